// libFuzzer target: pattern tables; a parsed table must drive the model without crashing.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "resil/core/error.hpp"
#include "resil/inject/fault_model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    auto t = resil::inject::parse_pattern_table(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    const auto m = resil::inject::FaultModel::from_table(std::move(t), "fuzz");
    resil::Rng rng(1, 2);
    for (unsigned w : {8u, 16u, 32u, 64u})
      for (unsigned a = 0; a < w; a += 7) (void)m.apply(0x5555555555555555ull, w, a, ~0ull, rng);
  } catch (const resil::CorruptInputError&) {
  }
  return 0;
}
