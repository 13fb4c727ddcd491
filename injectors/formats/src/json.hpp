// Internal: a small strict JSON reader (RFC 8259) for the safetensors header. Unlike a general
// library it refuses duplicate object keys (one tensor name twice would be ambiguous), keeps
// numbers as their text so 64-bit offsets are read exactly, and names the offset of every error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace resil::inject::formats::detail {

struct JsonValue {
  enum class Kind : std::uint8_t { null, boolean, number, string, array, object };
  Kind kind = Kind::null;
  bool boolean = false;
  std::string text;               // a string's value (UTF-8), a number's literal text
  std::vector<JsonValue> items;   // array elements, object values
  std::vector<std::string> keys;  // object keys, parallel to items, in document order
  std::uint64_t offset = 0;       // where the value starts (for messages)

  /// A number that is a non-negative integer fitting 64 bits, or nothing.
  std::optional<std::uint64_t> as_u64() const;
  const JsonValue* find(std::string_view key) const;
};

/// Parse `text` (one value, optional surrounding whitespace); errors are CorruptInputError
/// "<format>: <what> at offset <base + position>". Nesting is limited to 64 levels.
JsonValue parse_json(std::string_view text, std::string_view format, std::uint64_t base);

}  // namespace resil::inject::formats::detail
