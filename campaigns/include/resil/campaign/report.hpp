// Campaign reports: merge every shard's records, rates with Wilson and Clopper-Pearson intervals
// per class and group, per stratum of each dimension (field, bit, role, dtype, tensor), and
// estimates reweighted to the whole fault space by stratum size (docs/design/campaigns.md, "Statistics").
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "resil/campaign/fit.hpp"

namespace resil::inject {

/// Build the report of campaign directory `out` (campaign.json, golden.json, results/*.jsonl).
/// Deterministic: a function of the records only (wall times go to "timing").
nlohmann::json build_report(const std::filesystem::path& out);

/// Human tables for a terminal.
std::string report_text(const nlohmann::json& report);
/// Markdown with tables; `plots` are image file names to embed (relative to the markdown file).
std::string report_markdown(const nlohmann::json& report, const std::vector<std::string>& plots);

/// The files a report of campaign directory `out` reads (campaign.json, golden.json, each
/// results/*.jsonl), whether they exist or not: a command's outputs must be none of them.
std::vector<std::filesystem::path> report_inputs(const std::filesystem::path& out);

/// Records of all shards sorted by trial id, as written (for merge checks and scripts).
std::vector<nlohmann::json> merged_records(const std::filesystem::path& out);

/// What campaigns measured for a two-level FIT (`ckpt-flip fit`): trials and SDC / critical SDC /
/// DUE counts per campaign fault model (`inject.model`), the largest fault space, the confidence.
/// A stratified campaign contributes its estimates reweighted to the whole fault space, as effective
/// counts. `warnings` (for stderr) and `notes` (for stdout) say what was assumed.
struct CampaignEvidence {
  std::map<std::string, PatternEvidence> per_model;
  double space_bits = 0, confidence = 0.95;
  std::vector<std::string> warnings, notes;
};
CampaignEvidence campaign_evidence(const std::vector<std::string>& campaign_dirs);

}  // namespace resil::inject
