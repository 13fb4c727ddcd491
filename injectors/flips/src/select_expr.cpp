#include "resil/inject/select_expr.hpp"

#include <algorithm>
#include <charconv>

#include "resil/core/error.hpp"

namespace resil::inject {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The character an escape at p[i] == '\\' stands for, and its length: "\\xHH" is the byte 0xHH
// (names that are not UTF-8, written as flip logs and --json outputs escape them), "\\c" is c.
char escaped(std::string_view p, std::size_t i, std::size_t& len) {
  if (i + 3 < p.size() && p[i + 1] == 'x' && hex_digit(p[i + 2]) >= 0 && hex_digit(p[i + 3]) >= 0) {
    len = 4;
    return static_cast<char>(hex_digit(p[i + 2]) * 16 + hex_digit(p[i + 3]));
  }
  len = 2;
  return p[i + 1];
}

// Validates a pattern once so matching never has to deal with malformed syntax.
void check_pattern(const std::string& p) {
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '\\') {
      if (i + 1 >= p.size()) throw UsageError("glob '" + p + "': trailing backslash");
      ++i;
    } else if (p[i] == '[') {
      std::size_t j = i + 1;
      if (j < p.size() && (p[j] == '!' || p[j] == '^')) ++j;
      if (j < p.size() && p[j] == ']') ++j;  // a leading ']' is literal
      while (j < p.size() && p[j] != ']') ++j;
      if (j >= p.size()) throw UsageError("glob '" + p + "': unterminated '['");
      i = j;
    }
  }
}

// Matches a class starting at p[pi] == '['; returns whether c matched and sets `end` past ']'.
bool match_class(std::string_view p, std::size_t pi, char c, std::size_t& end) {
  std::size_t j = pi + 1;
  bool negate = false;
  if (j < p.size() && (p[j] == '!' || p[j] == '^')) {
    negate = true;
    ++j;
  }
  bool hit = false;
  bool first = true;
  while (j < p.size() && (p[j] != ']' || first)) {
    first = false;
    const char lo = p[j];
    if (j + 2 < p.size() && p[j + 1] == '-' && p[j + 2] != ']') {
      if (lo <= c && c <= p[j + 2]) hit = true;
      j += 3;
    } else {
      if (c == lo) hit = true;
      ++j;
    }
  }
  end = j + 1;
  return c != '/' && hit != negate;
}

// Set-of-positions simulation (no backtracking): O(|pattern| * |path|) for any input, so
// hostile patterns cannot blow up. cur[j] = "the pattern so far can end at path position j".
bool match_from(std::string_view p, std::string_view s, std::vector<char> cur) {
  const std::size_t n = s.size();
  std::vector<char> next(n + 1);
  std::size_t pi = 0;
  while (pi < p.size()) {
    std::fill(next.begin(), next.end(), 0);
    const char c = p[pi];
    if (c == '*') {
      const bool dbl = pi + 1 < p.size() && p[pi + 1] == '*';
      if (dbl && pi + 2 < p.size() && p[pi + 2] == '/') {
        // "**/": zero or more whole segments.
        bool any = false;
        for (std::size_t j = 0; j <= n; ++j) {
          next[j] = cur[j] || (j > 0 && s[j - 1] == '/' && any);
          any = any || cur[j];
        }
        pi += 3;
      } else {
        for (std::size_t j = 0; j <= n; ++j)
          next[j] = cur[j] || (j > 0 && next[j - 1] && (dbl || s[j - 1] != '/'));
        pi += dbl ? 2 : 1;
      }
    } else {
      std::size_t after = pi + 1;
      for (std::size_t j = 0; j < n; ++j) {
        if (!cur[j]) continue;
        bool ok;
        if (c == '?') {
          ok = s[j] != '/';
        } else if (c == '[') {
          ok = match_class(p, pi, s[j], after);
        } else if (c == '\\') {
          std::size_t len = 0;
          ok = s[j] == escaped(p, pi, len);
          after = pi + len;
        } else {
          ok = s[j] == c;
        }
        if (ok) next[j + 1] = 1;
      }
      if (c == '[') {
        std::size_t end = 0;
        match_class(p, pi, 'a', end);
        after = end;
      } else if (c == '\\') {
        std::size_t len = 0;
        escaped(p, pi, len);
        after = pi + len;
      }
      pi = after;
    }
    cur.swap(next);
  }
  return cur[n] != 0;
}

}  // namespace

