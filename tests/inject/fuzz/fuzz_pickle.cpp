// libFuzzer target: the pickle subset reader and the torch state walk must throw
// CorruptInputError or succeed, never crash, never allocate beyond the input's size.
#include <cstddef>
#include <cstdint>

#include "resil/core/error.hpp"
#include "resil/inject/formats/pickle.hpp"
#include "resil/inject/formats/torch.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    (void)resil::inject::formats::torch_state(resil::inject::formats::parse_pickle(resil::inject::formats::bytes_of(data, size)));
  } catch (const resil::CorruptInputError&) {
  }
  return 0;
}
