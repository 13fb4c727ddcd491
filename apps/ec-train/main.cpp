// ec-train: DLRM training over MPI with erasure-coded embedding shards. Wiring only: options,
// validation, the MPI transport, exit codes; the protocol is resil::ecrm (trainers/ecrm).
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <span>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "resil/app/choice.hpp"
#include "resil/app/main.hpp"
#include "resil/app/mpi_wait.hpp"
#include "resil/app/validators.hpp"
#include "resil/core/error.hpp"
#include "resil/ckpt/checkpoint.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/ecrm/engine.hpp"
#include "resil/ecrm/segment.hpp"
#include "resil/inject/fault_model.hpp"
#include "resil/inject/select_expr.hpp"
#include "resil/train/agree.hpp"
#include "resil/train/comm.hpp"
#include "resil/train/preempt.hpp"
#include "resil/train/trainer.hpp"

namespace resil::app::ec_train {
namespace {

struct Options {
  ecrm::Config cfg;
  std::string fail, kill, inject, scrub_cadence = "touched", inject_log, inject_bits = "all", inject_model = "flip", ckpt_dir = "ec-train-ckpt", report, bottom_mlp = "32", top_mlp = "32";
  std::optional<std::string> job_id;
  std::optional<std::uint64_t> seed, inject_seed;
  bool cleanup = false;
  bool scrub_cadence_given = false;
};

// The job whose state segments a run attaches: --job-id, else the batch system's job id (a
// relaunch inside one allocation finds the same segments), else a hash of the command line (the
// launcher runs the same command again; two different commands never share segments).
const char* job_id_variable() {
  for (const char* var : {"SLURM_JOB_ID", "PBS_JOBID"})
    if (const char* v = std::getenv(var); v && *v) return var;
  return nullptr;
}

std::string default_job_id(int argc, char** argv) {
  if (const char* var = job_id_variable()) return std::getenv(var);
  std::string cmd;
  for (int i = 1; i < argc; ++i) cmd.append(argv[i]).push_back('\0');
  return "cmd-" + ckpt::hex_u64(ckpt::xxh64(std::as_bytes(std::span(cmd.data(), cmd.size()))));
}

// A message of ckpt-flip's --bits / --model parser, naming ec-train's option instead.
std::string as_inject_option(const std::string& message, const std::string& option) {
  if (message.rfind(option + " ", 0) == 0) return "--inject-" + message.substr(2);
  return "--inject-" + option.substr(2) + ": " + message;
}

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
  mpiexec -n 6 ec-train --bottom-mlp 512,256,64 --top-mlp 512,256 --tables 26 --batch 1024 --seed 3
      the DLRM reference's Criteo Kaggle shape (dense MLPs that dominate the step, as in ECRM's runs)
  mpiexec -n 4 ec-train --k 2 --m 2 --seed 3 --scrub --inject row@10,parity@20,stripe@30:members=2 --inject-log flips.jsonl
      bit flips in a shard row, a parity row and two members of one codeword, each found by its row
      checksum and repaired by the code; the report's state_hash equals the fault-free run's
  mpiexec -n 4 ec-train --k 3 --m 1 --seed 3 --inject mlp@10:rank=2 --inject-bits exponent --inject-model adjacent:2 --inject-log f.jsonl
      two adjacent exponent bits of one word of rank 2's MLP replica (the code does not cover the
      MLPs): the report says the replicas diverged, and the state_hash differs from the fault-free run's
  scripts/hpc/ec-train-run.sh -n 4 -- --k 3 --m 1 --commit in-step --kill 1@100:node --job-id j1 --seed 3
      a real kill -9 with node loss at step 100, relaunched; step 99 was committed when it ended,
      so nothing is redone (with the default --commit next-step step 99 is redone)
  python3 scripts/plot_ec_timeline.py r.json timeline.png
SIGTERM or SIGUSR1: checkpoint at the next step boundary into --ckpt-dir and exit 75; the same
command run again resumes from that checkpoint (or name one with --resume).)";


// Learning rates: positive and in fp32's normal range (NaN, 1e39 and 1e-50 are refused, not clamped).
const CLI::Validator positive_fp32 = app::Real(std::numeric_limits<float>::min(), std::numeric_limits<float>::max());

