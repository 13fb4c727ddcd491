// Detection without a golden copy: checksum-attribute mismatches, NaN/Inf, and values whose
// exponent lies far above the tensor's own distribution (the signature of an exponent flip).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "resil/inject/storage.hpp"

namespace resil::inject {

/// A value is an exponent outlier when its binary exponent exceeds the reference, the tensor's
/// `outlier_reference_quantile` exponent (the 90th percentile: outliers making up to 10% of a
/// tensor cannot move it), by more than `outlier_margin(E)` binades for an E-bit exponent field:
/// min(24, 2^(E-2)), half the jump 2^(E-1) that the flip of the exponent field's top bit gives a
/// value whose top bit is clear (|v| < 2). f64, f32, bf16, E8M0: 24; f16, E5M2(FNUZ): 8; E4M3(FN,
/// FNUZ): 4. So the exponent-MSB flip of any value not more than 2^(E-2) binades below the
/// reference is caught in every float dtype (a fixed 24 exceeded the whole range of f16 and fp8).
inline constexpr double outlier_reference_quantile = 0.9;
constexpr int outlier_margin(unsigned exponent_bits) noexcept {
  return exponent_bits >= 7 ? 24 : 1 << (exponent_bits - 2);
}

struct DatasetScan {
  std::string path;
  std::string dtype;
  std::uint64_t numel = 0;
  std::string checksum = "absent";   // ok | mismatch | absent | unverified (sparse: not every logical byte was read)
  std::uint64_t nan = 0, inf = 0, outliers = 0;
  // Unbiased exponents of the stored field (subnormals: field 0); none without a finite non-zero value.
  std::optional<int> median_exponent, threshold_exponent;
  // The largest |x| and its first flat index; none when every element is NaN (or there is none).
  std::optional<double> max_abs;
  std::uint64_t max_abs_index = 0;
  bool suspect() const noexcept { return checksum == "mismatch" || nan || inf || outliers; }
};

struct ScanReport {
  std::vector<DatasetScan> datasets;
  std::vector<std::string> skipped;  // unsupported element types or extents, virtual datasets: "PATH (why)"
  bool suspect() const noexcept;
  nlohmann::json to_json() const;
};

ScanReport scan(const std::string& file, Format format = Format::automatic);

}  // namespace resil::inject
