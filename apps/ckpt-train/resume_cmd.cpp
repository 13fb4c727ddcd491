#include <iostream>

#include "commands.hpp"
#include "resil/app/mpi_wait.hpp"
#include "resil/app/validators.hpp"

namespace resil::app::ckpt_train {

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
  add_mpi_wait(app, o.mpi_wait);
}

int run_resume(const ResumeOptions& o, const resil::train::Comm& comm) {
  resil::train::ResumeOverrides over = o.over;
  if (!o.data.empty()) over.data = o.data;
  if (o.test_limit) over.test_limit = o.test_limit;
  if (o.threads) over.threads = o.threads;
  const auto s = resil::train::resume(o.from, over, comm, progress_printer(), stdout_logger());
  return report_end(s, over.epochs, comm);
}

}  // namespace resil::app::ckpt_train