void setup(CLI::App& app, Options& o) {
  auto& c = o.cfg;
  app.footer(examples);
  app.add_option("--k", c.k, "data fragments per stripe")->transform(app::Decimal(1, 255))->capture_default_str();
  app.add_option("--m", c.m, "parity fragments per stripe (failures tolerated per stripe)")->transform(app::Decimal(1, 255))->capture_default_str();
  app.add_option("--steps", c.steps, "training steps")->transform(app::Decimal(1, std::uint64_t{1} << 40))->capture_default_str();
  app.add_option("--seed", o.seed, "root seed (default: drawn once and printed)")->transform(app::Decimal());
  const std::map<std::string, ecrm::Ft> fts{{"none", ecrm::Ft::none}, {"ec", ecrm::Ft::ec}, {"ckpt", ecrm::Ft::ckpt}};
  app::add_choice(app, "--ft", c.ft, fts, "fault tolerance (default ec)")->option_text("none|ec|ckpt");
  const std::map<std::string, ecrm::Commit> commits{{"next-step", ecrm::Commit::next_step}, {"in-step", ecrm::Commit::in_step}};
  app::add_choice(app, "--commit", c.commit, commits,
                  "--ft ec: a step's parity deltas go with the next step's first exchange (next-step, default: a death before it "
                  "redoes the step) or in a round of their own at the step's end (in-step: no completed step is ever redone, one "
                  "more exchange per step)")
      ->option_text("next-step|in-step");
  app.add_option("--fail", o.fail, "RANK@STEP[,RANK@STEP...]: the rank loses its memory at the start of STEP");
  app.add_option("--kill", o.kill, "RANK@STEP[:node|:scrub][,...]: the rank SIGKILLs itself at the start of STEP (:node: removing its state segment first; :scrub: inside STEP's scrub repair, with --scrub)");
  app.add_flag("--scrub", c.scrub,
               "--ft ec: keep a CRC-32C per shard and parity row, check rows before they are read and parity rows as deltas fold in, "
               "repair bad rows from the code while training goes on (more than m bad in one codeword: exit 8, or --fallback-ckpt)");
  app.add_option("--scrub-cadence", o.scrub_cadence, "touched (the rows each step reads, checked before it reads them), sweep, or touched+sweep")
      ->check(CLI::IsMember({"touched", "sweep", "touched+sweep"}))->capture_default_str()
      ->each([&o](const std::string&) { o.scrub_cadence_given = true; });
  app.add_option("--scrub-sweep", c.scrub_sweep, "stripes the background sweep verifies per step (0: no sweep)")->transform(app::Decimal())->capture_default_str();
  app.add_option("--inject", o.inject,
                 "TARGET@STEP[:rank=R][:stripe=S][:members=J][:bits=B][:at=start|delta][,...]: flip bits in memory at STEP; TARGET row "
                 "(a shard row), parity (a parity row), stripe (J members of one codeword), mlp (an MLP replica), opt (its Adam state)");
  app.add_option("--inject-seed", o.inject_seed, "seed of the --inject draws (default: --seed)")->transform(app::Decimal());
  app.add_option("--inject-bits", o.inject_bits,
                 "the bits of a 32-bit word a fault's anchor is drawn from, as ckpt-flip inject --bits: sign, exponent, exponent-msb, mantissa, "
                 "mantissa-high, msb, lsb, all, numbers and ranges (0-7,31)")
      ->capture_default_str();
  app.add_option("--inject-model", o.inject_model,
                 "what a fault does to the word, as ckpt-flip inject --model: flip, adjacent:K, random-bits:K, burst[:K], stuck-at-0, stuck-at-1, "
                 "random-value, zero, pattern:FILE.json")
      ->capture_default_str();
  app.add_option("--inject-log", o.inject_log, "write the flips to this flip log (JSON lines, rank 0; replaced at the start, appended to by a relaunch)")->check(app::NonEmptyPath());
  app.add_option("--job-id", o.job_id, "state segments /dev/shm/resil-ec-JOB-RANK (default: SLURM_JOB_ID, PBS_JOBID, else a hash of the command line)");
  app.add_flag("--cleanup", o.cleanup, "remove the state segments of --job-id left by a run that did not complete, and exit");
  app.add_option("--ckpt-interval", c.ckpt_interval, "steps between checkpoints (--ft ckpt, --fallback-ckpt)")
      ->transform(app::Decimal(1, std::uint64_t{1} << 40))->capture_default_str();
  app.add_option("--ckpt-dir", o.ckpt_dir, "checkpoint directory (ckpt, fallback, preemption)")->check(app::NonEmptyPath())->capture_default_str();
  app.add_flag("--fallback-ckpt", c.fallback_ckpt, "with --ft ec: also checkpoint, and restart from it when a stripe loses more than m");
  app.add_option("--resume", c.resume, "continue from a checkpoint directory or manifest")->check(app::NonEmptyPath());
  app.add_option("--tables", c.tables, "embedding tables")->transform(app::Decimal(1, 26))->capture_default_str();
  app.add_option("--rows", c.rows, "rows per table")->transform(app::Decimal(1, 1u << 30))->capture_default_str();
  app.add_option("--dim", c.dim, "embedding dimension")->transform(app::Decimal(1, ecrm::max_dim))->capture_default_str();
  app.add_option("--bottom-mlp", o.bottom_mlp, "hidden layer widths of the bottom MLP (13 dense features -> ... -> --dim)")->capture_default_str();
  app.add_option("--top-mlp", o.top_mlp, "hidden layer widths of the top MLP (interactions -> ... -> 1)")->capture_default_str();
  app.add_option("--batch", c.batch, "global batch (split over the ranks)")->transform(app::Decimal(1, 1u << 20))->capture_default_str();
  app.add_option("--rows-per-fragment", c.rows_per_fragment, "rows per data fragment")->transform(app::Decimal(1, 1u << 20))->capture_default_str();
  app.add_option("--rebuild-stripes", c.rebuild_stripes, "stripes each replacement rebuilds per step (0 = all at once)")->transform(app::Decimal())->capture_default_str();
  app.add_option("--lr", c.lr, "Adagrad learning rate (embeddings)")->check(positive_fp32)->capture_default_str();
  app.add_option("--mlp-lr", c.mlp_lr, "Adam learning rate (MLPs)")->check(positive_fp32)->capture_default_str();
  app.add_option("--data", c.data, "Criteo TSV file (default: synthetic Criteo-like data)")->check(app::NonEmptyPath());
  app.add_option("--report", o.report, "write the JSON report here")->check(app::NonEmptyPath());
  app::add_mpi_wait(app, c.poll_us);
  app.add_option("--signal-at", c.signal_at, "testing: rank 0 sends itself SIGUSR1 before this step (not in a resumed run)")
      ->transform(app::Decimal(1, std::uint64_t{1} << 40));
}

