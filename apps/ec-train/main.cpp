// ec-train: DLRM training over MPI with erasure-coded embedding shards. Wiring only: options,
// validation, the MPI transport, exit codes; the protocol is resil::ecrm (trainers/ecrm).
#include <CLI/CLI.hpp>

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "resil/app/main.hpp"
#include "resil/app/validators.hpp"
#include "resil/core/error.hpp"
#include "resil/ecrm/engine.hpp"
#include "resil/train/agree.hpp"
#include "resil/train/comm.hpp"
#include "resil/train/preempt.hpp"

namespace resil::app::ec_train {
namespace {

struct Options {
  ecrm::Config cfg;
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


// Learning rates: positive and in fp32's normal range (NaN, 1e39 and 1e-50 are refused, not clamped).
const CLI::Validator positive_fp32 = app::Real(std::numeric_limits<float>::min(), std::numeric_limits<float>::max());

void setup(CLI::App& app, Options& o) {
  auto& c = o.cfg;
  app.footer(examples);
  app.add_option("--k", c.k, "data fragments per stripe")->check(CLI::Range(1, 255))->capture_default_str();
  app.add_option("--m", c.m, "parity fragments per stripe (failures tolerated per stripe)")->check(CLI::Range(1, 255))->capture_default_str();
  app.add_option("--steps", c.steps, "training steps")->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40))->capture_default_str();
  app.add_option("--seed", o.seed, "root seed (default: drawn once and printed)")->check(app::Decimal());
  const std::map<std::string, ecrm::Ft> fts{{"none", ecrm::Ft::none}, {"ec", ecrm::Ft::ec}, {"ckpt", ecrm::Ft::ckpt}};
  app.add_option("--ft", c.ft, "fault tolerance (default ec)")->transform(CLI::CheckedTransformer(fts))->option_text("none|ec|ckpt");
  app.add_option("--fail", o.fail, "RANK@STEP[,RANK@STEP...]: the rank loses its memory at the start of STEP");
  app.add_option("--ckpt-interval", c.ckpt_interval, "steps between checkpoints (--ft ckpt, --fallback-ckpt)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40))->capture_default_str();
  app.add_option("--ckpt-dir", o.ckpt_dir, "checkpoint directory (ckpt, fallback, preemption)")->capture_default_str();
  app.add_flag("--fallback-ckpt", c.fallback_ckpt, "with --ft ec: also checkpoint, and restart from it when a stripe loses more than m");
  app.add_option("--resume", c.resume, "continue from a checkpoint directory or manifest");
  app.add_option("--tables", c.tables, "embedding tables")->check(CLI::Range(1, 26))->capture_default_str();
  app.add_option("--rows", c.rows, "rows per table")->check(CLI::Range(1u, 1u << 30))->capture_default_str();
  app.add_option("--dim", c.dim, "embedding dimension")->check(CLI::Range(1, ecrm::max_dim))->capture_default_str();
  app.add_option("--batch", c.batch, "global batch (split over the ranks)")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app.add_option("--rows-per-fragment", c.rows_per_fragment, "rows per data fragment")->check(CLI::Range(1u, 1u << 20))->capture_default_str();
  app.add_option("--rebuild-stripes", c.rebuild_stripes, "stripes each replacement rebuilds per step (0 = all at once)")->check(app::Decimal())->capture_default_str();
  app.add_option("--lr", c.lr, "Adagrad learning rate (embeddings)")->check(positive_fp32)->capture_default_str();
  app.add_option("--mlp-lr", c.mlp_lr, "Adam learning rate (MLPs)")->check(positive_fp32)->capture_default_str();
  app.add_option("--data", c.data, "Criteo TSV file (default: synthetic Criteo-like data)")->check(CLI::ExistingFile);
  app.add_option("--report", o.report, "write the JSON report here");
  app.add_option("--poll-us", c.poll_us, "sleep between MPI progress polls, microseconds (0 = spin)")->check(CLI::Range(0, 100000))->capture_default_str();
  app.add_option("--signal-at", c.signal_at, "testing: rank 0 sends itself SIGUSR1 before this step (not in a resumed run)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
}

int run(Options& o, const train::Comm& comm) {
  auto& c = o.cfg;
  c.fail = ecrm::parse_failures(o.fail);
  c.validate(comm.size());
  c.seed_given = o.seed.has_value();
  if (o.seed) c.seed = *o.seed;
  c.ckpt_dir = o.ckpt_dir;
  c.report = o.report;
  train::install_preempt_handlers();
  const auto net = ecrm::make_comm_transport(comm);
  app::Progress bar("ec-train", static_cast<std::uint64_t>(c.steps));
  ecrm::Progress progress{[&](std::uint64_t step, const std::string& extra) { bar.update(step, extra); }, [&] { bar.finish(); }};
  return ecrm::run(c, *net, progress);
}

}  // namespace
}  // namespace resil::app::ec_train

int main(int argc, char** argv) {
  using namespace resil;
  using namespace resil::app::ec_train;
  train::MpiSession session(&argc, &argv);
  CLI::App app{"ec-train: DLRM training over MPI with Reed-Solomon erasure-coded embedding shards"};
  Options o;
  setup(app, o);
  train::Comm comm = train::Comm::world();
  // Errors every rank agreed on: a train::PeerError (train::agree, the policy ckpt-train shares:
  // each failing rank reports, naming its rank, or rank 0 once when every rank failed), and decisions every rank makes alike from the same data (usage, data
  // loss: rank 0 reports). Anything else was seen by this rank alone: guarded_main prints it with
  // the rank and ends the job with MPI_Abort (the others would wait in a collective forever).
  app::Ranks ranks{comm.rank(), comm.size(), [&comm](int v) { return comm.allreduce_max(v); },
                   [&comm](int code) { comm.abort(code); },
                   [&comm](const Error& e) -> std::optional<app::Agreed> {
                     if (const auto* p = dynamic_cast<const train::PeerError*>(&e)) return app::Agreed{p->report()};
                     if (dynamic_cast<const UsageError*>(&e) || dynamic_cast<const DataLossError*>(&e))
                       return app::Agreed{comm.rank() == 0};
                     return std::nullopt;
                   }};
  return app::guarded_main(
      "ec-train", app, argc, argv,
      [&] {
        comm.set_poll_us(o.cfg.poll_us);
        return run(o, comm);
      },
      ranks);
}
