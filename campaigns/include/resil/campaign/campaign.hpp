// Fault-injection campaigns (docs/design/campaigns.md): a golden run, then per trial inject (own seed) ->
// run a resume/eval command with a timeout -> read its summary JSON -> classify -> append a JSONL
// record (fsync). Trials are partitioned by `--shard i/n` (trial id mod n) and a re-run skips the
// trial ids already recorded anywhere in OUT/results/, so shards and restarts merge into exactly the
// records of a single-process run.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "resil/ckpt/dtype.hpp"
#include "resil/campaign/results.hpp"  // read_results: the records of OUT/results/
#include "resil/inject/select.hpp"

namespace resil::inject {

/// Outcome classes of one trial, in order of precedence (the first that applies wins).
enum class Outcome : std::uint8_t {
  load_failure,   // the checkpoint cannot be read (exit code in load_failure_codes)
  hang,           // timeout: the process group was killed
  crash,          // killed by a signal, or a non-zero exit not classified otherwise
  unreadable_summary,  // exit 0, but no summary to read the metric from: absent, not JSON, no such metric (the note says which)
  nan_at_load,    // NaN/Inf detected, and an injected fault itself produced a NaN/Inf value
  nan_later,      // NaN/Inf detected although every injected value was finite (arose in computation)
  critical_sdc,   // final metric worse than golden by more than `tolerance`
  tolerable_sdc,  // final metric differs from golden, worse by at most `tolerance` (or better)
  masked,         // final metric equal to golden's
  bit_masked,     // masked and the final weights are bit-identical to the golden run's
  detected,       // the run stopped on an error it detected itself (exit code in detected_codes: ec-train's 8,
                  // corruption its scrub found beyond repair)
};
inline constexpr Outcome all_outcomes[] = {Outcome::load_failure, Outcome::hang,          Outcome::crash,  Outcome::unreadable_summary,
                                           Outcome::nan_at_load,  Outcome::nan_later,     Outcome::critical_sdc,
                                           Outcome::tolerable_sdc, Outcome::masked,       Outcome::bit_masked,
                                           Outcome::detected};
std::string_view outcome_name(Outcome o) noexcept;
std::optional<Outcome> outcome_from_name(std::string_view s) noexcept;

/// Groups of classes reported next to the classes: sdc = critical + tolerable; due (detected
/// unrecoverable error) = load_failure + hang + crash + nan_* + detected; masked_any = masked + bit_masked;
/// unknown = unreadable_summary (the campaign could not see the outcome: in none of the others).
struct OutcomeGroup {
  std::string_view name;
  std::vector<Outcome> members;
};
const std::vector<OutcomeGroup>& outcome_groups();
/// Whether `o` belongs to the group named `group` ("sdc", "due", "masked_any"); false for an unknown name.
bool in_outcome_group(std::string_view group, Outcome o) noexcept;

/// Stratification dimensions of the fault space (each trial records its value for all of them).
inline constexpr const char* stratum_dims[] = {"field", "bit", "role", "dtype", "tensor"};

// The enumerated keys of a configuration, each with its one (name, value) table (inject.role:
// role_names, inject.as: as_names, select.hpp): read into the enum when the configuration is parsed
// (an unknown name is a UsageError naming the key and the names), written back by name.
/// `inject.strata`: the dimension the sampling is stratified along (trial t in stratum t mod S).
enum class Strata : std::uint8_t { none, field, bit, role, dtype, tensor };
inline constexpr std::pair<std::string_view, Strata> strata_names[] = {{"none", Strata::none}, {"field", Strata::field}, {"bit", Strata::bit},
                                                                       {"role", Strata::role}, {"dtype", Strata::dtype}, {"tensor", Strata::tensor}};
/// `restore`: revert in place from the flip log (false), or a fresh copy per trial (true).
inline constexpr std::pair<std::string_view, bool> restore_names[] = {{"revert", false}, {"copy", true}};
/// `verify`: after a revert, checksum the datasets the trial touched, or all of them.
enum class Verify : std::uint8_t { touched, all };
inline constexpr std::pair<std::string_view, Verify> verify_names[] = {{"touched", Verify::touched}, {"all", Verify::all}};
/// `kind`: what a trial flips. checkpoint: the bits of a checkpoint file the command then loads;
/// ec-train: the live state of an ec-train job (shard rows, parity, MLP replicas, Adam state), through
/// its --inject options, with no file in between (docs/design/campaigns.md says why one engine runs both).
enum class TrialKind : std::uint8_t { checkpoint, ec_train };
inline constexpr std::pair<std::string_view, TrialKind> trial_kind_names[] = {{"checkpoint", TrialKind::checkpoint}, {"ec-train", TrialKind::ec_train}};
/// The targets of an ec-train trial's --inject (ec-train's names).
inline constexpr std::string_view ec_train_targets[] = {"row", "parity", "stripe", "mlp", "opt"};
/// Most faults one ec-train trial injects (ec-train takes at most 64 --inject items).
inline constexpr std::uint64_t ec_train_max_flips = 64;
/// `mode`: how trials run (see CampaignConfig::mode).
enum class TrialMode : std::uint8_t { command, worker };
inline constexpr std::pair<std::string_view, TrialMode> trial_mode_names[] = {{"command", TrialMode::command}, {"worker", TrialMode::worker}};

/// One metric a trial is classified on: the summary field, its direction, its absolute tolerance.
struct MetricSpec {
  std::string name;
  bool higher_is_better = true;
  double tolerance = 0.01;
  bool operator==(const MetricSpec&) const = default;
};

/// A campaign configuration (JSON, docs/reference/campaign.md). Relative paths resolve against the config's
/// directory.
struct CampaignConfig {
  std::string name = "campaign";
  TrialKind kind = TrialKind::checkpoint;  // trial_kind_names
  std::string checkpoint;              // golden checkpoint: a file of any format (storage.hpp) or an mp manifest (*.manifest.json)
  Format format = Format::automatic;   // format_names: the checkpoint's format (auto: detected from its content)
  bool keep_crc = false;               // as `ckpt-flip inject --keep-crc`: a zip's CRC-32s are left as they were
  std::string golden_summary;          // optional: golden metrics instead of a golden run
  std::string golden_final_checkpoint; // optional, with golden_summary: final weights for bit-masked
  std::vector<std::string> command;    // argv (placeholders {ckpt} {out} {dir} {trial} {seed}); one element: sh -c
  double timeout_s = 600;
  std::uint64_t trials = 100;
  std::uint64_t seed = 1;
  // what to inject (as ckpt-flip inject)
  std::uint64_t flips = 1;
  bool finite = false;                 // inject --finite: redraw sites whose fault leaves a NaN or Inf
  std::string model = "flip";
  Role role = Role::all;               // role_names; left to its default: model for a trial that only evaluates, else all
  bool role_defaulted = false;         // parse(): inject.role was not in the configuration (see fault_space)
  std::string bits;                    // "" = every stored bit
  std::vector<std::string> include, exclude;
  std::optional<ckpt::DType> as;       // as_names; none ("" in JSON): the stored dtypes
  Strata strata = Strata::none;
  // kind ec-train: trial t injects into targets[t mod targets.size()] at steps drawn uniformly from
  // [steps.first, steps.second] (default: 1 to the golden run's last step); `flips` faults, `bits` and
  // `model` as ec-train's --inject-bits and --inject-model.
  std::vector<std::string> targets;
  std::optional<std::pair<std::uint64_t, std::uint64_t>> steps;
  // classification: the first metric here, any further ones in more_metrics (JSON: "metrics" lists
  // them all). Masked only when every metric equals golden's; critical SDC when any is worse than
  // golden's by more than its tolerance; tolerable SDC when some differ, none by that much.
  std::string metric = "test_accuracy";
  bool higher_is_better = true;
  double tolerance = 0.01;             // absolute: critical SDC when worse than golden by more
  std::vector<MetricSpec> more_metrics;
  // A trial whose summary names another numeric configuration ("numeric": {"id"}) than the golden
  // run's differs from it for reasons no fault caused: the campaign stops (exit 7) unless this is set.
  bool allow_numeric_mismatch = false;
  std::vector<int> load_failure_codes = {4, 7};
  std::vector<int> nan_codes = {6};
  std::vector<int> detected_codes;     // exit codes of a run that stopped on corruption it detected (ec-train: {8})
  // restore
  bool copies = false;                 // restore_names: true, a fresh copy per trial instead of inject in place + revert
  Verify verify = Verify::touched;
  double confidence = 0.95;
  // how trials run: "command" starts the command per trial; "worker" sends each trial's argv to a
  // resident worker per job (the command's words before its subcommand, then `serve`: ckpt-train
  // serve, or a resil.trial Python module), which forks the trial (same results, less overhead)
  TrialMode mode = TrialMode::command;

