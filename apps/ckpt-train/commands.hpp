// ckpt-train subcommands: one file each, an options struct, setup_<cmd> and run_<cmd> (wiring only).
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "resil/app/choice.hpp"
#include "resil/train/options.hpp"
#include "resil/train/trainer.hpp"

namespace resil::app::ckpt_train {

/// A fixed-choice option parsed into its enum through the enum's one name table
/// (resil/train/options.hpp; resil/app/choice.hpp says how).
template <class E, class Target>
CLI::Option* add_choice(CLI::App& app, const std::string& flag, Target& target, const std::string& help) {
  return resil::app::add_choice(app, flag, target, resil::train::Names<E>::table, help);
}

struct TrainOptions {
  resil::train::TrainConfig cfg;
  std::optional<std::uint64_t> seed;
  std::optional<float> lr;        // default: 2e-3 for cnn, 1e-3 otherwise
  std::optional<float> lr_decay;  // default: 0.75 mlp, 0.8 cnn, 1 (none) dlrm and gpt
  // Defaults that depend on the model (gpt: AdamW with decay 0.1, beta2 0.99, clipping at 1).
  std::optional<resil::train::OptimizerKind> optimizer;
  std::optional<float> weight_decay, beta2, clip;
  int mpi_wait = resil::train::poll_auto;
};
void setup_train(CLI::App& app, TrainOptions& o);
int run_train(const TrainOptions& o, const resil::train::Comm& comm);

struct ResumeOptions {
  std::string from;
  resil::train::ResumeOverrides over;
  std::string data;
  std::uint64_t test_limit = 0;
  int threads = 0;  // 0: the checkpoint's
  int mpi_wait = resil::train::poll_auto;
  std::string replica;  // --replica-from RANK=FILE
};
void setup_resume(CLI::App& app, ResumeOptions& o);
int run_resume(const ResumeOptions& o, const resil::train::Comm& comm);

struct EvalOptions {
  std::string from, data, summary;
  std::optional<resil::train::DeviceKind> device;
  std::uint64_t test_limit = 0;
};
void setup_eval(CLI::App& app, EvalOptions& o);
int run_eval(const EvalOptions& o, const resil::train::Comm& comm);

struct SampleOptions {
  std::string from, prompt;
  int length = 400;
  double temperature = 0.8;
  std::uint64_t seed = 0;
  std::optional<resil::train::DeviceKind> device;
};
void setup_sample(CLI::App& app, SampleOptions& o);
int run_sample(const SampleOptions& o);

struct LatestOptions {
  std::string ckpt_dir;
};
void setup_latest(CLI::App& app, LatestOptions& o);
int run_latest(const LatestOptions& o);

/// The last line of train/resume (rank 0): "done: ..." (returns 0), or after a preemption
/// "ckpt-train: preempted by SIGTERM at step ...: checkpoint PATH; continue with: ..." (returns 75).
int report_end(const resil::train::Summary& s, int epochs, const resil::train::Comm& comm);

/// Progress line and epoch log for rank 0.
resil::train::ProgressFn progress_printer();
resil::train::LogFn stdout_logger();

}  // namespace resil::app::ckpt_train
