// Checkpoints of a run: the snapshot of this rank's state, its commit (one file; mp: a shard per
// rank and the manifest, through ckpt::save_sharded), loading it back and checking it fits, resume.
#include "resil/train/trainer.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <optional>
#include <functional>

#include "resil/ckpt/checkpoint.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/train/agree.hpp"
#include "run.hpp"

namespace resil::train {

namespace stdfs = std::filesystem;
using nlohmann::json;

namespace {
/// Load `src` into `dst`; `dtype` is what the run stores there (f32, or bf16 for the model weights of
/// a mixed-precision run: each word the upper half of a float).
void upload_checked(const ckpt::Tensor& src, Tensor& dst, const std::string& what, ckpt::DType dtype = ckpt::DType::f32) {
  const ckpt::Shape want(dst.dims().begin(), dst.dims().end());
  if (src.dtype() != dtype || src.shape() != want)
    throw MismatchError(what + " is " + std::string(ckpt::dtype_name(src.dtype())) + ckpt::shape_string(src.shape()) + ", the model needs " +
                        std::string(ckpt::dtype_name(dtype)) + ckpt::shape_string(want));
  if (dtype == ckpt::DType::bf16) {
    const auto w = src.as<std::uint16_t>();
    std::vector<float> h(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) h[i] = std::bit_cast<float>(static_cast<std::uint32_t>(w[i]) << 16);
    dst.from_host(h);
    return;
  }
  const auto v = src.as<float>();
  dst.from_host(std::vector<float>(v.begin(), v.end()));
}

/// A float tensor whose values are bfloat16 (mixed precision's model weights) as a bf16 dataset.
ckpt::Tensor to_bf16(const ckpt::Shape& shape, const std::vector<float>& h) {
  ckpt::Tensor t(ckpt::DType::bf16, shape);
  auto w = t.as<std::uint16_t>();
  for (std::size_t i = 0; i < h.size(); ++i) w[i] = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(h[i]) >> 16);
  return t;
}
}  // namespace

ckpt::Checkpoint Run::snapshot() {
  ckpt::Checkpoint c;
  c.meta.step = step;
  c.meta.epoch = epoch;
  c.meta.world_size = comm.size();
  c.meta.rank = comm.rank();
  c.meta.mode = mode;
  c.meta.stage_layout = layout_json();
  c.meta.model = name(cfg.model);
  c.meta.config = cfg.to_json();
  c.meta.seed = cfg.seed;
  // Counter-based streams: the shuffle of epoch e is Rng(derive_seed(seed, shuffle), e), so
  // (seed, next epoch, step) fully restores the data order.
  c.meta.rng_state = {cfg.seed, static_cast<std::uint64_t>(epoch), static_cast<std::uint64_t>(step)};
  // 0 at epoch boundaries; a preemption checkpoint records how far into epoch `epoch` it is.
  c.meta.data_cursor = cursor;
  c.slices = slices;
  for (const auto& p : params) {
    const auto h = p.value->to_host();
    ckpt::Shape shape(p.value->dims().begin(), p.value->dims().end());
    // Mixed precision: the model weights the step computed with are bf16 (the float masters are an
    // optimizer slot); the values are exactly bf16, so the conversion drops only zero bits.
    c.model.emplace(p.name, cfg.precision == Precision::bf16 ? to_bf16(shape, h) : ckpt::Tensor::from<float>(shape, std::span<const float>(h)));
    for (auto& [slot, t] : opt->slots().at(p.name)) {
      const auto sh = t.to_host();
      c.optimizer[p.name].emplace(slot, ckpt::Tensor::from<float>(shape, std::span<const float>(sh)));
    }
  }
  return c;
}


std::string Run::save() {
  auto collective = [&](const std::function<void()>& phase) { agree(comm, phase); };
  // mp, tp: every rank's shard, then the manifest (the commit of the set) once every shard is durable.
  if (mode == ckpt::ParallelMode::mp || mode == ckpt::ParallelMode::tp) {
    ckpt::Checkpoint shard;
    collective([&] { shard = snapshot(); });  // a rank that cannot snapshot must not leave the others waiting
    return ckpt::save_sharded(cfg.ckpt_dir, shard, collective).string();
  }
  stdfs::path out;
  collective([&] {
    if (comm.rank() == 0) out = ckpt::save(cfg.ckpt_dir / ckpt::file_name_for_step(step), snapshot());
  });
  return out.string();
}