Glob::Glob(std::string pattern) : pattern_(std::move(pattern)) {
  if (pattern_.empty()) throw UsageError("empty glob pattern");
  check_pattern(pattern_);
}

bool Glob::matches(std::string_view path) const {
  std::vector<char> start(path.size() + 1, 0);
  if (pattern_.front() == '/') {
    start[0] = 1;
  } else {
    // Relative pattern: it may start at any path segment.
    for (std::size_t k = 0; k < path.size(); ++k)
      if ((k == 0 && path[0] != '/') || (k > 0 && path[k - 1] == '/')) start[k] = 1;
  }
  return match_from(pattern_, path, std::move(start));
}

namespace {
unsigned parse_bit(std::string_view s, std::string_view whole) {
  unsigned v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || s.empty())
    throw UsageError("--bits '" + std::string(whole) + "': '" + std::string(s) + "' is not a bit number or field name");
  if (v > 63) throw UsageError("--bits '" + std::string(whole) + "': bit " + std::string(s) + " is beyond 63");
  return v;
}
}  // namespace

BitSpec BitSpec::parse(std::string_view text) {
  BitSpec spec;
  spec.text_ = std::string(text);
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(start, comma - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.empty()) throw UsageError("--bits '" + std::string(text) + "': empty item");
    struct Named { std::string_view name; Kind kind; };
    static constexpr Named names[] = {{"all", Kind::all}, {"sign", Kind::sign}, {"exponent", Kind::exponent},
                                      {"exponent-msb", Kind::exponent_msb}, {"mantissa", Kind::mantissa},
                                      {"mantissa-high", Kind::mantissa_high}, {"msb", Kind::msb}, {"lsb", Kind::lsb}};
    bool named = false;
    for (const auto& n : names)
      if (n.name == item) {
        spec.items_.push_back({n.kind});
        named = true;
      }
    if (!named) {
      const auto dash = item.find('-');
      Item r{Kind::range};
      if (dash == std::string_view::npos) {
        r.lo = r.hi = parse_bit(item, text);
      } else {
        r.lo = parse_bit(item.substr(0, dash), text);
        r.hi = parse_bit(item.substr(dash + 1), text);
        if (r.lo > r.hi) throw UsageError("--bits '" + std::string(text) + "': range '" + std::string(item) + "' is reversed");
      }
      spec.items_.push_back(r);
    }
    start = comma + 1;
  }
  return spec;
}

std::uint64_t BitSpec::mask_for(ckpt::DType t) const noexcept {
  const unsigned w = ckpt::dtype_bits(t);
  const std::uint64_t all = width_mask(w);
  if (items_.empty()) return all;
  const auto fl = ckpt::float_layout(t);
  std::uint64_t m = 0;
  for (const auto& it : items_) {
    switch (it.kind) {
      case Kind::all: m |= all; break;
      case Kind::sign:
        if (ckpt::dtype_has_sign(t)) m |= std::uint64_t{1} << (w - 1);
        break;
      case Kind::msb: m |= std::uint64_t{1} << (w - 1); break;
      case Kind::lsb: m |= 1; break;
      case Kind::exponent:
        if (fl) m |= width_mask(fl->exponent_bits) << fl->mantissa_bits;
        break;
      case Kind::exponent_msb:
        if (fl) m |= std::uint64_t{1} << (fl->mantissa_bits + fl->exponent_bits - 1);
        break;
      case Kind::mantissa:
        if (fl) m |= width_mask(fl->mantissa_bits);
        break;
      case Kind::mantissa_high:
        if (fl) {
          const unsigned hi = (fl->mantissa_bits + 1) / 2;
          m |= width_mask(hi) << (fl->mantissa_bits - hi);
        }
        break;
      case Kind::range:
        for (unsigned b = it.lo; b <= it.hi && b < w; ++b) m |= std::uint64_t{1} << b;
        break;
    }
  }
  return m & all;
}

}  // namespace resil::inject
