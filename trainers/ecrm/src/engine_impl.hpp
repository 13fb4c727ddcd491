// Internals of the ECRM engine shared by engine.cpp (the step loop, failures), checkpoint.cpp
// (checkpoints, resume) and report.cpp (the JSON report). Not a public interface.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "failure_schedule.hpp"
#include "fetched_rows.hpp"
#include "resil/ecrm/batches.hpp"
#include "resil/ecrm/engine.hpp"
#include "resil/ecrm/parity_deltas.hpp"
#include "resil/ecrm/recovery.hpp"
#include "resil/ecrm/row_exchange.hpp"
#include "resil/ecrm/scrub.hpp"
#include "resil/ecrm/segment.hpp"
#include "resil/ecrm/shard_store.hpp"
#include "resil/train/dlrm.hpp"
#include "resil/train/optimizer.hpp"

namespace resil::ecrm {

double now_seconds();

/// One executed step (redone steps appear again).
struct StepLog {
  std::int64_t step = 0;
  double t_end = 0, dt = 0, loss = 0;
  std::string phase;  // normal | degraded | redo
  // The step began where the previous entry ended (same launch, no failure between): its time
  // end to end is t_end minus the previous t_end, which counts what follows a step's own work
  // (--ft none's commit, the preemption check, a wait for the slowest rank). Else only dt is known.
  bool follows = false;
  double step_s(const StepLog* prev) const noexcept { return follows && prev ? t_end - prev->t_end : dt; }
};

/// One failure and its recovery. Times in seconds; -1 where not applicable.
struct FailRecord {
  int rank = 0;
  std::int64_t step = 0;
  double t_fail = 0, detect_s = 0, mlp_restore_s = -1;
  // ec
  std::int64_t degraded_steps = 0, redundant_after_step = -1;
  double rebuild_s = 0, time_to_redundancy_s = -1;
  std::uint64_t degraded_rows = 0;
  bool superseded = false;  // the same rank failed again before its rebuild finished
  // ckpt / fallback
  std::int64_t rollback_to = -1, redo_steps = 0;
  double load_s = -1, redo_s = -1;
  std::string outcome;  // rebuilt | rolled-back | data-loss | failed-again | restarted | restarted-fresh
  // a real death (the job relaunched, restart.cpp): rank -1 when nobody knows which rank died
  bool relaunch = false, node_loss = false;
  double restart_s = -1, attach_s = -1;
  std::int64_t rollback_steps = 0;
};

/// One --inject flip as applied (the flip log's record, kept for the report).
struct InjectRecord {
  std::size_t item = 0;  // index in --inject
  std::int64_t step = 0;
  int rank = 0;
  std::string target, dataset;
  std::int64_t stripe = -1, member = -1, row = -1;  // shard rows and parity rows
  double t = 0;                                     // seconds since the run started
};

/// What the flip log (--inject-log) holds so far, rank 0: its records, and each word's first old and
/// last new bits (the footer's `applied` counts the words the records change).
struct FlipLogTally {
  std::uint64_t records = 0;
  std::map<std::pair<std::string, std::uint64_t>, std::pair<std::string, std::string>> words;  // (dataset, index) -> (old, new)
  void add(const std::string& dataset, std::uint64_t index, const std::string& old_bits, const std::string& new_bits);
  std::uint64_t words_changed() const;
  /// The records of the log an earlier launch of this job wrote (a relaunch appends to it); a last line
  /// without its newline (cut by a kill) is not a record and is cut off the file.
  void read(const std::filesystem::path& log);
};

class Engine {
public:
  Engine(Config cfg, const Transport& net);
  int run(const Progress& progress);

private:
  // engine.cpp: the run as phases (start_up, then per step: end_redo_if_done, kill_if_scheduled,
  // preempt_if_signalled, fail_if_scheduled, train_step with its commit; finish), the step itself
  int run_steps(const Progress& progress);
  /// The seed, the state segment, and the state to start from (an earlier launch's segments, a
  /// checkpoint, or fresh), committed; sets start_step_.
  void start_up();
  /// A rollback's redo that ends before `step` restored redundancy: its failure records say so.
  void end_redo_if_done(std::int64_t step);
  /// Some rank was signalled: checkpoint at step - 1 and return the exit code (75), else nullopt.
  std::optional<int> preempt_if_signalled(std::int64_t step, const Progress& progress);
  /// The --fail failures at `step`: the step to continue from when the job rolled back.
  std::optional<std::int64_t> fail_if_scheduled(std::int64_t step, bool& failed);
  /// Train `step`, log it, commit it (and checkpoint it when due).
  void step_and_commit(std::int64_t step, bool follows, const Progress& progress);
  /// After the last step: flush, complete redundancy, verify parity, hash, report; returns 0.
  int finish(const Progress& progress);
  /// Checkpoints are written (--ft ckpt, or --fallback-ckpt).
  bool checkpoints() const noexcept { return cfg_.ft == Ft::ckpt || cfg_.fallback_ckpt; }
  void train_step(std::int64_t step);
  void reduce_dense(double loss_sum);
  void update_rows(const std::vector<float>& gsum);
  /// Failures at `step`; returns the step to continue from when the job rolled back. `fresh`:
  /// this rank's store is a new segment (zeros), not wiped again (a relaunch's replacement).
  std::optional<std::int64_t> inject(const std::vector<int>& ranks, std::int64_t step, bool fresh = false);
  std::int64_t rollback(std::int64_t failed_step, std::size_t first_record);
  ByteVec mlp_state();
  std::size_t mlp_state_bytes();
  void write_mlp_state(std::byte* to);  // mlp_state_bytes() bytes, the layout of mlp_state()
  void set_mlp_state(const ByteVec& b);
  void after_rebuild(std::int64_t step, double round_s);
  std::string state_hash();
  // inject.cpp: --inject, and the scrub's round in a step (scrub.hpp)
  /// The --inject items due at `step` (`at_delta`: those between the row updates and the deltas).
  void inject_flips(std::int64_t step, bool at_delta);
  /// This step's checks (the rows it serves, the sweep) and the collective repair of what they found.
  void scrub_round(std::int64_t step, const std::vector<Recovery::RebuildJob>& jobs);
  /// --scrub: every row checked and the corrupt ones repaired, as of `step` (before a rebuild reads
  /// its sources, before a checkpoint, at the end); the repairs made.
  std::vector<ScrubRepair> full_scrub(std::int64_t step);
  /// The scrub's counts summed over ranks (collective), for the report.
  void total_scrub();
  /// The bit in the segment's fired mask of --inject item i (after the --kill items).
  std::uint64_t inject_bit(std::size_t i) const noexcept { return std::uint64_t{1} << (cfg_.kill.size() + i); }
  // restart.cpp: the state segment, commits, start-up as recovery
  void open_segment();
  /// Start-up from the segments of an earlier launch: the step to continue after, or nullopt when
  /// no rank has a committed state (a fresh run).
  std::optional<std::int64_t> restart_from_segments();
  /// A fresh start after a launch that died before its first commit: one failure record.
  void record_early_death();
  /// Everything but the store (and the ledgers inside it) as bytes, the segment's slot: identical
  /// on every rank, so a replacement takes it from a survivor.
  ByteVec small_state();
  /// small_state() after its MLP part (the MLP part is written where it goes, write_mlp_state).
  ByteVec small_state_rest();
  void put_small_state(std::byte* to, std::size_t mlp, const ByteVec& rest);
  void set_small_state(ByteView bytes);
  /// The store holds step `step` complete (ec: its parity deltas applied everywhere): commit it.
  void commit(std::int64_t step);
  /// Send the pending parity deltas in a round of their own and commit their step.
  void flush();
  /// The state is about to be overwritten without undo (a wipe, a checkpoint load).
  void invalidate_segment() noexcept;
  void kill_if_scheduled(std::int64_t step);
  void log_step(const StepLog& s);
  /// The last entry ends later (a checkpoint written after it was logged): its end and dt.
  void amend_last_step(double t_end, double dt);
  void remove_segment() noexcept;
  // checkpoint.cpp
  void save_ckpt(std::int64_t step, bool preempted);
  std::int64_t load_ckpt(const std::filesystem::path& manifest);
  std::optional<std::filesystem::path> resume_source();
  std::string meta_config(bool preempted) const;
  // report.cpp
  void write_report(const std::string& state_hash, int exit_code, std::int64_t parity_mismatches) const;
  void print_summary(const std::string& state_hash) const;
  void retire_preempt_source() const;

