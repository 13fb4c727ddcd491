// Dataset names in JSON (flip logs, --json outputs). HDF5 link names are bytes in any encoding,
// JSON strings are UTF-8: a name that is not valid UTF-8 is written escaped, reversibly, and
// flagged, so revert/replay find the very dataset again (docs/reference/flip-log.md). Header-only and
// without HDF5, so the fuzzed log parser uses it as it is.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace resil::inject {

/// Length of the valid UTF-8 sequence at s[i] (RFC 3629: no overlong forms, no surrogates, at
/// most U+10FFFF), or 0 when the bytes there are not one.
inline std::size_t utf8_sequence(std::string_view s, std::size_t i) noexcept {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned c = b(i);
  if (c < 0x80) return 1;
  std::size_t n;
  unsigned lo = 0x80, hi = 0xbf;  // allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c == 0xe0) n = 3, lo = 0xa0;
  else if (c >= 0xe1 && c <= 0xef) n = 3, hi = c == 0xed ? 0x9f : 0xbf;
  else if (c == 0xf0) n = 4, lo = 0x90;
  else if (c >= 0xf1 && c <= 0xf3) n = 4;
  else if (c == 0xf4) n = 4, hi = 0x8f;
  else return 0;
  if (i + n > s.size() || b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xbf) return 0;
  return n;
}

inline bool is_utf8(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

/// Whether the sequence of `n` bytes at s[i] is a control character: C0 (below 0x20), DEL, or C1
/// (U+0080-U+009F). A terminal acts on them (ESC starts a sequence that recolours, moves the cursor
/// or retitles the window), and a newline splits a listing's line.
inline bool is_control(std::string_view s, std::size_t i, std::size_t n) noexcept {
  const auto c = static_cast<unsigned char>(s[i]);
  return (n == 1 && (c < 0x20 || c == 0x7f)) || (n == 2 && c == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0);
}

/// The escaped form of a name: valid UTF-8 sequences as they are, each backslash as "\\", each
/// byte that is not part of a valid sequence as "\xHH" (two lower-case hex digits); with
/// `controls`, each byte of a control character (is_control) as "\xHH" too. Valid UTF-8, and
/// unescape_name gives the bytes back.
inline std::string escape_name(std::string_view s, bool controls = false) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() + 8);
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence(s, i);
    if (n == 0 || (controls && is_control(s, i, n))) {
      for (const std::size_t end = i + std::max<std::size_t>(n, 1); i < end;) {
        const auto c = static_cast<unsigned char>(s[i++]);
        out += "\\x";
        out += hex[c >> 4];
        out += hex[c & 15];
      }
    } else if (s[i] == '\\') {
      out += "\\\\";
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

/// The bytes of an escaped name; nullopt unless every backslash starts "\\" or "\xHH".
inline std::optional<std::string> unescape_name(std::string_view s) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (i + 1 < s.size() && s[i + 1] == '\\') {
      out += '\\';
      ++i;
    } else if (i + 3 < s.size() && s[i + 1] == 'x' && digit(s[i + 2]) >= 0 && digit(s[i + 3]) >= 0) {
      out += static_cast<char>(digit(s[i + 2]) * 16 + digit(s[i + 3]));
      i += 3;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

/// Whether a name prints as it is: valid UTF-8 without control characters.
inline bool is_printable_name(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence(s, i);
    if (n == 0 || is_control(s, i, n)) return false;
    i += n;
  }
  return true;
}

/// Human text (listings, --dry-run, messages): the name itself when it is valid UTF-8 without
/// control characters, else its escaped form with the controls escaped too, so that a name never
/// moves a terminal's cursor, recolours it or adds a line to a listing.
inline std::string display_name(std::string_view s) { return is_printable_name(s) ? std::string(s) : escape_name(s, true); }

/// Bytes as a double-quoted string that says exactly which bytes they are: printable ASCII as is,
/// '"' and '\' escaped, every other byte as \xNN ("" for none: an empty value is not an absent one).
inline std::string quote_bytes(std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string q;
  q.reserve(s.size() + 2);
  q += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      q += '\\';
      q += ch;
    } else if (c >= 0x20 && c < 0x7f) {
      q += ch;
    } else {
      q += "\\x";
      q += hex[c >> 4];
      q += hex[c & 15];
    }
  }
  q += '"';
  return q;
}

/// obj[key] = name when it is valid UTF-8; else obj[key] = escape_name(name) and
/// obj[key + "_escaped"] = true.
inline void put_name(nlohmann::json& obj, const std::string& key, std::string_view name) {
  if (is_utf8(name)) {
    obj[key] = std::string(name);
    return;
  }
  obj[key] = escape_name(name);
  obj[key + "_escaped"] = true;
}

/// A list of names (aliases, external raw files) as the flip log's `args`: obj[key] = the names as
/// they are when every one is valid UTF-8; else every one escaped (escape_name) and
/// obj[key + "_escaped"] = true.
inline void put_names(nlohmann::json& obj, const std::string& key, const std::vector<std::string>& names) {
  const bool plain = std::all_of(names.begin(), names.end(), [](const std::string& n) { return is_utf8(n); });
  auto& list = obj[key] = nlohmann::json::array();
  for (const auto& n : names) list.push_back(plain ? n : escape_name(n));
  if (!plain) obj[key + "_escaped"] = true;
}

}  // namespace resil::inject
