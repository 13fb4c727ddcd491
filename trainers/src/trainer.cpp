// The training loop: one file to follow a run top to bottom. Per step: forward -> backward ->
// reduce (dp) or pipeline (mp) -> NaN check -> clip -> update -> agree (NaN, preemption); per epoch:
// evaluate, checkpoint, report. The parts live in the files of their concepts (see run.hpp).
#include "resil/train/trainer.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>

#include "resil/ckpt/fs.hpp"
#include "resil/data/sampler.hpp"
#include "resil/train/agree.hpp"
#include "resil/train/preempt.hpp"
#include "run.hpp"

namespace resil::train {

using nlohmann::json;

StepStats Run::train_step(Data& d, Staging& st, std::span<const std::uint32_t> order, std::size_t s) {
  const float scale = 1.0f / static_cast<float>(cfg.batch);
  model->zero_grad();
  // forward, backward (mp: through the pipeline, activations exchanged between stages)
  StepStats stats;
  if (mode == ckpt::ParallelMode::mp) {
    const Batch global = st.gather(d, false, data::rank_batch(order, s, static_cast<std::size_t>(cfg.batch), 0, 1));
    stats = gpt_stage ? gpt_stage->train_step(global, scale) : stage->train_step(global, scale);
  } else {
    const int world = mode == ckpt::ParallelMode::dp ? comm.size() : 1;
    const int rank = mode == ckpt::ParallelMode::dp ? comm.rank() : 0;
    stats = model->forward_backward(st.gather(d, false, data::rank_batch(order, s, static_cast<std::size_t>(cfg.batch), rank, world)), scale);
    // reduce
    if (world > 1) reduce(stats);
  }
  const std::int64_t this_step = step + 1;
  // dp ranks hold the reduced loss and pipeline stages the last stage's, the same on each. tp ranks
  // compute it from their own copies of the unsliced parameters: a non-finite one on some ranks only
  // (a fault in one copy) is agreed here, or the others would wait in the clip's collective forever.
  bool finite = std::isfinite(stats.loss_sum);
  if (mode == ckpt::ParallelMode::tp && comm.size() > 1) finite = comm.allreduce_max(finite ? 0 : 1) == 0;
  if (!finite)
    throw NumericError("NaN/Inf in the training loss at step " + std::to_string(this_step) + " (epoch " + std::to_string(epoch + 1) + ")");
  // clip (by the global gradient norm)
  if (cfg.optimizer.clip > 0.0f) grad_norm = clip_gradients();
  // update
  opt->begin_step();
  if (mode == ckpt::ParallelMode::mp) {
    for (const auto& p : params) opt->update(p);
  } else {
    model->apply_update(*opt);
  }
  // agree: one collective per step on two things: non-finite weights on any rank (bit 1) and a
  // preemption signal on any rank (bit 0). Integer max: no floating-point value is touched.
  const int agreed = comm.allreduce_max((weights_finite() ? 0 : 2) | (preempt_signal() != 0 ? 1 : 0));
  stop = agreed == 1;
  if (agreed >= 2)
    throw NumericError("NaN/Inf in the weights after step " + std::to_string(this_step) + " (epoch " + std::to_string(epoch + 1) + ")");
  step = this_step;
  return stats;
}

namespace {
/// Preempted: commit a checkpoint at the current step (unless `saved`: one was just written there).
void preempt(Run& run, Summary& sum, bool saved) {
  sum.preempted = true;
  const int sig = preempt_signal();
  sum.preempt_signal = sig ? preempt_signal_name(sig) : "a signal on another rank";
  sum.data_cursor = run.cursor;
  if (!saved) sum.last_checkpoint = run.save();
  sum.steps = run.step;
  sum.epochs = run.epoch;
  sum.exit_code = static_cast<int>(ExitCode::preempted);
  if (run.comm.rank() == 0 && !run.cfg.metrics.empty())
    append_line(run.cfg.metrics, json({{"epoch", run.epoch + (run.cursor ? 1 : 0)}, {"step", run.step}, {"preempted", true},
                                       {"data_cursor", run.cursor}, {"checkpoint", sum.last_checkpoint}}));
}

/// dp: every rank's model weights against rank 0's (the replica that evaluates and saves).
Summary::Divergence divergence(Run& run) {
  std::vector<float> mine;
  for (const auto& p : run.params) {
    const auto h = p.value->to_host();
    mine.insert(mine.end(), h.begin(), h.end());
  }
  std::vector<float> ref = mine;
  run.comm.bcast_bytes(ref.data(), ref.size() * sizeof(float), 0);
  double stats[2] = {0.0, 0.0};  // elements differing, max |difference|
  for (std::size_t i = 0; i < mine.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(mine[i]) == std::bit_cast<std::uint32_t>(ref[i])) continue;
    stats[0] += 1.0;
    const double d = std::fabs(static_cast<double>(mine[i]) - static_cast<double>(ref[i]));
    stats[1] = std::isnan(d) || std::isnan(stats[1]) ? std::numeric_limits<double>::quiet_NaN() : std::max(stats[1], d);
  }
  std::vector<std::byte> packed(sizeof stats);
  std::memcpy(packed.data(), stats, sizeof stats);
  const auto all = run.comm.gather(packed, 0);
  Summary::Divergence d;
  d.elements = mine.size();
  for (const auto& b : all) {
    double r[2];
    std::memcpy(r, b.data(), sizeof r);
    if (r[0] > 0) ++d.ranks_differing;
    d.elements_differing += static_cast<std::uint64_t>(r[0]);
    d.max_abs_difference = std::isnan(r[1]) || std::isnan(d.max_abs_difference) ? r[1] + d.max_abs_difference : std::max(d.max_abs_difference, r[1]);
  }
  return d;
}
}  // namespace

