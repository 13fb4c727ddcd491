// The training harness behind `ckpt-train`: configuration, the epoch loop for --parallel
// none|dp|mp, checkpoints through resil::ckpt, resume and evaluation.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "resil/core/error.hpp"
#include "resil/train/agree.hpp"
#include "resil/train/comm.hpp"
#include "resil/train/gpt.hpp"
#include "resil/train/optimizer.hpp"
#include "resil/train/options.hpp"

namespace resil::train {

struct TrainConfig {
  ModelKind model = ModelKind::mlp;
  ckpt::ParallelMode parallel = ckpt::ParallelMode::none;
  int epochs = 1;                  // total epochs (resume continues up to this)
  std::uint64_t seed = 0;
  int batch = 64;                  // global batch (dp: split across ranks; mp: split into micro-batches)
  int micro_batches = 4;           // mp (GPipe)
  OptimizerConfig optimizer;
  int threads = 1;                 // CPU GEMM threads per rank (results do not depend on them)
  DeviceKind device = DeviceKind::cpu;        // the checkpoint records the resolved one (cpu | cuda)
  ReduceKind reduce = ReduceKind::automatic;  // dp gradients / mp activations; recorded resolved (host | nccl)
  std::string data;                // mlp/cnn: MNIST-format dir; dlrm: Criteo TSV file or "" (synthetic); gpt: fortune dir or file
  GptConfig gpt;                   // gpt: the model's size
  int seq = 0;                     // gpt: tokens per training window (0: the model's context)
  Precision precision = Precision::fp32;  // gpt: bf16 computes in bfloat16 with fp32 master weights
  std::uint64_t limit = 0;         // training samples kept (0 = all; gpt: windows)
  std::uint64_t test_limit = 0;    // test samples kept (0 = all; gpt: validation windows)
  std::uint64_t synthetic_samples = 20000;  // dlrm synthetic: training samples (test: a quarter)
  int ckpt_every = 1;              // epochs between checkpoints (the last epoch is always saved)
  // The numeric configuration that computed the state (Backend::numeric): set by the run from its
  // backend; read back from a checkpoint it is what the state was computed under.
  std::string numeric_id, numeric_detail;
  std::filesystem::path ckpt_dir;
  std::filesystem::path metrics;   // JSONL, one record per epoch ("" = none)
  std::filesystem::path summary;   // JSON at the end ("" = none)
  // Settings of one run that are not part of the computation's identity (never stored in a checkpoint):
  std::uint64_t loss_every = 0;               // > 0: Summary::loss_curve, the mean training loss of every loss_every steps
  std::optional<std::uint64_t> shuffle_seed;  // the seed of the data order instead of `seed` (resume --shuffle-seed)
  int replica_rank = -1;                      // dp resume: this rank loads replica_from instead of the checkpoint
  std::filesystem::path replica_from;
  bool replica_divergence = false;            // dp: Summary::divergence at the end (implied by replica_from)
  bool final_only = false;                    // evaluate, save and report only after the last epoch (or at a preemption)

