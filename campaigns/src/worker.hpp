// Internal to the campaign engine: the resident trial worker (`ckpt-train serve`, "mode": "worker")
// and the job processes that run trials side by side (--jobs N).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "resil/campaign/campaign.hpp"

namespace resil::inject::detail {

/// The last `n` bytes of a file ("" when unreadable).
std::string tail_of(const std::filesystem::path& p, std::size_t n);

/// StoppedError ("stopped by SIGTERM") once a stop signal arrived (install_stop_handlers).
void throw_if_stopped();

/// One trial worker process (`ckpt-train serve`, a resil.trial module's `serve`), started from this
/// process and ended with it (PR_SET_PDEATHSIG). run() sends it one trial's argv and returns what
/// run_command would have seen of the same command; nothing when the worker died before a result
/// came back.
class TrialWorker {
public:
  /// `program` is the command's words before its subcommand (trial_subcommand_at); the worker is
  /// `program... serve --preload <preload>`, its own output going to `log`. Throws UsageError when it
  /// does not become ready within `start_timeout_s`.
  TrialWorker(std::vector<std::string> program, std::string preload, std::filesystem::path log, double start_timeout_s);
  ~TrialWorker();
  TrialWorker(const TrialWorker&) = delete;
  TrialWorker& operator=(const TrialWorker&) = delete;

  std::optional<CommandResult> run(const std::vector<std::string>& argv, double timeout_s, const std::filesystem::path& log);
  /// End this worker (if still there) and start a fresh one.
  void restart();

private:
  void start();
  void stop() noexcept;
  std::vector<std::string> program_;
  std::string preload_;
  std::filesystem::path log_;
  double start_timeout_s_;
  pid_t pid_ = -1;
  int sock_ = -1;
};

/// A job's trial runner: the record of trial t (built inside the job process).
using TrialRunner = std::function<nlohmann::json(std::uint64_t)>;

/// Run trials on `jobs` forked job processes. `next` hands out trial ids (nothing: none left);
/// `make_runner(k)` runs in job process k and builds its runner (its private checkpoint copy, its
/// worker); `on_record` runs here for each record, in the order they finish; `in_job` runs first in
/// each job process (to close what only the campaign may hold). A job's error (resil::Error) ends the
/// campaign with the same exit code; a job that dies ends it with IoError. Job processes die with
/// this process (PR_SET_PDEATHSIG), and their trials with them.
void run_jobs(unsigned jobs, const std::function<std::optional<std::uint64_t>()>& next, const std::function<TrialRunner(unsigned)>& make_runner,
              const std::function<void(const nlohmann::json&)>& on_record, const std::function<void()>& in_job);

}  // namespace resil::inject::detail