void Run::load_state(const ckpt::Checkpoint& c, const std::string& where) {
  // A checkpoint holds exactly the parameters its configuration describes (snapshot): a dataset
  // beyond them (a gpt whose /meta says fewer layers than it holds) would be dropped unseen.
  for (const auto& [name, t] : c.model)
    if (std::none_of(params.begin(), params.end(), [&](const auto& p) { return p.name == name; }))
      throw CorruptInputError(where + ": dataset /model/" + name + " is not a parameter of the model its /meta configuration describes");
  for (const auto& p : params) {
    auto it = c.model.find(p.name);
    if (it == c.model.end()) throw CorruptInputError(where + ": missing dataset /model/" + p.name);
    upload_checked(it->second, *p.value, where + ": /model/" + p.name, cfg.precision == Precision::bf16 ? ckpt::DType::bf16 : ckpt::DType::f32);
    for (auto& [slot, t] : opt->slots().at(p.name)) {
      auto ps = c.optimizer.find(p.name);
      if (ps == c.optimizer.end() || !ps->second.count(slot))
        throw CorruptInputError(where + ": missing dataset /optimizer/" + p.name + "/" + slot + " (" + name(cfg.optimizer.kind) + " state)");
      upload_checked(ps->second.at(slot), t, where + ": /optimizer/" + p.name + "/" + slot);
    }
  }
  step = c.meta.step;
  epoch = c.meta.epoch;
  cursor = c.meta.data_cursor;
  opt->set_step(step);
}

/// /meta values no run writes are corrupt input, not a mismatch or a confusing failure later.
void check_meta(const ckpt::Meta& m, const std::string& where) {
  if (m.world_size < 1 || m.rank < 0 || m.rank >= m.world_size)
    throw CorruptInputError(where + ": /meta rank " + std::to_string(m.rank) + " of world_size " + std::to_string(m.world_size) +
                            " is not a rank of a job");
  if (m.step < 0 || m.epoch < 0 || m.epoch > m.step)
    throw CorruptInputError(where + ": /meta step " + std::to_string(m.step) + ", epoch " + std::to_string(m.epoch) +
                            " is not a training position (0 <= epoch <= step)");
  // No run gets near it (100,000 epochs of 2^30 samples at batch 1 are 2^47 steps), and the
  // optimizer's step counter counts on from here: near 2^63 it overflowed (undefined behaviour).
  if (m.step > kMaxStep)
    throw CorruptInputError(where + ": /meta step " + std::to_string(m.step) + " is beyond 2^53 (no run takes that many steps)");
  if (m.optimizer_step && (*m.optimizer_step < 0 || *m.optimizer_step > kMaxStep))
    throw CorruptInputError(where + ": /meta optimizer_step " + std::to_string(*m.optimizer_step) + " is not in 0..2^53");
}

TrainConfig config_of(const ckpt::Meta& m, const std::string& where) {
  TrainConfig cfg = TrainConfig::from_json(m.config, where);
  // The config and the attributes are written from one run: disagreeing, the file was edited.
  if (name(cfg.model) != m.model)
    throw CorruptInputError(where + ": /meta model '" + m.model + "' differs from its config's model '" + name(cfg.model) + "'");
  if (cfg.seed != m.seed)
    throw CorruptInputError(where + ": /meta seed " + std::to_string(m.seed) + " differs from its config's seed " + std::to_string(cfg.seed));
  return cfg;
}

void check_shard(const ckpt::Manifest& man, const stdfs::path& manifest, const ckpt::Meta& shard, const stdfs::path& file) {
  if (shard.model != man.model)
    throw CorruptInputError(manifest.string() + ": the manifest's model '" + man.model + "' differs from its shard " + file.string() + " ('" +
                            shard.model + "')");
}

/// Resolve what to load on this rank and check compatibility with this run.
ckpt::Checkpoint load_for_rank(const stdfs::path& from, const Run& run) {
  const bool manifest = from.string().ends_with(".manifest.json");
  stdfs::path file = from;
  ckpt::Manifest m;
  if (manifest) {
    m = ckpt::read_manifest(from);
    if (m.world_size != run.comm.size() || m.mode != run.mode)
      throw MismatchError(from.string() + ": written by a " + std::string(ckpt::mode_name(m.mode)) + " run with " + std::to_string(m.world_size) +
                          " ranks; this run is " + name(run.cfg.parallel) + " with " + std::to_string(run.comm.size()) + " ranks");
    file = from.parent_path() / m.shards.at(static_cast<std::size_t>(run.comm.rank()));
  }
  // Checksums are not enforced: fault-injection campaigns resume from deliberately altered files.
  ckpt::Checkpoint c = ckpt::read(file, false);
  check_meta(c.meta, file.string());
  if (c.meta.model != name(run.cfg.model))
    throw MismatchError(file.string() + ": checkpoint holds model '" + c.meta.model + "', this run trains '" + name(run.cfg.model) + "'");
  if (manifest) check_shard(m, from, c.meta, file);
  if (c.meta.mode != run.mode || c.meta.world_size != run.comm.size())
    throw MismatchError(file.string() + ": written by a " + std::string(ckpt::mode_name(c.meta.mode)) + " run with " + std::to_string(c.meta.world_size) +
                        " ranks; this run is " + name(run.cfg.parallel) + " with " + std::to_string(run.comm.size()) + " ranks");
  if (run.mode == ckpt::ParallelMode::mp && c.meta.stage_layout != run.layout_json())
    throw MismatchError(file.string() + ": stage layout " + c.meta.stage_layout + " differs from this run's " + run.layout_json());
  // tp: the shard must hold this rank's slice of every sliced parameter (and nothing else sliced).
  for (const auto& [p, slice] : run.slices) {
    const auto it = c.slices.find(p);
    const std::string held = it == c.slices.end() ? std::string("the whole tensor") : it->second;
    if (held != slice) throw MismatchError(file.string() + ": /model/" + p + " holds " + held + "; this rank needs the slice " + slice);
  }
  for (const auto& [p, slice] : c.slices)
    if (!run.slices.count(p)) throw MismatchError(file.string() + ": /model/" + p + " holds the slice " + slice + "; this run needs the whole tensor");
  return c;
}

