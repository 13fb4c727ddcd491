// libFuzzer target: a torch.distributed.checkpoint `.metadata` (a pickle read by the
// never-executing reader) must parse or throw CorruptInputError, never crash; every chunk it
// yields lies in its tensor and names a plain file. Seeds: .metadata files make_dcp_fixtures.py
// writes (tests/apps/ckpt-flip), ok (byte and safetensors modes) and hostile.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "resil/core/error.hpp"
#include "resil/inject/formats/dcp.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto md = resil::inject::formats::parse_dcp_metadata(resil::inject::formats::bytes_of(data, size));
    for (const auto& t : md.tensors)
      for (const auto& c : t.chunks) {
        if (c.offsets.size() != t.size.size() || c.sizes.size() != t.size.size()) std::abort();
        for (std::size_t d = 0; d < t.size.size(); ++d)
          if (c.offsets[d] > t.size[d] || c.sizes[d] > t.size[d] - c.offsets[d]) std::abort();
        if (c.file.empty() || c.file.find('/') != std::string::npos || c.file == "..") std::abort();
      }
  } catch (const resil::CorruptInputError&) {
  }
  return 0;
}