  /// The part of the config that defines the computation (stored in the checkpoint's /meta config).
  std::string to_json() const;
  static TrainConfig from_json(const std::string& text, const std::string& where);
};

struct Summary {
  std::string command = "train";
  std::string model, parallel;
  std::string device;              // e.g. "cpu (avx2 FMA, 1 thread)", "cuda:0 (NVIDIA H100 ...)"
  std::string numeric_id, numeric_detail;  // the numeric configuration of this run (Backend::numeric)
  int world_size = 1;
  std::string mpi_wait;            // more than one rank: how they waited for MPI (poll_name)
  std::uint64_t seed = 0;
  std::int64_t steps = 0, epochs = 0;
  // NaN until set, written as null: a run stopped before its first epoch ends (or, with final_only,
  // before its last) has neither a completed epoch's training loss nor an evaluation.
  double final_loss = std::numeric_limits<double>::quiet_NaN();  // mean training loss of the last epoch (eval: test loss)
  double test_loss = std::numeric_limits<double>::quiet_NaN();   // of the last evaluation
  double test_accuracy = std::numeric_limits<double>::quiet_NaN();
  double test_auc = -1.0;          // dlrm only
  bool nan_detected = false;
  std::int64_t nan_step = -1;
  bool preempted = false;          // stopped by SIGTERM/SIGUSR1 after committing last_checkpoint (exit 75)
  std::string preempt_signal;      // "SIGTERM" | "SIGUSR1" when preempted
  std::uint64_t data_cursor = 0;   // preempted: samples of the current epoch already consumed
  double wall_seconds = 0.0;
  std::string last_checkpoint;
  std::string error;
  int exit_code = 0;
  // TrainConfig::loss_every > 0: the mean training loss of each window of loss_every global steps
  // (window k ends at step (k+1) * loss_every of the run, counted from the checkpoint's step 0).
  std::vector<double> loss_curve;
  bool has_loss_curve = false;
  // TrainConfig::replica_divergence: how far the dp replicas' model weights are from rank 0's at the
  // end (rank 0 evaluates and writes the checkpoint): ranks and elements whose bits differ, and the
  // largest absolute difference (NaN when a value is non-finite on one side only).
  struct Divergence {
    int ranks_differing = 0;
    std::uint64_t elements_differing = 0, elements = 0;
    double max_abs_difference = 0.0;
  };
  std::optional<Divergence> divergence;
  std::string to_json() const;
};

using ProgressFn = std::function<void(std::uint64_t done, std::uint64_t total, const std::string& extra)>;
/// Receives one human-readable line per epoch (rank 0).
using LogFn = std::function<void(const std::string& line)>;

/// Train from scratch (resume_from empty) or resume from a checkpoint file / mp manifest,
/// up to cfg.epochs. Writes checkpoints, metrics and the summary (rank 0). When a preemption
/// signal arrived (see preempt.hpp) the ranks agree at the next step boundary, commit a
/// checkpoint there (mid-epoch: data cursor in /meta) and return with `preempted` set and
/// exit_code 75 -- the caller exits with it. Throws NumericError
/// (naming the step) on NaN/Inf, MismatchError on incompatible resume, CorruptInputError on
/// unreadable checkpoints -- consistently on every rank.
Summary train(TrainConfig cfg, const Comm& comm, const std::optional<std::filesystem::path>& resume_from,
              const ProgressFn& progress = {}, const LogFn& log = {});

/// Overrides a resume may apply to the stored config.
struct ResumeOverrides {
  int epochs = 0;
  std::optional<ckpt::ParallelMode> parallel;  // must match the checkpoint when set
  std::optional<ModelKind> model;              // must match the checkpoint when set
  std::optional<DeviceKind> device;            // unset: the device the checkpoint was written on
  std::optional<ReduceKind> reduce;            // unset: the checkpoint's (auto when --device changes it)
  std::filesystem::path ckpt_dir, metrics, summary;
  std::optional<std::string> data;
  std::optional<std::uint64_t> test_limit;
  std::optional<int> threads;                  // CPU GEMM threads (they do not change the results)
  std::uint64_t loss_every = 0;                // as TrainConfig's
  std::optional<std::uint64_t> shuffle_seed;
  int replica_rank = -1;                       // with replica_from: dp only, a rank of the run
  std::filesystem::path replica_from;
  bool replica_divergence = false;
  bool final_only = false;                     // as TrainConfig's
};
/// Resume: config from the checkpoint's /meta, then overrides (mismatch -> MismatchError).
Summary resume(const std::filesystem::path& from, const ResumeOverrides& o, const Comm& comm, const ProgressFn& progress = {},
               const LogFn& log = {});

/// Evaluate a checkpoint (file or mp manifest) on the test split, in one process. NaN/Inf in the
/// weights or the loss sets nan_detected (the caller maps it to exit 6).
Summary evaluate(const std::filesystem::path& from, const std::optional<std::string>& data,
                 const std::optional<std::uint64_t>& test_limit, const std::optional<DeviceKind>& device = std::nullopt);

/// Text from a gpt checkpoint (file or dp replica): `length` bytes drawn one at a time from the
/// model's next-byte distribution at `temperature` (softmax of logits / temperature), after
/// `prompt` (empty: after a fortune separator "%\n", as at the start of a record). The draws come
/// from the counter-based generator keyed by `seed`: the same checkpoint, prompt and seed give the
/// same text. MismatchError for a checkpoint of another model.
std::string sample(const std::filesystem::path& from, const std::string& prompt, int length, double temperature, std::uint64_t seed,
                   const std::optional<DeviceKind>& device = std::nullopt);

/// An output of a command and the option that named it (an empty path: not requested).
struct OutputPath {
  std::string option;  // e.g. "--summary"
  std::filesystem::path path;
  bool directory = false;  // --ckpt-dir (created later when missing); otherwise a file
};
/// An input of a command and the option that named it.
struct InputPath {
  std::string option;
  std::filesystem::path path;
};
/// Refuse outputs that cannot work or would overwrite an input, before anything is opened for
/// writing (creates nothing): UsageError when an output names an input (a checkpoint, its commit
/// marker or mp shards, the data file), another output, or an existing thing of the wrong kind (a
/// directory where a file goes, a FIFO or device, a file where a directory goes); IoError when it
/// cannot be created or written (a missing parent, a parent that is a file, no write permission).
/// Links count as what they point to.
void check_paths(const std::vector<OutputPath>& outputs, const std::vector<InputPath>& inputs);

/// The files a checkpoint argument stands for: the file or manifest, its commit marker, and for an
/// mp manifest every shard and its marker (inputs for check_paths).
std::vector<InputPath> checkpoint_inputs(const std::filesystem::path& from);

/// Write `s` as JSON to `path` atomically (no-op for an empty path).
void write_summary(const std::filesystem::path& path, const Summary& s);

/// Area under the ROC curve (ties count one half); 0.5 when one class is absent.
double auc(const std::vector<float>& scores, const std::vector<float>& labels);

}  // namespace resil::train
