// ec-train's engine: DLRM training with embedding tables sharded over the MPI ranks (as parameter
// servers hold them) and data-parallel MLP replicas, protected by one of
//   --ft none : nothing (a failure is data loss),
//   --ft ec   : Reed-Solomon parity over the shards (libec), XOR deltas every step, degraded reads
//               and a rebuild spread over the following steps while training goes on,
//   --ft ckpt : sharded checkpoints (libckpt) every --ckpt-interval steps, rollback + redo.
// One step, top to bottom, is Engine::train_step in engine.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "mpi_comm.hpp"
#include "resil/core/error.hpp"

namespace resil::ectrain {

/// `--fail RANK@STEP`: at the start of STEP, RANK loses its memory and a replacement takes its slot.
struct FailSpec {
  int rank = 0;
  std::int64_t step = 0;
};
/// Parse "2@100,3@100" (UsageError naming the bad item).
std::vector<FailSpec> parse_failures(const std::string& text);

struct Config {
  int k = 4, m = 2;
  std::int64_t steps = 300;
  std::uint64_t seed = 0;
  bool seed_given = false;
  std::string ft = "ec";                 // none | ec | ckpt
  std::vector<FailSpec> fail;
  std::int64_t ckpt_interval = 50;
  int tables = 8;
  std::uint32_t rows = 4096;
  int dim = 16;
  int batch = 256;                       // global batch, split over the ranks
  std::uint32_t rows_per_fragment = 8;
  std::uint64_t rebuild_stripes = 32;    // stripes each replacement rebuilds per step (0 = all at once)
  float lr = 0.05f;                      // Adagrad, embedding rows
  float mlp_lr = 1e-3f;                  // Adam, MLP replicas
  std::string data;                      // Criteo TSV; empty = synthetic
  std::filesystem::path ckpt_dir = "ec-train-ckpt";
  bool fallback_ckpt = false;
  std::string resume;                    // checkpoint directory or manifest
  std::filesystem::path report;
  std::int64_t signal_at = -1;           // testing: rank 0 raises SIGUSR1 on itself before this step
  int poll_us = 20;

  /// The fields that define the computation: a resume must match them.
  std::string computation_json(int world) const;
};

/// Run the whole job on every rank. Returns the process exit code (0, or 75 when preempted).
/// Throws resil::Error subclasses; DataLossError, UsageError and MismatchError are raised on every
/// rank alike (global decisions), anything else may be local to one rank.
int run(Config cfg, const Mpi& mpi);

/// An error the ranks agreed on: thrown on every rank with the exit code of the lowest failing
/// rank's error; that rank is the reporter (it prints the line), the others stay silent.
class AgreedError : public Error {
public:
  AgreedError(const std::string& what, ExitCode code, bool reporter) : Error(what), code_(code), reporter_(reporter) {}
  ExitCode exit_code() const noexcept override { return code_; }
  bool reporter() const noexcept { return reporter_; }

private:
  ExitCode code_;
  bool reporter_;
};

/// Run `fn` on every rank (a phase whose errors may be local to some ranks: reading a checkpoint,
/// writing a shard) and agree on its outcome, so that no rank is left waiting in a collective and
/// the job ends without MPI_Abort: when any rank failed, every rank throws AgreedError.
void agree(const Mpi& mpi, const std::function<void()>& fn);

/// Install the SIGTERM/SIGUSR1 handlers (a flag checked at each step boundary).
void install_preemption_handlers();

}  // namespace resil::ectrain
