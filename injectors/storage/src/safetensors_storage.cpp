// safetensors: every tensor is one extent of the data section; the JSON header is never written.
// Tensors are model weights (the format holds nothing else in practice): role model.
#include "extent_storage.hpp"
#include "format_storages.hpp"
#include "resil/inject/formats/safetensors.hpp"
#include "resil/inject/names.hpp"

namespace resil::inject {

namespace {

class SafetensorsStorage final : public ExtentStorage {
public:
  SafetensorsStorage(const std::string& path, Access access) : ExtentStorage(path, access) {
    const Mapping m = map_for_parsing(path);
    const auto st = parse_named(path, [&] { return formats::parse_safetensors(formats::bytes_of(m.data(), m.size())); });
    for (const auto& t : st.tensors) {
      Item it;
      it.tensor = make_tensor(t.name, TensorRole::model, t.dtype, t.shape, false);
      it.extent = {t.offset, t.size};
      it.size = formats::dtype_opaque(t.dtype) ? 1u : static_cast<unsigned>(formats::dtype_size(t.dtype));  // opaque: never edited
      add(std::move(it));
    }
    for (const auto& [k, v] : st.metadata) metadata_.push_back({"__metadata__/" + k, quote_bytes(v)});
  }
  Format format() const noexcept override { return Format::safetensors; }
  std::vector<OtherContent> other_content() override { return metadata_; }

private:
  std::vector<OtherContent> metadata_;  // the header's `__metadata__`: free-form strings
};

}  // namespace

std::unique_ptr<Storage> open_safetensors(const std::string& path, Access access) {
  return std::make_unique<SafetensorsStorage>(path, access);
}

}  // namespace resil::inject
