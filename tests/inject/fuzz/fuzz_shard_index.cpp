// libFuzzer target: a Hugging Face shard index (weight_map: tensor -> file) must parse or throw
// CorruptInputError, never crash, and never yield a file name that leaves the index's directory.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "resil/core/error.hpp"
#include "resil/inject/formats/shard_index.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto ix = resil::inject::formats::parse_shard_index(resil::inject::formats::bytes_of(data, size));
    for (const auto& f : ix.files)
      if (f.empty() || f == "." || f == ".." || f.find('/') != std::string::npos) std::abort();
  } catch (const resil::CorruptInputError&) {
  }
  return 0;
}
