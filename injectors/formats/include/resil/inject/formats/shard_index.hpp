// The index of a Hugging Face sharded checkpoint (`model.safetensors.index.json`,
// `pytorch_model.bin.index.json`, as transformers' save_pretrained writes them): a JSON object
// whose "weight_map" maps each tensor name to the file holding it ({"metadata": {...},
// "weight_map": {"model.embed.weight": "model-00001-of-00002.safetensors", ...}}). Files are
// plain names in the index's directory: a path (a '/', "..") or an empty name is refused, so an
// index never reaches outside its directory. A tensor named twice is refused by the JSON reader.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "resil/inject/formats/bytes.hpp"

namespace resil::inject::formats {

struct ShardIndex {
  std::vector<std::pair<std::string, std::string>> weight_map;  // tensor -> file, in index order
  std::vector<std::string> files;                               // each file once, sorted
};

/// Whether `text` looks like a JSON object (whitespace, then '{'): the cheap test before parsing.
bool looks_like_json_object(Bytes text) noexcept;
/// Parse an index file's whole text (at most 64 MiB). Errors: CorruptInputError
/// "shard index: <what> at offset N".
ShardIndex parse_shard_index(Bytes text);

}  // namespace resil::inject::formats
