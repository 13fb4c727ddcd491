// Evaluation on the test split: the per-epoch evaluation of a run, `ckpt-train eval` of a
// checkpoint (all shards gathered into one process), and the AUC of click predictions.
#include "resil/train/trainer.hpp"

#include <algorithm>
#include <cmath>

#include "resil/ckpt/checkpoint.hpp"
#include "resil/train/agree.hpp"
#include "run.hpp"

namespace resil::train {

namespace stdfs = std::filesystem;
using nlohmann::json;

double auc(const std::vector<float>& scores, const std::vector<float>& labels) {
  std::vector<std::size_t> idx(scores.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return scores[a] < scores[b]; });
  double pos = 0, neg = 0, rank_sum = 0;
  for (std::size_t i = 0; i < idx.size();) {
    std::size_t j = i;
    while (j < idx.size() && scores[idx[j]] == scores[idx[i]]) ++j;
    const double avg_rank = (static_cast<double>(i) + static_cast<double>(j) + 1.0) / 2.0;  // 1-based, ties averaged
    for (std::size_t k = i; k < j; ++k)
      if (labels[idx[k]] > 0.5f) rank_sum += avg_rank;
    i = j;
  }
  for (float l : labels) (l > 0.5f ? pos : neg) += 1;
  if (pos == 0 || neg == 0) return 0.5;
  return (rank_sum - pos * (pos + 1) / 2) / (pos * neg);
}

Run::Eval Run::evaluate(Data& d, Staging& st) {
  // Text windows are evaluated a training batch at a time: a GPT's activations grow with the
  // window (attention keeps heads x seq x seq probabilities per window and layer).
  const std::size_t n = d.test_n(), chunk = d.text ? static_cast<std::size_t>(cfg.batch) : 1000;
  std::vector<std::uint32_t> idx(n);
  for (std::size_t i = 0; i < n; ++i) idx[i] = static_cast<std::uint32_t>(i);
  const std::size_t chunks = (n + chunk - 1) / chunk;
  // dp: every rank holds the same weights, so chunk c is evaluated on rank c % world only (the
  // same batch gives the same results on any rank) and its (loss sum, correct, samples) reach
  // every rank through one sum in which each entry has a single non-zero term: exact (counts are
  // integers below 2^53 as doubles). The totals are then accumulated chunk by chunk in the order
  // one process uses, so the reported numbers are bit-identical to every rank evaluating
  // everything. dlrm keeps the old way (its AUC needs every score on every rank).
  const bool split = mode == ckpt::ParallelMode::dp && comm.size() > 1 && !d.clicks;
  std::vector<double> per_chunk(3 * chunks, 0.0);  // loss sum, correct, samples
  std::vector<float> scores;
  for (std::size_t c = 0; c < chunks; ++c) {
    if (split && static_cast<int>(c % static_cast<std::size_t>(comm.size())) != comm.rank()) continue;
    const std::size_t b = c * chunk;
    const Batch batch = st.gather(d, true, std::span<const std::uint32_t>(idx).subspan(b, std::min(chunk, n - b)));
    StepStats s;
    if (mode == ckpt::ParallelMode::mp) {
      s = gpt_stage ? gpt_stage->eval_step(batch) : stage->eval_step(batch);
    } else {
      s = model->evaluate(batch, d.clicks ? &scores : nullptr);
    }
    per_chunk[3 * c] = s.loss_sum;
    per_chunk[3 * c + 1] = static_cast<double>(s.correct);
    per_chunk[3 * c + 2] = static_cast<double>(s.samples);
  }
  if (split) comm.allreduce_sum(per_chunk);
  StepStats tot;
  for (std::size_t c = 0; c < chunks; ++c) {
    tot.loss_sum += per_chunk[3 * c];
    tot.correct += static_cast<std::int64_t>(per_chunk[3 * c + 1]);
    tot.samples += static_cast<std::int64_t>(per_chunk[3 * c + 2]);
  }
  Eval e;
  e.loss = tot.samples ? tot.loss_sum / static_cast<double>(tot.samples) : 0.0;
  e.accuracy = tot.samples ? static_cast<double>(tot.correct) / static_cast<double>(tot.samples) : 0.0;
  if (d.clicks) e.auc = auc(scores, d.test_clk.labels);
  return e;
}

Summary evaluate(const stdfs::path& from, const std::optional<std::string>& data_dir, const std::optional<std::uint64_t>& test_limit,
                 const std::optional<DeviceKind>& device) {
  const double t0 = now();
  const Comm solo = Comm::world();
  if (solo.size() > 1) throw UsageError("eval runs in one process (got " + std::to_string(solo.size()) + " MPI ranks)");
  // Gather every parameter (all shards of an mp or tp manifest) into one checkpoint.
  ckpt::Checkpoint all = read_whole(from);
  check_meta(all.meta, from.string());
  TrainConfig cfg = config_of(all.meta, from.string());
  if (data_dir) cfg.data = *data_dir;
  if (test_limit) cfg.test_limit = *test_limit;
  if (device) cfg.device = *device;
  cfg.parallel = ckpt::ParallelMode::none;
  cfg.reduce = ReduceKind::automatic;  // one process: nothing to reduce
  cfg.limit = 1;  // evaluation needs the test split only
  Run run(cfg, solo, false);  // every parameter comes from the checkpoint
  run.load_state(all, from.string());
  Data d = load_data(run.cfg);
  Staging st;
  Summary s = base_summary(cfg, solo);
  s.command = "eval";
  s.device = run.device;
  s.numeric_id = run.cfg.numeric_id;
  s.numeric_detail = run.cfg.numeric_detail;
  s.parallel = std::string(ckpt::mode_name(all.meta.mode));
  s.world_size = static_cast<int>(all.meta.world_size);
  s.steps = all.meta.step;
  s.epochs = all.meta.epoch;
  const bool weights_ok = run.weights_finite();
  const auto ev = run.evaluate(d, st);
  s.test_loss = s.final_loss = ev.loss;
  s.test_accuracy = ev.accuracy;
  s.test_auc = ev.auc;
  s.nan_detected = !weights_ok || !std::isfinite(ev.loss);
  s.wall_seconds = now() - t0;
  return s;
}
}  // namespace resil::train
