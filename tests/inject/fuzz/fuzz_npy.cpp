// libFuzzer target: .npy headers (magic, version, length, the dict literal) must throw
// CorruptInputError or succeed, never crash.
#include <cstddef>
#include <cstdint>

#include "resil/core/error.hpp"
#include "resil/inject/formats/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    (void)resil::inject::formats::parse_npy(resil::inject::formats::bytes_of(data, size));
  } catch (const resil::CorruptInputError&) {
  }
  return 0;
}
