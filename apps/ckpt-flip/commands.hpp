// ckpt-flip subcommands: one file each, an options struct, setup_<cmd> (CLI11 wiring, validated at
// parse time) and run_<cmd> (calls into resil::inject). No domain logic here.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "resil/ckpt/fs.hpp"
#include "resil/inject/flip_log.hpp"
#include "resil/inject/sampling.hpp"
#include "resil/inject/select.hpp"
#include "resil/inject/storage.hpp"

namespace resil::app::ckpt_flip {

struct InspectOptions {
  std::string file;
  bool json = false;
  bool verify = false;
  inject::Format format = inject::Format::automatic;  // --format
};
CLI::App* setup_inspect(CLI::App& app, InspectOptions& o);
int run_inspect(const InspectOptions& o);

struct InjectOptions {
  std::string input, output, log;
  bool in_place = false, dry_run = false, raw = false, no_hash = false, no_sync = false, keep_crc = false;
  ckpt::FileHash hash = ckpt::FileHash::sample_sha256;  // --hash; --no-hash is none
  std::optional<std::uint64_t> seed;
  std::uint64_t trial = 0;
  std::optional<std::uint64_t> flips;
  std::optional<double> ber;
  std::vector<std::string> include, exclude;
  inject::Role role = inject::Role::all;
  inject::Stratify stratify = inject::Stratify::none;
  std::string bits, model = "flip";
  std::optional<ckpt::DType> as;
  std::vector<std::string> argv;  // the command line, for the log header
  inject::Format format = inject::Format::automatic;  // --format
  bool finite = false;            // --finite: redraw sites whose fault leaves a NaN or Inf
};
CLI::App* setup_inject(CLI::App& app, InjectOptions& o);
int run_inject(const InjectOptions& o);

struct RevertOptions {
  std::string file, log;
  bool force = false, keep_crc = false;
  inject::Format format = inject::Format::automatic;  // --format
};
CLI::App* setup_revert(CLI::App& app, RevertOptions& o);
int run_revert(const RevertOptions& o);

struct ReplayOptions {
  std::string file, log, output;
  bool force = false, keep_crc = false;
  inject::Format format = inject::Format::automatic;  // --format
};
CLI::App* setup_replay(CLI::App& app, ReplayOptions& o);
int run_replay(const ReplayOptions& o);

struct DiffOptions {
  std::string a, b;
  bool json = false;
  inject::Format format = inject::Format::automatic;  // --format
};
CLI::App* setup_diff(CLI::App& app, DiffOptions& o);
int run_diff(const DiffOptions& o);

struct ScanOptions {
  std::string file;
  bool json = false;
  inject::Format format = inject::Format::automatic;  // --format
};
CLI::App* setup_scan(CLI::App& app, ScanOptions& o);
int run_scan(const ScanOptions& o);

struct CampaignOptions {
  std::string config, out, shard = "0/1";
  std::optional<std::uint64_t> max_trials;
  bool keep_work = false, quiet = false;
  unsigned jobs = 0;  // 0: the number of cores
  inject::Format format = inject::Format::automatic;  // --format: other than auto, replaces the config's "format"
};
CLI::App* setup_campaign(CLI::App& app, CampaignOptions& o);
int run_campaign(const CampaignOptions& o);

struct PlanOptions {
  std::string input;
  double margin = 0.01, confidence = 0.95, p = 0.5;
  std::vector<std::string> include, exclude;
  inject::Role role = inject::Role::all;
  std::string bits, model = "flip";
  std::optional<ckpt::DType> as;
  bool json = false;
  inject::Format format = inject::Format::automatic;  // --format: the checkpoint's; other than auto, replaces a config's "format"
};
CLI::App* setup_plan(CLI::App& app, PlanOptions& o);
int run_plan(const PlanOptions& o);

struct ReportOptions {
  std::string dir, json, markdown, records, plot_script;
  bool no_plots = false;
};
CLI::App* setup_report(CLI::App& app, ReportOptions& o);
int run_report(const ReportOptions& o);

struct FitOptions {
  std::string fault_model, json;
  std::vector<std::string> results;
  std::optional<double> mbit;
  std::uint64_t draws = 20000;
  std::optional<std::uint64_t> seed;
};
CLI::App* setup_fit(CLI::App& app, FitOptions& o);
int run_fit(const FitOptions& o);

/// --format hdf5|torch|safetensors|npy|npz|auto on a subcommand that reads checkpoints.
void add_format_option(CLI::App& c, inject::Format& format);
/// --keep-crc on inject, revert and replay (zip CRC-32s of edited members left as they were).
void add_keep_crc_option(CLI::App& c, bool& keep_crc);
/// --bits on inject and plan; an empty value is refused (exit 2): it would silently mean every bit.
void add_bits_option(CLI::App& c, std::string& bits, const std::string& help);
/// "1.5e+03 -> inf  [Inf]" style annotations shared by dry-run and reports.
std::string describe_change(const inject::FlipRecord& r);
/// Copy `from` to a temporary sibling of `to`, run `fn(tmp)`, then durably rename onto `to`;
/// on any error the temporary is removed and `to` is untouched. A set of files (a sharded
/// checkpoint) is copied to the new directory `to` (with its index under the index's name when
/// `from` names the index), and fn gets the copy's index or directory.
void with_output_copy(const std::string& from, const std::string& to, const std::function<void(const std::string&)>& fn);
/// `to` may receive the copy of `from`: a regular file or a new one (ckpt::fs::require_output_file),
/// or, for a set of files, a new or empty directory. IoError naming `to` otherwise.
void require_output_for(const std::string& from, const std::string& to);
/// report and fit: refuse (UsageError naming the option) an output that is the same file as
/// another path argument or as a file the campaigns in `campaign_dirs` hold (campaign.json,
/// golden.json, results/*.jsonl), or a new .jsonl in a campaign's results/ (read as records).
void require_report_outputs_apart(const std::vector<ckpt::fs::PathArg>& args, const std::vector<std::string>& campaign_dirs);

}  // namespace resil::app::ckpt_flip
