// The state of one run on one rank (backend, model, optimizer, pipeline stage, position) and the
// steps the loop in trainer.cpp is made of; each is defined in the file of its concept:
// train_run.cpp (setup), trainer.cpp (a training step), train_reduce.cpp (the dp reduction),
// evaluate.cpp (evaluation), train_checkpoint.cpp (save, load). Private to the trainer.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline.hpp"
#include "resil/ckpt/checkpoint.hpp"
#include "resil/train/trainer.hpp"
#include "train_data.hpp"

namespace resil::train {

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Run {
  TrainConfig cfg;
  const Comm& comm;
  ckpt::ParallelMode mode;
  std::unique_ptr<Backend> be;
  std::unique_ptr<DeviceComm> dcomm;  // --reduce nccl with several ranks; null: host path over MPI
  std::unique_ptr<Model> model;
  std::unique_ptr<Optimizer> opt;
  std::vector<std::pair<std::size_t, std::size_t>> layout;  // mp stages
  std::unique_ptr<PipelineStage> stage;
  std::unique_ptr<GptPipelineStage> gpt_stage;  // mp of a gpt (stage is null then)
  std::vector<ParamRef> params;  // this rank's parameters
  std::map<std::string, std::string> slices;  // tp: param -> its slice of the global tensor (ckpt::TpSlice JSON)
  std::string device;            // the backend in words (summary)
  std::int64_t step = 0, epoch = 0;
  std::uint64_t cursor = 0;      // samples of epoch `epoch` consumed when the state was saved/loaded
  bool stop = false;             // every rank agreed on a preemption request at the last step
  double grad_norm = 0.0;        // the last step's global gradient norm (before clipping), when clipping
  std::vector<float> reduce_buf; // reduce()'s flat gradients, kept between steps (no fresh pages per step)

  /// random_init false: the caller loads every parameter this rank holds from a checkpoint next
  /// (load_state refuses one that is missing), so drawing the initial weights is skipped.
  Run(TrainConfig c, const Comm& cm, bool random_init = true);
  std::string layout_json() const;
  bool weights_finite();
  /// tp: a tensor summed over the ranks in place (rank order on the host, or NCCL's).
  void tp_sum(Tensor& t);

  // checkpoints (train_checkpoint.cpp)
  ckpt::Checkpoint snapshot();
  /// Save at the current step; returns the path of the file or manifest.
  std::string save();
  void load_state(const ckpt::Checkpoint& c, const std::string& where);

  /// Forward, backward, reduce, NaN check, update, agree. Returns the global batch's stats.
  StepStats train_step(Data& d, Staging& st, std::span<const std::uint32_t> order, std::size_t s);
  /// Data-parallel reduction of the gradients and the step's stats (train_reduce.cpp).
  void reduce(StepStats& stats);
  /// The global gradient norm of the step (over every rank's parameters for mp), and gradient
  /// clipping by it when the optimizer asks for clipping (train_reduce.cpp).
  double clip_gradients();

  struct Eval {
    double loss = 0, accuracy = 0, auc = -1;
  };
  Eval evaluate(Data& d, Staging& st);  // evaluate.cpp
};

/// Everything a run checks and loads before its first step, agreed by every rank (train_run.cpp):
/// the run, its data, steps per epoch and the first step of the first epoch (a mid-epoch resume).
struct Start {
  std::unique_ptr<Run> run;
  Data data;
  std::size_t steps = 0, first = 0;
};
Start start(const TrainConfig& cfg, const Comm& comm, const std::optional<std::filesystem::path>& resume_from);

/// Resolve what to load on this rank and check compatibility with this run (train_checkpoint.cpp).
ckpt::Checkpoint load_for_rank(const std::filesystem::path& from, const Run& run);
/// A checkpoint file, or every shard of a manifest in one checkpoint (tp slices placed into their
/// global tensors): what one process evaluates or samples.
ckpt::Checkpoint read_whole(const std::filesystem::path& from);
/// /meta values no run writes are corrupt input, not a mismatch or a confusing failure later.
void check_meta(const ckpt::Meta& m, const std::string& where);
/// The largest /meta step (and optimizer_step) a checkpoint may hold.
inline constexpr std::int64_t kMaxStep = std::int64_t{1} << 53;
/// The checkpoint's config, which must agree with its /meta attributes (model, seed): exit 4.
TrainConfig config_of(const ckpt::Meta& m, const std::string& where);
/// A shard of an mp manifest must hold the manifest's model (exit 4 naming both).
void check_shard(const ckpt::Manifest& man, const std::filesystem::path& manifest, const ckpt::Meta& shard, const std::filesystem::path& file);

Summary base_summary(const TrainConfig& c, const Comm& comm);  // train_config.cpp
void append_line(const std::filesystem::path& p, const nlohmann::json& record);  // train_report.cpp
/// A per-token loss in nats as bits per byte (tokens are bytes).
double bits_per_byte(double nats);
/// The epoch's metrics record and log line (rank 0; train_report.cpp).
void report_epoch(const Run& run, const Summary& sum, const StepStats& ep, const Run::Eval& ev, double seconds, double step_seconds,
                  const LogFn& log);

std::vector<OutputPath> outputs_of(const TrainConfig& c);  // train_paths.cpp
std::vector<InputPath> inputs_of(const TrainConfig& c, const std::optional<std::filesystem::path>& from);

}  // namespace resil::train
