// inject::Storage: the one door through which every command (inspect, inject, revert, replay, diff,
// scan, campaigns) reaches a checkpoint file, whatever its format. A format adapter exposes the
// file's tensors (name, role, dtype, shape, and where their bytes are) and reads/writes their stored
// words; the rest of the injector (selection, sampling, planning, applying, logs) never sees the
// format. HDF5 is one adapter (hdf5_storage.hpp); the table of what an adapter provides is in
// docs/design/storage-layer.md.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "resil/ckpt/io.hpp"
#include "resil/inject/shared_text.hpp"
#include "resil/inject/regions.hpp"

namespace resil::inject {

/// File formats. `automatic`: detected from the content (detect_format), never from the name.
/// `shards`: a Hugging Face sharded set (an index file or a directory); `dcp`: a
/// torch.distributed.checkpoint directory (file_set.hpp).
enum class Format { automatic, hdf5, torch, safetensors, npy, npz, shards, dcp };
/// The names of Format on the command line (`--format`).
inline constexpr std::pair<std::string_view, Format> format_names[] = {
    {"auto", Format::automatic}, {"hdf5", Format::hdf5},   {"torch", Format::torch},
    {"safetensors", Format::safetensors}, {"npy", Format::npy}, {"npz", Format::npz}, {"shards", Format::shards},
    {"dcp", Format::dcp}};
std::string_view format_name(Format f) noexcept;

/// The format of the bytes of a file, from magic bytes only: HDF5's signature \x89HDF\r\n\x1a\n at
/// offset 0, 512, 1024, 2048, ... (a user block shifts it by a power of two); a zip archive
/// (PK\x03\x04) is npz when its first member's name ends in ".npy", torch otherwise (torch.save
/// writes ARCHIVE/data.pkl first); safetensors: a little-endian u64 header length N with 8 + N no
/// more than the file and '{' at offset 8; npy: \x93NUMPY. nullopt when none matches.
std::optional<Format> detect_format(std::span<const std::byte> head, std::uint64_t file_size,
                                    const std::function<bool(std::uint64_t offset)>& hdf5_signature_at);
/// The same for a path (reads its first bytes and the candidate HDF5 offsets), except that an
/// HDF5 signature after a user block loses to another format's magic at offset 0 when that
/// format's parser takes the file: detection is not decided by what a tensor's bytes hold. Throws
/// IoError naming the file when it cannot be read. A directory is a set (directory_format in
/// file_set.hpp); a file whose content is a JSON object that is no safetensors header is a shard index.
std::optional<Format> detect_format(const std::string& path);
/// The format a command works with: `forced` unless automatic, else the detected one. Throws
/// CorruptInputError naming the file when the content matches no known format.
Format resolve_format(const std::string& path, Format forced);

enum class Access {
  read,      // nothing is written
  in_place,  // only stored words at known file offsets change, one all-or-nothing store each; no
             // metadata of the format is written, so a kill at any point leaves a file that opens.
             // Words only a rewrite can change (filtered chunks, deflated members) are refused.
  rewrite,   // a private copy: the format's own writer may rewrite anything (filtered chunks)
};

/// What a tensor is for, as the format's layout says (HDF5: /model/..., /optimizer/<p>/master for
/// the fp32 master weights of mixed-precision training, the other /optimizer/... slots).
enum class TensorRole { model, master, optimizer, other };
/// The resil schema's role of a dataset path: model, master, optimizer, or other.
TensorRole schema_role(std::string_view path) noexcept;

/// Stored bytes at an absolute file offset.
struct Extent {
  std::uint64_t offset = 0, length = 0;
};

/// A tensor as the format's own loader gives it, viewing (part of) a storage tensor's stored
/// bytes: torch.load's tensors, each at an element offset in its storage with its shape and
/// strides (several may view one storage, at other offsets, strides or dtypes).
struct View {
  std::string name;                  // "/" + the tensor's dict path, like Tensor::info.path
  std::optional<ckpt::DType> dtype;  // nullopt: a dtype ckpt-flip does not interpret (type_desc says which)
  std::string type_desc;
  unsigned bits = 0;                 // stored bits per element
  bool big_endian = false;
  ckpt::Shape shape;
  std::vector<std::int64_t> stride;  // in elements
  std::uint64_t offset = 0;          // in elements of its dtype, from the storage's first byte
};

/// A tensor of a file as the storage layer sees it.
struct Tensor {
  /// Name (`info.path`, an absolute path: "/model/fc1.weight"), dtype and byte order, shape, other
  /// names of the same bytes (aliases), stored and logical bytes, the layout and filters.
  ckpt::DatasetInfo info;
  TensorRole role = TensorRole::other;
  /// Identity of the stored bytes; `shared_with`: the name of the tensor that owns the bytes this
  /// one views (tied weights, views of one torch storage), empty when it owns them. A tensor with
  /// `shared_with` set adds nothing to the fault space: the bytes count once, under their owner.
  std::string storage, shared_with;
  /// Bytes behind filters (gzip chunks, a deflated npz member): changing them rewrites and
  /// re-encodes the touched chunk or member, which only Access::rewrite (a staged copy) may do.
  bool staged = false;
  /// A counter by the format's own layout (torch: num_batches_tracked, an optimizer step, a 0-d
  /// integer tensor), skipped by select() unless an --include names it, as is_counter() skips HDF5's.
  bool counter = false;
  /// torch.save: every tensor of the state that views these stored bytes (`info` describes the
  /// storage, the fault space), as torch.load gives them; what `diff` compares. A Fortran-ordered
  /// .npy/.npz array (exposed as its transpose): itself, through column-major strides. Empty where a
  /// tensor is its stored bytes in C order.
  std::vector<View> views;
};

/// A file opened through its format's adapter. Move-free, one per open file.
/// One item of a file's content other than tensors (Storage::other_content).
struct OtherContent {
  std::string name;       // shown: "/g/w@units", "pickle", "__metadata__/format"
  std::string value;      // what a reader gets, as text
  bool compared = true;   // false: a value ckpt-flip does not render (HDF5 region references), never "the same"
  std::string key;        // what diff pairs items of two files by, unique in a file (empty: the name)
  std::string object, attribute;  // an HDF5 attribute's object and name (the name alone can be ambiguous)
  const std::string& pairing() const noexcept { return key.empty() ? name : key; }
};
/// The key of the item holding the values of variable-length tensor `tensor` as text.
inline std::string values_key(const std::string& tensor) { return std::string("\0values\0", 8) + tensor; }

class Storage {
public:
  virtual ~Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  virtual Format format() const noexcept = 0;
  /// The format of what other_content() describes: format(), except for a shard set, whose items
  /// are its shards' ("shards:safetensors", "shards:safetensors+torch"). diff compares other
  /// content only between two files where this is the same.
  virtual std::string content_format() const { return std::string(format_name(format())); }
  const std::string& path() const noexcept { return path_; }
  Access access() const noexcept { return access_; }

