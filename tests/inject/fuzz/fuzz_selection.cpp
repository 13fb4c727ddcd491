// libFuzzer target: selection expressions. Input = "pattern\npath\nbitspec\nmodel"; globs, bit specs
// and fault-model specs must parse or throw UsageError, and matching must stay fast.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "resil/core/error.hpp"
#include "resil/inject/fault_model.hpp"
#include "resil/inject/select_expr.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::string_view part[4];
  for (int i = 0; i < 4; ++i) {
    const auto nl = in.find('\n');
    part[i] = in.substr(0, nl);
    in = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
  }
  try {
    resil::inject::Glob g{std::string(part[0])};
    (void)g.matches(part[1]);
    (void)g.matches("/model/layer.0/weight");
  } catch (const resil::UsageError&) {
  }
  try {
    const auto b = resil::inject::BitSpec::parse(part[2]);
    for (auto t : resil::ckpt::all_dtypes) (void)b.mask_for(t);
  } catch (const resil::UsageError&) {
  }
  if (!part[3].starts_with("pattern")) {  // pattern:FILE would open files
    try {
      const auto m = resil::inject::FaultModel::parse(part[3]);
      resil::Rng rng(3, 4);
      (void)m.apply(0x1234, 16, 15, 0xffff, rng);
    } catch (const resil::UsageError&) {
    }
  }
  return 0;
}
