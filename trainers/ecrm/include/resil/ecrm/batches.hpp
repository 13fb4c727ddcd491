// The local share of each global batch: synthetic Criteo-like samples (a pure function of the seed
// and the sample number) or a Criteo TSV file read once and cycled.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "resil/data/criteo.hpp"
#include "resil/ecrm/config.hpp"

namespace resil::ecrm {

struct LocalBatch {
  int n = 0;
  std::vector<float> dense;        // n x 13
  std::vector<float> targets;      // n
  std::vector<std::int32_t> rows;  // n x tables: row index per sample and table
};

class BatchSource {
public:
  BatchSource(const Config& cfg, int world, int rank, std::uint64_t seed);
  /// This rank's share of step `step`'s global batch (steps count from 1).
  LocalBatch batch(std::int64_t step) const;

private:
  const Config& cfg_;
  int world_, rank_;
  std::uint64_t data_seed_;
  std::vector<std::uint32_t> sizes_;  // 26 Criteo table sizes (the first cfg.tables are used)
  std::optional<data::ClickSet> file_;
};

}  // namespace resil::ecrm
