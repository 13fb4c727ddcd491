// inject::PlanOptions: what decides a plan of flips (seed and trial, how many sites, strata, the
// fault model, --finite); sample_sites (sampling.hpp) draws the sites of a plan, plan (plan.hpp)
// turns them into flip records.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "resil/inject/fault_model.hpp"

namespace resil::inject {

enum class Stratify { none, bits, dataset };
/// The names of Stratify on the command line.
inline constexpr std::pair<std::string_view, Stratify> stratify_names[] = {
    {"none", Stratify::none}, {"bits", Stratify::bits}, {"dataset", Stratify::dataset}};

struct PlanOptions {
  std::uint64_t seed = 0;
  std::uint64_t trial = 0;              // campaign trial: its own counter-based streams
  std::optional<std::uint64_t> flips;   // exact count, sites without replacement
  std::optional<double> ber;            // per stored bit
  Stratify stratify = Stratify::none;
  FaultModel model;
  /// --finite: a site whose fault would leave a float NaN or Inf is redrawn (finite.hpp); planning
  /// then draws each site's model randomness from the site's own stream.
  bool finite = false;
  /// The fault model's draw stream across several plans of one trial (a campaign plans each file of
  /// a set or manifest on its own): when set, plan() starts the model stream at *model_draws and
  /// leaves it past the draws it made, so the files' faults are not the same draws repeated.
  std::uint64_t* model_draws = nullptr;
};

}  // namespace resil::inject
