// Internal to the campaign engine: the campaign's selection over all files of the golden checkpoint,
// its sampling strata, and the fault space it spans.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "resil/campaign/campaign.hpp"
#include "resil/inject/select.hpp"
#include "files.hpp"

namespace resil::inject::detail {

/// Targets of every file of a checkpoint, with the file each lies in and its role.
struct CampaignTargets {
  std::vector<Target> targets;
  std::vector<std::size_t> file;  // file index per target
  /// Role label per target ("model", "optimizer", "other"): the format adapter's (a safetensors
  /// file's tensors are model weights whatever their names), not guessed from the name.
  std::vector<std::string> role;
  double bits() const {
    double b = 0;
    for (const auto& t : targets) b += static_cast<double>(t.weight());
    return b;
  }
};
/// The configuration's selection over `files`, each opened as the configuration's `format` (a shard file that holds nothing selected is skipped;
/// nothing selected at all: NothingSelectedError).
CampaignTargets select_all(const CampaignConfig& c, const CkptFiles& files);

struct Stratum {
  std::string label;
  CampaignTargets sel;
};
/// The sampling strata: the selection split along the configuration's `strata` (empty strata dropped).
std::vector<Stratum> make_strata(const CampaignConfig& c, const CampaignTargets& base, const CkptFiles& files);

/// Stored bits of the selection, in total and per stratum of each dimension.
FaultSpace space_of(const CampaignTargets& s, const CkptFiles& files);

/// fn(name, checksum) for each tensor with a dtype of a checkpoint file opened through its format's
/// adapter (the storage layer), in the adapter's order: Storage::checksum, the XXH64 of its stored bytes.
void for_each_checksum(const std::string& file, Format format, const std::function<void(const Tensor&, std::uint64_t)>& fn);

}  // namespace resil::inject::detail
