// The JSON report (rank 0) and the human summary on stdout.
#include <cstdio>
#include <iostream>
#include <numeric>

#include <nlohmann/json.hpp>

#include "engine_impl.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/config.hpp"
#include "resil/train/comm.hpp"

namespace resil::ecrm {

namespace {
struct Rate {
  double samples = 0, seconds = 0;
  double per_s() const { return seconds > 0 ? samples / seconds : 0.0; }
};

double mean(const std::vector<double>& v) { return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()); }

// Each step's time end to end (StepLog::follows), in timeline order.
std::vector<double> step_seconds(const std::vector<StepLog>& log) {
  std::vector<double> out;
  out.reserve(log.size());
  for (std::size_t i = 0; i < log.size(); ++i) out.push_back(log[i].step_s(i ? &log[i - 1] : nullptr));
  return out;
}

// Samples per second before the first failure, while any recovery (degraded reads and rebuild, or
// rollback redo) is under way, and after the last recovery finished; steps timed end to end.
std::map<std::string, Rate> throughput(const std::vector<StepLog>& log, int batch) {
  std::map<std::string, Rate> r;
  bool seen_failure = false;
  const auto secs = step_seconds(log);
  for (std::size_t i = 0; i < log.size(); ++i) {
    const auto& s = log[i];
    std::string when;
    if (s.phase != "normal") {
      when = "during";
      seen_failure = true;
    } else {
      when = seen_failure ? "after" : "before";
    }
    r[when].samples += batch;
    r[when].seconds += secs[i];
  }
  return r;
}
}  // namespace

