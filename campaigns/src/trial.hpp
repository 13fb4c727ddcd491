// Internal to the campaign engine: one trial, start to end, in a job's private work directory:
// sample and plan the flips, inject them (the injection transaction, transaction.hpp), run the
// command, classify, restore the work copy to golden bytes, build the record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "resil/campaign/campaign.hpp"
#include "resil/inject/fault_model.hpp"
#include "resil/inject/plan.hpp"
#include "resil/inject/sampling.hpp"
#include "files.hpp"
#include "golden.hpp"
#include "targets.hpp"
#include "worker.hpp"

namespace resil::inject::detail {

/// Everything one job needs to run trials: the shared campaign state (read-only) and its own
/// private checkpoint copy, scratch directory and (in worker mode) trial worker.
struct TrialContext {
  const CampaignConfig& c;
  const Golden& golden;
  const FaultModel& fmodel;
  const std::vector<Stratum>& strata;
  const CkptFiles& golden_files;
  const GoldenSums& gsum;
  ShardSpec shard;
  std::string campaign;  // the identity each record carries: campaign_id of OUT/campaign.json's configuration
  std::filesystem::path wdir;
  CkptFiles work;
  std::vector<FileId> work_ids;
  std::unique_ptr<TrialWorker> worker;
  /// Kind ec-train: the steps a fault is drawn from (inject.steps, else 1 to the golden run's last).
  std::pair<std::uint64_t, std::uint64_t> ec_steps{1, 1};

  /// Before the first trial, with `work` in place: note its files' identities, start the worker.
  void prepare();
  /// The record of trial t. In worker mode a worker that dies without a result is restarted and the
  /// trial run again (from golden bytes, as restored); a second death is recorded as crash.
  nlohmann::json run(std::uint64_t t);
  /// One run of trial t; nothing when the worker died and `last` is false (restored, no record).
  /// Its phases, in order, each below.
  std::optional<nlohmann::json> attempt(std::uint64_t t, bool last);

  /// What one attempt carries from phase to phase.
  struct Attempt {
    std::uint64_t t = 0;
    const Stratum& st;                                    // the trial's stratum (t mod the number of strata)
    PlanOptions popt;
    Sampled sampled;                                      // the fault sites, over the stratum's targets
    std::map<std::size_t, std::vector<FlipRecord>> recs;  // the planned flips of each file
    CkptFiles trial_files;                                // what the command is given: the work copy, or a fresh copy
    nlohmann::json flips = nlohmann::json::array();       // the record's flips
    bool nonfinite = false;                               // a flip left a NaN or Inf
    std::set<std::pair<std::size_t, std::string>> touched;  // (file, dataset) of each flip
    std::map<std::string, std::string> labels;            // the strata labels of the first flip
    CommandResult r;
    bool worker_died = false;  // the worker ended without a result (r is empty)
    Classified k;
    std::string restore = "copy";  // how the work copy got its golden bytes back
    nlohmann::json ec_train;       // kind ec-train: what the record carries from the run's report (ec_train.hpp)
  };
  /// 1. Sample the fault sites over the stratum (--finite reads the candidates' words from the work copy).
  void draw_sites(Attempt& a);
  /// 2. Plan the flips of each file against that file's targets.
  void plan_files(Attempt& a);
  /// 3. Inject: per file, the injection transaction (its log durable before the file changes), the
  ///    record's flips and strata labels.
  void inject_flips(Attempt& a);
  /// 4. Run the command, as a process or in the worker.
  void execute(Attempt& a);
  /// 5. Classify the run against the golden one.
  void classify_run(Attempt& a);
  /// 6. Restore the work copy to golden bytes: revert from the log, verified against the golden
  ///    checksums; copied again from golden when the command damaged it.
  void restore_files(Attempt& a);
  /// 7. The trial's record.
  nlohmann::json record_of(const Attempt& a) const;

  /// Kind ec-train instead of phases 1-6: draw the faults, run the command with them (--inject), remove
  /// the run's state segments however it ended, read its flip log, classify its report.
  void run_ec_train(Attempt& a);
};

}  // namespace resil::inject::detail
