// Internal to the campaign engine: the golden reference every trial is compared with (its metric
// and final weights) and the checksums a reverted work copy must match.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "resil/campaign/campaign.hpp"
#include "files.hpp"

namespace resil::inject::detail {

/// (file index, tensor name) -> XXH64 of the stored bytes.
using GoldenSums = std::map<std::pair<std::size_t, std::string>, std::uint64_t>;
/// Checksums of every tensor of the golden files, each opened as `format` (the storage layer).
GoldenSums golden_checksums(const CkptFiles& f, Format format);

/// The final weights named by a summary's "last_checkpoint", when it is a readable checkpoint (a
/// trial may name a file it never finished or damaged: then the weights are unknown, not an error).
std::optional<std::string> final_weights_of(const nlohmann::json& summary);

/// The numeric configuration a summary names ("numeric": {"id": ...}), if it names one.
std::optional<std::string> numeric_id_of(const nlohmann::json& summary);

/// Throws MismatchError when trial `t`'s summary names another numeric configuration than the
/// golden run's and the campaign does not allow it (CampaignConfig::allow_numeric_mismatch).
void check_numeric(const CampaignConfig& c, const Golden& g, const nlohmann::json& trial_summary, std::uint64_t t);

/// The golden reference (OUT/golden.json, else the given summary, else a golden run of the command
/// on `work`; `ran` tells the caller the command has had the work copy). Written to OUT/golden.json.
Golden golden_reference(const CampaignConfig& c, const RunOptions& o, const CkptFiles& work, const std::filesystem::path& wdir, bool& ran);

}  // namespace resil::inject::detail
