// libFuzzer target: the pickle reader, the torch state walk (names) and the views of each storage
// (alias lists) must throw CorruptInputError or succeed, never crash, never allocate beyond the
// input's size.
#include <cstddef>
#include <cstdint>

#include "resil/core/error.hpp"
#include "resil/inject/formats/pickle.hpp"
#include "resil/inject/formats/torch.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    namespace f = resil::inject::formats;
    // The state walk builds every tensor's name; storage_views every storage's alias list.
    const f::TorchState state = f::torch_state(f::parse_pickle(f::bytes_of(data, size)));
    (void)f::storage_views(state);
  } catch (const resil::CorruptInputError&) {
  }
  return 0;
}
