// What a torch.save zip archive holds, read without PyTorch: the tensors of the pickled object
// (names = dict paths, roles, dtypes, shapes, strides, storage offsets) and the storages behind
// them (zip entries `<archive>/data/<key>`). Tensors sharing a storage (tied weights, views) share
// its key, so a caller counts the storage bytes once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "resil/inject/formats/bytes.hpp"
#include "resil/inject/formats/dtype.hpp"
#include "resil/inject/formats/pickle.hpp"
#include "resil/inject/formats/zip.hpp"

namespace resil::inject::formats {

enum class Role : std::uint8_t { model, optimizer, other };
constexpr const char* role_name(Role r) noexcept {
  return r == Role::model ? "model" : r == Role::optimizer ? "optimizer" : "other";
}

struct TorchStorage {
  std::string key;          // the archive entry is `<archive>/data/<key>`
  DType dtype = DType::u8;  // typed storages: their class; untyped (torch.UntypedStorage): u8
  std::uint64_t numel = 0;  // elements of dtype, as the persistent id states
  std::string location;     // "cpu", "cuda:0"...
};

struct TorchTensor {
  std::string name;                  // dict path joined by '/': "model/fc1.weight", "optimizer/state/0/exp_avg"
  Role role = Role::other;
  std::string storage_key;
  DType dtype = DType::f32;
  std::uint64_t storage_offset = 0;  // in elements of dtype
  std::vector<std::int64_t> shape, stride;
  bool requires_grad = false;
  /// A counter, excluded from fault spaces by default: `num_batches_tracked`, an optimizer `step`,
  /// a 0-d integer tensor.
  bool counter = false;
};

/// Numbers stored in the pickle itself (epoch, lr...): not in any storage, listed for reports.
struct TorchScalar {
  std::string name;
  Role role = Role::other;
  bool is_integer = false;
  std::int64_t integer = 0;
  double real = 0.0;
};

/// An object outside the tensor subset (argparse.Namespace, a numpy scalar or array, a user's
/// class): read as an opaque value, never constructed; tensors in its arguments or state are found.
struct TorchOpaque {
  std::string name;  // its path, as a tensor's
  Role role = Role::other;
  std::string type;  // "argparse.Namespace", "numpy.core.multiarray.scalar"...
};

struct TorchState {
  std::vector<TorchTensor> tensors;   // in pickle order (a tensor reached by two paths is listed twice)
  std::vector<TorchStorage> storages; // each key once, in order of first use
  std::vector<TorchScalar> scalars;
  std::vector<TorchOpaque> opaque;    // outermost opaque objects, in pickle order
  const TorchStorage* storage(const std::string& key) const noexcept;
};

/// Walk the value tree of a torch.save pickle. Refuses tensors that do not fit their storage, one
/// storage key with two dtypes or sizes, nesting deeper than 64 and more than 2^20 visited values.
/// Roles: top-level keys "model"/"model_state_dict"/"state_dict" give model and
/// "optimizer"/"optimizer_state_dict" optimizer; a bare state_dict (an OrderedDict, or a dict of
/// tensors only) is model; a bare optimizer state_dict ("state" and "param_groups") is optimizer.
TorchState torch_state(const Pickle& pickle);

/// The tensors that view one storage and the names they give it: `viewers` in pickle order, and
/// `aliases`, "/" + the name of each viewer after the first, each name once (the first viewer's name
/// is the storage's). Linear in the number of tensors: a storage may have a million viewers.
struct StorageViews {
  std::vector<const TorchTensor*> viewers;
  std::vector<std::string> aliases;
};

/// One StorageViews per state.storages entry (same order); pointers into `state.tensors`.
std::vector<StorageViews> storage_views(const TorchState& state);

/// A whole torch.save file. Zip (torch >= 1.6 default): the zip directory, the archive's folder
/// name, the state, and for each of state.storages (same order) its zip entry, checked to be
/// stored and exactly as long as the storage. Legacy (`_use_new_zipfile_serialization=False`): a
/// stream of pickles (magic number, protocol version 1001, system info, the object, the sorted
/// storage keys), then each storage as an 8-byte little-endian element count and its elements.
struct TorchArchive {
  bool legacy = false;
  ZipDirectory zip;    // empty when legacy
  std::string prefix;  // "archive/" (torch.save uses the file's stem); empty when legacy
  bool big_endian = false;  // <archive>/byteorder says "big": every storage's elements are big-endian
  TorchState state;
  std::vector<std::size_t> storage_entries;  // index into zip.entries, parallel to state.storages (zip only)
  struct Span {
    std::uint64_t offset = 0, size = 0;
  };
  std::vector<Span> storage_data;  // each storage's bytes in the file, parallel to state.storages (both forms)
  Span pickle;                     // the saved object's pickle: <archive>/data.pkl, or (legacy) the object's pickle
};

/// The dtype a pickle GLOBAL names ("torch.float32", "torch.bfloat16"...), or nothing.
std::optional<DType> torch_dtype(std::string_view global_name) noexcept;

/// Parse a torch.save file: legacy when it starts with a pickle's PROTO opcode (0x80), else zip.
TorchArchive parse_torch(Bytes file);

}  // namespace resil::inject::formats