// The paths this run writes, checked before any training (rank 0, for the job): the report must be
// a regular file or new, in an existing directory (renamed onto /dev/null as root it would replace
// the device), neither an input nor a checkpoint's name inside --ckpt-dir (a manifest's: it would
// replace one). Found only at the end, a bad --report would cost the whole run.
void check_paths(const Options& o) {
  namespace fs = ckpt::fs;
  const auto& c = o.cfg;
  if (!c.data.empty()) fs::require_input_file(c.data, "--data");  // exit 3 like every missing input (CLI11's check made it 2)
  fs::require_distinct({{"--data", c.data, false}, {"--resume", c.resume, false}, {"--report", o.report, true}, {"--inject-log", o.inject_log, true}});
  if (!o.inject_log.empty()) fs::require_output_file(o.inject_log, "--inject-log");
  if (o.report.empty()) return;
  fs::require_output_file(o.report, "--report");
  // Inside --ckpt-dir only a checkpoint's own names (ckpt-step*: manifests, step directories) collide.
  if (ckpt::is_checkpoint_name_in(o.report, o.ckpt_dir))
    throw UsageError("--report " + o.report + " is a checkpoint's name inside --ckpt-dir " + o.ckpt_dir + " (ckpt-step*): give the report another name");
  if (c.resume.empty()) return;
  // The checkpoint --resume reads, however it is named: a manifest, its step directory
  // (ckpt-stepN/, the manifest beside it), or a directory of checkpoints (the newest is read, and a
  // report named like one would change which). Its files are ckpt-step* names in one directory.
  namespace stdfs = std::filesystem;
  const stdfs::path r = stdfs::path(c.resume).lexically_normal();
  const stdfs::path named = r.filename().empty() ? r.parent_path() : r;  // "ckpt-step00000010/"
  const bool step_dir = stdfs::is_directory(named) && named.filename().string().starts_with("ckpt-step");
  const stdfs::path dir = stdfs::is_directory(named) && !step_dir ? named : named.parent_path();
  const stdfs::path manifest = step_dir ? stdfs::path(named.string() + ".manifest.json") : named;
  if (!stdfs::is_directory(manifest))  // hard links to its files too
    for (const auto& i : train::checkpoint_inputs(manifest))
      if (fs::same_file(o.report, i.path))
        throw UsageError("--report " + o.report + " is the input " + i.path.string() + " (--resume): it would be overwritten");
  if (ckpt::is_checkpoint_name_in(o.report, dir.empty() ? stdfs::path(".") : dir))
    throw UsageError("--report " + o.report + " is a checkpoint's name beside the --resume checkpoint " + c.resume + " (ckpt-step*): give the report another name");
}

