// Internal to the campaign engine: the ec-train trial kind (TrialKind::ec_train). A trial is the
// configured ec-train command with in-memory flips (--inject) drawn from the trial's seed, its flip
// log (--inject-log) read back into the record, and its report ({out}) classified against the
// golden run's state_hash and loss. No file is flipped or restored; what a run leaves behind is its
// state segments, removed after every run however it ended.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "resil/campaign/campaign.hpp"

namespace resil::inject::detail {

/// The ec-train --job-id of a run in the work directory `wdir` (`trial`: the trial id, or "golden"):
/// distinct for every campaign directory, shard, job and trial, so that no two runs share state
/// segments, and a valid segment name (ec-train accepts 1-200 of A-Z a-z 0-9 . _ -).
std::string ec_job_id(const std::filesystem::path& wdir, const std::string& trial);

/// The faults of trial t: all in target targets[t mod n] (the trial's stratum), each at a step drawn
/// uniformly from `steps` with the trial's seed; ec-train draws the rank, the word and the bits from
/// `seed` (--inject-seed), the trial's derived seed.
struct EcInjection {
  std::string target;
  std::vector<std::uint64_t> steps;
  std::uint64_t seed = 0;
  std::string items() const;  // the --inject value: "row@7,row@12"
};
EcInjection draw_ec_injection(const CampaignConfig& c, std::uint64_t t, std::pair<std::uint64_t, std::uint64_t> steps);

/// The arguments a trial adds to the command: --job-id, --inject, --inject-seed, --inject-bits,
/// --inject-model, --inject-log. The golden run adds only --job-id.
std::vector<std::string> ec_trial_args(const CampaignConfig& c, const EcInjection& inj, const std::string& job, const std::filesystem::path& log);

/// Remove the state segments of `job` (/dev/shm/resil-ec-<job>-<rank>, owned by this user): a run
/// that stopped (exit 1 or 8, killed, timed out) keeps them for a relaunch that a campaign never
/// makes. Returns how many it removed.
std::size_t remove_ec_segments(const std::string& job);

/// Remove the state segments of every run a campaign working in `wdir` makes (its golden run and
/// trials, in `wdir` and in `wdir`/job-k, k < `jobs`): those a campaign killed with SIGKILL left, its
/// job killed with it (the supervisor, exec.cpp) but nothing removed. Called before the first run,
/// with the shard's results file locked: no live run of this shard can hold one. Returns how many.
std::size_t remove_ec_campaign_segments(const std::filesystem::path& wdir, unsigned jobs);

/// A trial's flip log (ckpt-flip's format, written by ec-train's rank 0) as the record's "flips":
/// dataset, index, nd, dtype, bit (the anchor), mask, old, new, old_value, new_value, and ec-train's
/// step, rank, target (stripe, member, member_row for shard and parity rows); `labels` are the strata
/// of the first (field, bit, role = the target, dtype, tensor); `nonfinite` when a new value is NaN or Inf.
struct EcFlips {
  nlohmann::json flips = nlohmann::json::array();
  std::map<std::string, std::string> labels;
  bool nonfinite = false;
};
EcFlips read_ec_flip_log(const std::filesystem::path& log);

/// What a record carries from the trial's ec-train report: `state_hash`, `golden_state_hash`,
/// `replicas_diverged`, `replicas_xxh64` (each rank's replica), `injections` (each flip's step, rank, dataset and, once the scrub repaired it,
/// `repaired_step` and `flip_to_repair_s`), `repaired` (the scrub's counts: data, parity, checksum),
/// `repairs` (the scrub's repairs, row by row, at most 100)
/// and `unrepairable` (the error line of a codeword beyond repair); null where the report says nothing.
nlohmann::json ec_train_fields(const nlohmann::json& report, const Golden& g);

/// The golden run's final state (its report's state_hash), which a trial's must equal to be
/// bit_masked; UsageError naming `what` when the report has none.
std::string ec_golden_state(const nlohmann::json& report, const std::string& what);

}  // namespace resil::inject::detail
