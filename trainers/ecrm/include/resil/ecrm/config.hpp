// The configuration of an ECRM training job (ec-train's options) and its `--fail` schedule.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "resil/core/rng.hpp"

namespace resil::ecrm {

/// Fault tolerance of the embedding shards:
///   none : nothing (a failure is data loss),
///   ec   : Reed-Solomon parity over the shards, XOR deltas every step, degraded reads and a
///          rebuild spread over the following steps while training goes on,
///   ckpt : sharded checkpoints every ckpt_interval steps, rollback + redo.
enum class Ft { none, ec, ckpt };
std::string_view ft_name(Ft ft) noexcept;

/// When step S's parity deltas travel (`--commit`, docs/design/ec-train-protocol.md, "Commit protocol"):
///   next_step : with step S+1's first exchange, no round of their own; step S commits when that
///               exchange returns, so a death before it redoes step S;
///   in_step   : in a round of their own at the end of step S, which commits S before S+1 begins:
///               a death never redoes a completed step, for one more exchange per step.
/// The state is the same either way (same bytes, same state_hash).
enum class Commit { next_step, in_step };
std::string_view commit_name(Commit c) noexcept;

/// `--fail RANK@STEP`: at the start of STEP, RANK loses its memory and a replacement takes its slot.
struct FailSpec {
  int rank = 0;
  std::int64_t step = 0;
};
/// Parse "2@100,3@100" (UsageError naming the bad item).
std::vector<FailSpec> parse_failures(const std::string& text);

/// `--kill RANK@STEP[:node]`: at the start of STEP, RANK sends itself SIGKILL (a real process
/// death; the launcher relaunches the job); with `:node` it first removes its state segment (a
/// node loss: its memory is gone too).
/// `:scrub` (testing the scrub, with --scrub): the rank dies inside STEP's scrub repair, right after
/// it wrote its first repaired row (no kill when that step repairs nothing on the rank).
struct KillSpec {
  int rank = 0;
  std::int64_t step = 0;
  bool node = false;
  bool in_repair = false;
};
/// Parse "1@20,2@20:node,1@30:scrub" (UsageError naming the bad item); at most 64 items.
std::vector<KillSpec> parse_kills(const std::string& text);

/// `--inject TARGET@STEP[:key=value...]`: in-memory bit flips at the start of STEP (or, with
/// `:at=delta`, between the step's row updates and its parity deltas), reproducible from
/// --inject-seed. Targets: `row` (a data row of a rank's shard: weights or Adagrad accumulators),
/// `parity` (a row of a rank's parity fragment), `stripe` (`members` members of one codeword: the
/// rows at one offset of one stripe), `mlp` (a rank's MLP replica), `opt` (its Adam state).
/// Keys: rank=R (default drawn), stripe=S (stripe only; default drawn), members=J (stripe only,
/// 1..k+m; default 2), member=M and row=W (stripe only: member M is one of them, the codeword is
/// row W of the fragments; default drawn), bits=B (bits flipped in one 32-bit word, 1..32; default 1), at=start|delta.
enum class InjectTarget { row, parity, stripe, mlp, opt };
std::string_view inject_target_name(InjectTarget t) noexcept;
struct InjectSpec {
  InjectTarget target = InjectTarget::row;
  std::int64_t step = 0;
  int rank = -1;               // -1: drawn
  std::int64_t stripe = -1;    // -1: drawn
  int members = 2, bits = 1;
  int member = -1, row = -1;   // stripe only; -1: drawn
  bool at_delta = false;
  std::string text;            // as given, for messages and the log
};
/// Parse "row@5,parity@7:rank=2,stripe@9:members=3" (UsageError naming the bad item); with the
/// --kill items at most 64 in all (they share the segment's fired mask).
std::vector<InjectSpec> parse_injects(const std::string& text);

/// `--bottom-mlp` / `--top-mlp`: hidden layer sizes "512,256,64" (1..8 layers, each 1..max_mlp_width;
/// UsageError naming `option`).
inline constexpr int max_mlp_width = 8192;
std::vector<int> parse_mlp(const std::string& text, const std::string& option);
std::string mlp_text(const std::vector<int>& sizes);  // "512,256,64"

/// Largest embedding dimension (--dim's range): RowExchange::gradients stages one row in a
/// fixed buffer of this many floats on the stack.
inline constexpr int max_dim = 256;

struct Config {
  int k = 4, m = 2;
  std::int64_t steps = 300;
  std::uint64_t seed = 0;
  bool seed_given = false;
  Ft ft = Ft::ec;
  Commit commit = Commit::next_step;     // --ft ec only
  std::vector<FailSpec> fail;
  std::vector<KillSpec> kill;
  /// The job whose state segments (/dev/shm/resil-ec-<job_id>-<rank>) this run attaches or
  /// creates; empty: no segments (the state dies with the process).
  std::string job_id;
  std::int64_t ckpt_interval = 50;
  int tables = 8;
  std::uint32_t rows = 4096;
  int dim = 16;                          // 1..max_dim
  int batch = 256;                       // global batch, split over the ranks
  std::uint32_t rows_per_fragment = 8;
  std::uint64_t rebuild_stripes = 32;    // stripes each replacement rebuilds per step (0 = all at once)
  float lr = 0.05f;                      // Adagrad, embedding rows
  float mlp_lr = 1e-3f;                  // Adam, MLP replicas
  std::vector<int> bottom_mlp = {32};    // hidden sizes: 13 dense features -> ... -> dim
  std::vector<int> top_mlp = {32};       // hidden sizes: interactions -> ... -> 1 logit
  std::string data;                      // Criteo TSV; empty = synthetic
  std::filesystem::path ckpt_dir = "ec-train-ckpt";
  bool fallback_ckpt = false;
  std::string resume;                    // checkpoint directory or manifest
  std::filesystem::path report;
  std::int64_t signal_at = -1;           // testing: rank 0 raises SIGUSR1 on itself before this step
  int poll_us = -2;  // how ranks wait for MPI: train::poll_auto (resil/train/comm.hpp)
  // --scrub (docs/design/ec-train-protocol.md, "Scrubbing"): row checksums, checks and repair.
  bool scrub = false;
  bool scrub_touched = true;             // check the rows each step serves, before it reads them
  std::uint64_t scrub_sweep = 0;         // stripes verified per step by the background sweep
  std::vector<InjectSpec> inject;        // --inject
  std::uint64_t inject_seed = 0;
  bool inject_seed_given = false;        // else: --seed
  std::filesystem::path inject_log;      // the flip log (rank 0 writes it)
  /// --inject-bits / --inject-model (the fault models of ckpt-flip inject --bits / --model): the
  /// bits of a 32-bit word the anchor is drawn from (bit 0 = LSB), and what the fault does to the
  /// word; `inject_fault` (set by the caller from the model) gives the new word, empty: the anchor
  /// is flipped. The texts go into the flip log's header.
  std::uint32_t inject_allowed = 0xffffffffu;
  std::string inject_bits = "all", inject_model = "flip";
  std::function<std::uint32_t(std::uint32_t old, unsigned anchor, std::uint32_t allowed, Rng& rng)> inject_fault;

  /// The MLPs are ec-train's defaults (32 / 32).
  bool default_mlps() const { return bottom_mlp == Config{}.bottom_mlp && top_mlp == Config{}.top_mlp; }
  /// The fields that define the computation: a resume must match them.
  std::string computation_json(int world) const;
  /// Checks that need the world size (UsageError naming the option): k + m <= world, every --fail
  /// rank in the world and step within --steps, --fallback-ckpt, --commit in-step and --scrub only
  /// with --ft ec, --inject ranks, stripes and members in range.
  void validate(int world) const;
};

}  // namespace resil::ecrm