  /// Every tensor once (other names of the same bytes in info.aliases), in name order.
  virtual std::vector<Tensor> tensors() = 0;
  /// Where a tensor's raw stored bytes are, in C order, when they lie at known file offsets (HDF5:
  /// allocated contiguous data; a torch storage in a stored zip member): asked per tensor, since
  /// finding them may cost (HDF5 opens the dataset). Empty when they are chunked (located chunk
  /// by chunk by edit()), behind filters (`staged`) or not allocated.
  virtual std::vector<Extent> extents(const std::string& tensor) = 0;
  /// Why a tensor's bytes are never written (HDF5: kept in external raw files); empty if they may be.
  virtual std::string unwritable(const std::string& tensor) = 0;

  /// fn(indices, words) for each block of touched words (a chunk, the touched elements of a
  /// contiguous extent): `indices` flat C-order element indices, ascending and unique, `words`
  /// their stored words (bit 0 = LSB whatever the byte order). Unless the access is read, fn's
  /// changes are written back (changed words only). With Access::in_place, a change in a block
  /// that only a rewrite may change (see staged_only) throws Error before that block is written.
  using BlockFn = std::function<void(std::span<const std::uint64_t> indices, std::span<std::uint64_t> words)>;
  virtual void edit(const std::string& tensor, std::vector<std::uint64_t> indices, const BlockFn& fn) = 0;
  /// The subset of `indices` (sorted, unique) an in-place edit may not change: those behind
  /// filters or not allocated yet. Reads no data (the chunk index at most).
  virtual std::vector<std::uint64_t> staged_only(const std::string& tensor, std::vector<std::uint64_t> indices) = 0;
  /// Stored width in bits of a tensor's elements.
  virtual unsigned width_of(const std::string& tensor) = 0;

