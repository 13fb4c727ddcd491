// torch.save files, zip archives and the legacy (non-zip) stream. The fault space is storage bytes: each storage (zip member
// `<archive>/data/<key>`) is one tensor, whole, however many tensors view it and however much of
// it they view (docs/design/storage-layer.md, "torch.save: the fault space is the storages"). It is named after the first tensor that
// views it in pickle (dict) order, the other viewers' names are its aliases; its shape is that
// tensor's when it views all of the storage contiguously from offset 0, else the storage's element
// count (flat indices are always element offsets in the storage). Role: the first viewer's.
// A storage all of whose viewers are counters (num_batches_tracked, an optimizer step, a 0-d
// integer tensor) is a counter, excluded by default like HDF5 counters.
#include <algorithm>
#include <cstdio>
#include <span>
#include <utility>

#include "format_storages.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/inject/formats/torch.hpp"
#include "zip_storage.hpp"

namespace resil::inject {

namespace {

TensorRole role_of(formats::Role r) {
  return r == formats::Role::model ? TensorRole::model : r == formats::Role::optimizer ? TensorRole::optimizer : TensorRole::other;
}

// Whether `t` views all `elements` of its storage, in C order from its start.
bool whole_view(const formats::TorchTensor& t, std::uint64_t elements) {
  if (t.storage_offset != 0) return false;
  std::uint64_t n = 1;
  std::int64_t expect = 1;
  for (std::size_t d = t.shape.size(); d-- > 0;) {
    if (t.shape[d] != 1 && t.stride[d] != expect) return false;
    expect *= t.shape[d];
    n *= static_cast<std::uint64_t>(t.shape[d]);
  }
  return n == elements;
}

class TorchStorage final : public ZipStorage {
public:
  TorchStorage(const std::string& path, Access access) : ZipStorage(path, access) {
    const Mapping m = map_for_parsing(path);
    auto a = parse_named(path, [&] { return formats::parse_torch(formats::bytes_of(m.data(), m.size())); });
    legacy_ = a.legacy;
    {
      ckpt::Xxh64 h;
      h.update(std::span<const std::byte>(m.data() + a.pickle.offset, a.pickle.size));
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h.digest()));
      pickle_ = std::string("XXH64 ") + hex + " of its " + std::to_string(a.pickle.size) + " bytes";
    }
    zip_ = std::move(a.zip);
    auto views_of = formats::storage_views(a.state);
    for (std::size_t s = 0; s < a.state.storages.size(); ++s) {
      const auto& st = a.state.storages[s];
      const auto& views = views_of[s].viewers;
      if (views.empty()) continue;  // a storage no tensor views is not in the state
      const auto& first = *views.front();
      const auto& data = a.storage_data[s];
      const auto size = formats::dtype_size(first.dtype);
      const std::uint64_t elements = data.size / size;
      const bool whole = whole_view(first, elements);
      std::vector<std::uint64_t> shape;
      if (whole) for (const auto d : first.shape) shape.push_back(static_cast<std::uint64_t>(d));
      else shape = {elements};
      Item it;
      it.tensor = make_tensor(first.name, role_of(first.role), first.dtype, shape, a.big_endian && size > 1);
      it.tensor.counter = std::all_of(views.begin(), views.end(), [](const auto* v) { return v->counter; });
      it.tensor.info.aliases = std::move(views_of[s].aliases);
      // The tensors torch.load gives (diff compares these): each viewer at its offset and strides.
      for (const auto* v : views) {
        View w;
        w.name = "/" + v->name;
        w.dtype = dtype_of(v->dtype);
        w.type_desc = w.dtype ? std::string(ckpt::dtype_name(*w.dtype)) : std::string(formats::dtype_name(v->dtype)) + " (opaque)";
        w.bits = formats::dtype_bits(v->dtype);
        w.big_endian = a.big_endian && formats::dtype_size(v->dtype) > 1;
        for (const auto d : v->shape) w.shape.push_back(static_cast<std::uint64_t>(d));
        w.stride = v->stride;
        w.offset = v->storage_offset;
        it.tensor.views.push_back(std::move(w));
      }
      // The storage's identity: its zip member, or (legacy) its key in the stream.
      it.tensor.storage = legacy_ ? "data/" + st.key : zip_.entries[a.storage_entries[s]].name;
      it.extent = {data.offset, elements * size};
      it.size = static_cast<unsigned>(size);
      it.big_endian = a.big_endian && size > 1;
      it.part = legacy_ ? 0 : a.storage_entries[s];
      add(std::move(it));
    }
  }
  Format format() const noexcept override { return Format::torch; }
  // The pickled object: the state's structure and every non-tensor value (an epoch, a numpy array).
  std::vector<OtherContent> other_content() override { return {{"pickle", pickle_}}; }

protected:
  // A legacy file has no CRC to keep: its storages are plain bytes of the stream.
  void changed(const Item& it, std::uint64_t offset, std::span<const std::byte> old_bytes, std::span<const std::byte> new_bytes) override {
    if (!legacy_) ZipStorage::changed(it, offset, old_bytes, new_bytes);
  }

private:
  bool legacy_ = false;
  std::string pickle_;
};

}  // namespace

std::unique_ptr<Storage> open_torch(const std::string& path, Access access) { return std::make_unique<TorchStorage>(path, access); }

}  // namespace resil::inject
