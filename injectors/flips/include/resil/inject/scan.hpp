// Detection without a golden copy: checksum-attribute mismatches, NaN/Inf, and values whose
// exponent lies far above the tensor's own distribution (the signature of an exponent flip).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "resil/inject/storage.hpp"

namespace resil::inject {

/// A value is an exponent outlier when its binary exponent exceeds the tensor's median exponent
/// by more than `outlier_binades` (and, for tensors of >= 1000 values, its 99.9th percentile by 8).
inline constexpr int outlier_binades = 24;

struct DatasetScan {
  std::string path;
  std::string dtype;
  std::uint64_t numel = 0;
  std::string checksum = "absent";   // ok | mismatch | absent | unverified (sparse: not every logical byte was read)
  std::uint64_t nan = 0, inf = 0, outliers = 0;
  int median_exponent = 0, threshold_exponent = 0;
  double max_abs = 0;
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
