// Tensors as HDF5 datasets: write with a checksum attribute, read any supported dataset (ours or
// foreign: h5py/PyTorch/Keras), describe datasets, verify checksums.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <span>
#include <optional>
#include <string>
#include <vector>

#include "resil/ckpt/h5.hpp"
#include "resil/ckpt/tensor.hpp"

namespace resil::ckpt {

/// Attribute names resil writes on tensor datasets.
inline constexpr const char* checksum_attr = "resil_xxh64";  // u64: XXH64 (seed 0) of the stored bytes
inline constexpr const char* dtype_attr = "resil_dtype";     // "bf16" on uint16 datasets holding bfloat16
/// A tp shard's slice of its global tensor (JSON, TpSlice in checkpoint.hpp).
inline constexpr const char* tp_slice_attr = "resil_tp_slice";

struct WriteOptions {
  /// Chunk shape; empty = contiguous layout. Must have the tensor's rank when set.
  Shape chunks;
  int gzip_level = 0;    // 0 = no deflate filter; 1..9 needs chunks
  bool shuffle = false;  // byte-shuffle filter before deflate
};

/// Write `t` as dataset `path` (parents created), with the checksum attribute (and bf16 marker).
void write_tensor(hid_t file, const std::string& path, const Tensor& t, const WriteOptions& opt = {});
/// Two-step form for writers that hash on another thread: the data (and bf16 marker) first,
/// then the checksum attribute once it is known.
void write_tensor_data(hid_t file, const std::string& path, const Tensor& t, const WriteOptions& opt = {});
void set_checksum(hid_t file, const std::string& path, std::uint64_t checksum);

/// Read dataset `path` into native-order memory. `file_for_errors` names the file in messages.
/// Unsupported types (compound, string, vlen, enum, ...) raise CorruptInputError naming the dataset.
Tensor read_tensor(hid_t file, const std::string& path, const std::string& file_for_errors = "");

/// Read with an expected shape/dtype: a mismatch raises MismatchError naming the dataset.
Tensor read_tensor_as(hid_t file, const std::string& path, DType dtype, const Shape& shape,
                      const std::string& file_for_errors = "");

/// The resil dtype of an HDF5 datatype, or nullopt when unsupported. `bf16_marker` says the
/// dataset carries resil_dtype="bf16".
std::optional<DType> dtype_from_h5(hid_t type, bool bf16_marker = false);
/// Memory (native order) HDF5 type for a dtype; the caller owns the returned handle.
h5::Datatype h5_native_type(DType t);

enum class Layout { contiguous, chunked, compact, virtual_ };

/// Datasets with more elements than this are unsupported (HDF5 counts a selection's points in a
/// signed 64-bit integer, yet accepts extents whose product overflows even 64 unsigned bits).
inline constexpr std::uint64_t max_elements = (std::uint64_t{1} << 63) - 1;
/// At most this many paths of one object are listed (hard links; see list_datasets).
inline constexpr std::size_t max_paths = 64;
/// Groups nested deeper than this are damaged or hostile input (exit 4): HDF5's walk of a chain of
/// d groups costs time cubic in d (1,000 levels: 7 s, 5,000: most of an hour), and no checkpoint
/// nests more than a few dozen.
inline constexpr std::size_t max_group_depth = 256;

struct DatasetInfo {
  std::string path;               // absolute, e.g. "/model/fc1.weight" (the bytes of the HDF5 link names, any encoding)
  std::vector<std::string> aliases;  // other hard-link paths of the same object, in name order (list_datasets)
  std::optional<DType> dtype;     // nullopt: unsupported type or extent (type_desc says what it is)
  std::string type_desc;          // e.g. "f32", "compound", "string", "f32, more than 2^63-1 elements"
  /// HDF5, when dtype is nullopt: the stored type's exact encoding (H5Tencode), so two types that
  /// type_desc names alike ("compound", "string") are told apart by diff; empty otherwise.
  std::string type_code;
  /// HDF5: elements of variable length (vlen strings or sequences, anywhere in the type): their
  /// stored bytes are heap addresses, not the values.
  bool variable_length = false;
  bool big_endian = false;
  bool null_space = false;        // H5S_NULL (h5py.Empty): no element at all (shape is empty, numel() 0)
  Shape shape;
  Layout layout = Layout::contiguous;
  Shape chunks;                   // empty unless chunked
  std::vector<std::string> filters;  // e.g. {"shuffle", "deflate(4)"}
  std::uint64_t stored_bytes = 0;    // H5Dget_storage_size (compressed size on disk)
  std::uint64_t logical_bytes = 0;   // numel * element size
  std::optional<std::uint64_t> checksum;  // resil_xxh64 when present
  /// Names of the external raw data files holding the elements (HDF5 external storage, h5py's
  /// `external=`), as stored; empty when the data is in the HDF5 file. Such datasets are read but
  /// never edited: the raw files are not part of an `-o` copy (docs/design/ckpt-flip-io.md).
  std::vector<std::string> external;
  /// The text of the dataset's `resil_tp_slice` attribute (a tp shard's slice of the global tensor,
  /// TpSlice::from_json reads it) when it has one; "" when that attribute is not a string.
  std::optional<std::string> tp_slice;
  /// Elements: 0 for a null dataspace, the product of the dims saturated at UINT64_MAX (such
  /// datasets are unsupported: dtype is nullopt beyond max_elements).
  std::uint64_t numel() const noexcept;
};

/// The external raw data file names of an open dataset (see DatasetInfo::external).
std::vector<std::string> external_files(hid_t dataset);

/// Every dataset in the file once, depth-first in name order, under the first of its hard-link
/// paths in that order; its other hard-link paths (the object linked under several names, or
/// under a group that is) are in `aliases`, at most max_paths in all. Soft and external links are
/// not followed (a dataset in another file is never listed).
std::vector<DatasetInfo> list_datasets(hid_t file);
/// Describe one dataset.
DatasetInfo describe_dataset(hid_t file, const std::string& path);

/// XXH64 of a dataset's stored bytes (file byte order, C order, after filters are undone),
/// streamed in bounded slabs so any size is fine.
std::uint64_t dataset_checksum(hid_t file, const std::string& path);

struct VerifyIssue {
  std::string dataset;
  std::uint64_t expected = 0;
  std::uint64_t actual = 0;
};
struct VerifyReport {
  std::vector<VerifyIssue> mismatched;    // checksum attribute no longer matches the bytes
  std::vector<std::string> unchecked;     // datasets without a checksum attribute (foreign files)
  std::size_t checked = 0;
  bool ok() const noexcept { return mismatched.empty(); }
};
/// A box of elements: [start, start + count) along each dimension.
struct Box {
  std::vector<hsize_t> start, count;
};
/// The boxes, in C order, that hold exactly the elements [first, first + n) of a tensor of `shape`
/// in C order: at most 2 x rank boxes, each one contiguous run of C order (a box over the last
/// dimensions), so a slab of n elements never needs more than n elements of buffer whatever the
/// shape ([1, N] included). A scalar (empty shape) is one empty box.
std::vector<Box> flat_boxes(const Shape& shape, std::uint64_t first, std::uint64_t n);
/// Stream a dataset through `fn` in C-order slabs of at most max(max_bytes, one element) bytes
/// each (flat element ranges, read as flat_boxes hyperslabs, so the slab does not grow with the row
/// size), read as `mem_type` (pass the file type for raw bytes). Memory: one slab, plus HDF5's own
/// decompressed chunk where a filtered chunk is larger than the chunk cache.
void for_each_slab(hid_t dset, hid_t mem_type, std::size_t max_bytes,
                   const std::function<void(std::span<const std::byte>)>& fn);

/// Verify every dataset carrying a checksum attribute.
VerifyReport verify(const std::string& file_path);

/// Recompute and rewrite the checksum attribute of one dataset (after an intended modification).
void update_checksum(hid_t file, const std::string& path);

}  // namespace resil::ckpt
