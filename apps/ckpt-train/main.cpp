// ckpt-train: deterministic training (none | dp | mp | tp) that writes and resumes HDF5 checkpoints.
#include <iostream>
#include <optional>
#include <string_view>

#include "commands.hpp"
#include "serve.hpp"
#include "resil/app/main.hpp"
#include "resil/config.hpp"
#include "resil/train/backend.hpp"
#include "resil/train/device.hpp"
#include "resil/train/preempt.hpp"
#if RESIL_HAVE_CUDA
#include "resil/train/cuda.hpp"
#endif

using namespace resil::app::ckpt_train;

int main(int argc, char** argv) {
  // serve forks a child per trial: no MPI in that process (a world of one, as for a plain eval).
  std::optional<resil::train::MpiSession> mpi;
  if (argc < 2 || std::string_view(argv[1]) != "serve") mpi.emplace(&argc, &argv);
#if RESIL_HAVE_CUDA
  resil::train::register_cuda_provider({&resil::train::cuda_device_count, &resil::train::cuda_device_description,
                                        &resil::train::cuda_device_for_local_rank, &resil::train::make_cuda_backend});
#endif
#if RESIL_HAVE_CUDA && RESIL_HAVE_NCCL
  resil::train::register_nccl_provider({&resil::train::make_nccl_comm, &resil::train::cuda_device_count});
#endif
  resil::train::Comm comm = resil::train::Comm::world();
  CLI::App app{"ckpt-train: deterministic data-/model-parallel training with HDF5 checkpoints"};
  app.require_subcommand(1);
  TrainOptions train_o;
  ResumeOptions resume_o;
  EvalOptions eval_o;
  LatestOptions latest_o;
  SampleOptions sample_o;
  ServeOptions serve_o;
  auto* train = app.add_subcommand("train", "train from scratch");
  auto* resume = app.add_subcommand("resume", "continue a run from a checkpoint (file or mp manifest)");
  auto* eval = app.add_subcommand("eval", "evaluate a checkpoint on the test split");
  auto* latest = app.add_subcommand("latest", "print the newest complete checkpoint in a directory");
  auto* sample = app.add_subcommand("sample", "generate text from a gpt checkpoint");
  setup_train(*train, train_o);
  setup_resume(*resume, resume_o);
  setup_eval(*eval, eval_o);
  setup_latest(*latest, latest_o);
  setup_sample(*sample, sample_o);
  auto* serve = app.add_subcommand("serve", "resident trial worker for campaigns (\"mode\": \"worker\"; started by ckpt-flip campaign)");
  setup_serve(*serve, serve_o);
  app.footer(
      "Examples (docs/guide/ckpt-train.md):\n"
      "  ckpt-train train --model mlp --epochs 2 --seed 1 --ckpt-dir ckpts --summary s.json\n"
      "  mpiexec -n 4 ckpt-train train --model cnn --parallel dp --epochs 3 --ckpt-dir cnn-dp\n"
      "  ckpt-train resume --from ckpts/ckpt-step00000937.h5 --epochs 3 --ckpt-dir ckpts\n"
      "  ckpt-train eval --from ckpts/ckpt-step00000937.h5 --summary e.json");
  train->footer(
      "Examples:\n"
      "  ckpt-train train --model mlp --epochs 2 --seed 1 --ckpt-dir ckpts --summary s.json   (Fashion-MNIST, 937 steps per epoch)\n"
      "  mpiexec -n 4 ckpt-train train --model mlp --parallel mp --micro-batches 4 --epochs 3 --ckpt-dir mlp-mp\n"
      "  ckpt-train train --model gpt --precision bf16 --layers 2 --heads 2 --width 32 --context 32 --limit 256 --batch 32 --epochs 1 --ckpt-dir g\n"
      "  mpiexec -n 2 ckpt-train train --model gpt --parallel tp --layers 2 --heads 2 --width 32 --context 32 --limit 1024 --batch 64 --epochs 2 --ckpt-dir gpt-tp");
  resume->footer(
      "Examples:\n"
      "  ckpt-train resume --from ckpts/ckpt-step00000937.h5 --epochs 3 --ckpt-dir ckpts\n"
      "  ckpt-train resume --from bad.h5 --epochs 3 --ckpt-dir trial --summary t.json --loss-every 10 --final-only   (a campaign trial)\n"
      "  mpiexec -n 2 ckpt-train resume --from gpt-tp/ckpt-step00000032.manifest.json --epochs 3 --ckpt-dir gpt-tp");
  eval->footer(
      "Examples:\n"
      "  ckpt-train eval --from ckpts/ckpt-step00000937.h5 --test-limit 2000 --summary e.json\n"
      "  ckpt-train eval --from gpt-tp/ckpt-step00000032.manifest.json   (a tp or pp manifest's shards put together)");
  latest->footer(
      "Examples:\n"
      "  ckpt-train latest --ckpt-dir ckpts   (exit 5 when there is none)\n"
      "  ckpt-train resume --from \"$(ckpt-train latest --ckpt-dir ckpts)\" --epochs 3 --ckpt-dir ckpts   (a requeued batch job)");
  sample->footer(
      "Examples:\n"
      "  ckpt-train sample --from gpt/ckpt-step00000600.h5 --prompt \"The \" --length 300\n"
      "  ckpt-train sample --from bad.h5 --seed 1 --temperature 0.8   (the same seed gives the same text)");
  const std::string prog = "ckpt-train";
  // Errors every rank agreed on: a PeerError (see there: its reporters name their rank), and NaN/Inf,
  // which the step's collective makes every rank see at the same step (rank 0 reports). Anything
  // else under MPI was seen by this rank alone: guarded_main prints it with the rank and ends the
  // job with MPI_Abort (the other ranks may be waiting in a collective).
  resil::app::Ranks ranks{comm.rank(), comm.size(), [&comm](int v) { return comm.allreduce_max(v); },
                          [&comm](int code) { comm.abort(code); },
                          [&comm](const resil::Error& e) -> std::optional<resil::app::Agreed> {
                            if (const auto* p = dynamic_cast<const resil::train::PeerError*>(&e)) return resil::app::Agreed{p->report()};
                            if (dynamic_cast<const resil::NumericError*>(&e) && comm.size() > 1) return resil::app::Agreed{comm.rank() == 0};
                            return std::nullopt;
                          }};
  return resil::app::guarded_main(
      prog, app, argc, argv,
      [&]() -> int {
        if ((*eval || *latest || *sample) && comm.size() > 1)
          throw resil::train::PeerError(std::string(*eval ? "eval" : *sample ? "sample" : "latest") + " runs in one process (got " + std::to_string(comm.size()) +
                                            " MPI ranks)",
                                        resil::ExitCode::usage, comm.rank() == 0);
        // SIGTERM/SIGUSR1 (Slurm --signal, scancel, mpiexec forwarding): checkpoint at the next step, exit 75.
        if (*train || *resume) {
          resil::train::install_preempt_handlers();
          // A training step computes for milliseconds between messages: ranks that share cores back off.
          comm.set_poll_us(*train ? train_o.mpi_wait : resume_o.mpi_wait, resil::train::poll_backoff);
        }
        if (*train) return run_train(train_o, comm);
        if (*resume) return run_resume(resume_o, comm);
        if (*eval) return run_eval(eval_o, comm);
        if (*serve) return run_serve(serve_o);
        if (*sample) return run_sample(sample_o);
        return run_latest(latest_o);
      },
      ranks);
}