  Config cfg_;
  const Transport& net_;
  std::unique_ptr<train::Backend> be_;
  FetchedRows* emb_ = nullptr;  // the embedding source of net_model_ (owned by it)
  train::Dlrm net_model_;
  train::Optimizer opt_;
  ShardStore store_;
  Recovery recovery_;
  ParityDeltas deltas_;
  RowExchange rows_;
  Scrub scrub_;
  std::vector<std::byte> fresh_;            // --scrub: the updated rows' new bytes (ParityDeltas::build)
  std::int64_t parity_mismatches_ = -1;  // at the end of the run (finish), for the report of a failure found then
  std::string final_hash_;               // the state_hash finish computed, likewise
  std::vector<std::pair<std::int64_t, std::int64_t>> scrub_fallbacks_;  // --fallback-ckpt after a codeword beyond repair: (step, checkpoint step)
  std::vector<ScrubRepair> repairs_;        // every repair, in order (the same list on every rank)
  ScrubStats scrub_total_;                  // summed over ranks at the end (total_scrub)
  std::int64_t scrub_step_ = 0;             // the step whose scrub round runs
  std::string scrub_loss_;                  // the message of a scrub that could not repair
  std::vector<InjectRecord> injected_;      // rank 0: every --inject flip of this launch
  FlipLogTally log_tally_;                  // rank 0: the flip log's records over every launch
  std::vector<std::uint64_t> replica_hashes_;  // rank 0, at the end: each rank's XXH64 of its MLP state (state_hash)
  bool replicas_diverged_ = false;
  std::unique_ptr<BatchSource> data_;

