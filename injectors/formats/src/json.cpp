#include "json.hpp"

#include <unordered_set>

#include "resil/inject/formats/bytes.hpp"

namespace resil::inject::formats::detail {
namespace {

constexpr int kMaxDepth = 64;
// The arrays of a safetensors header are shapes and offset pairs: a few values each. A 100 MB
// header of one 50 M-entry shape took 9 GB as a value tree.
constexpr std::size_t kMaxArray = 1024;

// Length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlong forms, no surrogates, at
// most U+10FFFF), 0 when the bytes there are not one. RFC 8259 8.1: JSON text is UTF-8.
std::size_t utf8_length(std::string_view s, std::size_t i) noexcept {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned c = b(i);
  std::size_t n = 0;
  unsigned lo = 0x80, hi = 0xBF;  // the second byte's range
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c == 0xE0) n = 3, lo = 0xA0;
  else if (c >= 0xE1 && c <= 0xEF) n = 3, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c == 0xF0) n = 4, lo = 0x90;
  else if (c >= 0xF1 && c <= 0xF3) n = 4;
  else if (c == 0xF4) n = 4, hi = 0x8F;
  else return 0;
  if (i + n > s.size() || b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  return n;
}

class Parser {
public:
  Parser(std::string_view s, std::string_view format, std::uint64_t base) : s_(s), format_(format), base_(base) {}

  JsonValue document() {
    JsonValue v = value(0);
    skip_ws();
    if (i_ != s_.size()) fail("trailing characters after the JSON value");
    return v;
  }

private:
  [[noreturn]] void fail(const std::string& what) const { corrupt(format_, what, base_ + i_); }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  char peek() {
    skip_ws();
    if (i_ == s_.size()) fail("unexpected end of JSON");
    return s_[i_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  bool literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }

  JsonValue value(int depth) {
    if (depth > kMaxDepth) fail("JSON nested deeper than " + std::to_string(kMaxDepth));
    JsonValue v;
    const char c = peek();
    v.offset = base_ + i_;
    if (c == '{') {
      v.kind = JsonValue::Kind::object;
      ++i_;
      if (peek() == '}') return ++i_, v;
      std::unordered_set<std::string> seen;
      for (;;) {
        if (peek() != '"') fail("expected a string key");
        const std::size_t at = i_;
        std::string k = string();
        if (!seen.insert(k).second) {
          i_ = at;
          fail("duplicate key '" + printable(k) + "'");
        }
        expect(':');
        v.keys.push_back(std::move(k));
        v.items.push_back(value(depth + 1));
        if (peek() == '}') return ++i_, v;
        expect(',');
      }
    }
    if (c == '[') {
      v.kind = JsonValue::Kind::array;
      ++i_;
      if (peek() == ']') return ++i_, v;
      for (;;) {
        if (v.items.size() == kMaxArray) fail("JSON array of more than " + std::to_string(kMaxArray) + " values");
        v.items.push_back(value(depth + 1));
        if (peek() == ']') return ++i_, v;
        expect(',');
      }
    }
    if (c == '"') {
      v.kind = JsonValue::Kind::string;
      v.text = string();
      return v;
    }
    if (literal("true") || literal("false")) {
      v.kind = JsonValue::Kind::boolean;
      v.boolean = c == 't';
      return v;
    }
    if (literal("null")) return v;
    if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = JsonValue::Kind::number;
      v.text = number();
      return v;
    }
    fail(std::string("unexpected character '") + (c >= 0x20 && c < 0x7F ? std::string(1, c) : "?") + "'");
  }

  std::string number() {
    const std::size_t start = i_;
    auto digits = [&] {
      const std::size_t from = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      if (i_ == from) fail("malformed number");
    };
    if (s_[i_] == '-') ++i_;
    if (i_ < s_.size() && s_[i_] == '0') ++i_;
    else digits();
    if (i_ < s_.size() && s_[i_] == '.') ++i_, digits();
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      digits();
    }
    return std::string(s_.substr(start, i_ - start));
  }

  unsigned hex4() {
    if (s_.size() - i_ < 4) fail("truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; ++k, ++i_) {
      const char h = s_[i_];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= static_cast<unsigned>(h - '0');
      else if (h >= 'a' && h <= 'f') v |= static_cast<unsigned>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') v |= static_cast<unsigned>(h - 'A' + 10);
      else fail("bad \\u escape");
    }
    return v;
  }
  static void utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string string() {
    ++i_;  // the opening quote
    std::string out;
    for (;;) {
      if (i_ == s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (static_cast<unsigned char>(c) >= 0x80) {
        const std::size_t n = utf8_length(s_, i_ - 1);
        if (n == 0) {
          --i_;
          static constexpr char hex[] = "0123456789abcdef";
          const auto u = static_cast<unsigned char>(c);
          fail(std::string("string is not valid UTF-8 (byte 0x") + hex[u >> 4] + hex[u & 15] + ")");
        }
        out.append(s_.substr(i_ - 1, n));
        i_ += n - 1;
        continue;
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ == s_.size()) fail("unterminated string");
      const char e = s_[i_++];
      switch (e) {
        case '"': case '\\': case '/': out += e; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {  // a surrogate pair
            if (!literal("\\u")) fail("unpaired surrogate");
            const unsigned lo = hex4();
            if (lo < 0xDC00 || lo >= 0xE000) fail("unpaired surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            fail("unpaired surrogate");
          }
          utf8(out, cp);
          break;
        }
        default: --i_, fail("bad escape");
      }
    }
  }

  std::string_view s_;
  std::string_view format_;
  std::uint64_t base_;
  std::size_t i_ = 0;
};

}  // namespace

std::optional<std::uint64_t> JsonValue::as_u64() const {
  if (kind != Kind::number || text.empty() || text.size() > 20) return std::nullopt;
  std::uint64_t v = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;  // negative, fraction or exponent
    if (__builtin_mul_overflow(v, 10u, &v) || __builtin_add_overflow(v, static_cast<unsigned>(c - '0'), &v)) return std::nullopt;
  }
  return v;
}

const JsonValue* JsonValue::find(std::string_view key) const {
  for (std::size_t i = 0; i < keys.size(); ++i)
    if (keys[i] == key) return &items[i];
  return nullptr;
}

JsonValue parse_json(std::string_view text, std::string_view format, std::uint64_t base) {
  return Parser(text, format, base).document();
}

}  // namespace resil::inject::formats::detail
