#include "resil/inject/formats/safetensors.hpp"

#include <algorithm>
#include <optional>
#include <string_view>

#include "json.hpp"

namespace resil::inject::formats {
namespace {

constexpr std::string_view kFormat = "safetensors";
constexpr std::uint64_t kMaxHeader = 100'000'000;

std::optional<DType> dtype_from(std::string_view s) {
  for (const DType t : all_dtypes)
    if (dtype_is_safetensors_tag(t) && dtype_name(t) == s) return t;
  return std::nullopt;
}

using detail::JsonValue;

SafetensorsTensor tensor(const std::string& name, const JsonValue& v, std::uint64_t data_start, std::uint64_t data_size) {
  const std::string where = "tensor '" + printable(name) + "'";
  if (v.kind != JsonValue::Kind::object) corrupt(kFormat, where + " is not an object", v.offset);
  for (std::size_t i = 0; i < v.keys.size(); ++i)
    if (v.keys[i] != "dtype" && v.keys[i] != "shape" && v.keys[i] != "data_offsets")
      corrupt(kFormat, where + ": unknown key '" + printable(v.keys[i]) + "'", v.items[i].offset);
  const JsonValue* dt = v.find("dtype");
  const JsonValue* shape = v.find("shape");
  const JsonValue* offs = v.find("data_offsets");
  if (!dt || !shape || !offs) corrupt(kFormat, where + " lacks dtype, shape or data_offsets", v.offset);
  SafetensorsTensor t;
  t.name = name;
  const auto d = dt->kind == JsonValue::Kind::string ? dtype_from(dt->text) : std::nullopt;
  if (!d) corrupt(kFormat, where + ": unsupported dtype " + (dt->kind == JsonValue::Kind::string ? "'" + printable(dt->text) + "'" : "(not a string)"), dt->offset);
  t.dtype = *d;
  if (shape->kind != JsonValue::Kind::array) corrupt(kFormat, where + ": shape is not an array", shape->offset);
  // In bits: the packed sub-byte floats (F4, F6_*) fill whole bytes only in multiples.
  std::uint64_t bits = dtype_bits(t.dtype);
  for (const auto& e : shape->items) {
    const auto n = e.as_u64();
    if (!n) corrupt(kFormat, where + ": shape entry is not a non-negative integer", e.offset);
    t.shape.push_back(*n);
    if (__builtin_mul_overflow(bits, *n, &bits)) corrupt(kFormat, where + ": shape overflows 64 bits", e.offset);
  }
  if (bits % 8) corrupt(kFormat, where + ": " + std::to_string(bits) + " bits of " + std::string(dtype_name(t.dtype)) + " elements do not fill whole bytes", shape->offset);
  const std::uint64_t bytes = bits / 8;
  if (offs->kind != JsonValue::Kind::array || offs->items.size() != 2 || !offs->items[0].as_u64() || !offs->items[1].as_u64())
    corrupt(kFormat, where + ": data_offsets is not [begin, end]", offs->offset);
  const std::uint64_t begin = *offs->items[0].as_u64(), end = *offs->items[1].as_u64();
  if (begin > end || end > data_size)
    corrupt(kFormat, where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] outside the " +
                         std::to_string(data_size) + " data bytes", offs->offset);
  if (end - begin != bytes)
    corrupt(kFormat, where + ": " + std::to_string(end - begin) + " bytes for a shape and dtype of " + std::to_string(bytes), offs->offset);
  t.offset = data_start + begin;
  t.size = bytes;
  return t;
}

}  // namespace

Safetensors parse_safetensors(Bytes file) {
  Reader r(file, kFormat);
  Safetensors st;
  st.header_size = r.le<std::uint64_t>("header length");
  if (st.header_size > kMaxHeader) r.fail_at("header length " + std::to_string(st.header_size) + " exceeds the 100 MB limit", 0);
  if (st.header_size > r.left())
    r.fail_at("header length " + std::to_string(st.header_size) + " beyond the end of the file (" + std::to_string(file.size()) + " bytes)", 0);
  const std::string_view text = as_chars(r.take(st.header_size, "header"));
  if (text.empty() || text[0] != '{') r.fail_at("header does not start with '{'", 8);
  const JsonValue header = detail::parse_json(text, kFormat, 8);
  if (header.kind != JsonValue::Kind::object) r.fail_at("header is not a JSON object", 8);
  const std::uint64_t data_start = 8 + st.header_size, data_size = file.size() - data_start;
  for (std::size_t i = 0; i < header.keys.size(); ++i) {
    const JsonValue& v = header.items[i];
    if (header.keys[i] != "__metadata__") {
      st.tensors.push_back(tensor(header.keys[i], v, data_start, data_size));
      continue;
    }
    if (v.kind != JsonValue::Kind::object) corrupt(kFormat, "__metadata__ is not an object", v.offset);
    for (std::size_t j = 0; j < v.keys.size(); ++j) {
      if (v.items[j].kind != JsonValue::Kind::string) corrupt(kFormat, "__metadata__ value of '" + printable(v.keys[j]) + "' is not a string", v.items[j].offset);
      st.metadata.emplace_back(v.keys[j], v.items[j].text);
    }
  }
  // Sorted by offset the tensors must tile the data exactly: an overlap would make one byte two
  // tensors' (one flip counted twice); a hole or trailing bytes are refused by the reference too.
  std::vector<const SafetensorsTensor*> order;
  for (const auto& t : st.tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->offset != b->offset ? a->offset < b->offset : a->size < b->size; });
  std::uint64_t at = data_start;
  for (const auto* t : order) {
    if (t->offset < at) corrupt(kFormat, "tensor '" + printable(t->name) + "' overlaps the tensor before it", t->offset);
    if (t->offset > at) corrupt(kFormat, "hole of " + std::to_string(t->offset - at) + " bytes before tensor '" + printable(t->name) + "'", at);
    at = t->offset + t->size;
  }
  if (at != file.size()) corrupt(kFormat, std::to_string(file.size() - at) + " bytes after the last tensor", at);
  return st;
}

}  // namespace resil::inject::formats