int run(Options& o, const train::Comm& comm, const std::string& job_id) {
  auto& c = o.cfg;
  if (o.cleanup) {
    if (!o.job_id) throw UsageError("--cleanup needs --job-id");
    std::size_t n = 0;  // rank 0 for the job: several ranks would race for the same names
    train::agree(comm, [&] { if (comm.rank() == 0) n = ecrm::Segment::cleanup(*o.job_id); }, true);
    if (comm.rank() == 0) std::cout << "ec-train: removed " << n << " state segment(s) of job " << *o.job_id << "\n";
    return 0;
  }
  c.job_id = job_id;
  try {
    (void)ecrm::Segment::path(c.job_id, 0);  // checks its characters
  } catch (const UsageError&) {
    const char* var = o.job_id ? nullptr : job_id_variable();
    if (!var) throw;  // the message names --job-id, which the user gave
    throw UsageError(std::string(var) + "='" + c.job_id + "' cannot name the state segments (1-200 characters of A-Z a-z 0-9 . _ -): pass --job-id");
  }
  c.bottom_mlp = ecrm::parse_mlp(o.bottom_mlp, "--bottom-mlp");
  c.top_mlp = ecrm::parse_mlp(o.top_mlp, "--top-mlp");
  c.kill = ecrm::parse_kills(o.kill);
  c.fail = ecrm::parse_failures(o.fail);
  c.inject = ecrm::parse_injects(o.inject);
  c.scrub_touched = o.scrub_cadence != "sweep";
  if (o.scrub_cadence_given && !c.scrub) throw UsageError("--scrub-sweep and --scrub-cadence go with --scrub");
  if (o.scrub_cadence == "touched" && c.scrub_sweep > 0) throw UsageError("--scrub-sweep " + std::to_string(c.scrub_sweep) + " needs --scrub-cadence sweep or touched+sweep");
  if (o.scrub_cadence.find("sweep") != std::string::npos && c.scrub_sweep == 0) c.scrub_sweep = 16;
  c.inject_log = o.inject_log;
  if (o.inject_bits.empty()) throw UsageError("--inject-bits: empty (leave it out, or say all)");
  c.inject_bits = o.inject_bits;
  try {
    c.inject_allowed = static_cast<std::uint32_t>(inject::BitSpec::parse(o.inject_bits).mask_for(ckpt::DType::f32));
  } catch (const UsageError& e) {
    throw UsageError(as_inject_option(e.what(), "--bits"));
  }
  if (c.inject_allowed == 0) throw UsageError("--inject-bits " + o.inject_bits + " selects no bit of a 32-bit float word");
  {
    std::shared_ptr<inject::FaultModel> model;
    // Every rank reads a pattern file (pattern:FILE) alike: agreed, so a missing or bad one is one
    // line from rank 0, named by this program's option.
    train::agree(comm, [&] {
      try {
        model = std::make_shared<inject::FaultModel>(inject::FaultModel::parse(o.inject_model));
      } catch (const UsageError& e) {
        throw UsageError(as_inject_option(e.what(), "--model"));
      } catch (const IoError& e) {
        throw IoError(as_inject_option(e.what(), "--model"));
      } catch (const CorruptInputError& e) {
        throw CorruptInputError(as_inject_option(e.what(), "--model"));
      }
    });
    c.inject_model = model->name();
    if (model->kind() != inject::FaultModel::Kind::flip)
      c.inject_fault = [model](std::uint32_t old, unsigned anchor, std::uint32_t allowed, Rng& rng) {
        return static_cast<std::uint32_t>(model->apply(old, 32, anchor, allowed, rng));
      };
  }
  c.validate(comm.size());
  c.seed_given = o.seed.has_value();
  if (o.seed) c.seed = *o.seed;
  c.inject_seed_given = o.inject_seed.has_value();
  if (o.inject_seed) c.inject_seed = *o.inject_seed;
  c.ckpt_dir = o.ckpt_dir;
  c.report = o.report;
  train::agree(comm, [&] { if (comm.rank() == 0) check_paths(o); }, true);
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
        o.cfg.poll_us = comm.poll_us();  // the report names the wait auto chose
        return run(o, comm, o.job_id ? *o.job_id : default_job_id(argc, argv));
      },
      ranks);
}
