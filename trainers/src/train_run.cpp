// Setting up a run on one rank: backend, model, optimizer, the mp stage; and the agreed start.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "resil/data/sampler.hpp"
#include "resil/train/device.hpp"
#include "resil/train/agree.hpp"
#include "run.hpp"

namespace resil::train {

namespace stdfs = std::filesystem;
using nlohmann::json;

namespace {

/// Bytes of memory this process may use: the machine's physical memory, or the cgroup's limit (a
/// batch scheduler's allocation, a container) when that is smaller.
double memory_limit_bytes() {
  double limit = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  for (const char* f : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(f);
    double v = 0;
    if (in >> v && v > 0) limit = std::min(limit, v);  // "max" (no limit) fails to parse and is skipped
  }
  return limit;
}

/// What one gpt rank allocates in host memory (the CPU backend), counted from what its layers keep:
/// the parameters, their gradients and the optimizer's slots (4 bytes each per parameter of the
/// rank); per block the outputs and input gradients each layer holds (36 rows x width floats, 22 of
/// them split over tp ranks) and the attention's scores, probabilities and their gradient (3 x
/// micro-batch x heads x seq x seq floats); the embedding, final LayerNorm and logits buffers. A
/// configuration above the memory its node's ranks share is refused in one line, before any
/// allocation, rather than killed by the kernel minutes later. Measured against it: 8 layers of width
/// 512 with 8 heads, 256 positions and batch 8 allocate 1.1x the count (2.27 GB).
void check_gpt_memory(const TrainConfig& cfg, ckpt::ParallelMode mode, const Comm& comm, std::size_t slots) {
  const double ranks = comm.size();
  double params = static_cast<double>(cfg.gpt.parameters()), layers = cfg.gpt.layers, heads = cfg.gpt.heads, batch = cfg.batch, split = 1.0;
  if (mode == ckpt::ParallelMode::tp) params /= ranks, heads /= ranks, split = ranks;
  if (mode == ckpt::ParallelMode::dp) batch = std::floor(batch / ranks);
  // A stage holds its blocks' buffers for one micro-batch (the first stages take the extra blocks).
  if (mode == ckpt::ParallelMode::mp) layers = std::ceil(layers / ranks), batch = std::floor(batch / std::max(cfg.micro_batches, 1));
  const double seq = cfg.seq, rows_c = batch * seq * cfg.gpt.width, state = 4.0 * params * static_cast<double>(2 + slots);
  const double attention = 4.0 * layers * 3.0 * batch * heads * seq * seq;
  const double activations = 4.0 * layers * rows_c * (14.0 + 22.0 / split) + 4.0 * (5.0 * rows_c + 2.0 * batch * seq * cfg.gpt.vocab);
  const double need = state + attention + activations;
  const double limit = memory_limit_bytes() / (comm.size() > 1 ? comm.local_size() : 1);
  if (need <= limit) return;
  char b[640];
  std::snprintf(b, sizeof b,
                "the gpt of --layers %d --heads %d --width %d --context %d (%.4g parameters) at --batch %d --seq %d needs about "
                "%.1f GiB per rank (parameters, gradients and optimizer state %.1f GiB, activations %.1f GiB, attention scores %.1f GiB), "
                "more than the %.1f GiB of memory a rank has here",
                cfg.gpt.layers, cfg.gpt.heads, cfg.gpt.width, cfg.gpt.context, static_cast<double>(cfg.gpt.parameters()), cfg.batch, cfg.seq,
                need / 1073741824.0, state / 1073741824.0, activations / 1073741824.0, attention / 1073741824.0, limit / 1073741824.0);
  throw UsageError(b);
}

}  // namespace

Run::Run(TrainConfig c, const Comm& cm, bool random_init) : cfg(std::move(c)), comm(cm), mode(cfg.parallel) {
  if (cfg.epochs < 1) throw UsageError("--epochs must be at least 1");
  if (cfg.batch < 1) throw UsageError("--batch must be at least 1");
  if (mode == ckpt::ParallelMode::none && comm.size() > 1)
    throw UsageError("--parallel none under " + std::to_string(comm.size()) + " MPI ranks (use dp or mp, or run one process)");
  if (mode == ckpt::ParallelMode::dp && cfg.batch % comm.size() != 0)
    throw UsageError("--batch " + std::to_string(cfg.batch) + " is not divisible by the " + std::to_string(comm.size()) + " dp ranks");
  if (mode == ckpt::ParallelMode::mp && cfg.micro_batches >= 1 && cfg.batch % cfg.micro_batches != 0)
    throw UsageError("--batch " + std::to_string(cfg.batch) + " is not divisible by --micro-batches " + std::to_string(cfg.micro_batches));
  // The device is resolved (auto -> cpu|cuda) before the config is recorded anywhere. A run may
  // resume on another device than it started on: the checkpoint format does not depend on it.
  cfg.device = *from_name<DeviceKind>(resolve_device(name(cfg.device)));
  cfg.reduce = *from_name<ReduceKind>(resolve_reduce(name(cfg.reduce), name(cfg.device), comm));
  const int local_rank = comm.size() > 1 ? comm.local_rank() : 0;
  be = make_backend(name(cfg.device), cfg.threads, local_rank, &device);
  // A state computed under another numeric configuration continues (or is evaluated) correctly,
  // but not bit for bit as it would have been there: say so once, then record this run's.
  const NumericConfig nc = be->numeric();
  if (!cfg.numeric_id.empty() && cfg.numeric_id != nc.id && comm.rank() == 0)
    std::fprintf(stderr, "ckpt-train: note: the checkpoint was computed under numeric configuration %s, this run computes under %s: "
                         "results are not bit-identical to a run that stayed there\n", cfg.numeric_id.c_str(), nc.id.c_str());
  cfg.numeric_id = nc.id;
  cfg.numeric_detail = nc.detail;
  if (cfg.reduce == ReduceKind::nccl && comm.size() > 1 && mode != ckpt::ParallelMode::none) {
    dcomm = make_device_comm(*be, comm);
    device += ", " + dcomm->name();
  }
  if (cfg.model == ModelKind::gpt) {
    cfg.gpt.validate();
    if (cfg.seq == 0) cfg.seq = cfg.gpt.context;
    if (cfg.seq < 1 || cfg.seq > cfg.gpt.context)
      throw UsageError("--seq " + std::to_string(cfg.seq) + " is longer than the model's context of " + std::to_string(cfg.gpt.context) +
                       " (--context)");
    OptimizerConfig slots_of = cfg.optimizer;
    slots_of.master_weights = cfg.precision == Precision::bf16;
    if (cfg.device == DeviceKind::cpu) check_gpt_memory(cfg, mode, comm, Optimizer(*be, slots_of).slot_names().size());
    TensorParallel tp;
    if (mode == ckpt::ParallelMode::tp) {
      tp = {comm.rank(), comm.size(), [this](Tensor& t) { tp_sum(t); }};
      if (cfg.gpt.heads % comm.size() != 0)
        throw UsageError("--heads " + std::to_string(cfg.gpt.heads) + " is not divisible by the " + std::to_string(comm.size()) + " tp ranks");
    }
    auto gpt = std::make_unique<Gpt>(*be, cfg.gpt, cfg.precision == Precision::bf16, tp);
    for (const auto& [p, slice] : gpt->slices()) slices.emplace(p, slice.to_json());
    model = std::move(gpt);
  } else {
    if (mode == ckpt::ParallelMode::tp) throw UsageError("--parallel tp supports --model gpt, not " + name(cfg.model));
    if (cfg.precision != Precision::fp32) throw UsageError("--precision " + name(cfg.precision) + " supports --model gpt, not " + name(cfg.model));
    model = make_model(*be, name(cfg.model));
  }
  if (random_init) model->init(cfg.seed);  // ~10 % of an eval trial when drawn only to be overwritten
  OptimizerConfig oc = cfg.optimizer;
  oc.master_weights = cfg.precision == Precision::bf16;
  opt = std::make_unique<Optimizer>(*be, oc);
  if (mode == ckpt::ParallelMode::mp && cfg.model == ModelKind::gpt) {
    // gpt: blocks in stages, the embeddings on the first, the head on the last (GptPipelineStage)
    layout = partition_blocks(cfg.gpt.layers, comm.size());
    const auto [first, end] = layout[static_cast<std::size_t>(comm.rank())];
    gpt_stage = std::make_unique<GptPipelineStage>(dynamic_cast<Gpt&>(*model), first, end, comm, cfg.micro_batches, dcomm.get());
    params = gpt_stage->params();
  } else if (mode == ckpt::ParallelMode::mp) {
    auto* cls = dynamic_cast<Classifier*>(model.get());
    if (!cls) throw UsageError("--parallel mp supports mlp, cnn and gpt, not " + name(cfg.model));
    layout = partition_layers(cls->net(), comm.size());
    const auto [first, end] = layout[static_cast<std::size_t>(comm.rank())];
    stage = std::make_unique<PipelineStage>(cls->net(), first, end, comm, cfg.micro_batches, dcomm.get());
    params = cls->net().params(first, end);
  } else {
    params = model->params();
  }
  opt->attach(params);
}

std::string Run::layout_json() const {
  json a = json::array();
  for (auto [f, e] : layout) a.push_back({f, e});
  return layout.empty() ? std::string() : a.dump();
}

void Run::tp_sum(Tensor& t) {
  if (dcomm) return dcomm->allreduce_sum({{t.data(), t.numel()}});
  std::vector<float> h = t.to_host();
  comm.allreduce_sum(h);
  be->upload(t.data(), h.data(), h.size());
}

bool Run::weights_finite() {
  bool ok = true;
  for (const auto& p : params) ok = ok && be->all_finite(p.value->data(), p.value->numel());
  return ok;
}

Start start(const TrainConfig& cfg, const Comm& comm, const std::optional<stdfs::path>& resume_from) {
  Start s;
  const std::size_t batch = static_cast<std::size_t>(cfg.batch);
  // Every check of the setup runs inside agree: one that fails on some ranks only (a shard of
  // another run, a cursor that does not fit) must not leave the others in the first collective.
  agree(comm, [&] {
    if (cfg.ckpt_every < 1) throw UsageError("--ckpt-every must be at least 1");
    try {
      (void)cfg.to_json();
    } catch (const json::exception&) {
      throw UsageError("--data " + cfg.data + ": the path is not valid UTF-8 (it is stored in the checkpoint's JSON config)");
    }
    // A resumed run loads every parameter; an mp stage only its own, so the other layers keep
    // their drawn values there (unused on this rank, but not left as zeros).
    s.run = std::make_unique<Run>(cfg, comm, !resume_from || cfg.parallel == ckpt::ParallelMode::mp);
    s.data = load_data(s.run->cfg);
    s.steps = data::steps_per_epoch(s.data.train_n(), batch);
    if (s.steps == 0)
      throw UsageError("--batch " + std::to_string(cfg.batch) + " is larger than the " + std::to_string(s.data.train_n()) + " training samples");
    if (resume_from) {
      // dp --replica-from: one rank's state comes from another file (a fault in that replica only).
      const stdfs::path& src = cfg.replica_rank == comm.rank() ? cfg.replica_from : *resume_from;
      s.run->load_state(load_for_rank(src, *s.run), src.string());
      if (s.run->epoch >= cfg.epochs)
        throw UsageError(resume_from->string() + " already has " + std::to_string(s.run->epoch) + " epochs; ask --epochs beyond that");
      // A preemption checkpoint resumes mid-epoch: the epoch's order is a pure function of
      // (seed, epoch), so skipping the first cursor / batch batches restores the exact stream.
      if (s.run->cursor != 0) {
        s.first = static_cast<std::size_t>(s.run->cursor / batch);
        if (s.run->cursor % batch != 0 || s.first >= s.steps ||
            s.run->step != s.run->epoch * static_cast<std::int64_t>(s.steps) + static_cast<std::int64_t>(s.first))
          throw MismatchError(resume_from->string() + ": data cursor " + std::to_string(s.run->cursor) + " at step " + std::to_string(s.run->step) +
                              " does not fit this data set (" + std::to_string(s.steps) + " steps of " + std::to_string(batch) + " per epoch)");
      }
    }
  });
  // Outputs only once every rank's setup succeeded: a rank that failed to load its shard must not
  // leave an empty --ckpt-dir made by one that did.
  agree(comm, [&] {
    if (comm.rank() == 0) {
      std::error_code ec;
      stdfs::create_directories(cfg.ckpt_dir, ec);
      if (ec) throw IoError("--ckpt-dir " + cfg.ckpt_dir.string() + ": cannot create: " + ec.message());
      if (!cfg.metrics.empty() && cfg.metrics.has_parent_path()) stdfs::create_directories(cfg.metrics.parent_path(), ec);
      if (!cfg.metrics.empty() && !resume_from && !std::ofstream(cfg.metrics, std::ios::trunc))
        throw IoError("--metrics " + cfg.metrics.string() + ": cannot create");
    }
  });
  return s;
}

}  // namespace resil::train
