#include "resil/inject/formats/shard_index.hpp"

#include <algorithm>

#include "json.hpp"

namespace resil::inject::formats {

namespace {
constexpr std::string_view kFormat = "shard index";
constexpr std::uint64_t kMaxIndex = 64ull << 20;
using detail::JsonValue;

}  // namespace

bool looks_like_json_object(Bytes text) noexcept {
  for (const std::byte b : text) {
    const char c = static_cast<char>(b);
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    return c == '{';
  }
  return false;
}

ShardIndex parse_shard_index(Bytes text) {
  if (text.size() > kMaxIndex) corrupt(kFormat, "index of " + std::to_string(text.size()) + " bytes exceeds the 64 MiB limit", 0);
  const JsonValue root = detail::parse_json(as_chars(text), kFormat, 0);
  if (root.kind != JsonValue::Kind::object) corrupt(kFormat, "not a JSON object", root.offset);
  const JsonValue* map = root.find("weight_map");
  if (!map) {
    // ckpt-train's manifest of an mp/tp/pp checkpoint is JSON too, but no shard index: say what it is.
    if (root.find("shards") && root.find("world_size"))
      corrupt(kFormat, "a ckpt-train manifest, not a shard index: give one of its shards (plan and campaign read the manifest whole)", root.offset);
    corrupt(kFormat, "no \"weight_map\"", root.offset);
  }
  if (map->kind != JsonValue::Kind::object) corrupt(kFormat, "\"weight_map\" is not an object", map->offset);
  if (map->keys.empty()) corrupt(kFormat, "\"weight_map\" is empty", map->offset);
  ShardIndex ix;
  for (std::size_t i = 0; i < map->keys.size(); ++i) {
    const JsonValue& v = map->items[i];
    if (v.kind != JsonValue::Kind::string) corrupt(kFormat, "file of tensor '" + printable(map->keys[i]) + "' is not a string", v.offset);
    const std::string& f = v.text;
    if (map->keys[i].empty()) corrupt(kFormat, "empty tensor name", v.offset);
    if (f.empty() || f == "." || f == ".." || f.find('/') != std::string::npos || f.find('\0') != std::string::npos)
      corrupt(kFormat, "file '" + printable(f) + "' of tensor '" + printable(map->keys[i]) + "' is not a plain file name in the index's directory", v.offset);
    ix.weight_map.emplace_back(map->keys[i], f);
    ix.files.push_back(f);
  }
  std::sort(ix.files.begin(), ix.files.end());
  ix.files.erase(std::unique(ix.files.begin(), ix.files.end()), ix.files.end());
  return ix;
}

}  // namespace resil::inject::formats
