// Internal to the campaign engine: the campaign's selection over all files of the golden checkpoint,
// its sampling strata, and the fault space it spans.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "resil/inject/campaign.hpp"
#include "resil/inject/select.hpp"
#include "campaign_files.hpp"

namespace resil::inject::detail {

/// Targets of every file of a checkpoint, with the file each lies in.
struct Selection {
  std::vector<Target> targets;
  std::vector<std::size_t> file;  // file index per target
  double bits() const {
    double b = 0;
    for (const auto& t : targets) b += static_cast<double>(t.weight());
    return b;
  }
};
/// The configuration's selection over `files` (a shard file that holds nothing selected is skipped;
/// nothing selected at all: NothingSelectedError).
Selection select_all(const CampaignConfig& c, const CkptFiles& files);

struct Stratum {
  std::string label;
  Selection sel;
};
/// The sampling strata: the selection split along the configuration's `strata` (empty strata dropped).
std::vector<Stratum> make_strata(const CampaignConfig& c, const Selection& base, const CkptFiles& files);

/// Stored bits of the selection, in total and per stratum of each dimension.
FaultSpace space_of(const Selection& s, const CkptFiles& files);

}  // namespace resil::inject::detail
