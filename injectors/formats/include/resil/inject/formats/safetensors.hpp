// safetensors (huggingface/safetensors, docs "format"): an 8-byte little-endian header length,
// a JSON header {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}},
// then the tensors' bytes. Checked like the reference implementation: offsets inside the data,
// no overlaps and no holes, shape x dtype size == byte length, no duplicate names.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "resil/inject/formats/bytes.hpp"
#include "resil/inject/formats/dtype.hpp"

namespace resil::inject::formats {

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::uint64_t> shape;
  std::uint64_t offset = 0;  // first byte, from the start of the file
  std::uint64_t size = 0;    // bytes
};

struct Safetensors {
  std::uint64_t header_size = 0;  // the JSON's bytes (data start at 8 + header_size)
  std::vector<SafetensorsTensor> tensors;  // in header order
  std::vector<std::pair<std::string, std::string>> metadata;  // `__metadata__`, in header order
};

/// Parse a whole safetensors file. The header is limited to 100 MB (as the reference reader).
Safetensors parse_safetensors(Bytes file);

}  // namespace resil::inject::formats
