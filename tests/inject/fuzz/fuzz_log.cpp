// libFuzzer target: flip-log JSONL parsing must throw CorruptInputError or succeed, never crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "resil/core/error.hpp"
#include "resil/inject/flip_log.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto log = resil::inject::parse_log(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    for (std::size_t i = 0; i < log.records.size(); ++i) (void)resil::inject::record_line(log.records[i], i);
  } catch (const resil::CorruptInputError&) {
  }
  return 0;
}