void Engine::write_report(const std::string& state_hash, int exit_code, std::int64_t parity_mismatches) const {
  if (net_.rank() != 0 || cfg_.report.empty()) return;
  nlohmann::json j;
  j["program"] = "ec-train";
  j["version"] = resil::version;
  j["world_size"] = net_.size();
  j["ft"] = std::string(ft_name(cfg_.ft));
  j["commit_mode"] = cfg_.ft == Ft::ec ? nlohmann::json(std::string(commit_name(cfg_.commit))) : nlohmann::json(nullptr);  // --commit
  j["k"] = cfg_.k;
  j["m"] = cfg_.m;
  j["seed"] = cfg_.seed;
  j["steps"] = cfg_.steps;
  j["batch"] = cfg_.batch;
  j["tables"] = cfg_.tables;
  j["rows"] = cfg_.rows;
  j["dim"] = cfg_.dim;
  j["bottom_mlp"] = cfg_.bottom_mlp;
  j["top_mlp"] = cfg_.top_mlp;
  j["rows_per_fragment"] = cfg_.rows_per_fragment;
  j["rebuild_stripes"] = cfg_.rebuild_stripes;
  j["ckpt_interval"] = cfg_.ckpt_interval;
  j["mpi_wait"] = train::poll_name(cfg_.poll_us);
  j["data"] = cfg_.data.empty() ? "synthetic" : cfg_.data;
  j["exit_code"] = exit_code;
  // The launcher (scripts/hpc/ec-train-run.sh) relaunches until this is true.
  j["completed"] = exit_code == 0;
  j["job_id"] = cfg_.job_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(cfg_.job_id);
  j["relaunches"] = restarts_;
  j["preempted"] = preempted_;
  j["resumed_from"] = resumed_from_ >= 0 ? nlohmann::json(resumed_from_) : nlohmann::json(nullptr);
  j["state_hash"] = state_hash.empty() ? nlohmann::json(nullptr) : nlohmann::json(state_hash);
  // Each rank's MLP replica with its Adam state (XXH64 of its bytes, rank order), and whether
  // they differ: data parallelism keeps them identical but never re-synchronises them.
  if (state_hash.empty() || replica_hashes_.empty()) {
    j["replicas"] = nullptr;
  } else {
    nlohmann::json hs = nlohmann::json::array();
    for (auto v : replica_hashes_) hs.push_back(ckpt::hex_u64(v));
    j["replicas"] = {{"diverged", replicas_diverged_}, {"xxh64", hs}};
  }
  const train::NumericConfig nc = be_->numeric();  // what the state_hash's bits depend on besides the inputs
  j["numeric"] = {{"id", nc.id}, {"detail", nc.detail}};
  j["parity_mismatches"] = parity_mismatches >= 0 ? nlohmann::json(parity_mismatches) : nlohmann::json(nullptr);
  j["stripes"] = store_.layout().stripes();
  j["wall_s"] = now_seconds() - t_start_;
  const auto secs = step_seconds(log_);
  j["mean_step_s"] = mean(secs);
  j["final_loss"] = log_.empty() ? 0.0 : log_.back().loss;
  j["checkpoints"] = {{"writes", ckpt_writes_}, {"write_s", ckpt_write_s_}, {"dir", cfg_.ckpt_dir.string()}};
  // What a commit writes besides the 40-byte record (rank 0, this launch): neither grows with the state.
  j["commit"] = seg_ ? nlohmann::json{{"small_state_bytes", commit_small_bytes_}, {"undo_bytes_max", commit_undo_peak_}} : nlohmann::json(nullptr);
  auto& tl = j["timeline"];
  tl["step"] = nlohmann::json::array();
  for (const auto& s : log_) {
    tl["step"].push_back(s.step);
    tl["t"].push_back(s.t_end);
    tl["dt"].push_back(s.dt);
    tl["follows"].push_back(s.follows);
    tl["loss"].push_back(s.loss);
    tl["phase"].push_back(s.phase);
  }
  tl["step_s"] = secs;
  j["step_times"] = tl.value("dt", nlohmann::json::array());
  j["failures"] = nlohmann::json::array();
  for (const auto& f : fails_) {
    nlohmann::json r{{"rank", f.rank},       {"step", f.step},          {"t_fail", f.t_fail},
                     {"detect_s", f.detect_s}, {"outcome", f.outcome}, {"time_to_redundancy_s", f.time_to_redundancy_s},
                     {"redundant_after_step", f.redundant_after_step}, {"relaunch", f.relaunch}};
    if (f.relaunch) {
      r["node_loss"] = f.node_loss;
      r["restart_s"] = f.restart_s;
      r["attach_s"] = f.attach_s;
      r["rollback_steps"] = f.rollback_steps;
    }
    if (cfg_.ft == Ft::ec && f.rollback_to < 0) {
      r["mlp_restore_s"] = f.mlp_restore_s;
      r["degraded_steps"] = f.degraded_steps;
      r["degraded_s"] = f.time_to_redundancy_s;
      r["rebuild_s"] = f.rebuild_s;
      r["superseded"] = f.superseded;
    } else {
      r["rollback_to"] = f.rollback_to;
      r["load_s"] = f.load_s;
      r["redo_steps"] = f.redo_steps;
      r["redo_s"] = f.redo_s;
    }
    j["failures"].push_back(r);
  }
  for (const auto& [when, rate] : throughput(log_, cfg_.batch))
    j["throughput"][when] = {{"samples_per_s", rate.per_s()}, {"seconds", rate.seconds}};
  if (cfg_.scrub) {
    // Counts over every rank (this launch); the repairs are the same list on every rank.
    const auto& st = scrub_total_;
    nlohmann::json sc{{"touched", cfg_.scrub_touched},
                      {"sweep_stripes", cfg_.scrub_sweep},
                      {"rows_checked", st.rows_checked},
                      {"check_s", st.check_s},
                      {"repair_s", st.repair_s},
                      {"repair_rounds", scrub_.stats().rounds},
                      {"repaired", {{"data", scrub_.stats().repaired_data}, {"parity", scrub_.stats().repaired_parity}, {"checksum", scrub_.stats().repaired_checksum}}},
                      {"unrepairable", scrub_loss_.empty() ? nlohmann::json(nullptr) : nlohmann::json(scrub_loss_)}};
    sc["fallbacks"] = nlohmann::json::array();
    for (const auto& [step, to] : scrub_fallbacks_) sc["fallbacks"].push_back({{"step", step}, {"rollback_to", to}});
    sc["repairs"] = nlohmann::json::array();
    for (const auto& r : repairs_)
      if (sc["repairs"].size() < 10000)
        sc["repairs"].push_back({{"step", r.step}, {"stripe", r.stripe}, {"member", r.member}, {"row", r.row}, {"rank", r.rank}, {"kind", r.kind}, {"t", r.t}});
    j["scrub"] = sc;
  } else {
    j["scrub"] = nullptr;
  }
  if (!cfg_.inject.empty()) {
    j["inject_seed"] = cfg_.inject_seed;
    j["injections"] = nlohmann::json::array();
    for (const auto& f : injected_) {
      nlohmann::json r{{"inject", cfg_.inject[f.item].text}, {"step", f.step}, {"rank", f.rank}, {"target", f.target}, {"dataset", f.dataset}, {"t", f.t}};
      r["repaired_step"] = nullptr;
      if (f.stripe >= 0) {
        r["stripe"] = f.stripe, r["member"] = f.member, r["member_row"] = f.row;
        // The first repair of that row at or after the flip: how long the corruption lived.
        for (const auto& q : repairs_)
          if (static_cast<std::int64_t>(q.stripe) == f.stripe && static_cast<std::int64_t>(q.member) == f.member &&
              static_cast<std::int64_t>(q.row) == f.row && q.step >= f.step) {
            r["repaired_step"] = q.step;
            r["flip_to_repair_s"] = q.t - f.t;
            break;
          }
      }
      j["injections"].push_back(r);
    }
  }
  ckpt::fs::write_file_atomic(cfg_.report, j.dump(1) + "\n");
}

