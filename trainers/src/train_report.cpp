// What a run reports per epoch: a metrics record (JSONL) and a log line.
#include <cstdio>
#include <fstream>

#include "resil/train/agree.hpp"
#include "run.hpp"

namespace resil::train {

namespace stdfs = std::filesystem;
using nlohmann::json;

double bits_per_byte(double nats) { return nats / 0.6931471805599453; }

void append_line(const stdfs::path& p, const json& record) {
  std::ofstream f(p, std::ios::app);
  if (!(f << record.dump(-1, ' ', false, json::error_handler_t::replace) << "\n")) throw IoError(p.string() + ": cannot append metrics");
}

void report_epoch(const Run& run, const Summary& sum, const StepStats& ep, const Run::Eval& ev, double seconds, double step_seconds,
                  const LogFn& log) {
  const TrainConfig& cfg = run.cfg;
  if (run.comm.rank() != 0) return;
  if (!cfg.metrics.empty()) {
    json m = {{"epoch", run.epoch}, {"step", run.step}, {"loss", sum.final_loss},
              {"train_accuracy", static_cast<double>(ep.correct) / static_cast<double>(ep.samples)},
              {"test_loss", ev.loss}, {"test_accuracy", ev.accuracy}, {"nan_seen", false}, {"epoch_seconds", seconds},
              {"train_seconds", step_seconds}};
    if (ev.auc >= 0) m["test_auc"] = ev.auc;
    if (cfg.model == ModelKind::gpt) {
      m["train_bpb"] = bits_per_byte(sum.final_loss);
      m["test_bpb"] = bits_per_byte(ev.loss);
      if (cfg.optimizer.clip > 0.0f) m["grad_norm"] = run.grad_norm;
    }
    append_line(cfg.metrics, m);
  }
  if (log && cfg.model == ModelKind::gpt) {
    // A language model's loss per byte in bits (nats / ln 2) and its next-byte accuracy.
    char line[256];
    std::snprintf(line, sizeof line, "epoch %lld/%d  step %lld  loss %.4f (%.3f bits/byte)  test_loss %.4f (%.3f bits/byte)  test_acc %.4f  (%.1f s)",
                  static_cast<long long>(run.epoch), cfg.epochs, static_cast<long long>(run.step), sum.final_loss, bits_per_byte(sum.final_loss),
                  ev.loss, bits_per_byte(ev.loss), ev.accuracy, seconds);
    log(line + (sum.last_checkpoint.empty() || run.epoch % cfg.ckpt_every != 0 ? std::string() : "  -> " + sum.last_checkpoint));
  } else if (log) {
    char line[256];
    std::snprintf(line, sizeof line, "epoch %lld/%d  step %lld  loss %.4f  train_acc %.4f  test_acc %.4f%s  (%.1f s)",
                  static_cast<long long>(run.epoch), cfg.epochs, static_cast<long long>(run.step), sum.final_loss,
                  static_cast<double>(ep.correct) / static_cast<double>(ep.samples), ev.accuracy,
                  ev.auc >= 0 ? ("  test_auc " + std::to_string(ev.auc)).c_str() : "", seconds);
    log(line + (sum.last_checkpoint.empty() || run.epoch % cfg.ckpt_every != 0 ? std::string() : "  -> " + sum.last_checkpoint));
  }
}

}  // namespace resil::train
