// The state that outlives a process and start-up as recovery (docs/design/ec-train-protocol.md, "Real failures").
//
// Every rank keeps its store in its segment (segment.hpp) and commits once per step: ec at the
// moment the step's parity deltas are applied everywhere (when the next step's first exchange
// returns, or after a flush), none/ckpt at the end of the step. A rank reaches the commit of
// step S + 1 only after every rank committed S (the exchange in between needs them all), so after
// a death the committed steps differ by at most one. A relaunched job agrees on G, the lowest
// committed step, rolls the ranks at G + 1 back one step through their undo records, and goes on
// from G: ranks whose segment is gone (node loss) are replacements, handled as an emulated failure
// at step G + 1 (degraded reads, rebuild), or by a checkpoint restart / exit 8 beyond m.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>

#include <nlohmann/json.hpp>

#include "engine_impl.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/train/agree.hpp"

namespace resil::ecrm {

namespace {
std::uint64_t wall_now_ns() {
  using namespace std::chrono;
  return static_cast<std::uint64_t>(duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count());
}

void put_string(Writer& w, const std::string& s) {
  w.put(static_cast<std::uint64_t>(s.size()));
  w.put_bytes(reinterpret_cast<const std::byte*>(s.data()), s.size());
}
std::string get_string(Reader& r) {
  const auto n = static_cast<std::size_t>(r.get<std::uint64_t>());
  const auto* p = r.take(n);
  return {reinterpret_cast<const char*>(p), n};
}

void put_fail(Writer& w, const FailRecord& f) {
  w.put(f.rank), w.put(f.step), w.put(f.t_fail), w.put(f.detect_s), w.put(f.mlp_restore_s), w.put(f.degraded_steps);
  w.put(f.redundant_after_step), w.put(f.rebuild_s), w.put(f.time_to_redundancy_s), w.put(f.degraded_rows), w.put(f.superseded);
  w.put(f.rollback_to), w.put(f.redo_steps), w.put(f.load_s), w.put(f.redo_s), w.put(f.relaunch), w.put(f.node_loss), w.put(f.restart_s);
  w.put(f.attach_s), w.put(f.rollback_steps);
  put_string(w, f.outcome);
}
FailRecord get_fail(Reader& r) {
  FailRecord f;
  f.rank = r.get<int>(), f.step = r.get<std::int64_t>(), f.t_fail = r.get<double>(), f.detect_s = r.get<double>();
  f.mlp_restore_s = r.get<double>(), f.degraded_steps = r.get<std::int64_t>(), f.redundant_after_step = r.get<std::int64_t>();
  f.rebuild_s = r.get<double>(), f.time_to_redundancy_s = r.get<double>(), f.degraded_rows = r.get<std::uint64_t>();
  f.superseded = r.get<bool>(), f.rollback_to = r.get<std::int64_t>(), f.redo_steps = r.get<std::int64_t>(), f.load_s = r.get<double>();
  f.redo_s = r.get<double>(), f.relaunch = r.get<bool>(), f.node_loss = r.get<bool>(), f.restart_s = r.get<double>();
  f.attach_s = r.get<double>(), f.rollback_steps = r.get<std::int64_t>();
  f.outcome = get_string(r);
  return f;
}

const char* phase_names[] = {"normal", "degraded", "redo"};

// A timeline entry as the segment keeps it: the phase by its index, `follows` in bit 0 of the
// spare word (0 there in a segment that does not record it: dt then stands for the step).
LogEntry log_entry(const StepLog& s) {
  const auto ph = static_cast<std::uint32_t>(std::find(std::begin(phase_names), std::end(phase_names), s.phase) - std::begin(phase_names));
  return {s.step, s.t_end, s.dt, s.loss, ph, s.follows ? 1u : 0u};
}

StepLog step_log(const LogEntry& e) {
  return {e.step, e.t_end, e.dt, e.loss, phase_names[std::min<std::uint32_t>(e.phase, 2)], (e.pad & 1u) != 0};
}
}  // namespace

void Engine::open_segment() {
  if (cfg_.job_id.empty()) {
    heap_.assign(store_.memory_bytes(), std::byte{0});
    store_.use_memory(heap_);
    return;
  }
  const int me = net_.rank(), N = net_.size();
  // The --data file's content, not only its path: a relaunch must not continue state trained on
  // other samples (the file edited, or the same command run in another directory).
  const std::string data_id = cfg_.data.empty() ? std::string() : ckpt::hex_u64(ckpt::xxh64_file(cfg_.data));
  // The --kill specs too: which of them fired is kept by position in the list (kills_fired), so a
  // relaunch with another list would misread it.
  std::string kills;
  for (const auto& k : cfg_.kill) kills += "," + std::to_string(k.rank) + "@" + std::to_string(k.step) + (k.node ? ":node" : k.in_repair ? ":scrub" : "");
  // --scrub changes the store's layout (row checksums), and --inject items are kept fired by position.
  std::string scrub, injects;
  if (cfg_.scrub) scrub = "scrub";
  for (const auto& f : cfg_.inject) injects += "," + f.text;
  if (!cfg_.inject.empty()) injects += ";seed=" + std::to_string(cfg_.inject_seed);
  const std::string key = cfg_.computation_json(N) + std::string(ft_name(cfg_.ft)) + data_id + kills + scrub + injects;
  // The same settings by option name, for the message that refuses another configuration's segment.
  auto settings = nlohmann::json::parse(cfg_.computation_json(N));
  nlohmann::json named = nlohmann::json::object();
  for (const auto& [k, v] : settings.items()) {
    std::string option = "--" + k;  // rows_per_fragment -> --rows-per-fragment
    std::replace(option.begin(), option.end(), '_', '-');
    if (k != "world") named[option] = v;  // ranks: in the message's own field
  }
  named["--bottom-mlp"] = cfg_.bottom_mlp;  // also when the default, which computation_json leaves out
  named["--top-mlp"] = cfg_.top_mlp;
  named["--ft"] = ft_name(cfg_.ft);
  named["--data content (XXH64)"] = data_id;
  named["--kill"] = kills.empty() ? std::string() : kills.substr(1);
  if (cfg_.scrub) named["--scrub"] = true;
  if (!cfg_.inject.empty()) named["--inject"] = injects.substr(1);
  const SegmentIdentity id{ckpt::xxh64(std::as_bytes(std::span(key.data(), key.size()))), cfg_.seed, me, N, named.dump()};
  SegmentLayout lay;
  lay.store_bytes = store_.memory_bytes();
  // One commit interval overwrites at most the rows of one batch (data) and one batch's deltas (parity).
  const auto rows_per_step = static_cast<std::size_t>(cfg_.batch) * static_cast<std::size_t>(cfg_.tables);
  // Each row's parity delta also changes one ledger word (a 24-byte entry); the ledgers are part
  // of the store, so the small state written at every commit does not grow with the state.
  lay.undo_bytes = 2 * rows_per_step * (16 + store_.row_bytes()) + rows_per_step * 24 + 4096;
  // --scrub: each updated data row and each parity row a delta folds into also changes its checksum word.
  if (cfg_.scrub) lay.undo_bytes += 2 * rows_per_step * static_cast<std::size_t>(1 + cfg_.m) * 24;
  lay.slot_bytes = mlp_state_bytes() + static_cast<std::size_t>(N) * (16 + store_.layout().stripes()) + (256u << 10);
  lay.log_entries = static_cast<std::size_t>(std::min<std::int64_t>(4 * cfg_.steps + 1024, std::int64_t{1} << 20));
  seg_ = Segment::attach(cfg_.job_id, id, lay);
  found_segment_ = !seg_ ? 0 : seg_->committed() ? 2 : 1;
  if (found_segment_ < 2) seg_ = Segment::create(cfg_.job_id, id, lay);
  store_.use_memory(seg_->store());
  store_.set_undo(&*seg_);
}

ByteVec Engine::small_state() {
  const auto mlp = mlp_state_bytes();
  const auto rest = small_state_rest();
  ByteVec g(sizeof(std::uint64_t) + mlp + rest.size());
  put_small_state(g.data(), mlp, rest);
  return g;
}

// [u64 MLP bytes][MLP state][the rest]: written in place (a commit writes into the segment's slot).
void Engine::put_small_state(std::byte* to, std::size_t mlp, const ByteVec& rest) {
  const auto n = static_cast<std::uint64_t>(mlp);
  std::memcpy(to, &n, sizeof n);
  write_mlp_state(to + sizeof n);
  if (!rest.empty()) std::memcpy(to + sizeof n + mlp, rest.data(), rest.size());
}

ByteVec Engine::small_state_rest() {
  ByteVec g;
  Writer w(g);
  recovery_.save(w);
  w.put(static_cast<std::uint64_t>(fails_.size()));
  for (const auto& f : fails_) put_fail(w, f);
  for (int a : active_) w.put(a);
  w.put(static_cast<std::uint64_t>(redo_records_.size()));
  for (auto i : redo_records_) w.put(static_cast<std::uint64_t>(i));
  w.put(redo_until_), w.put(last_ckpt_), w.put(ckpt_writes_), w.put(ckpt_write_s_), w.put(wall_start_ns_), w.put(resumed_from_);
  w.put(restarts_), w.put(schedule_.kills_fired()), w.put(t_redo_start_ - t_start_), w.put(static_cast<std::uint64_t>(log_.size()));
  return g;
}

void Engine::set_small_state(ByteView bytes) {
  Reader r(bytes, "segment small state");
  const auto n = static_cast<std::size_t>(r.get<std::uint64_t>());
  const auto* mlp = r.take(n);
  set_mlp_state(ByteVec(mlp, mlp + n));
  recovery_.load(r);
  fails_.resize(static_cast<std::size_t>(r.get<std::uint64_t>()));
  for (auto& f : fails_) f = get_fail(r);
  for (int& a : active_) a = r.get<int>();
  redo_records_.resize(static_cast<std::size_t>(r.get<std::uint64_t>()));
  for (auto& i : redo_records_) i = static_cast<std::size_t>(r.get<std::uint64_t>());
  redo_until_ = r.get<std::int64_t>(), last_ckpt_ = r.get<std::int64_t>(), ckpt_writes_ = r.get<std::int64_t>();
  ckpt_write_s_ = r.get<double>(), wall_start_ns_ = r.get<std::uint64_t>(), resumed_from_ = r.get<std::int64_t>();
  restarts_ = r.get<std::int64_t>();
  schedule_.set_kills_fired(r.get<std::uint64_t>());
  const double redo_rel = r.get<double>();
  log_.resize(static_cast<std::size_t>(r.get<std::uint64_t>()));
  // Times are kept relative to the first launch's start (CLOCK_REALTIME), across relaunches.
  t_start_ = now_seconds() - static_cast<double>(wall_now_ns() - wall_start_ns_) * 1e-9;
  t_redo_start_ = t_start_ + redo_rel;
}

void Engine::commit(std::int64_t step) {
  if (!seg_) return;
  const auto mlp = mlp_state_bytes();
  const auto rest = small_state_rest();
  commit_small_bytes_ = sizeof(std::uint64_t) + mlp + rest.size();
  commit_undo_peak_ = std::max(commit_undo_peak_, seg_->undo_used());  // what the step overwrote
  seg_->commit(step, commit_small_bytes_, [&](std::byte* to) { put_small_state(to, mlp, rest); });
}

void Engine::flush() {
  const auto s = deltas_.pending_step();
  deltas_.flush();
  if (s >= 0) commit(s);
}

void Engine::invalidate_segment() noexcept {
  if (seg_) seg_->invalidate();
}

void Engine::remove_segment() noexcept {
  if (seg_) Segment::remove(cfg_.job_id, net_.rank());
}

void Engine::log_step(const StepLog& s) {
  log_.push_back(s);
  if (!seg_) return;
  seg_->log_put(log_.size() - 1, log_entry(s));
}

void Engine::amend_last_step(double t_end, double dt) {
  auto& s = log_.back();
  s.t_end = t_end, s.dt = dt;
  // Written over an entry that may be committed already: a death during the write leaves the
  // entry as logged before the checkpoint (each field is one aligned 8-byte store).
  if (seg_) seg_->log_put(log_.size() - 1, log_entry(s));
}

void Engine::kill_if_scheduled(std::int64_t step) {
  const std::uint64_t now = schedule_.kills_due(step);
  if (!now) return;
  bool dies = false, node = false;
  for (std::size_t i = 0; i < schedule_.kills().size(); ++i) {
    const auto& k = schedule_.kills()[i];
    if ((now >> i & 1u) && k.rank == net_.rank()) dies = true, node = node || k.node;
  }
  // Every rank records the kill in its segment before anyone dies, so that the relaunch does not
  // repeat it (the slots are not committed again before the job ends).
  schedule_.set_kills_fired(schedule_.kills_fired() | now);
  if (seg_) seg_->set_kills_fired(schedule_.kills_fired());
  if (dies && node) remove_segment();
  net_.barrier();
  if (!dies) return;
  std::fflush(stdout);
  std::cout.flush();
  std::raise(SIGKILL);
}

// A launch that died before its first commit (during the start-up: initialization, the initial
// encode, the start checkpoint) left segments that hold nothing: the relaunch starts afresh, and
// says so in the report. The ranks without any segment lost theirs (a node loss); when it is one
// rank, that is the rank that died. When the death was, nobody knows (nothing was committed).
void Engine::record_early_death() {
  const int me = net_.rank(), N = net_.size();
  std::vector<int> found(static_cast<std::size_t>(N), 0);
  found[static_cast<std::size_t>(me)] = found_segment_;
  net_.allreduce_max(found);
  if (std::find(found.begin(), found.end(), 1) == found.end()) return;  // the first launch
  std::vector<int> missing;
  for (int r = 0; r < N; ++r)
    if (found[static_cast<std::size_t>(r)] == 0) missing.push_back(r);
  std::vector<double> a{attach_s_};
  net_.allreduce_sum_ordered(a);
  FailRecord f;
  f.rank = missing.size() == 1 ? missing[0] : -1;
  f.step = start_step_ + 1;
  f.outcome = "restarted-fresh";
  f.relaunch = true;
  f.node_loss = !missing.empty();
  f.attach_s = a[0] / N;
  fails_.push_back(f);
  ++restarts_;
  if (me == 0)
    std::cout << "ec-train: relaunch of job " << cfg_.job_id << ": the last launch died before its first commit; starting afresh\n" << std::flush;
}

std::optional<std::int64_t> Engine::restart_from_segments() {
  const int me = net_.rank(), N = net_.size();
  const auto com = seg_ ? seg_->committed() : std::nullopt;
  std::vector<double> c(static_cast<std::size_t>(N), 0.0), wall(static_cast<std::size_t>(N), 0.0);
  c[static_cast<std::size_t>(me)] = com ? static_cast<double>(com->step + 1) : 0.0;
  wall[static_cast<std::size_t>(me)] = com ? static_cast<double>(com->wall_ns) * 1e-9 : 0.0;
  net_.allreduce_sum_ordered(c);
  net_.allreduce_sum_ordered(wall);
  double lo = 0, hi = 0;
  for (double v : c)
    if (v > 0) lo = lo == 0 ? v : std::min(lo, v), hi = std::max(hi, v);
  if (hi == 0) {  // nothing committed anywhere: a fresh run
    record_early_death();
    return std::nullopt;
  }
  const auto G = static_cast<std::int64_t>(lo) - 1, top = static_cast<std::int64_t>(hi) - 1;
  if (top > G + 1)
    throw DataLossError("the state segments of job " + cfg_.job_id + " hold steps " + std::to_string(G) + " to " + std::to_string(top) +
                        ", more than one step apart: not one run's (ec-train --cleanup --job-id " + cfg_.job_id + ")");
  const double t0 = now_seconds();
  int intact = 0;
  train::agree(net_, [&] {
    if (com && seg_->can_roll_back_to(G)) {
      seg_->rollback_to(G);
      intact = 1;
    }
  });
  std::vector<int> ok(static_cast<std::size_t>(N), 0);
  ok[static_cast<std::size_t>(me)] = intact;
  net_.allreduce_max(ok);
  const int root = static_cast<int>(std::find(ok.begin(), ok.end(), 1) - ok.begin());
  // The global part of the small state (identical on every intact rank) and the timeline, from
  // the lowest intact rank to the replacements.
  ByteVec g, lg;
  if (intact) {
    set_small_state(seg_->small_state());
    if (me == root) {
      g = small_state();
      for (std::size_t i = 0; i < log_.size(); ++i) {
        const auto e = seg_->log_get(i);
        Writer(lg).put(e);
      }
    }
  }
  std::uint64_t gn = g.size(), ln = lg.size();
  net_.bcast(gn, root);
  net_.bcast(ln, root);
  g.resize(gn);
  lg.resize(ln);
  net_.bcast(g, root);
  net_.bcast(lg, root);
  if (!intact) set_small_state(g);
  Reader lr(lg, "segment timeline");
  for (auto& s : log_) {
    const auto e = lr.get<LogEntry>();
    s = step_log(e);
  }
  if (!intact)
    for (std::size_t i = 0; i < log_.size(); ++i) seg_->log_put(i, log_entry(log_[i]));
  // The --kill specs that fired (recorded in every surviving header) and which of them are new.
  std::vector<int> bits(cfg_.kill.size() + cfg_.inject.size(), 0);  // then the --inject items (inject_bit)
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = intact && (seg_->kills_fired() >> i & 1u) ? 1 : 0;
  if (!bits.empty()) net_.allreduce_max(bits);
  std::uint64_t mask = 0;
  for (std::size_t i = 0; i < bits.size(); ++i) mask |= static_cast<std::uint64_t>(bits[i]) << i;
  const std::uint64_t fresh = mask & ~schedule_.kills_fired();
  schedule_.set_kills_fired(mask);
  seg_->set_kills_fired(mask);
  ++restarts_;
  schedule_.skip_through(G);

  // How long the restart took: from the last commit anywhere (the job stopped training after it)
  // to every rank attached and agreed; the slowest rank's attach.
  std::vector<double> t{static_cast<double>(wall_now_ns()) * 1e-9 - *std::max_element(wall.begin(), wall.end()), now_seconds() - t0 + attach_s_};
  net_.allreduce_sum_ordered(t);  // summed, then taken as the mean of the ranks' views
  const double restart_s = t[0] / N, attach_s = t[1] / N;
  // The death, as the report's times count from it: the last commit any rank made.
  const double t_death = now_seconds() - t_start_ - restart_s;
  std::vector<int> missing;
  for (int r = 0; r < N; ++r)
    if (!ok[static_cast<std::size_t>(r)]) missing.push_back(r);
  if (me == 0)
    std::cout << "ec-train: relaunch " << restarts_ << " of job " << cfg_.job_id << ": continuing after step " << G
              << (top > G ? " (rolled back one step)" : "") << (missing.empty() ? std::string(", every rank's state intact")
                                                                                   : ", " + std::to_string(missing.size()) + " rank(s) lost their state")
              << "\n"
              << std::flush;
  const std::size_t first = fails_.size();
  std::optional<std::int64_t> next;
  if (missing.empty()) {
    FailRecord f;
    f.rank = -1;
    for (std::size_t i = 0; i < cfg_.kill.size(); ++i)
      if (fresh >> i & 1u) f.rank = cfg_.kill[i].rank;
    f.step = G + 1;
    f.t_fail = t_death;
    f.outcome = "restarted";
    f.time_to_redundancy_s = restart_s;
    f.redundant_after_step = G;
    fails_.push_back(f);
    if (cfg_.ft == Ft::ckpt) next = rollback(G + 1, first);
  } else {
    try {
      next = inject(missing, G + 1, found_segment_ < 2);
    } catch (const DataLossError&) {
      for (auto i = first; i < fails_.size(); ++i) fails_[i].relaunch = fails_[i].node_loss = true;
      throw;
    }
  }
  for (auto i = first; i < fails_.size(); ++i) {
    auto& f = fails_[i];
    f.relaunch = true;
    f.t_fail = t_death;  // not the moment of the replacements' announcement: the restart counts too
    f.node_loss = std::find(missing.begin(), missing.end(), f.rank) != missing.end();
    f.restart_s = restart_s;
    f.attach_s = attach_s;
    f.rollback_steps = top - G;
  }
  return next ? *next - 1 : G;
}

}  // namespace resil::ecrm