ckpt::Checkpoint read_whole(const stdfs::path& from) {
  if (!from.string().ends_with(".manifest.json")) return ckpt::read(from);
  const ckpt::Manifest m = ckpt::read_manifest(from);
  ckpt::Checkpoint all;
  // Sliced tensors: the ranges along the slice's dimension the shards placed (they must tile it).
  struct Cover {
    std::uint64_t extent = 0;  // the global tensor's size along the slice's dimension
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  };
  std::map<std::string, Cover> covered;
  // Unsliced tensors: the shard whose copy is kept (the others must hold the same bytes).
  std::map<std::string, stdfs::path> kept_from;
  auto put = [&](std::map<std::string, ckpt::Tensor>& into, const std::string& key, ckpt::Tensor t, const ckpt::TpSlice* s, const stdfs::path& file,
                 const std::string& name, bool count) {
    if (!s) {
      // A tensor every shard holds whole (tp: the unsliced parameters; pp: the tied embedding on the
      // first and last stage): one process computes with one copy, so the copies must agree. A
      // fault in one copy reaches only what its rank computes, which a single-process eval or
      // sample cannot reproduce: refused, not evaluated on the first copy as if the fault were not there.
      auto [it, fresh] = into.try_emplace(key, std::move(t));
      if (fresh) {
        kept_from[name] = file;
        return;
      }
      const ckpt::Tensor& first = it->second;
      if (first.dtype() != t.dtype() || first.shape() != t.shape() || !std::equal(first.bytes().begin(), first.bytes().end(), t.bytes().begin()))
        throw MismatchError(file.string() + ": " + name + " differs from its copy in " + kept_from[name].string() +
                            ": one process cannot compute with both; resume the manifest with its " + std::to_string(m.shards.size()) +
                            " ranks to see what the difference does");
      return;
    }
    auto [it, fresh] = into.try_emplace(key, t.dtype(), s->global_shape);
    if (fresh) std::memset(it->second.bytes().data(), 0, it->second.nbytes());
    try {
      s->place(t, it->second);
    } catch (const Error& e) {
      throw CorruptInputError(file.string() + ": " + name + ": " + e.what());
    }
    if (count) {
      Cover& c = covered[key];
      c.extent = s->global_shape.at(s->dim);
      c.ranges.insert(c.ranges.end(), s->ranges.begin(), s->ranges.end());
    }
  };
  for (const auto& shard : m.shards) {
    const stdfs::path file = from.parent_path() / shard;
    ckpt::Checkpoint c = ckpt::read(file);
    check_shard(m, from, c.meta, file);
    if (all.meta.config.empty()) all.meta = c.meta;
    for (auto& [k, v] : c.model) {
      std::optional<ckpt::TpSlice> s;
      if (auto it = c.slices.find(k); it != c.slices.end()) s = ckpt::TpSlice::from_json(it->second, file.string() + ": /model/" + k);
      put(all.model, k, std::move(v), s ? &*s : nullptr, file, "/model/" + k, true);
      if (auto o = c.optimizer.find(k); o != c.optimizer.end())
        for (auto& [slot, t] : o->second) put(all.optimizer[k], slot, std::move(t), s ? &*s : nullptr, file, "/optimizer/" + k + "/" + slot, false);
    }
  }
  // The shards' slices of each sliced tensor tile its dimension: no index twice, none left out
  // (an index placed twice would leave another one zero with the count of placed elements right).
  for (auto& [k, c] : covered) {
    std::sort(c.ranges.begin(), c.ranges.end());
    std::uint64_t next = 0;
    for (const auto& [lo, hi] : c.ranges) {
      if (lo < next)
        throw CorruptInputError(from.string() + ": the shards' slices of /model/" + k + " overlap at index " + std::to_string(lo) + " of its sliced dimension");
      if (lo > next) break;
      next = hi;
    }
    if (next != c.extent)
      throw CorruptInputError(from.string() + ": the shards' slices of /model/" + k + " leave index " + std::to_string(next) + " of its sliced dimension (of " +
                              std::to_string(c.extent) + ") unstored");
  }
  return all;
}

