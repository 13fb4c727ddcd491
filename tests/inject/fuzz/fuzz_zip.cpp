// libFuzzer target: zip directories, and the torch.save and .npz readers on top of them, must
// throw CorruptInputError or succeed, never crash; a zip refusal names an offset inside the input.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "resil/core/error.hpp"
#include "resil/inject/formats/npy.hpp"
#include "resil/inject/formats/torch.hpp"
#include "resil/inject/formats/zip.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace f = resil::inject::formats;
  const f::Bytes b = f::bytes_of(data, size);
  try {
    (void)f::parse_zip(b);
  } catch (const resil::CorruptInputError& e) {
    // A refusal points into the input: "... at offset N" with N at most its size.
    const std::string_view what = e.what();
    const auto at = what.rfind("at offset ");
    if (at == std::string_view::npos || std::stoull(std::string(what.substr(at + 10))) > size) __builtin_trap();
  }
  try {
    const f::TorchArchive a = f::parse_torch(b);
    (void)f::storage_views(a.state);
  } catch (const resil::CorruptInputError&) {
  }
  try {
    (void)f::parse_npz(b);
  } catch (const resil::CorruptInputError&) {
  }
  return 0;
}
