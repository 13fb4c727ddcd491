// ec-train: DLRM training over MPI with erasure-coded embedding shards (wiring only; the engine is
// engine.cpp, one step is Engine::train_step).
#include <CLI/CLI.hpp>

#include <iostream>
#include <optional>

#include "engine.hpp"
#include "resil/app/main.hpp"
#include "resil/core/error.hpp"
#include "resil/train/comm.hpp"

using namespace resil;

namespace {

struct Options {
  ectrain::Config cfg;
  std::string fail, ckpt_dir = "ec-train-ckpt", report;
  std::optional<std::uint64_t> seed;
};

const char* examples = R"(Examples:
  mpiexec -n 6 ec-train --k 4 --m 2 --steps 300 --seed 3 --ft ec --fail 2@100,3@100 --report r.json
      two ranks lose their memory at step 100; training goes on with degraded reads while their
      shards are rebuilt; the report's state_hash equals the failure-free run's (same seed)
  mpiexec -n 6 ec-train --k 4 --m 2 --steps 300 --seed 3 --ft none --report ref.json
      the failure-free reference
  mpiexec -n 6 ec-train --ft ckpt --ckpt-interval 50 --fail 2@120 --seed 3 --report c.json
      the checkpointing baseline: roll back to step 100 and redo 19 steps
  mpiexec -n 6 ec-train --k 4 --m 2 --fail 1@50,2@50,3@50 --fallback-ckpt --seed 3
      three failures in a stripe exceed m = 2: restart from the newest checkpoint instead of exit 8
  python3 scripts/plot_ec_timeline.py r.json timeline.png
SIGTERM or SIGUSR1: checkpoint at the next step boundary into --ckpt-dir and exit 75; the same
command run again resumes from that checkpoint (or name one with --resume).)";

void setup(CLI::App& app, Options& o) {
  auto& c = o.cfg;
  app.footer(examples);
  app.add_option("--k", c.k, "data fragments per stripe")->check(CLI::Range(1, 255))->capture_default_str();
  app.add_option("--m", c.m, "parity fragments per stripe (failures tolerated per stripe)")->check(CLI::Range(1, 255))->capture_default_str();
  app.add_option("--steps", c.steps, "training steps")->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40))->capture_default_str();
  app.add_option("--seed", o.seed, "root seed (default: drawn once and printed)");
  app.add_option("--ft", c.ft, "fault tolerance: none | ec | ckpt")
      ->check(CLI::IsMember({"none", "ec", "ckpt"}))->capture_default_str();
  app.add_option("--fail", o.fail, "RANK@STEP[,RANK@STEP...]: the rank loses its memory at the start of STEP");
  app.add_option("--ckpt-interval", c.ckpt_interval, "steps between checkpoints (--ft ckpt, --fallback-ckpt)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40))->capture_default_str();
  app.add_option("--ckpt-dir", o.ckpt_dir, "checkpoint directory (ckpt, fallback, preemption)")->capture_default_str();
  app.add_flag("--fallback-ckpt", c.fallback_ckpt, "with --ft ec: also checkpoint, and restart from it when a stripe loses more than m");
  app.add_option("--resume", c.resume, "continue from a checkpoint directory or manifest");
  app.add_option("--tables", c.tables, "embedding tables")->check(CLI::Range(1, 26))->capture_default_str();
  app.add_option("--rows", c.rows, "rows per table")->check(CLI::Range(1u, 1u << 30))->capture_default_str();
  app.add_option("--dim", c.dim, "embedding dimension")->check(CLI::Range(1, 256))->capture_default_str();
  app.add_option("--batch", c.batch, "global batch (split over the ranks)")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app.add_option("--rows-per-fragment", c.rows_per_fragment, "rows per data fragment")->check(CLI::Range(1u, 1u << 20))->capture_default_str();
  app.add_option("--rebuild-stripes", c.rebuild_stripes, "stripes each replacement rebuilds per step (0 = all at once)")->capture_default_str();
  app.add_option("--lr", c.lr, "Adagrad learning rate (embeddings)")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--mlp-lr", c.mlp_lr, "Adam learning rate (MLPs)")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--data", c.data, "Criteo TSV file (default: synthetic Criteo-like data)")->check(CLI::ExistingFile);
  app.add_option("--report", o.report, "write the JSON report here");
  app.add_option("--poll-us", c.poll_us, "sleep between MPI progress polls, microseconds (0 = spin)")->check(CLI::Range(0, 100000))->capture_default_str();
  app.add_option("--signal-at", c.signal_at, "testing: rank 0 sends itself SIGUSR1 before this step (not in a resumed run)");
}

int run(Options& o, const ectrain::Mpi& mpi) {
  auto& c = o.cfg;
  c.fail = ectrain::parse_failures(o.fail);
  for (const auto& f : c.fail)
    if (f.rank >= mpi.size()) throw UsageError("--fail " + std::to_string(f.rank) + "@" + std::to_string(f.step) + ": there are only " + std::to_string(mpi.size()) + " ranks");
  if (c.k + c.m > mpi.size())
    throw UsageError("--k " + std::to_string(c.k) + " --m " + std::to_string(c.m) + " needs at least k + m = " + std::to_string(c.k + c.m) +
                     " ranks; this job has " + std::to_string(mpi.size()));
  if (c.fallback_ckpt && c.ft != "ec") throw UsageError("--fallback-ckpt goes with --ft ec");
  c.seed_given = o.seed.has_value();
  if (o.seed) c.seed = *o.seed;
  c.ckpt_dir = o.ckpt_dir;
  c.report = o.report;
  ectrain::install_preemption_handlers();
  return ectrain::run(c, mpi);
}

}  // namespace

int main(int argc, char** argv) {
  train::MpiSession session(&argc, &argv);
  CLI::App app{"ec-train: DLRM training over MPI with Reed-Solomon erasure-coded embedding shards"};
  Options o;
  setup(app, o);
  const std::string prog = "ec-train";
  int rank = 0;
  return app::guarded_main(prog, app, argc, argv, [&]() -> int {
    const ectrain::Mpi mpi(o.cfg.poll_us);
    rank = mpi.rank();
    try {
      return run(o, mpi);
    } catch (const Error& e) {
      // Decisions every rank makes alike (usage, data loss): one line from rank 0, same exit code.
      if (dynamic_cast<const UsageError*>(&e) || dynamic_cast<const DataLossError*>(&e)) {
        if (rank == 0) std::cerr << prog << ": error: " << e.what() << "\n";
        return exit_code_of(e);
      }
      // Seen by this rank alone: the others would wait in a collective forever, so end them all.
      std::cerr << prog << ": error: rank " << rank << ": " << e.what() << "\n";
      if (mpi.size() > 1) mpi.abort(exit_code_of(e));
      return exit_code_of(e);
    } catch (const std::exception& e) {
      std::cerr << prog << ": internal error: rank " << rank << ": " << e.what() << "\n";
      if (mpi.size() > 1) mpi.abort(static_cast<int>(ExitCode::internal));
      return static_cast<int>(ExitCode::internal);
    }
  });
}
