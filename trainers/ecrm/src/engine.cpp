// The ECRM step loop. One step, top to bottom (Engine::train_step): request rows -> serve ->
// decode -> forward/backward -> reduce dense -> apply row updates -> send deltas -> commit (with the
// next step's requests, or at once with --commit in-step).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <iostream>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine_impl.hpp"
#include "resil/ckpt/checkpoint.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/config.hpp"
#include "resil/core/rng.hpp"
#include "resil/train/agree.hpp"
#include "resil/train/preempt.hpp"

namespace resil::ecrm {

namespace {
constexpr float adagrad_eps = 1e-8f;

// The DLRM replica of every rank: 13 dense features, bottom MLP (default 32) -> dim, top MLP
// (default 32) -> 1.
train::DlrmConfig dlrm_config(const Config& c) {
  return {static_cast<int>(data::criteo_num_dense), std::vector<std::uint32_t>(static_cast<std::size_t>(c.tables), c.rows), c.dim, c.bottom_mlp, c.top_mlp};
}

std::unique_ptr<train::EmbeddingSource> fetched_rows(train::Backend& be, const RowExchange& rows, int dim, FetchedRows*& out) {
  auto src = std::make_unique<FetchedRows>(be, rows, dim);
  out = src.get();
  return src;
}
}  // namespace

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

Engine::Engine(Config cfg, const Transport& net)
    : cfg_(std::move(cfg)), net_(net), be_(train::make_cpu_backend(1)), net_model_(*be_, dlrm_config(cfg_), fetched_rows(*be_, rows_, cfg_.dim, emb_)),
      opt_(*be_, train::OptimizerConfig{train::OptimizerKind::adam, cfg_.mlp_lr}),
      store_(net, cfg_.k, cfg_.m, cfg_.tables, cfg_.rows, cfg_.dim, cfg_.rows_per_fragment, false, cfg_.scrub), recovery_(net, store_, cfg_.m),
      deltas_(net, store_, recovery_), rows_(net, store_, recovery_), scrub_(net, store_, recovery_), schedule_(cfg_.fail, cfg_.kill) {
  if (cfg_.scrub) deltas_.report_mismatches(&scrub_.suspects());
  // --kill R@S:scrub: this rank dies right after writing its first repaired row of step S (recorded
  // as fired in its segment first, so that the relaunch does not die again).
  scrub_.on_repaired_write([this] {
    const auto i = schedule_.kill_in_repair(scrub_step_, net_.rank());
    if (!i) return;
    schedule_.set_kills_fired(schedule_.kills_fired() | std::uint64_t{1} << *i);
    if (seg_) seg_->set_kills_fired(schedule_.kills_fired());
    std::fflush(stdout);
    std::cout.flush();
    std::raise(SIGKILL);
  });
  opt_.attach(net_model_.params());
  active_.assign(static_cast<std::size_t>(net_.size()), -1);
  // stripe=S is a stripe of this state (never wrapped); the state's shape decides how many there are.
  const auto stripes = store_.layout().stripes();
  for (const auto& f : cfg_.inject)
    if (f.target == InjectTarget::stripe && f.stripe >= 0 && static_cast<std::uint64_t>(f.stripe) >= stripes)
      throw UsageError("--inject " + f.text + ": stripe " + std::to_string(f.stripe) + " is beyond this state's " + std::to_string(stripes) +
                       " stripes (0.." + std::to_string(stripes - 1) + ")");
}

void Engine::train_step(std::int64_t step) {
  const LocalBatch b = data_->batch(step);
  const bool recovering = recovery_.any_lost();

  // Request rows. The last step's parity deltas ride in the same messages: their arrival
  // everywhere commits that step, one round earlier than a round of their own.
  const std::int64_t committed = deltas_.pending_step();
  rows_.request(b, deltas_.outgoing());
  deltas_.sent();
  // Once they are applied here, this rank's state is step `committed` complete: commit it (restart.cpp).
  bool applied = false;
  auto commit = [&] {
    if (committed < 0 || applied) return;
    applied = true;
    deltas_.apply(static_cast<std::uint64_t>(committed), rows_.extra_received());
    this->commit(committed);
  };
  // Applied now when this step reads parity (degraded reads, rebuild, a scrub's repair), else while
  // the replies travel.
  if (recovering || cfg_.scrub) commit();
  // While anything is lost, every rank takes the same rebuild round (the data is as of the end of
  // step - 1).
  const auto jobs = recovering ? recovery_.take_rebuild_jobs(cfg_.rebuild_stripes) : std::vector<Recovery::RebuildJob>{};
  // Scrub: the rows this step serves, and those its decodes read here, are verified (and anything
  // found repaired) before any of them is read for a reply, a decode, an update or a delta
  // (docs/design/ec-train-protocol.md, "Scrubbing").
  if (cfg_.scrub) scrub_round(step, jobs);

  // Serve: the rows asked of this rank, the recovery bytes and this round's rebuild sources.
  double recovery_s = rows_.serve(jobs, recovering ? std::function<void()>{} : std::function<void()>(commit));

  // Decode: lost rows from their survivors, this round's rebuild jobs.
  const double r1 = now_seconds();
  rows_.decode(jobs, static_cast<std::uint64_t>(step - 1));
  if (recovering) after_rebuild(step - 1, recovery_s + (now_seconds() - r1));

  // Forward and backward on the local batch (gradients scaled by 1 / global batch).
  net_model_.zero_grad();
  const auto res = net_model_.forward_backward({b.n, b.dense.data(), nullptr, b.targets.data(), b.rows.data()}, 1.0f / static_cast<float>(cfg_.batch));

  // Reduce dense: MLP gradients summed in rank order, then the same Adam update on every replica.
  reduce_dense(res.loss_sum);

  // Apply row updates: row gradients to their owners, summed in rank order, Adagrad on each row.
  update_rows(rows_.gradients(emb_->grads()));
  inject_flips(step, true);  // --inject ...:at=delta: a flip between a row's update and its delta

  // Send deltas: XOR of each updated row to its stripe's parity holders, sent with the next
  // step's requests (or flushed); commit: when every holder applied them (next step), this step.
  // --commit in-step: in a round of their own now (committed by the caller, after the step's
  // timeline entry: the commit records the timeline's length).
  if (cfg_.ft != Ft::ec) return;
  deltas_.build(step, rows_.owned(), rows_.places(), rows_.old_bytes(), fresh_);
  if (cfg_.commit == Commit::in_step) deltas_.flush();
}

void Engine::reduce_dense(double loss_sum) {
  auto params = net_model_.params();
  std::size_t n = 1;
  for (auto& p : params) n += p.grad->numel();
  std::vector<float> flat(n);  // every gradient, then the loss: one buffer, no copies of its own
  std::size_t at = 0;
  for (auto& p : params) {
    if (p.grad->numel()) be_->download(flat.data() + at, p.grad->data(), p.grad->numel());
    at += p.grad->numel();
  }
  flat.back() = static_cast<float>(loss_sum);
  net_.allreduce_sum_ordered(flat);
  at = 0;
  for (auto& p : params) {
    if (p.grad->numel()) be_->upload(p.grad->data(), flat.data() + at, p.grad->numel());
    at += p.grad->numel();
  }
  loss_sum_ = flat.back();
  opt_.begin_step();
  for (auto& p : params) opt_.update(p);
}

// Adagrad on each touched row: [w | s] -> s += g^2, w -= lr g / (sqrt(s) + eps). The new bytes go
// to the store even for a lost fragment (its rebuild writes the same bytes again); the exchange's
// old_bytes keep the bytes before.
void Engine::update_rows(const std::vector<float>& gsum) {
  const auto sd = static_cast<std::size_t>(cfg_.dim);
  const auto rb = store_.row_bytes();
  const auto& owned = rows_.owned();
  const auto& place = rows_.places();  // owned[i] is at place[i] (located by the exchange)
  const auto old = rows_.old_bytes();
  if (cfg_.scrub) fresh_.resize(owned.size() * rb);
  for (std::size_t i = 0; i < owned.size(); ++i) {
    if (i + prefetch_ahead < owned.size()) prefetch_row(store_.row(owned[i + prefetch_ahead], place[i + prefetch_ahead]));
    float v[2 * max_dim];  // [w | s] of one row: Config::dim <= max_dim (config.cpp)
    std::memcpy(v, old.data() + i * rb, rb);
    const float* g = gsum.data() + i * sd;
    for (std::size_t q = 0; q < sd; ++q) {
      v[sd + q] += g[q] * g[q];
      v[q] -= cfg_.lr * g[q] / (std::sqrt(v[sd + q]) + adagrad_eps);
    }
    const auto dst = store_.row(owned[i], place[i]);
    store_.before_write(dst);  // the one-step undo record (segment.hpp)
    std::memcpy(dst.data(), v, rb);
    if (!cfg_.scrub) continue;
    // The row's checksum follows the update (an error in the bytes read stays visible in it), and
    // the delta is made from the bytes computed here, not read back from the store.
    const ec::ConstBytes now(reinterpret_cast<const std::byte*>(v), rb);
    std::memcpy(fresh_.data() + i * rb, v, rb);
    const auto& p = place[i];
    store_.follow(store_.checksum(static_cast<int>(owned[i].table), p.fragment, {p.rank, p.slot}, static_cast<std::uint32_t>(p.offset / rb)),
                  ec::ConstBytes(old.data() + i * rb, rb), now);
  }
}

// ---------------------------------------------------------------------------------------------
// The MLP replicas and their Adam state, as bytes (a replacement copies them from a survivor;
// every commit writes them into the segment): parameters, then Adam's slots, then its step.
std::size_t Engine::mlp_state_bytes() {
  std::size_t n = sizeof(std::int64_t);
  for (auto& p : net_model_.params()) n += p.value->numel() * sizeof(float);
  for (auto& [param, slots] : opt_.slots())
    for (auto& [name, t] : slots) n += t.numel() * sizeof(float);
  return n;
}

void Engine::write_mlp_state(std::byte* to) {
  auto put = [&](const train::Tensor& t) {
    if (!t.numel()) return;
    float* dst = reinterpret_cast<float*>(to);  // 4-byte aligned: the slot and every field before are
    be_->download(dst, t.data(), t.numel());
    to += t.numel() * sizeof(float);
  };
  for (auto& p : net_model_.params()) put(*p.value);
  for (auto& [param, slots] : opt_.slots())
    for (auto& [name, t] : slots) put(t);
  const std::int64_t step = opt_.step();
  std::memcpy(to, &step, sizeof step);
}

ByteVec Engine::mlp_state() {
  ByteVec b(mlp_state_bytes());
  write_mlp_state(b.data());
  return b;
}

void Engine::set_mlp_state(const ByteVec& b) {
  Reader rd(b, "MLP state");
  auto load = [&](train::Tensor& t) {
    std::vector<float> h(t.numel());
    std::memcpy(h.data(), rd.take(h.size() * sizeof(float)), h.size() * sizeof(float));
    t.from_host(h);
  };
  for (auto& p : net_model_.params()) load(*p.value);
  for (auto& [param, slots] : opt_.slots())
    for (auto& [name, t] : slots) load(t);
  opt_.set_step(rd.get<std::int64_t>());
}

std::optional<std::int64_t> Engine::inject(const std::vector<int>& ranks, std::int64_t step, bool fresh) {
  const int me = net_.rank(), N = net_.size();
  // Failures strike at a commit boundary: the last step's deltas are applied first (see
  // docs/design/ec-train-protocol.md, "Commit protocol").
  flush();
  const double t0 = now_seconds();
  // The failed rank loses everything it held in memory; a replacement with garbage memory takes
  // its slot (same rank number). Then it announces itself: a real collective every rank joins.
  const bool me_failed = std::find(ranks.begin(), ranks.end(), me) != ranks.end();
  if (me_failed) {
    auto garbage = mlp_state();
    std::fill(garbage.begin(), garbage.end(), std::byte{0xFF});  // NaN floats
    set_mlp_state(garbage);
  }
  std::vector<int> flags(static_cast<std::size_t>(N), 0);
  if (me_failed) flags[static_cast<std::size_t>(me)] = 1;
  net_.allreduce_max(flags);
  const double detect = now_seconds() - t0;
  const std::size_t first = fails_.size();
  for (int r = 0; r < N; ++r) {
    if (!flags[static_cast<std::size_t>(r)]) continue;
    FailRecord f;
    f.rank = r;
    f.step = step;
    f.t_fail = t0 - t_start_;
    f.detect_s = detect;
    if (active_[static_cast<std::size_t>(r)] >= 0) {
      fails_[static_cast<std::size_t>(active_[static_cast<std::size_t>(r)])].superseded = true;
      fails_[static_cast<std::size_t>(active_[static_cast<std::size_t>(r)])].outcome = "failed-again";
    }
    fails_.push_back(f);
    if (r == me) invalidate_segment();  // the wipe below has no undo: this rank's state counts as lost
    // On rank r: store wiped (a new segment after a relaunch is all zeros already: writing it would
    // cost a page fault per 4 KiB of it before the first step), ledgers cleared; everywhere: its
    // members lost.
    recovery_.fail(r, !fresh);
  }
  if (cfg_.ft == Ft::none) {
    for (auto i = first; i < fails_.size(); ++i) fails_[i].outcome = "data-loss";
    throw DataLossError("step " + std::to_string(step) + ": rank " + std::to_string(fails_[first].rank) +
                        " lost its embedding shards and --ft none keeps no redundancy (use --ft ec or --ft ckpt)");
  }
  if (cfg_.ft == Ft::ckpt) return rollback(step, first);

  // ec: more than m lost members in any stripe cannot be decoded. Never continue with wrong values.
  if (const auto s = recovery_.over_limit()) {
    const auto& lay = store_.layout();
    std::string who;
    for (int j : recovery_.erased(*s)) who += (who.empty() ? "" : ",") + std::to_string(lay.rank_of(*s, j));
    const std::string what = "step " + std::to_string(step) + ": stripe " + std::to_string(*s) + " (table " + std::to_string(lay.table_of(*s)) +
                             ") lost " + std::to_string(recovery_.erased(*s).size()) + " members (ranks " + who + ") but m = " +
                             std::to_string(cfg_.m) + " tolerates " + std::to_string(cfg_.m);
    if (!cfg_.fallback_ckpt) {
      for (auto i = first; i < fails_.size(); ++i) fails_[i].outcome = "data-loss";
      throw DataLossError(what + "; no --fallback-ckpt");
    }
    if (me == 0) std::cerr << "ec-train: " << what << "; restarting from the newest checkpoint (--fallback-ckpt)\n";
    return rollback(step, first);
  }
  // The MLP replicas and their optimizer state come from the lowest surviving rank.
  const double t1 = now_seconds();
  int root = 0;
  while (root < N && flags[static_cast<std::size_t>(root)]) ++root;
  auto state = mlp_state();
  net_.bcast(state, root);
  if (me_failed) set_mlp_state(state);
  const double restore = now_seconds() - t1;
  for (auto i = first; i < fails_.size(); ++i) {
    fails_[i].mlp_restore_s = restore;
    active_[static_cast<std::size_t>(fails_[i].rank)] = static_cast<int>(i);
  }
  return std::nullopt;
}

std::int64_t Engine::rollback(std::int64_t failed_step, std::size_t first_record) {
  // The newest checkpoint this run wrote or started from (not whatever else lies in the directory).
  std::optional<std::filesystem::path> from;
  if (last_ckpt_ >= 0 && ckpt::manifest_complete(ckpt::manifest_path(cfg_.ckpt_dir, last_ckpt_)))
    from = ckpt::manifest_path(cfg_.ckpt_dir, last_ckpt_);
  if (!from) throw DataLossError("step " + std::to_string(failed_step) + ": no complete checkpoint in " + cfg_.ckpt_dir.string() + " to restart from");
  const double t0 = now_seconds();
  std::int64_t c = 0;
  invalidate_segment();  // the load overwrites the store without undo
  train::agree(net_, [&] { c = load_ckpt(*from); });
  if (cfg_.ft == Ft::ec) store_.encode_all();  // fresh parity, nothing lost
  recovery_.clear_lost();
  std::fill(active_.begin(), active_.end(), -1);
  const double load = now_seconds() - t0;
  for (auto i = first_record; i < fails_.size(); ++i) {
    fails_[i].rollback_to = c;
    fails_[i].load_s = load;
    fails_[i].redo_steps = failed_step - 1 - c;
    fails_[i].outcome = "rolled-back";
    redo_records_.push_back(i);
  }
  redo_until_ = failed_step;
  t_redo_start_ = now_seconds();
  commit(c);
  return c + 1;
}

void Engine::after_rebuild(std::int64_t step, double round_s) {
  for (int r = 0; r < net_.size(); ++r) {
    const int a = active_[static_cast<std::size_t>(r)];
    if (a < 0) continue;
    auto& f = fails_[static_cast<std::size_t>(a)];
    f.rebuild_s += round_s;
    ++f.degraded_steps;
    if (recovery_.pending(r) == 0) {
      f.redundant_after_step = step;
      f.time_to_redundancy_s = now_seconds() - t_start_ - f.t_fail;
      f.outcome = "rebuilt";
      active_[static_cast<std::size_t>(r)] = -1;
    }
  }
}

std::string Engine::state_hash() {
  ckpt::Xxh64 h;
  store_.hash_into(h);
  const auto mlp = mlp_state();
  h.update(mlp);
  // Every rank's MLP replica and Adam state: data parallelism keeps them bit-identical but never
  // re-synchronises them, so a flip in one rank's replica stays in that rank alone. Identical
  // replicas leave the hash what rank 0's state gives; a replica that differs adds every rank's
  // XXH64 of its MLP state, in rank order.
  ckpt::Xxh64 mine;
  mine.update(mlp);
  const std::uint64_t d = mine.digest();
  ByteVec b(sizeof d);
  std::memcpy(b.data(), &d, sizeof d);
  const auto all = net_.gather(b, 0);
  replica_hashes_.clear();
  for (const auto& x : all) {
    std::uint64_t v = 0;
    std::memcpy(&v, x.data(), std::min(x.size(), sizeof v));
    replica_hashes_.push_back(v);
  }
  replicas_diverged_ = std::any_of(replica_hashes_.begin(), replica_hashes_.end(), [&](std::uint64_t v) { return v != replica_hashes_.front(); });
  if (replicas_diverged_)
    for (const auto& x : all) h.update(x);
  return ckpt::hex_u64(h.digest());
}

int Engine::run(const Progress& progress) {
  try {
    return run_steps(progress);
  } catch (const DataLossError& e) {
    if (dynamic_cast<const ScrubLossError*>(&e)) scrub_loss_ = e.what();
    // The job is over for good (a relaunch cannot help): say so in the report, leave no segment.
    write_report(final_hash_, static_cast<int>(ExitCode::data_loss), parity_mismatches_);
    remove_segment();
    throw;
  } catch (const Error&) {
    if (seg_ && !seg_->committed()) remove_segment();  // made by this launch, holding nothing yet
    throw;
  }
}

int Engine::run_steps(const Progress& progress) {
  start_up();
  std::int64_t step = start_step_ + 1;
  bool follows = false;  // the previous step's end is this step's start (StepLog::follows)
  while (step <= cfg_.steps) {
    end_redo_if_done(step);
    kill_if_scheduled(step);
    if (const auto code = preempt_if_signalled(step, progress)) return *code;
    bool failed = false;
    if (const auto next = fail_if_scheduled(step, failed)) {
      step = *next;
      follows = false;
      continue;
    }
    inject_flips(step, false);
    try {
      step_and_commit(step, follows && !failed, progress);
    } catch (const ScrubLossError& e) {
      scrub_loss_ = e.what();
      if (!cfg_.fallback_ckpt) throw;
      if (net_.rank() == 0) std::cerr << "ec-train: " << e.what() << "; restarting from the newest checkpoint (--fallback-ckpt)\n";
      const auto from = step;
      step = rollback(step, fails_.size());
      scrub_fallbacks_.push_back({from, step - 1});
      follows = false;
      continue;
    }
    follows = true;
    ++step;
  }
  return finish(progress);
}

void Engine::start_up() {
  const int me = net_.rank();
  t_start_ = now_seconds();
  wall_start_ns_ = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  // Start-up reads files each rank on its own (checkpoint shards, the TSV): the ranks agree on its
  // outcome, so a bad file ends every rank with one line and one exit code instead of MPI_Abort.
  std::optional<std::filesystem::path> resume;
  train::agree(net_, [&] { resume = resume_source(); });
  bool seed_from_segment = false;
  if (!cfg_.seed_given && !resume && !cfg_.job_id.empty()) {
    // A relaunch of a run whose seed was drawn: the seed its segments were made with.
    const auto peeked = Segment::peek_seed(cfg_.job_id, me);
    const int root = net_.size() - 1 - net_.allreduce_max(peeked ? net_.size() - 1 - me : -1);
    if (root < net_.size()) {
      cfg_.seed = peeked ? *peeked : 0;
      net_.bcast(cfg_.seed, root);
      seed_from_segment = true;
    }
  }
  if (!cfg_.seed_given && !resume && !seed_from_segment) {
    cfg_.seed = me == 0 ? draw_seed() : 0;
    net_.bcast(cfg_.seed, 0);
  }
  if (!cfg_.inject_seed_given) cfg_.inject_seed = cfg_.seed;
  const double a0 = now_seconds();
  train::agree(net_, [&] { open_segment(); });
  if (!cfg_.job_id.empty()) {
    net_.barrier();  // every rank's segment made: what they will take, counted once they all exist
    train::agree(net_, [&] { Segment::require_room(cfg_.job_id); });
  }
  attach_s_ = now_seconds() - a0;
  // Start-up is recovery: the segments of an earlier launch of this job, if any (restart.cpp).
  const auto relaunch = restart_from_segments();
  if (relaunch) {
    start_step_ = *relaunch;
    train::agree(net_, [&] { data_ = std::make_unique<BatchSource>(cfg_, net_.size(), me, cfg_.seed); });
  } else train::agree(net_, [&] {
    if (resume) {
      start_step_ = load_ckpt(*resume);
      if (start_step_ >= cfg_.steps)
        throw UsageError(resume->string() + " is a checkpoint of step " + std::to_string(start_step_) + ": nothing left to train with --steps " +
                         std::to_string(cfg_.steps) + " (ask --steps beyond it)");
      resumed_from_ = start_step_;
    } else {
      net_model_.init(cfg_.seed);
      store_.init_rows(cfg_.seed);
    }
    data_ = std::make_unique<BatchSource>(cfg_, net_.size(), me, cfg_.seed);
  });
  if (me == 0)
    std::cout << "ec-train: " << net_.size() << " ranks, --ft " << ft_name(cfg_.ft) << ", k=" << cfg_.k << " m=" << cfg_.m << ", "
              << cfg_.tables << " tables x " << cfg_.rows << " rows x dim " << cfg_.dim << ", batch " << cfg_.batch
              << (cfg_.default_mlps() ? std::string() : ", MLPs " + mlp_text(cfg_.bottom_mlp) + " / " + mlp_text(cfg_.top_mlp))
              << (cfg_.commit == Commit::in_step ? ", --commit in-step" : "") << ", seed "
              << cfg_.seed << (cfg_.seed_given ? "" : seed_from_segment ? " (of the job's segments)" : " (drawn)")
              << (resume ? ", resumed from " + resume->string() : "") << (cfg_.job_id.empty() ? "" : ", job " + cfg_.job_id) << "\n"
              << std::flush;
  if (me == 0 && !cfg_.inject.empty())
    std::cout << "ec-train: --inject " << cfg_.inject.size() << " item(s), inject seed " << cfg_.inject_seed << "\n" << std::flush;
  if (me == 0 && !cfg_.inject_log.empty() && !relaunch) {
    // The flip log's header (a relaunch appends to the log its first launch began). Records come
    // as the run reaches their steps: "planned" 0 (the count is not known before).
    nlohmann::json h{{"type", "header"}, {"format", "resil-flip-log/1"}, {"tool", "ec-train"}, {"version", resil::version},
                     {"seed", cfg_.inject_seed}, {"trial", 0}, {"model", cfg_.inject_model}, {"bits", cfg_.inject_bits},
                     {"planned", 0}, {"in_place", true}, {"raw", false}, {"world_size", net_.size()}};
    h["args"] = nlohmann::json::array();
    for (const auto& f : cfg_.inject) h["args"].push_back("--inject=" + f.text);
    h["args"].push_back("--inject-seed=" + std::to_string(cfg_.inject_seed));
    h["args"].push_back("--inject-bits=" + cfg_.inject_bits);
    h["args"].push_back("--inject-model=" + cfg_.inject_model);
    std::ofstream(cfg_.inject_log, std::ios::trunc) << h.dump() << "\n";
  } else if (me == 0 && !cfg_.inject_log.empty()) {
    log_tally_.read(cfg_.inject_log);
  }
  if (!relaunch) {
    if (cfg_.ft == Ft::ec) store_.encode_all();
    // Rollbacks need a checkpoint of the starting state in --ckpt-dir.
    if (checkpoints() && !(resume && ckpt::manifest_complete(ckpt::manifest_path(cfg_.ckpt_dir, start_step_)))) save_ckpt(start_step_, false);
    schedule_.skip_through(start_step_);
    commit(start_step_);
  }
}

void Engine::end_redo_if_done(std::int64_t step) {
  if (redo_until_ != step) return;
  for (auto i : redo_records_) {
    fails_[i].redo_s = now_seconds() - t_redo_start_;
    fails_[i].time_to_redundancy_s = now_seconds() - t_start_ - fails_[i].t_fail;
    fails_[i].redundant_after_step = step - 1;
  }
  redo_records_.clear();
  redo_until_ = -1;
}

std::optional<int> Engine::preempt_if_signalled(std::int64_t step, const Progress& progress) {
  // At a step boundary every rank learns whether any rank was signalled.
  if (cfg_.signal_at == step && net_.rank() == 0 && resumed_from_ < 0 && restarts_ == 0) std::raise(SIGUSR1);
  if (!net_.allreduce_max(train::preempt_signal() != 0 ? 1 : 0)) return std::nullopt;
  save_ckpt(step - 1, true);
  remove_segment();  // the checkpoint holds the state now
  preempted_ = true;
  if (progress.end) progress.end();
  if (net_.rank() == 0)
    std::cout << "ec-train: preempted: checkpoint of step " << step - 1 << " in " << cfg_.ckpt_dir.string()
              << "; run the same command again to continue\n";
  write_report("", static_cast<int>(ExitCode::preempted), -1);
  return static_cast<int>(ExitCode::preempted);
}

std::optional<std::int64_t> Engine::fail_if_scheduled(std::int64_t step, bool& failed) {
  const std::vector<int> failing = schedule_.fail_at(step);
  failed = !failing.empty();
  return failed ? inject(failing, step) : std::nullopt;
}

void Engine::step_and_commit(std::int64_t step, bool follows, const Progress& progress) {
  const double t0 = now_seconds();
  const std::string phase = redo_until_ > 0 ? "redo" : recovery_.any_lost() ? "degraded" : "normal";
  train_step(step);
  // The step's timeline entry goes in before any commit of the step (each commit records the
  // timeline's length, so an entry written after it would be lost with a death before the next).
  const double t1 = now_seconds();
  log_step({step, t1 - t_start_, t1 - t0, loss_sum_ / cfg_.batch, phase, follows});
  if (cfg_.ft == Ft::ec && cfg_.commit == Commit::in_step) commit(step);  // its deltas are applied everywhere
  if (checkpoints() && step % cfg_.ckpt_interval == 0 && step > last_ckpt_) {
    save_ckpt(step, false);  // ec next-step: flushes the step's deltas and commits it first
    const double t2 = now_seconds();
    amend_last_step(t2 - t_start_, t2 - t0);  // the write counts in the step (dt)
  }
  if (cfg_.ft != Ft::ec) commit(step);  // no parity: the step is complete here
  if (progress.step) {
    std::ostringstream extra;
    extra << "loss " << loss_sum_ / cfg_.batch << (phase == "normal" ? "" : " [" + phase + "]");
    progress.step(static_cast<std::uint64_t>(step), extra.str());
  }
}

int Engine::finish(const Progress& progress) {
  flush();
  // Before the rest of a rebuild reads its sources: every surviving row checked and repaired.
  if (cfg_.scrub && recovery_.any_lost()) full_scrub(cfg_.steps);
  // Finish any rebuild still running, so the final state is fully redundant before it is hashed.
  while (cfg_.ft == Ft::ec && recovery_.any_lost()) {
    const double r0 = now_seconds();
    recovery_.rebuild(0, static_cast<std::uint64_t>(cfg_.steps));
    after_rebuild(cfg_.steps, now_seconds() - r0);
  }
  if (progress.end) progress.end();
  if (cfg_.scrub) {
    // A last full sweep: nothing the run's cadence left unchecked ends in the final state unrepaired
    // (a codeword beyond repair here ends the run with exit 8).
    full_scrub(cfg_.steps);
  }
  total_scrub();
  const std::int64_t mismatches = cfg_.ft == Ft::ec ? static_cast<std::int64_t>(store_.verify_parity()) : -1;
  const auto hash = state_hash();
  // Every rank has the same count (summed over ranks): corruption neither the code nor a scrub
  // caught. No relaunch can mend it, so it ends the job like a codeword beyond repair: run() writes
  // the report (exit 8, with this count) and removes the segments.
  parity_mismatches_ = mismatches;
  final_hash_ = hash;
  if (mismatches > 0) throw DataLossError(std::to_string(mismatches) + " parity fragment(s) differ from a fresh encode of the data at the end: the state was corrupted where neither the code nor a scrub saw it");
  // Agreed before any rank removes its segment: a report that cannot be written leaves every
  // segment in place (the same command then completes again from the last step), not some.
  if (net_.rank() == 0 && !cfg_.inject_log.empty())
    std::ofstream(cfg_.inject_log, std::ios::app) << nlohmann::json{{"type", "footer"}, {"applied", log_tally_.words_changed()}, {"output_sha256", ""}}.dump()
                                                  << "\n";
  train::agree(net_, [&] {
    write_report(hash, 0, mismatches);
    retire_preempt_source();
  }, true);
  remove_segment();  // the run is complete: nothing left to survive
  print_summary(hash);
  return 0;
}

int run(Config cfg, const Transport& net, const Progress& progress) {
  // Made under agree(): its allocations (sized by the state's stripes) fail on every rank alike,
  // one line for the job, not an "out of memory" and MPI_Abort from each.
  std::unique_ptr<Engine> e;
  train::agree(net, [&] { e = std::make_unique<Engine>(std::move(cfg), net); });
  return e->run(progress);
}

}  // namespace resil::ecrm
