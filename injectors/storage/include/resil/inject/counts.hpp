// Exact counts beyond 64 bits (fault spaces: a dataset of 2^62 f64 elements holds 2^68 stored
// bits) and how they appear in JSON: a number up to 2^53 (exact in every JSON reader, JavaScript
// and jq included), else a string of decimal digits (docs/reference/ckpt-flip.md, "Selection").
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "resil/core/rng.hpp"  // resil::uint128_t

namespace resil::inject {

/// Largest count written as a JSON number.
inline constexpr std::uint64_t json_exact_max = std::uint64_t{1} << 53;

inline std::string count_string(uint128_t v) {
  if (v == 0) return "0";
  std::string s;
  for (; v > 0; v /= 10) s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
  return s;
}

inline nlohmann::json count_json(uint128_t v) {
  if (v <= json_exact_max) return static_cast<std::uint64_t>(v);
  return count_string(v);
}

}  // namespace resil::inject