  std::int64_t start_step_ = 0, resumed_from_ = -1, last_ckpt_ = -1, redo_until_ = -1;
  double t_start_ = 0, t_redo_start_ = 0, ckpt_write_s_ = 0;
  std::int64_t ckpt_writes_ = 0;
  std::vector<StepLog> log_;
  std::vector<FailRecord> fails_;
  std::vector<int> active_;                 // per rank: index in fails_ of its ongoing rebuild, or -1
  std::vector<std::size_t> redo_records_;   // fails_ rolled back and waiting for the redo to finish
  FailureSchedule schedule_;                // --fail and --kill, and which have fired
  double loss_sum_ = 0;                     // this step's global loss (rank 0's view)
  std::optional<Segment> seg_;              // the state that outlives the process (job_id given)
  std::vector<std::byte> heap_;             // the store without a segment
  std::uint64_t wall_start_ns_ = 0;         // CLOCK_REALTIME when the run (first launch) started
  std::int64_t restarts_ = 0;
  double attach_s_ = 0;                     // this launch: attaching (or creating) the segment
  int found_segment_ = 0;                   // this launch found 1: an uncommitted segment, 2: a committed one
  bool preempted_ = false;
  std::filesystem::path preempt_source_;    // the preemption checkpoint this run resumed on its own, if any
  std::size_t commit_small_bytes_ = 0, commit_undo_peak_ = 0;  // this launch's commits, for the report
};

}  // namespace resil::ecrm