Summary resume(const stdfs::path& from, const ResumeOverrides& o, const Comm& comm, const ProgressFn& progress,
               const LogFn& log) {
  TrainConfig cfg;
  // Refused paths write nothing, not even the summary (it may be the refused path, or the input).
  agree(comm, [&] {
    if (comm.rank() != 0) return;
    ckpt::fs::require_input_file(from, "--from");  // exit 3 (CLI11's existence check made it 2)
    std::vector<InputPath> in = checkpoint_inputs(from);
    if (o.data) in.push_back({"--data", *o.data});
    if (!o.replica_from.empty()) {
      ckpt::fs::require_input_file(o.replica_from, "--replica-from");
      for (auto& f : checkpoint_inputs(o.replica_from)) in.push_back({"--replica-from", f.path});
    }
    check_paths({{"--ckpt-dir", o.ckpt_dir, true}, {"--metrics", o.metrics, false}, {"--summary", o.summary, false}}, in);
  }, true);
  try {
  agree(comm, [&] {
    stdfs::path meta_file = from;
    std::optional<ckpt::Manifest> m;
    if (from.string().ends_with(".manifest.json")) {
      m = ckpt::read_manifest(from);
      if (m->shards.empty()) throw CorruptInputError(from.string() + ": the manifest lists no shards");
      meta_file = from.parent_path() / m->shards.front();
    }
    const ckpt::Meta meta = ckpt::read_meta(meta_file);
    if (m) check_shard(*m, from, meta, meta_file);
    check_meta(meta, meta_file.string());
    cfg = config_of(meta, meta_file.string());
    if (o.model && *o.model != cfg.model)
      throw MismatchError(from.string() + ": checkpoint holds model '" + name(cfg.model) + "', --model asks for '" + name(*o.model) + "'");
    if (o.parallel && *o.parallel != cfg.parallel)
      throw MismatchError(from.string() + ": checkpoint was written with --parallel " + name(cfg.parallel) + ", this run asks for " +
                          name(*o.parallel));
    if (!o.replica_from.empty() && (cfg.parallel != ckpt::ParallelMode::dp || o.replica_rank < 0 || o.replica_rank >= comm.size()))
      throw UsageError("--replica-from " + std::to_string(o.replica_rank) + "=" + o.replica_from.string() + ": needs a dp checkpoint and a rank in 0.." +
                       std::to_string(comm.size() - 1) + " (this run: " + name(cfg.parallel) + ", " + std::to_string(comm.size()) + " ranks)");
    if (meta.world_size != comm.size())
      throw MismatchError(from.string() + ": checkpoint was written by " + std::to_string(meta.world_size) + " ranks, this run has " +
                          std::to_string(comm.size()));
  });
  } catch (const Error& e) {
    // Campaigns read the summary even when the checkpoint cannot be used.
    Summary s;
    s.command = "resume";
    s.world_size = comm.size();
    s.error = e.what();
    s.exit_code = static_cast<int>(e.exit_code());
    if (comm.rank() == 0) write_summary(o.summary, s);
    throw;
  }
  cfg.epochs = o.epochs;
  cfg.ckpt_dir = o.ckpt_dir;
  cfg.metrics = o.metrics;
  cfg.summary = o.summary;
  if (o.data) cfg.data = *o.data;
  if (o.test_limit) cfg.test_limit = *o.test_limit;
  if (o.threads) cfg.threads = *o.threads;
  cfg.loss_every = o.loss_every;
  cfg.shuffle_seed = o.shuffle_seed;
  cfg.final_only = o.final_only;
  if (!o.replica_from.empty()) {
    cfg.replica_rank = o.replica_rank;
    cfg.replica_from = o.replica_from;
  }
  cfg.replica_divergence = (o.replica_divergence || !o.replica_from.empty()) && cfg.parallel == ckpt::ParallelMode::dp && comm.size() > 1;
  if (o.device && *o.device != cfg.device) cfg.reduce = ReduceKind::automatic;  // re-chosen for the new device
  if (o.device) cfg.device = *o.device;
  if (o.reduce) cfg.reduce = *o.reduce;
  Summary s = train(cfg, comm, from, progress, log);
  return s;
}
}  // namespace resil::train
