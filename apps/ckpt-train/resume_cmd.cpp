#include <iostream>

#include "commands.hpp"
#include "resil/app/mpi_wait.hpp"
#include "resil/app/validators.hpp"

namespace resil::app::ckpt_train {

namespace {
/// RANK of a --replica-from RANK=FILE value (at most 6 digits, a non-empty FILE), or -1.
int replica_rank_of(const std::string& v) {
  const auto eq = v.find('=');
  const std::string rank = eq == std::string::npos ? std::string() : v.substr(0, eq);
  if (rank.empty() || rank.size() > 6 || rank.find_first_not_of("0123456789") != std::string::npos || eq + 1 >= v.size()) return -1;
  return std::stoi(rank);
}
}  // namespace

void setup_resume(CLI::App& app, ResumeOptions& o) {
  app.add_option("--from", o.from, "checkpoint file, or mp manifest (*.manifest.json)")->required()->check(NonEmptyPath());
  app.add_option("--epochs", o.over.epochs, "continue up to this many epochs in total")->required()->transform(Decimal(1, 100000));
  app.add_option("--ckpt-dir", o.over.ckpt_dir, "directory for new checkpoints")->required()->check(NonEmptyPath());
  add_choice<ckpt::ParallelMode>(app, "--parallel", o.over.parallel, "must match the checkpoint");
  add_choice<resil::train::ModelKind>(app, "--model", o.over.model, "must match the checkpoint");
  add_choice<resil::train::DeviceKind>(app, "--device", o.over.device, "cpu | cuda | auto (default: the checkpoint's device; any may resume any)");
  add_choice<resil::train::ReduceKind>(app, "--reduce", o.over.reduce, "auto | host | nccl (default: the checkpoint's; auto when --device changes)");
  app.add_option("--metrics", o.over.metrics, "JSONL file, one record per epoch (appended)")->check(NonEmptyPath());
  app.add_option("--summary", o.over.summary, "JSON summary written at the end (also on failure)")->check(NonEmptyPath());
  app.add_option("--data", o.data, "override the stored data location")->check(NonEmptyPath());
  app.add_option("--test-limit", o.test_limit, "override the stored test limit")->transform(Decimal());
  app.add_option("--threads", o.threads, "CPU GEMM threads per rank (default: the checkpoint's; the results do not depend on them)")
      ->transform(Decimal(1, 256));
  app.add_option("--loss-every", o.over.loss_every, "summary loss_curve: the mean training loss of every N steps (0 = none)")
      ->transform(Decimal(0, std::uint64_t{1} << 40));
  app.add_option("--shuffle-seed", o.over.shuffle_seed, "draw the data order from this seed instead of the checkpoint's (a run without a fault that "
                 "differs from the checkpoint's own continuation only in the order of its samples)")->transform(Decimal());
  // Checked while parsing, where every rank agrees on a usage error and rank 0 alone reports it.
  app.add_option("--replica-from", o.replica, "dp: RANK=FILE, that rank loads its whole state from FILE, every other rank from --from "
                 "(a fault in one replica); implies --replica-divergence")
      ->check([](const std::string& v) { return replica_rank_of(v) < 0 ? "'" + v + "': expected RANK=FILE, e.g. 1=ckpt-step000300.h5" : std::string(); });
  app.add_flag("--replica-divergence", o.over.replica_divergence, "dp: the summary's replica_divergence, how far each rank's final model weights "
               "are from rank 0's (the replica that evaluates and saves)");
  app.add_flag("--final-only", o.over.final_only, "evaluate, checkpoint and report (metrics record, log line) only after the last epoch, "
               "or at an epoch a signal ends: what a campaign trial reads, without the epochs between");
  add_mpi_wait(app, o.mpi_wait);
}

int run_resume(const ResumeOptions& o, const resil::train::Comm& comm) {
  resil::train::ResumeOverrides over = o.over;
  if (!o.data.empty()) over.data = o.data;
  if (o.test_limit) over.test_limit = o.test_limit;
  if (o.threads) over.threads = o.threads;
  if (!o.replica.empty()) {  // its shape was checked while parsing
    over.replica_rank = replica_rank_of(o.replica);
    over.replica_from = o.replica.substr(o.replica.find('=') + 1);
  }
  const auto s = resil::train::resume(o.from, over, comm, progress_printer(), stdout_logger());
  return report_end(s, over.epochs, comm);
}

}  // namespace resil::app::ckpt_train