void Engine::print_summary(const std::string& state_hash) const {
  if (net_.rank() != 0) return;
  const auto secs = step_seconds(log_);
  std::printf("ec-train: %zu steps run in %.2f s (mean %.2f ms/step), final loss %.4f\n", log_.size(), std::accumulate(secs.begin(), secs.end(), 0.0),
              1e3 * mean(secs), log_.empty() ? 0.0 : log_.back().loss);
  for (const auto& f : fails_) {
    if (f.relaunch) {
      // restart_s < 0: the launch died before its first commit, so nothing says when it died.
      char took[80];
      if (f.restart_s >= 0)
        std::snprintf(took, sizeof took, "relaunched in %.3f s", f.restart_s);
      else
        std::snprintf(took, sizeof took, "relaunched (it died before its first commit: when is unknown)");
      // f.step is the first step not committed everywhere (an ec step commits with the next one's
      // exchange, so a --kill R@S lands after step S - 2 is committed).
      std::printf("  death of %s after step %lld was committed: %s (attach %.4f s), rolled back %lld step(s), %s%s\n",
                  f.rank >= 0 ? ("rank " + std::to_string(f.rank)).c_str() : "a rank", static_cast<long long>(f.step - 1), took, f.attach_s,
                  static_cast<long long>(f.rollback_steps), f.node_loss ? "its state lost: " : "state intact: ", f.outcome.c_str());
    }
    if (f.rollback_to >= 0)
      std::printf("  failure of rank %d at step %lld: rolled back to step %lld, load %.3f s, redo %lld steps %.3f s\n", f.rank,
                  static_cast<long long>(f.step), static_cast<long long>(f.rollback_to), f.load_s, static_cast<long long>(f.redo_steps), f.redo_s);
    else
      std::printf("  failure of rank %d at step %lld: detected in %.4f s, %s after %lld degraded steps, %.3f s to full redundancy (rebuild work %.3f s)\n",
                  f.rank, static_cast<long long>(f.step), f.detect_s, f.outcome.c_str(), static_cast<long long>(f.degraded_steps),
                  f.time_to_redundancy_s, f.rebuild_s);
  }
  for (const auto& [when, rate] : throughput(log_, cfg_.batch))
    std::printf("  throughput %-6s: %.0f samples/s over %.2f s\n", when.c_str(), rate.per_s(), rate.seconds);
  if (cfg_.scrub)
    std::printf("  scrub: %llu rows checked (%.3f s per rank), %llu repaired (data %llu, parity %llu, checksum %llu)\n",
                static_cast<unsigned long long>(scrub_total_.rows_checked), scrub_total_.check_s, static_cast<unsigned long long>(repairs_.size()),
                static_cast<unsigned long long>(scrub_.stats().repaired_data), static_cast<unsigned long long>(scrub_.stats().repaired_parity),
                static_cast<unsigned long long>(scrub_.stats().repaired_checksum));
  const train::NumericConfig nc = be_->numeric();
  if (replicas_diverged_) {
    std::printf("  MLP replicas diverged: their hashes differ between ranks (");
    for (std::size_t r = 0; r < replica_hashes_.size(); ++r)
      std::printf("%s%zu: %s", r ? ", " : "", r, ckpt::hex_u64(replica_hashes_[r]).c_str());
    std::printf("); the state_hash covers every rank's\n");
  }
  std::printf("state_hash %s\nnumeric %s (%s)\n", state_hash.c_str(), nc.id.c_str(), nc.detail.c_str());
  if (!cfg_.report.empty()) std::printf("report: %s\n", cfg_.report.string().c_str());
  std::fflush(stdout);
}

}  // namespace resil::ecrm
