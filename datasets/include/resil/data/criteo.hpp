// Criteo click logs (Kaggle/Terabyte TSV: label, 13 integer features, 26 hex categoricals) with the
// DLRM preprocessing, and a synthetic Criteo-like generator with a planted signal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <vector>

namespace resil::data {

inline constexpr std::size_t criteo_num_dense = 13;
inline constexpr std::size_t criteo_num_sparse = 26;

/// Preprocessed click samples: dense is N x 13 (log(max(x,0)+1)), sparse is N x 26 row indices
/// already reduced modulo each table's size, label is 0/1.
struct ClickSet {
  std::size_t n = 0;
  std::vector<float> dense;
  std::vector<std::int32_t> sparse;
  std::vector<float> labels;
  std::vector<std::uint32_t> table_sizes;  // 26 entries
};

/// Read a Criteo TSV file: 40 tab-separated fields per line; empty fields mean 0 (missing).
/// Categorical hex values are reduced with `value mod table_sizes[j]` (DLRM's preprocessing).
/// A malformed line raises CorruptInputError naming file, line and field; `limit` > 0 stops early.
ClickSet read_criteo_tsv(const std::filesystem::path& p, const std::vector<std::uint32_t>& table_sizes,
                         std::size_t limit = 0);

/// Write raw (unprocessed) Criteo-format lines: round-trips the synthetic generator through the reader.
struct RawClick {
  int label = 0;
  std::int64_t ints[criteo_num_dense] = {};
  std::uint32_t cats[criteo_num_sparse] = {};
};
void write_criteo_tsv(const std::filesystem::path& p, const std::vector<RawClick>& rows);

/// Synthetic raw clicks: heavy-tailed integer features, Zipf-like categoricals, and a label drawn
/// from a logistic model over hidden per-category and per-feature weights, so a learned model
/// reaches an AUC clearly above 0.5 (the planted signal). Pure function of (seed, first, n).
std::vector<RawClick> synthetic_raw_clicks(std::size_t n, std::uint64_t seed, std::uint64_t first = 0);

/// The same samples preprocessed (as read_criteo_tsv would return them).
ClickSet synthetic_clicks(std::size_t n, std::uint64_t seed, const std::vector<std::uint32_t>& table_sizes,
                          std::uint64_t first = 0);

/// DLRM preprocessing of one raw sample, appended to `out`.
void append_preprocessed(ClickSet& out, const RawClick& r);

}  // namespace resil::data
