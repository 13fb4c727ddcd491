// Internal to the campaign engine: one trial, start to end, in a job's private work directory:
// sample and plan the flips, inject them (the injection transaction, transaction.hpp), run the
// command, classify, restore the work copy to golden bytes, build the record.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "resil/campaign/campaign.hpp"
#include "resil/inject/fault_model.hpp"
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

  /// Before the first trial, with `work` in place: note its files' identities, start the worker.
  void prepare();
  /// The record of trial t. In worker mode a worker that dies without a result is restarted and the
  /// trial run again (from golden bytes, as restored); a second death is recorded as crash.
  nlohmann::json run(std::uint64_t t);
  /// One run of trial t; nothing when the worker died and `last` is false (restored, no record).
  std::optional<nlohmann::json> attempt(std::uint64_t t, bool last);
};

}  // namespace resil::inject::detail
