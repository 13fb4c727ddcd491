// CLI11 validators for numeric and path options, shared by resil's executables. They run at parse
// time, so a bad value is a usage error (exit 2) naming the option before anything has happened.
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

namespace resil::app {

/// A decimal integer in [lo, hi]. CLI11 alone reads "-1" into an unsigned option as 2^64-1, clamps
/// values past the type's range and reads "010" as octal 8; this refuses all three (and hex), and
/// normalises the accepted text so the conversion that follows sees plain decimal digits.
inline CLI::Validator Decimal(std::uint64_t lo = 0, std::uint64_t hi = std::numeric_limits<std::uint64_t>::max()) {
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, range](std::string& s) -> std::string {
        std::uint64_t v = 0;
        const char* end = s.data() + s.size();
        const auto [p, ec] = std::from_chars(s.data(), end, v);
        if (s.empty() || s[0] < '0' || s[0] > '9' || ec != std::errc() || p != end || v < lo || v > hi)
          return "'" + s + "' is not a decimal integer in " + range;
        s = std::to_string(v);  // "010" -> "10"
        return {};
      },
      "UINT in " + range);
}

/// A 64-bit unsigned value (seeds, trial numbers): decimal as `Decimal()`, or 0x and hex digits
/// (seeds are copied from logs in either form). -1, 2^64 and beyond, signs and spaces are refused.
inline CLI::Validator Uint64() {
  const CLI::Validator decimal = Decimal();
  return CLI::Validator(
      [decimal](std::string& s) -> std::string {
        if (s.size() <= 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return decimal(s);
        std::uint64_t v = 0;
        const char* end = s.data() + s.size();
        const auto [p, ec] = std::from_chars(s.data() + 2, end, v, 16);
        if (s[2] == '+' || s[2] == '-' || ec != std::errc() || p != end) return "'" + s + "' is not a 64-bit hexadecimal integer";
        s = std::to_string(v);
        return {};
      },
      "UINT64");
}

/// A real number in [lo, hi] (`lo_open`: (lo, hi]) that stays finite and in range once stored as a
/// 32-bit float: refuses NaN, Inf, 1e40 (Inf as a float) and 1e-50 (0 as a float) where 0 is out.
/// CLI::Range lets NaN through (every comparison with NaN is false).
inline CLI::Validator Real(double lo, double hi, bool lo_open = false) {
  std::ostringstream r;
  r << (lo_open ? "(" : "[") << lo << ", " << hi << "]";
  const std::string range = r.str();
  return CLI::Validator(
      [lo, hi, lo_open, range](std::string& s) -> std::string {
        double d = 0;
        if (!CLI::detail::lexical_cast(s, d)) return "'" + s + "' is not a number";
        const double f = static_cast<double>(static_cast<float>(d));
        if (!std::isfinite(f) || f < lo || f > hi || (lo_open && f <= lo)) return "'" + s + "' is not a number in " + range;
        return {};
      },
      "REAL in " + range);
}

/// A path that is not empty ("" would silently mean "none" or the current directory).
inline CLI::Validator NonEmptyPath() {
  return CLI::Validator([](std::string& s) -> std::string { return s.empty() ? std::string("empty path") : std::string(); }, "PATH");
}

}  // namespace resil::app