  /// Every value is type- and range-checked (UsageError naming the key): no wrap-around of
  /// negative counts, no truncated fractions, no silently ignored wrong types.
  static CampaignConfig parse(std::string_view json_text, const std::string& source);
  /// The checks of parse() on the values (also for configurations built in code); UsageError.
  void validate(const std::string& source) const;
  static CampaignConfig load(const std::filesystem::path& p);
  /// Every metric the trials are classified on, the first one first.
  std::vector<MetricSpec> metrics() const;
  /// The processes one trial starts: the rank count of a command that begins with an MPI launcher
  /// (mpiexec, mpirun, srun: -n K, -np K, --np K, --ntasks K, -nK, -n=K, --ntasks=K), else 1.
  unsigned processes_per_trial() const;
  /// As OUT/campaign.json records it; the paths absolute, so the record (and the identity every
  /// trial record carries) does not depend on the working directory of the run.
  nlohmann::json to_json() const;

private:
  void validate_ec_train(const std::string& source) const;  // the checks of kind ec-train
  nlohmann::json ec_train_json() const;                     // to_json() of kind ec-train
};

/// The golden reference every trial is compared with.
struct Golden {
  double metric = 0;                     // the first metric's
  std::map<std::string, double> metrics; // every metric's, by name, when the campaign has more than one
  /// The golden value of metric `name` (the first metric's when `metrics` does not hold it).
  double value_of(const std::string& name) const;
  std::optional<std::string> final_weights;  // hex XXH64 over /model of the final checkpoint
  nlohmann::json summary;
  double wall_seconds = 0;
  nlohmann::json to_json() const;
  static Golden from_json(const nlohmann::json& j);
};

/// The fault space of the selection: stored bits in total and per stratum of each dimension.
struct FaultSpace {
  double total = 0;
  std::map<std::string, std::map<std::string, double>> by;  // dim -> stratum -> bits
  nlohmann::json to_json() const;
  static FaultSpace from_json(const nlohmann::json& j);
};

/// Labels of a site for each stratification dimension.
std::string field_of(std::string_view dtype, unsigned bit);
std::string role_of(std::string_view dataset);  // by the resil schema's paths (/model/, /optimizer/<p>/master, /optimizer/)
std::string role_of(TensorRole role);            // as a format adapter gives it (what campaigns label)

/// What the classifier sees of one finished command.
struct CommandResult {
  bool timed_out = false;
  int exit_code = 0;       // when exited normally
  int signal = 0;          // when killed by a signal (0 otherwise)
  double wall_seconds = 0;
  /// User + system CPU seconds of the command and every descendant it waited for (an MPI
  /// launcher's ranks included), when the campaign started it itself (command mode).
  std::optional<double> cpu_seconds;
  std::optional<nlohmann::json> summary;  // parsed {out}, when present and valid JSON
  std::string summary_problem;            // why there is no summary, when there is none
  std::string output_tail; // last bytes of the command's stdout+stderr
};

/// A summary's JSON text as programs write it: strict JSON, and also the non-finite numbers that
/// Python's json module writes by default (`NaN`, `Infinity`, `-Infinity`, outside strings), read
/// as those doubles. Throws nlohmann::json::parse_error for anything else that is not JSON.
nlohmann::json parse_summary(std::string_view text);

struct Classified {
  Outcome outcome = Outcome::crash;
  std::optional<double> metric;
  std::optional<double> delta;  // metric - golden (sign as measured)
  std::string note;
  /// With more than one metric, once the summary holds them all: name -> {value, golden, delta,
  /// verdict: masked | tolerable | critical | nonfinite}; empty otherwise.
  nlohmann::json metrics = nlohmann::json::object();
};
/// Pure classification (tested on its own). `injected_nonfinite`: an injected value is NaN/Inf.
/// `final_weights`: hex XXH64 of the trial's final weights, when known.
Classified classify(const CampaignConfig& c, const Golden& g, const CommandResult& r, bool injected_nonfinite,
                    const std::optional<std::string>& final_weights);

/// Run `argv` (one element: through /bin/sh -c) in its own process group with stdout+stderr to
/// `log`; kill the group (SIGKILL) after `timeout_s`. Throws IoError when it cannot start.
CommandResult run_command(const std::vector<std::string>& argv, double timeout_s, const std::filesystem::path& log);

/// Where an argv command names its trial subcommand (`eval` or `resume`): command[1] for a program
/// that serves trials itself (ckpt-train, an executable resil.trial module), command[2] after a
/// Python interpreter (`python3 trial.py eval ...`, resil.trial); 0 when it names none. In worker
/// mode the words before it, followed by `serve --preload GOLDEN`, start the worker.
std::size_t trial_subcommand_at(const std::vector<std::string>& command);
/// Whether the command's trial only evaluates (its subcommand is `eval`): it reads no optimizer state.
bool trial_only_evaluates(const std::vector<std::string>& command);

/// Replace {ckpt} {out} {dir} {trial} {seed} in each argument.
std::vector<std::string> substitute(const std::vector<std::string>& argv, const std::map<std::string, std::string>& values);

/// XXH64 over (name, stored-bytes checksum) of the model tensors (TensorRole::model: HDF5's /model
/// datasets, a torch.save file's model/ state_dict) and of mixed precision's fp32 master weights
/// (TensorRole::master) of a checkpoint file of any format, or of an mp manifest's shards.
std::string model_weights_hash(const std::filesystem::path& ckpt);

struct ShardSpec {
  std::uint64_t index = 0, count = 1;
  static ShardSpec parse(std::string_view text);  // "i/n", decimal digits only, 0 <= i < n; throws UsageError
  /// How many of the trial ids 0 .. trials-1 belong to this shard (no overflow near 2^64).
  std::uint64_t trials_of(std::uint64_t trials) const noexcept { return trials > index ? (trials - index - 1) / count + 1 : 0; }
};

inline constexpr unsigned max_jobs = 1024;

struct RunOptions {
  std::filesystem::path out;
  /// The configuration file, when the configuration came from one: an input like the checkpoint
  /// (never inside what the campaign writes), and the directory its relative paths were read from
  /// (how a campaign.json that stores them relative to the working directory is recognised as
  /// the same configuration).
  std::filesystem::path config;
  ShardSpec shard;
  std::optional<std::uint64_t> max_trials;  // stop after this many new trials (this invocation)
  bool keep_work = false;
  /// Trials run at once, each job in its own process with its own copy of the checkpoint (and its
  /// own worker in "worker" mode); the records are those of a serial run. 1 to max_jobs.
  unsigned jobs = 1;
  /// Told what the campaign chose that the configuration left open (a default role, a role kept
  /// from the campaign directory), before the first trial; one line each.
  std::function<void(const std::string&)> note;
};

/// Called after each trial: the record just appended, trials of this shard done/total, counts so far.
using TrialCallback = std::function<void(const nlohmann::json& record, std::uint64_t done, std::uint64_t total,
                                         const std::map<std::string, std::uint64_t>& counts)>;

struct RunSummary {
  std::uint64_t planned = 0, skipped = 0, ran = 0;
  std::map<std::string, std::uint64_t> counts;
  std::filesystem::path results;
  std::string replaced;  // the name of a configuration OUT held without any recorded trial, now replaced
};

/// Run (or continue) this shard of the campaign. Writes OUT/campaign.json, OUT/golden.json,
/// OUT/results/shard-<i>-of-<n>.jsonl; works in OUT/work/shard-<i>-of-<n>/ (removed at the end).
RunSummary run_campaign(const CampaignConfig& c, const RunOptions& o, const TrialCallback& on_trial = {});

/// SIGINT and SIGTERM stop a campaign between two waits instead of killing it: run_campaign then
/// kills the trials in flight (not recorded), removes its work copies and throws StoppedError
/// (exit 75) naming the signal; the recorded trials stay and the same command continues. For the
/// command line (ckpt-flip campaign): the handlers stay installed, and job processes inherit them.
void install_stop_handlers();
/// The signal that asked the campaign to stop, or 0.
int stop_signal() noexcept;

/// Fault space of the configuration's selection over the golden checkpoint (all shard files of a manifest).
/// A role left to its default for a trial that only evaluates (model) is all on a checkpoint without
/// tensors in the model role (a .npy array, an h5py state_dict of top-level datasets, a torch.save file
/// of other keys): nothing there is known to be optimizer state. run_campaign does the same.
FaultSpace fault_space(const CampaignConfig& c);

}  // namespace resil::inject