Summary train(TrainConfig cfg, const Comm& comm, const std::optional<std::filesystem::path>& resume_from, const ProgressFn& progress,
              const LogFn& log) {
  const double t0 = now();
  Summary sum = base_summary(cfg, comm);
  const bool root = comm.rank() == 0;
  auto finish = [&](const Error* e) {
    sum.wall_seconds = now() - t0;
    if (e) {
      sum.error = e->what();
      sum.exit_code = static_cast<int>(e->exit_code());
    }
    if (root) write_summary(cfg.summary, sum);
    return sum;
  };
  // Refused paths write nothing, not even the summary (it may be the refused path, or an input).
  agree(comm, [&] {
    if (cfg.ckpt_dir.empty()) throw UsageError("--ckpt-dir is required");
    if (root && resume_from) ckpt::fs::require_input_file(*resume_from, "--from");
    if (root) check_paths(outputs_of(cfg), inputs_of(cfg, resume_from));
  }, true);
  try {
    auto [run, data, steps, first] = start(cfg, comm, resume_from);
    if (data.text && root && log) {
      // The bar a language model has to clear on this split, in the unit of its epoch lines.
      const auto base = data::ngram_baselines(data.corpus.train, data.corpus.valid);
      char line[320];
      std::snprintf(line, sizeof line, "text: %zu files, %zu records, %zu training / %zu validation bytes; validation baselines: unigram %.3f, "
                    "bigram %.3f bits/byte; model: %lld parameters",
                    data.corpus.files, data.corpus.records, data.corpus.train.size(), data.corpus.valid.size(), base.unigram_bpb, base.bigram_bpb,
                    static_cast<long long>(run->cfg.gpt.parameters()));
      log(line);
    }
    sum.device = run->device;
    sum.numeric_id = run->cfg.numeric_id;
    sum.numeric_detail = run->cfg.numeric_detail;
    sum.steps = run->step;
    sum.epochs = run->epoch;
    Staging st;
    sum.has_loss_curve = cfg.loss_every > 0;
    double win_loss = 0.0;
    std::uint64_t win_samples = 0;
    const std::uint64_t total = steps * static_cast<std::size_t>(cfg.epochs - run->epoch) - first;
    std::uint64_t done = 0;
    while (run->epoch < cfg.epochs) {
      const double te = now();
      const auto order = data::epoch_order(data.train_n(), cfg.shuffle_seed.value_or(cfg.seed), static_cast<std::uint64_t>(run->epoch));
      run->opt->set_epoch(run->epoch);
      StepStats ep;
      double step_seconds = 0.0;  // the training steps alone (no evaluation, no checkpoint)
      const std::size_t s_begin = first;
      first = 0;
      for (std::size_t s = s_begin; s < steps; ++s) {
        StepStats st1;
        try {
          const double ts = now();
          st1 = run->train_step(data, st, order, s);
          step_seconds += now() - ts;
        } catch (const NumericError&) {
          sum.nan_detected = true;
          sum.nan_step = run->step + 1;
          sum.steps = run->step;
          if (root && !cfg.metrics.empty())
            append_line(cfg.metrics, json({{"epoch", run->epoch + 1}, {"step", run->step + 1}, {"nan_seen", true}}));
          throw;
        }
        if (cfg.loss_every > 0) {
          win_loss += st1.loss_sum;
          win_samples += st1.samples;
          if (static_cast<std::uint64_t>(run->step) % cfg.loss_every == 0) {
            sum.loss_curve.push_back(win_loss / static_cast<double>(win_samples));
            win_loss = 0.0;
            win_samples = 0;
          }
        }
        ep.loss_sum += st1.loss_sum;
        ep.correct += st1.correct;
        ep.samples += st1.samples;
        if (progress && root)
          progress(++done, total, "epoch " + std::to_string(run->epoch + 1) + " loss " + std::to_string(st1.loss_sum / static_cast<double>(st1.samples)));
        if (run->stop && s + 1 < steps) {
          run->cursor = (s + 1) * static_cast<std::size_t>(cfg.batch);
          preempt(*run, sum, false);
          return finish(nullptr);
        }
      }
      ++run->epoch;
      run->cursor = 0;
      sum.final_loss = ep.loss_sum / static_cast<double>(ep.samples);
      sum.steps = run->step;
      sum.epochs = run->epoch;
      // evaluate, checkpoint and report the epoch (with final_only: the last one, or one a signal ends)
      const bool last = run->epoch == cfg.epochs;
      const bool reported = !cfg.final_only || last || run->stop;
      bool saved = false;
      if (reported) {
        const auto ev = run->evaluate(data, st);
        sum.test_loss = ev.loss;
        sum.test_accuracy = ev.accuracy;
        sum.test_auc = ev.auc;
        saved = run->epoch % cfg.ckpt_every == 0 || last;
        if (saved) sum.last_checkpoint = run->save();
        report_epoch(*run, sum, ep, ev, now() - te, step_seconds, log);
      }
      // The signal came during the last step of the epoch: the epoch is complete, stop at its boundary.
      if (run->stop && run->epoch < cfg.epochs) {
        preempt(*run, sum, saved);
        return finish(nullptr);
      }
    }
    if (cfg.replica_divergence) sum.divergence = divergence(*run);
  } catch (const Error& e) {
    finish(&e);
    throw;
  } catch (const std::bad_alloc&) {  // outside the data (named by load_data): the summary still says why
    const Error e("out of memory");
    finish(&e);
    throw e;
  }
  return finish(nullptr);
}

}  // namespace resil::train