  /// Bulk reads (scan, diff, inspect --verify). How to read all of a tensor: whole (in boxes of
  /// rows) or, when sparse, its stored regions plus one fill value for the rest.
  virtual StoredLayout stored_layout(const std::string& tensor) = 0;
  /// The stored bytes (file byte order, C order) of the box [start, start + count) into `buf`.
  virtual void read_box(const std::string& tensor, const std::vector<hsize_t>& start, const std::vector<hsize_t>& count,
                        std::vector<std::byte>& buf) = 0;
  /// Every stored byte of a tensor (file byte order, C order) in slabs of at most about `max_bytes`.
  virtual void for_each_slab(const std::string& tensor, std::size_t max_bytes,
                             const std::function<void(std::span<const std::byte>)>& fn) = 0;
  /// Stored bytes [offset, offset + length) of a tensor's byte stream (file byte order, C order;
  /// packed sub-byte and other opaque elements included) into `buf`. false when the adapter reads
  /// only boxes of whole elements (read_box), as HDF5 and DCP do; throws CorruptInputError when the
  /// range lies beyond the tensor's bytes.
  virtual bool read_bytes(const std::string& /*tensor*/, std::uint64_t /*offset*/, std::uint64_t /*length*/,
                          std::vector<std::byte>& /*buf*/) {
    return false;
  }
  /// What a reader of the file gets besides its tensors, which `diff` compares between two files
  /// of one format: HDF5 soft and external links ("/v": "soft link to /w"), attributes
  /// ("/g/w@units": "vstring \"m/s\"") and the values of variable-length datasets (under the
  /// dataset's own name); a torch.save file's pickled object ("pickle": its bytes' XXH64, the
  /// state's structure and its non-tensor values); safetensors' `__metadata__` entries
  /// ("__metadata__/format"); a DCP checkpoint's non-tensor values (their stored bytes' XXH64); for
  /// a shard set, each shard's, under "<file>:". Empty where the format has nothing more.
  virtual std::vector<OtherContent> other_content() { return {}; }
  /// XXH64 of a tensor's stored bytes in C order (compared with the checksum in info.checksum).
  virtual std::uint64_t checksum(const std::string& tensor) = 0;
  /// Where the element at flat index `index` of a tensor is stored beyond the tensor's name, as a
  /// compact JSON object with sorted keys (a set: {"file":"model-00001-of-00002.safetensors"}), or
  /// "" when the file itself says it all. Flip logs record it with each flip (one shared text per
  /// chunk or file, so a call is cheap).
  virtual SharedText location(const std::string& /*tensor*/, std::uint64_t /*index*/) { return {}; }

  /// The format's finishing step after edits, before close (for a zip: the CRC-32 of each touched
  /// member in its local header and the central directory; HDF5: nothing). apply() calls it once.
  virtual void finish() {}
  /// Flush and close: errors surface here, not in the destructor. Makes the edits durable (msync,
  /// fsync) unless set_sync(false).
  virtual void close() = 0;
  /// Whether close() makes the edits durable. Default: yes.
  void set_sync(bool sync) noexcept { sync_ = sync; }
  bool sync() const noexcept { return sync_; }

protected:
  Storage(std::string path, Access access) : path_(std::move(path)), access_(access) {}
  std::string path_;
  Access access_;
  bool sync_ = true;
};

/// Whether Storage::finish() leaves a container's own checksums as they were (`--keep-crc`: the
/// zip CRC-32 of an edited torch.save or .npz member then no longer matches its bytes, as after
/// corruption of the storage medium that the container can notice). Process-wide, like word_io():
/// a staged edit opens its copy anew. Default: false (the archive stays valid).
bool keep_crc() noexcept;
void set_keep_crc(bool keep) noexcept;
/// Whether finish() computes each touched stored zip member's CRC-32 from its bytes instead of
/// patching the stored CRC by the change (revert and replay: after a killed run the stored CRC
/// may not be the one of the bytes it stands for, and a patch would carry that error on).
/// Process-wide. Default: false (cost proportional to the change, not to the member).
bool recompute_crc() noexcept;
void set_recompute_crc(bool on) noexcept;

/// Open `path` through its format's adapter (`format` automatic: detected from the content).
/// Throws CorruptInputError naming the file for content of no known format or that its format's
/// parser refuses (one line: "FILE: <format>: <what> at offset N"), IoError when it cannot be read.
std::unique_ptr<Storage> open_storage(const std::string& path, Access access, Format format = Format::automatic);

/// The tensors' descriptions alone (the listing select() and inspect take).
std::vector<ckpt::DatasetInfo> infos_of(const std::vector<Tensor>& tensors);

}  // namespace resil::inject
