// The training harness: one file to follow a run top to bottom -- data, model, (resume), then per
// step: batch -> forward/backward -> reduce (dp) or pipeline (mp) -> NaN check -> update; per
// epoch: metrics, checkpoint.
#include "resil/train/trainer.hpp"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cmath>
#include <fstream>
#include <limits>

#include "pipeline.hpp"
#include "resil/ckpt/checkpoint.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/config.hpp"
#include "resil/data/criteo.hpp"
#include "resil/data/idx.hpp"
#include "resil/data/sampler.hpp"
#include "resil/train/device.hpp"
#include "resil/train/dlrm.hpp"
#include "resil/train/preempt.hpp"

namespace resil::train {

namespace stdfs = std::filesystem;
using nlohmann::json;

// ------------------------------------------------------------------ config and summary JSON
std::string TrainConfig::to_json() const {
  const json j = {{"model", model}, {"parallel", parallel}, {"epochs", epochs}, {"seed", seed}, {"batch", batch},
                  {"micro_batches", micro_batches},
                  {"optimizer", {{"kind", optimizer.kind}, {"lr", optimizer.lr}, {"momentum", optimizer.momentum},
                                 {"beta1", optimizer.beta1}, {"beta2", optimizer.beta2}, {"eps", optimizer.eps},
                                 {"weight_decay", optimizer.weight_decay}, {"lr_decay", optimizer.lr_decay}}},
                  {"threads", threads}, {"blas", "openblas"}, {"device", device}, {"reduce", reduce}, {"data", data}, {"limit", limit}, {"test_limit", test_limit},
                  {"synthetic_samples", synthetic_samples}, {"ckpt_every", ckpt_every}};
  return j.dump();
}

TrainConfig TrainConfig::from_json(const std::string& text, const std::string& where) {
  // A damaged or foreign config is corrupt input naming the field, never a wrapped integer or a
  // NaN learning rate handed on to the trainer (nlohmann's own errors name the JSON position).
  const std::string at = where + ": /meta config";
  auto bad = [&](const std::string& field, const json& v, const std::string& want) {
    return CorruptInputError(at + ": " + field + " = " + v.dump(-1, ' ', false, json::error_handler_t::replace) + " is not " + want);
  };
  auto integer = [&](const json& o, const std::string& key, std::int64_t lo, std::int64_t hi, const std::string& prefix = "") {
    const json& v = o.at(key);
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi)) ||
        v.get<std::int64_t>() < lo || v.get<std::int64_t>() > hi)
      throw bad(prefix + key, v, "an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
    return v.get<std::int64_t>();
  };
  auto real = [&](const json& o, const std::string& key, double lo, double hi, bool lo_open, bool hi_open, float dflt) {
    if (!o.contains(key) && !std::isnan(dflt)) return dflt;
    const json& v = o.at(key);
    const float f = v.is_number() ? v.get<float>() : std::nanf("");
    if (!std::isfinite(f) || f < lo || f > hi || (lo_open && f <= lo) || (hi_open && f >= hi))
      throw bad("optimizer." + key, v, std::string("a number in ") + (lo_open ? "(" : "[") + std::to_string(lo) + ", " + std::to_string(hi) +
                                           (hi_open ? ")" : "]"));
    return f;
  };
  auto name = [&](const json& o, const std::string& key, std::initializer_list<const char*> allowed, const std::string& dflt,
                  const std::string& prefix = "") {
    if (!o.contains(key) && !dflt.empty()) return dflt;
    const json& v = o.at(key);
    std::string list;
    for (const char* a : allowed) {
      if (v.is_string() && v.get<std::string>() == a) return std::string(a);
      list += (list.empty() ? "" : " | ") + std::string(a);
    }
    throw bad(prefix + key, v, "one of " + list);
  };
  try {
    const json j = json::parse(text);
    if (!j.is_object()) throw CorruptInputError(at + ": not a JSON object");
    TrainConfig c;
    c.model = name(j, "model", {"mlp", "cnn", "dlrm"}, "");
    c.parallel = name(j, "parallel", {"none", "dp", "mp"}, "");
    c.epochs = static_cast<int>(integer(j, "epochs", 1, 100000));
    c.seed = j.at("seed").get<std::uint64_t>();
    c.batch = static_cast<int>(integer(j, "batch", 1, 1 << 20));
    c.micro_batches = static_cast<int>(integer(j, "micro_batches", 1, 4096));
    const json& o = j.at("optimizer");
    if (!o.is_object()) throw bad("optimizer", o, "an object");
    const float nan = std::nanf("");  // no default: required
    c.optimizer = {name(o, "kind", {"sgd", "adam", "adagrad"}, "", "optimizer."),
                   real(o, "lr", 0, std::numeric_limits<float>::max(), true, false, nan),
                   real(o, "momentum", 0, 1, false, false, nan),
                   real(o, "beta1", 0, 1, false, true, nan),
                   real(o, "beta2", 0, 1, false, true, nan),
                   real(o, "eps", 0, 1, false, false, nan),
                   real(o, "weight_decay", 0, 1, false, false, nan),
                   real(o, "lr_decay", 0, 1, true, false, 1.0f)};
    c.threads = static_cast<int>(integer(j, "threads", 1, 256));
    c.device = name(j, "device", {"cpu", "cuda", "auto"}, "cpu");
    c.reduce = name(j, "reduce", {"host", "nccl", "auto"}, "host");  // written before --reduce existed: the host path
    c.data = j.at("data").get<std::string>();
    c.limit = j.at("limit").get<std::uint64_t>();
    c.test_limit = j.at("test_limit").get<std::uint64_t>();
    c.synthetic_samples = static_cast<std::uint64_t>(integer(j, "synthetic_samples", 1, std::int64_t{1} << 30));
    c.ckpt_every = static_cast<int>(integer(j, "ckpt_every", 1, 100000));
    return c;
  } catch (const CorruptInputError&) {
    throw;
  } catch (const std::exception& e) {
    throw CorruptInputError(at + " is not a ckpt-train configuration: " + e.what());
  }
}

std::string Summary::to_json() const {
  json j = {{"command", command}, {"model", model}, {"parallel", parallel}, {"device", device}, {"world_size", world_size}, {"seed", seed},
            {"steps", steps}, {"epochs", epochs}, {"final_loss", std::isfinite(final_loss) ? json(final_loss) : json(nullptr)},
            {"test_loss", std::isfinite(test_loss) ? json(test_loss) : json(nullptr)}, {"test_accuracy", test_accuracy},
            {"nan_detected", nan_detected}, {"nan_step", nan_step}, {"preempted", preempted}, {"wall_seconds", wall_seconds},
            {"last_checkpoint", last_checkpoint}, {"exit_code", exit_code}, {"error", error},
            {"program_version", resil::version}};
  if (test_auc >= 0) j["test_auc"] = test_auc;
  if (preempted) {
    j["preempt_signal"] = preempt_signal;
    j["data_cursor"] = data_cursor;
  }
  // Strings from files and the command line (an error naming a damaged file, a path in another
  // encoding) may hold bytes that are not UTF-8: replaced, never an exception that loses the summary.
  return j.dump(2, ' ', false, json::error_handler_t::replace);
}

void write_summary(const stdfs::path& path, const Summary& s) {
  if (path.empty()) return;
  std::error_code ec;  // a missing parent is created (check_paths vouched for it); failing, the write says why
  if (path.has_parent_path()) stdfs::create_directories(path.parent_path(), ec);
  ckpt::fs::write_file_atomic(path, s.to_json() + "\n");
}

double auc(const std::vector<float>& scores, const std::vector<float>& labels) {
  std::vector<std::size_t> idx(scores.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return scores[a] < scores[b]; });
  double pos = 0, neg = 0, rank_sum = 0;
  for (std::size_t i = 0; i < idx.size();) {
    std::size_t j = i;
    while (j < idx.size() && scores[idx[j]] == scores[idx[i]]) ++j;
    const double avg_rank = (static_cast<double>(i) + static_cast<double>(j) + 1.0) / 2.0;  // 1-based, ties averaged
    for (std::size_t k = i; k < j; ++k)
      if (labels[idx[k]] > 0.5f) rank_sum += avg_rank;
    i = j;
  }
  for (float l : labels) (l > 0.5f ? pos : neg) += 1;
  if (pos == 0 || neg == 0) return 0.5;
  return (rank_sum - pos * (pos + 1) / 2) / (pos * neg);
}

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Run `fn` on every rank and agree on failure, so no rank hangs in a collective. One process:
/// the error itself. Several: every rank throws a PeerError with the job's exit code (the highest
/// of the failing ranks'); it is reported once by rank 0 when every rank failed (the same check on
/// the same input), otherwise by each failing rank, prefixed with its rank (its own shard, file or
/// memory: "rank 0: ..." too); ranks that did not fail stay silent. `for_job`: a check rank 0
/// makes for the whole job (its outputs): reported like one every rank failed.
template <class Fn>
void agree(const Comm& comm, Fn&& fn, bool for_job = false) {
  int code = 0;
  std::exception_ptr err;
  std::string what;
  try {
    fn();
  } catch (const Error& e) {
    code = static_cast<int>(e.exit_code());
    err = std::current_exception();
    what = e.what();
  } catch (const stdfs::filesystem_error& e) {
    code = static_cast<int>(ExitCode::io);
    err = std::make_exception_ptr(IoError(e.what()));
    what = e.what();
  } catch (const std::exception& e) {
    code = static_cast<int>(ExitCode::internal);
    err = std::current_exception();
    what = e.what();
  }
  if (comm.size() == 1) {
    if (err) std::rethrow_exception(err);
    return;
  }
  const int any = comm.allreduce_max(code);
  if (any == 0) return;
  const bool every = comm.allreduce_max(err ? 0 : 1) == 0;
  const int last = comm.allreduce_max(err ? comm.rank() : -1);
  const auto job_code = static_cast<ExitCode>(any);
  if (!err) throw PeerError("rank " + std::to_string(last) + " failed (it reported why)", job_code);
  if (every || for_job) throw PeerError(what, job_code, comm.rank() == 0);
  throw PeerError("rank " + std::to_string(comm.rank()) + ": " + what, job_code, true);
}

// ------------------------------------------------------------------ data
struct Data {
  bool clicks = false;
  data::ImageSet train_img, test_img;
  data::ClickSet train_clk, test_clk;
  std::size_t train_n() const { return clicks ? train_clk.n : train_img.n; }
  std::size_t test_n() const { return clicks ? test_clk.n : test_img.n; }
};

Data load_data(const TrainConfig& c) {
  Data d;
  if (c.model == "dlrm") {
    d.clicks = true;
    const DlrmConfig dc;
    if (c.data.empty()) {
      const std::uint64_t n = c.limit ? std::min(c.limit, c.synthetic_samples) : c.synthetic_samples;
      const std::uint64_t nt = c.test_limit ? c.test_limit : std::max<std::uint64_t>(1, c.synthetic_samples / 4);
      d.train_clk = data::synthetic_clicks(n, c.seed, dc.table_sizes);
      d.test_clk = data::synthetic_clicks(nt, c.seed, dc.table_sizes, c.synthetic_samples);  // disjoint samples
    } else {
      // A TSV file: the last quarter (or test_limit samples) is the test split.
      data::ClickSet all = data::read_criteo_tsv(c.data, dc.table_sizes);
      if (all.n == 0) throw CorruptInputError(c.data + ": no samples (an empty Criteo TSV file)");
      const std::size_t nt = c.test_limit ? std::min<std::size_t>(c.test_limit, all.n / 2) : all.n / 4;
      auto split = [&](std::size_t from, std::size_t n) {
        data::ClickSet s;
        s.table_sizes = all.table_sizes;
        s.n = n;
        s.dense.assign(all.dense.begin() + static_cast<long>(from * 13), all.dense.begin() + static_cast<long>((from + n) * 13));
        s.sparse.assign(all.sparse.begin() + static_cast<long>(from * 26), all.sparse.begin() + static_cast<long>((from + n) * 26));
        s.labels.assign(all.labels.begin() + static_cast<long>(from), all.labels.begin() + static_cast<long>(from + n));
        return s;
      };
      const std::size_t ntr = all.n - nt;
      d.train_clk = split(0, c.limit ? std::min<std::size_t>(c.limit, ntr) : ntr);
      d.test_clk = split(ntr, nt);
    }
  } else {
    const std::string dir = c.data.empty() ? data::default_fashion_mnist_dir : c.data;
    d.train_img = data::load_mnist(dir, data::Split::train, c.limit);
    d.test_img = data::load_mnist(dir, data::Split::test, c.test_limit);
    if (d.train_img.dim() != 784 || d.test_img.dim() != 784)
      throw CorruptInputError(dir + ": images are " + std::to_string(d.train_img.rows) + "x" + std::to_string(d.train_img.cols) +
                              ", the mlp and cnn models need 28x28");
  }
  return d;
}

/// Host staging for one batch: rows of the dataset picked by `idx`.
struct Staging {
  std::vector<float> x, targets;
  std::vector<std::int32_t> labels, sparse;
  Batch gather(const Data& d, bool test, std::span<const std::uint32_t> idx) {
    const auto n = idx.size();
    if (d.clicks) {
      const auto& s = test ? d.test_clk : d.train_clk;
      x.resize(n * 13);
      sparse.resize(n * 26);
      targets.resize(n);
      for (std::size_t i = 0; i < n; ++i) {
        std::copy_n(s.dense.begin() + static_cast<long>(idx[i] * 13), 13, x.begin() + static_cast<long>(i * 13));
        std::copy_n(s.sparse.begin() + static_cast<long>(idx[i] * 26), 26, sparse.begin() + static_cast<long>(i * 26));
        targets[i] = s.labels[idx[i]];
      }
      return Batch{static_cast<int>(n), x.data(), nullptr, targets.data(), sparse.data()};
    }
    const auto& s = test ? d.test_img : d.train_img;
    const std::size_t dim = s.dim();
    x.resize(n * dim);
    labels.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      std::copy_n(s.pixels.begin() + static_cast<long>(idx[i] * dim), dim, x.begin() + static_cast<long>(i * dim));
      labels[i] = s.labels[idx[i]];
    }
    return Batch{static_cast<int>(n), x.data(), labels.data(), nullptr, nullptr};
  }
};

// ------------------------------------------------------------------ run state
struct Run {
  TrainConfig cfg;
  const Comm& comm;
  ckpt::ParallelMode mode;
  std::unique_ptr<Backend> be;
  std::unique_ptr<DeviceComm> dcomm;  // --reduce nccl with several ranks; null: host path over MPI
  std::unique_ptr<Model> model;
  std::unique_ptr<Optimizer> opt;
  std::vector<std::pair<std::size_t, std::size_t>> layout;  // mp stages
  std::unique_ptr<PipelineStage> stage;
  std::vector<ParamRef> params;  // this rank's parameters
  std::string device;            // the backend in words (summary)
  std::int64_t step = 0, epoch = 0;
  std::uint64_t cursor = 0;      // samples of epoch `epoch` consumed when the state was saved/loaded
  bool stop = false;             // every rank agreed on a preemption request at the last step

  Run(TrainConfig c, const Comm& cm) : cfg(std::move(c)), comm(cm), mode(ckpt::mode_from_name(cfg.parallel)) {
    if (cfg.epochs < 1) throw UsageError("--epochs must be at least 1");
    if (cfg.batch < 1) throw UsageError("--batch must be at least 1");
    if (mode == ckpt::ParallelMode::none && comm.size() > 1)
      throw UsageError("--parallel none under " + std::to_string(comm.size()) + " MPI ranks (use dp or mp, or run one process)");
    if (mode == ckpt::ParallelMode::dp && cfg.batch % comm.size() != 0)
      throw UsageError("--batch " + std::to_string(cfg.batch) + " is not divisible by the " + std::to_string(comm.size()) + " dp ranks");
    // The device is resolved (auto -> cpu|cuda) before the config is recorded anywhere. A run may
    // resume on another device than it started on: the checkpoint format does not depend on it.
    cfg.device = resolve_device(cfg.device);
    cfg.reduce = resolve_reduce(cfg.reduce, cfg.device, comm);
    const int local_rank = comm.size() > 1 ? comm.local_rank() : 0;
    be = make_backend(cfg.device, cfg.threads, local_rank, &device);
    if (cfg.reduce == "nccl" && comm.size() > 1 && mode != ckpt::ParallelMode::none) {
      dcomm = make_device_comm(*be, comm);
      device += ", " + dcomm->name();
    }
    model = make_model(*be, cfg.model);
    model->init(cfg.seed);
    opt = std::make_unique<Optimizer>(*be, cfg.optimizer);
    if (mode == ckpt::ParallelMode::mp) {
      auto* cls = dynamic_cast<Classifier*>(model.get());
      if (!cls) throw UsageError("--parallel mp supports the layer-chain models mlp and cnn, not " + cfg.model);
      layout = partition_layers(cls->net(), comm.size());
      const auto [first, end] = layout[static_cast<std::size_t>(comm.rank())];
      stage = std::make_unique<PipelineStage>(cls->net(), first, end, comm, cfg.micro_batches, dcomm.get());
      params = cls->net().params(first, end);
    } else {
      params = model->params();
    }
    opt->attach(params);
  }

  std::string layout_json() const {
    json a = json::array();
    for (auto [f, e] : layout) a.push_back({f, e});
    return layout.empty() ? std::string() : a.dump();
  }

  bool weights_finite() {
    bool ok = true;
    for (const auto& p : params) ok = ok && be->all_finite(p.value->data(), p.value->numel());
    return ok;
  }

  // ---------------------------------------------------------------- checkpoints
  ckpt::Checkpoint snapshot() {
    ckpt::Checkpoint c;
    c.meta.step = step;
    c.meta.epoch = epoch;
    c.meta.world_size = comm.size();
    c.meta.rank = comm.rank();
    c.meta.mode = mode;
    c.meta.stage_layout = layout_json();
    c.meta.model = cfg.model;
    c.meta.config = cfg.to_json();
    c.meta.seed = cfg.seed;
    // Counter-based streams: the shuffle of epoch e is Rng(derive_seed(seed, shuffle), e), so
    // (seed, next epoch, step) fully restores the data order.
    c.meta.rng_state = {cfg.seed, static_cast<std::uint64_t>(epoch), static_cast<std::uint64_t>(step)};
    // 0 at epoch boundaries; a preemption checkpoint records how far into epoch `epoch` it is.
    c.meta.data_cursor = cursor;
    for (const auto& p : params) {
      const auto h = p.value->to_host();
      ckpt::Shape shape(p.value->dims().begin(), p.value->dims().end());
      c.model.emplace(p.name, ckpt::Tensor::from<float>(shape, std::span<const float>(h)));
      for (auto& [slot, t] : opt->slots().at(p.name)) {
        const auto sh = t.to_host();
        c.optimizer[p.name].emplace(slot, ckpt::Tensor::from<float>(shape, std::span<const float>(sh)));
      }
    }
    return c;
  }

  /// Save at the current step; returns the path of the file or manifest.
  std::string save() {
    stdfs::path out;
    agree(comm, [&] {
      if (mode == ckpt::ParallelMode::mp) {
        const auto shard = ckpt::shard_path(cfg.ckpt_dir, step, comm.rank());
        stdfs::create_directories(shard.parent_path());
        out = ckpt::save(shard, snapshot());
      } else if (comm.rank() == 0) {
        out = ckpt::save(cfg.ckpt_dir / ckpt::file_name_for_step(step), snapshot());
      }
    });
    if (mode == ckpt::ParallelMode::mp) {
      comm.barrier();  // every shard is committed before the manifest vouches for the set
      out = ckpt::manifest_path(cfg.ckpt_dir, step);
      agree(comm, [&] {
        if (comm.rank() != 0) return;
        ckpt::Manifest m;
        m.step = step;
        m.epoch = epoch;
        m.world_size = comm.size();
        m.mode = mode;
        m.model = cfg.model;
        for (int r = 0; r < comm.size(); ++r) m.shards.push_back(stdfs::relative(ckpt::shard_path(cfg.ckpt_dir, step, r), cfg.ckpt_dir));
        ckpt::write_manifest(out, m);
      });
    }
    return out.string();
  }

  void load_state(const ckpt::Checkpoint& c, const std::string& where) {
    for (const auto& p : params) {
      auto it = c.model.find(p.name);
      if (it == c.model.end()) throw CorruptInputError(where + ": missing dataset /model/" + p.name);
      upload_checked(it->second, *p.value, where + ": /model/" + p.name);
      for (auto& [slot, t] : opt->slots().at(p.name)) {
        auto ps = c.optimizer.find(p.name);
        if (ps == c.optimizer.end() || !ps->second.count(slot))
          throw CorruptInputError(where + ": missing dataset /optimizer/" + p.name + "/" + slot + " (" + cfg.optimizer.kind + " state)");
        upload_checked(ps->second.at(slot), t, where + ": /optimizer/" + p.name + "/" + slot);
      }
    }
    step = c.meta.step;
    epoch = c.meta.epoch;
    cursor = c.meta.data_cursor;
    opt->set_step(step);
  }

  static void upload_checked(const ckpt::Tensor& src, Tensor& dst, const std::string& what) {
    const ckpt::Shape want(dst.dims().begin(), dst.dims().end());
    if (src.dtype() != ckpt::DType::f32 || src.shape() != want)
      throw MismatchError(what + " is " + std::string(ckpt::dtype_name(src.dtype())) + ckpt::shape_string(src.shape()) +
                          ", the model needs f32" + ckpt::shape_string(want));
    const auto v = src.as<float>();
    dst.from_host(std::vector<float>(v.begin(), v.end()));
  }

  // ---------------------------------------------------------------- one step
  /// Forward, backward, reduce, NaN check, update. Returns the global batch's stats.
  StepStats train_step(Data& d, Staging& st, std::span<const std::uint32_t> order, std::size_t s) {
    const float scale = 1.0f / static_cast<float>(cfg.batch);
    model->zero_grad();
    StepStats stats;
    if (mode == ckpt::ParallelMode::mp) {
      stats = stage->train_step(st.gather(d, false, data::rank_batch(order, s, static_cast<std::size_t>(cfg.batch), 0, 1)), scale);
    } else {
      const int world = mode == ckpt::ParallelMode::dp ? comm.size() : 1;
      const int rank = mode == ckpt::ParallelMode::dp ? comm.rank() : 0;
      stats = model->forward_backward(st.gather(d, false, data::rank_batch(order, s, static_cast<std::size_t>(cfg.batch), rank, world)), scale);
      if (world > 1) reduce(stats);
    }
    const std::int64_t this_step = step + 1;
    if (!std::isfinite(stats.loss_sum))
      throw NumericError("NaN/Inf in the training loss at step " + std::to_string(this_step) + " (epoch " + std::to_string(epoch + 1) + ")");
    opt->begin_step();
    if (mode == ckpt::ParallelMode::mp) {
      for (const auto& p : params) opt->update(p);
    } else {
      model->apply_update(*opt);
    }
    // One collective per step agrees on two things: non-finite weights on any rank (bit 1) and a
    // preemption signal on any rank (bit 0). Integer max: no floating-point value is touched.
    const int agreed = comm.allreduce_max((weights_finite() ? 0 : 2) | (preempt_signal() != 0 ? 1 : 0));
    stop = agreed == 1;
    if (agreed >= 2)
      throw NumericError("NaN/Inf in the weights after step " + std::to_string(this_step) + " (epoch " + std::to_string(epoch + 1) + ")");
    step = this_step;
    return stats;
  }

  /// Data-parallel reduction: gradients (and row-sparse touched-row masks) summed in rank order
  /// on the host, or the gradients summed by NCCL on the device (--reduce nccl).
  void reduce(StepStats& stats) {
    std::vector<float> flat;
    if (dcomm) {
      std::vector<DeviceSpan> grads;
      for (const auto& p : params) grads.push_back({p.grad->data(), p.grad->numel()});
      dcomm->allreduce_sum(grads);
    } else {
      for (const auto& p : params) {
        const auto g = p.grad->to_host();
        flat.insert(flat.end(), g.begin(), g.end());
      }
    }
    const auto touched = model->touched_rows();
    std::vector<std::size_t> mask_at;
    for (const auto& [name, rows] : touched) {
      const auto it = std::find_if(params.begin(), params.end(), [&](const ParamRef& p) { return p.name == name; });
      mask_at.push_back(flat.size());
      flat.resize(flat.size() + static_cast<std::size_t>(it->value->dim(0)), 0.0f);
      for (auto r : rows) flat[mask_at.back() + static_cast<std::size_t>(r)] = 1.0f;
    }
    if (!flat.empty()) comm.allreduce_sum(flat);
    if (!dcomm) {
      std::size_t off = 0;
      for (const auto& p : params) {
        be->upload(p.grad->data(), flat.data() + off, p.grad->numel());
        off += p.grad->numel();
      }
    }
    for (std::size_t t = 0; t < touched.size(); ++t) {
      const auto it = std::find_if(params.begin(), params.end(), [&](const ParamRef& p) { return p.name == touched[t].first; });
      std::vector<std::int32_t> rows;
      for (int r = 0; r < it->value->dim(0); ++r)
        if (flat[mask_at[t] + static_cast<std::size_t>(r)] > 0.0f) rows.push_back(r);
      model->set_touched_rows(touched[t].first, std::move(rows));
    }
    std::vector<double> s = {stats.loss_sum, static_cast<double>(stats.correct), static_cast<double>(stats.samples)};
    comm.allreduce_sum(s);
    stats = {s[0], static_cast<std::int64_t>(s[1]), static_cast<std::int64_t>(s[2])};
  }

  // ---------------------------------------------------------------- evaluation
  struct Eval {
    double loss = 0, accuracy = 0, auc = -1;
  };
  Eval evaluate(Data& d, Staging& st) {
    const std::size_t n = d.test_n(), chunk = 1000;
    std::vector<std::uint32_t> idx(n);
    for (std::size_t i = 0; i < n; ++i) idx[i] = static_cast<std::uint32_t>(i);
    StepStats tot;
    std::vector<float> scores;
    for (std::size_t b = 0; b < n; b += chunk) {
      const Batch batch = st.gather(d, true, std::span<const std::uint32_t>(idx).subspan(b, std::min(chunk, n - b)));
      StepStats s;
      if (mode == ckpt::ParallelMode::mp) {
        s = stage->eval_step(batch);
      } else {
        s = model->evaluate(batch, d.clicks ? &scores : nullptr);
      }
      tot.loss_sum += s.loss_sum;
      tot.correct += s.correct;
      tot.samples += s.samples;
    }
    Eval e;
    e.loss = tot.samples ? tot.loss_sum / static_cast<double>(tot.samples) : 0.0;
    e.accuracy = tot.samples ? static_cast<double>(tot.correct) / static_cast<double>(tot.samples) : 0.0;
    if (d.clicks) e.auc = auc(scores, d.test_clk.labels);
    return e;
  }
};

void append_line(const stdfs::path& p, const json& record) {
  std::ofstream f(p, std::ios::app);
  if (!(f << record.dump(-1, ' ', false, json::error_handler_t::replace) << "\n")) throw IoError(p.string() + ": cannot append metrics");
}

Summary base_summary(const TrainConfig& c, const Comm& comm) {
  Summary s;
  s.model = c.model;
  s.parallel = c.parallel;
  s.world_size = comm.size();
  s.seed = c.seed;
  return s;
}

/// /meta values no run writes are corrupt input, not a mismatch or a confusing failure later.
void check_meta(const ckpt::Meta& m, const std::string& where) {
  if (m.world_size < 1 || m.rank < 0 || m.rank >= m.world_size)
    throw CorruptInputError(where + ": /meta rank " + std::to_string(m.rank) + " of world_size " + std::to_string(m.world_size) +
                            " is not a rank of a job");
  if (m.step < 0 || m.epoch < 0 || m.epoch > m.step)
    throw CorruptInputError(where + ": /meta step " + std::to_string(m.step) + ", epoch " + std::to_string(m.epoch) +
                            " is not a training position (0 <= epoch <= step)");
}

// ------------------------------------------------------------------ paths
/// Whether two paths name the same file: the same inode when both exist (links, "a/../b"),
/// otherwise the same absolute normal form.
bool same_file(const stdfs::path& a, const stdfs::path& b) {
  std::error_code ea, eb;
  const bool xa = stdfs::exists(a, ea), xb = stdfs::exists(b, eb);
  if (xa && xb) return stdfs::equivalent(a, b, ea);
  if (xa != xb) return false;
  return stdfs::weakly_canonical(a, ea) == stdfs::weakly_canonical(b, eb);
}

std::string errno_text() { return std::strerror(errno); }

std::vector<OutputPath> outputs_of(const TrainConfig& c) {
  return {{"--ckpt-dir", c.ckpt_dir, true}, {"--metrics", c.metrics, false}, {"--summary", c.summary, false}};
}

std::vector<InputPath> inputs_of(const TrainConfig& c, const std::optional<stdfs::path>& from) {
  std::vector<InputPath> in;
  if (from) in = checkpoint_inputs(*from);
  if (!c.data.empty()) in.push_back({"--data", c.data});
  return in;
}

/// Resolve what to load on this rank and check compatibility with this run.
ckpt::Checkpoint load_for_rank(const stdfs::path& from, const Run& run) {
  const bool manifest = from.string().ends_with(".manifest.json");
  ckpt::Meta meta;
  stdfs::path file = from;
  if (manifest) {
    const ckpt::Manifest m = ckpt::read_manifest(from);
    if (m.world_size != run.comm.size() || m.mode != run.mode)
      throw MismatchError(from.string() + ": written by a " + std::string(ckpt::mode_name(m.mode)) + " run with " + std::to_string(m.world_size) +
                          " ranks; this run is " + run.cfg.parallel + " with " + std::to_string(run.comm.size()) + " ranks");
    file = from.parent_path() / m.shards.at(static_cast<std::size_t>(run.comm.rank()));
  }
  // Checksums are not enforced: fault-injection campaigns resume from deliberately altered files.
  ckpt::Checkpoint c = ckpt::read(file, false);
  check_meta(c.meta, file.string());
  if (c.meta.model != run.cfg.model)
    throw MismatchError(file.string() + ": checkpoint holds model '" + c.meta.model + "', this run trains '" + run.cfg.model + "'");
  if (c.meta.mode != run.mode || c.meta.world_size != run.comm.size())
    throw MismatchError(file.string() + ": written by a " + std::string(ckpt::mode_name(c.meta.mode)) + " run with " + std::to_string(c.meta.world_size) +
                        " ranks; this run is " + run.cfg.parallel + " with " + std::to_string(run.comm.size()) + " ranks");
  if (run.mode == ckpt::ParallelMode::mp && c.meta.stage_layout != run.layout_json())
    throw MismatchError(file.string() + ": stage layout " + c.meta.stage_layout + " differs from this run's " + run.layout_json());
  return c;
}

}  // namespace

std::vector<InputPath> checkpoint_inputs(const stdfs::path& from) {
  std::vector<InputPath> in = {{"--from", from}, {"--from", from.string() + ".done"}};
  if (!from.string().ends_with(".manifest.json")) return in;
  try {
    for (const auto& shard : ckpt::read_manifest(from).shards) {
      in.push_back({"--from", from.parent_path() / shard});
      in.push_back({"--from", (from.parent_path() / shard).string() + ".done"});
    }
  } catch (const Error&) {
    // Unreadable: reading it for the run reports why.
  }
  return in;
}

void check_paths(const std::vector<OutputPath>& outputs, const std::vector<InputPath>& inputs) {
  std::vector<const OutputPath*> outs;
  for (const auto& o : outputs)
    if (!o.path.empty()) outs.push_back(&o);
  auto name = [](const OutputPath& o) { return o.option + " " + o.path.string(); };
  // Aliasing first: writing one output would destroy another, or the input being read.
  for (std::size_t i = 0; i < outs.size(); ++i) {
    for (std::size_t j = i + 1; j < outs.size(); ++j)
      if (same_file(outs[i]->path, outs[j]->path))
        throw UsageError(name(*outs[i]) + " and " + outs[j]->option + " " + outs[j]->path.string() + " name the same file");
    if (outs[i]->directory) continue;
    // A checkpoint the run writes would replace the file (or the file a committed checkpoint).
    const stdfs::path parent = outs[i]->path.parent_path().empty() ? stdfs::path(".") : outs[i]->path.parent_path();
    for (const OutputPath* d : outs)
      if (d->directory && outs[i]->path.filename().string().starts_with("ckpt-step") && same_file(parent, d->path))
        throw UsageError(name(*outs[i]) + ": a checkpoint's name inside " + d->option + " " + d->path.string() + " (ckpt-step*)");
    for (const auto& in : inputs)
      if (!in.path.empty() && same_file(outs[i]->path, in.path))
        throw UsageError(name(*outs[i]) + " is the input " + in.path.string() + " (" + in.option + "): it would be overwritten");
  }
  for (const OutputPath* o : outs) {
    std::error_code ec;
    const auto st = stdfs::status(o->path, ec);  // follows links: what would be written
    if (stdfs::exists(st)) {
      if (o->directory && !stdfs::is_directory(st)) throw UsageError(name(*o) + ": exists and is not a directory");
      if (!o->directory && stdfs::is_directory(st)) throw UsageError(name(*o) + ": is a directory (" + o->option + " names a file)");
      if (!o->directory && !stdfs::is_regular_file(st))
        throw UsageError(name(*o) + ": is not a regular file (a FIFO, device or socket; " + o->option + " names a file)");
      if (::access(o->path.c_str(), o->directory ? W_OK | X_OK : W_OK) != 0) throw IoError(name(*o) + ": not writable: " + errno_text());
    }
    // Missing directories (--ckpt-dir, a file's parent) are created and files are written beside
    // themselves (a temporary renamed over them): the nearest existing ancestor must be a writable
    // directory.
    stdfs::path dir = o->path.parent_path();
    if (dir.empty()) dir = ".";
    if (o->directory && stdfs::exists(st)) continue;
    while (!stdfs::exists(stdfs::symlink_status(dir, ec)) && dir.has_relative_path() && dir != dir.parent_path())
      dir = dir.parent_path().empty() ? stdfs::path(".") : dir.parent_path();
    const auto dst = stdfs::status(dir, ec);
    if (!stdfs::exists(dst)) throw IoError(name(*o) + ": directory " + dir.string() + " does not exist");
    if (!stdfs::is_directory(dst)) throw IoError(name(*o) + ": cannot create: " + dir.string() + " is not a directory");
    if (::access(dir.c_str(), W_OK | X_OK) != 0) throw IoError(name(*o) + ": cannot write in " + dir.string() + ": " + errno_text());
  }
}

// ------------------------------------------------------------------ train
Summary train(TrainConfig cfg, const Comm& comm, const std::optional<stdfs::path>& resume_from, const ProgressFn& progress,
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
  };
  std::unique_ptr<Run> run;
  Data data;
  // Refused paths write nothing, not even the summary (it may be the refused path, or an input).
  agree(comm, [&] {
    if (cfg.ckpt_dir.empty()) throw UsageError("--ckpt-dir is required");
    if (root) check_paths(outputs_of(cfg), inputs_of(cfg, resume_from));
  }, true);
  try {
    const std::size_t batch = static_cast<std::size_t>(cfg.batch);
    std::size_t steps = 0, first = 0;
    // Every check of the setup runs inside agree: one that fails on some ranks only (a shard of
    // another run, a cursor that does not fit) must not leave the others in the first collective.
    agree(comm, [&] {
      if (cfg.ckpt_every < 1) throw UsageError("--ckpt-every must be at least 1");
      try {
        (void)cfg.to_json();
      } catch (const json::exception&) {
        throw UsageError("--data " + cfg.data + ": the path is not valid UTF-8 (it is stored in the checkpoint's JSON config)");
      }
      run = std::make_unique<Run>(cfg, comm);
      data = load_data(cfg);
      steps = data::steps_per_epoch(data.train_n(), batch);
      if (steps == 0)
        throw UsageError("--batch " + std::to_string(cfg.batch) + " is larger than the " + std::to_string(data.train_n()) + " training samples");
      if (resume_from) {
        run->load_state(load_for_rank(*resume_from, *run), resume_from->string());
        if (run->epoch >= cfg.epochs)
          throw UsageError(resume_from->string() + " already has " + std::to_string(run->epoch) + " epochs; ask --epochs beyond that");
        // A preemption checkpoint resumes mid-epoch: the epoch's order is a pure function of
        // (seed, epoch), so skipping the first cursor / batch batches restores the exact stream.
        if (run->cursor != 0) {
          first = static_cast<std::size_t>(run->cursor / batch);
          if (run->cursor % batch != 0 || first >= steps ||
              run->step != run->epoch * static_cast<std::int64_t>(steps) + static_cast<std::int64_t>(first))
            throw MismatchError(resume_from->string() + ": data cursor " + std::to_string(run->cursor) + " at step " + std::to_string(run->step) +
                                " does not fit this data set (" + std::to_string(steps) + " steps of " + std::to_string(batch) + " per epoch)");
        }
      }
      if (root) {
        std::error_code ec;
        stdfs::create_directories(cfg.ckpt_dir, ec);
        if (ec) throw IoError("--ckpt-dir " + cfg.ckpt_dir.string() + ": cannot create: " + ec.message());
        if (!cfg.metrics.empty() && cfg.metrics.has_parent_path()) stdfs::create_directories(cfg.metrics.parent_path(), ec);
        if (!cfg.metrics.empty() && !resume_from && !std::ofstream(cfg.metrics, std::ios::trunc))
          throw IoError("--metrics " + cfg.metrics.string() + ": cannot create");
      }
    });
    sum.device = run->device;
    sum.steps = run->step;
    sum.epochs = run->epoch;
    Staging st;
    const std::uint64_t total = steps * static_cast<std::size_t>(cfg.epochs - run->epoch) - first;
    std::uint64_t done = 0;
    // Preempted: commit a checkpoint at the current step (unless one was just written there).
    auto preempt = [&](bool saved) {
      sum.preempted = true;
      const int sig = preempt_signal();
      sum.preempt_signal = sig ? preempt_signal_name(sig) : "a signal on another rank";
      sum.data_cursor = run->cursor;
      if (!saved) sum.last_checkpoint = run->save();
      sum.steps = run->step;
      sum.epochs = run->epoch;
      sum.exit_code = static_cast<int>(ExitCode::preempted);
      if (root && !cfg.metrics.empty())
        append_line(cfg.metrics, json({{"epoch", run->epoch + (run->cursor ? 1 : 0)}, {"step", run->step}, {"preempted", true},
                                       {"data_cursor", run->cursor}, {"checkpoint", sum.last_checkpoint}}));
    };
    while (run->epoch < cfg.epochs) {
      const double te = now();
      const auto order = data::epoch_order(data.train_n(), cfg.seed, static_cast<std::uint64_t>(run->epoch));
      run->opt->set_epoch(run->epoch);
      StepStats ep;
      const std::size_t s_begin = first;
      first = 0;
      for (std::size_t s = s_begin; s < steps; ++s) {
        StepStats st1;
        try {
          st1 = run->train_step(data, st, order, s);
        } catch (const NumericError&) {
          sum.nan_detected = true;
          sum.nan_step = run->step + 1;
          sum.steps = run->step;
          if (root && !cfg.metrics.empty())
            append_line(cfg.metrics, json({{"epoch", run->epoch + 1}, {"step", run->step + 1}, {"nan_seen", true}}));
          throw;
        }
        ep.loss_sum += st1.loss_sum;
        ep.correct += st1.correct;
        ep.samples += st1.samples;
        if (progress && root)
          progress(++done, total, "epoch " + std::to_string(run->epoch + 1) + " loss " + std::to_string(st1.loss_sum / static_cast<double>(st1.samples)));
        if (run->stop && s + 1 < steps) {
          run->cursor = (s + 1) * batch;
          preempt(false);
          finish(nullptr);
          return sum;
        }
      }
      ++run->epoch;
      run->cursor = 0;
      const auto ev = run->evaluate(data, st);
      sum.final_loss = ep.loss_sum / static_cast<double>(ep.samples);
      sum.test_loss = ev.loss;
      sum.test_accuracy = ev.accuracy;
      sum.test_auc = ev.auc;
      sum.steps = run->step;
      sum.epochs = run->epoch;
      const bool saved = run->epoch % cfg.ckpt_every == 0 || run->epoch == cfg.epochs;
      if (saved) sum.last_checkpoint = run->save();
      if (root && !cfg.metrics.empty()) {
        json m = {{"epoch", run->epoch}, {"step", run->step}, {"loss", sum.final_loss},
                  {"train_accuracy", static_cast<double>(ep.correct) / static_cast<double>(ep.samples)},
                  {"test_loss", ev.loss}, {"test_accuracy", ev.accuracy}, {"nan_seen", false}, {"epoch_seconds", now() - te}};
        if (ev.auc >= 0) m["test_auc"] = ev.auc;
        append_line(cfg.metrics, m);
      }
      if (root && log) {
        char line[256];
        std::snprintf(line, sizeof line, "epoch %lld/%d  step %lld  loss %.4f  train_acc %.4f  test_acc %.4f%s  (%.1f s)",
                      static_cast<long long>(run->epoch), cfg.epochs, static_cast<long long>(run->step), sum.final_loss,
                      static_cast<double>(ep.correct) / static_cast<double>(ep.samples), ev.accuracy,
                      ev.auc >= 0 ? ("  test_auc " + std::to_string(ev.auc)).c_str() : "", now() - te);
        log(line + (sum.last_checkpoint.empty() || run->epoch % cfg.ckpt_every != 0 ? std::string() : "  -> " + sum.last_checkpoint));
      }
      // The signal came during the last step of the epoch: the epoch is complete, stop at its boundary.
      if (run->stop && run->epoch < cfg.epochs) {
        preempt(saved);
        finish(nullptr);
        return sum;
      }
    }
  } catch (const Error& e) {
    finish(&e);
    throw;
  }
  finish(nullptr);
  return sum;
}

Summary resume(const stdfs::path& from, const ResumeOverrides& o, const Comm& comm, const ProgressFn& progress,
               const LogFn& log) {
  TrainConfig cfg;
  // Refused paths write nothing, not even the summary (it may be the refused path, or the input).
  agree(comm, [&] {
    if (comm.rank() != 0) return;
    std::vector<InputPath> in = checkpoint_inputs(from);
    if (o.data) in.push_back({"--data", *o.data});
    check_paths({{"--ckpt-dir", o.ckpt_dir, true}, {"--metrics", o.metrics, false}, {"--summary", o.summary, false}}, in);
  }, true);
  try {
  agree(comm, [&] {
    stdfs::path meta_file = from;
    if (from.string().ends_with(".manifest.json")) {
      const ckpt::Manifest m = ckpt::read_manifest(from);
      if (m.shards.empty()) throw CorruptInputError(from.string() + ": the manifest lists no shards");
      meta_file = from.parent_path() / m.shards.front();
    }
    const ckpt::Meta meta = ckpt::read_meta(meta_file);
    check_meta(meta, meta_file.string());
    cfg = TrainConfig::from_json(meta.config, meta_file.string());
    if (!o.model.empty() && o.model != cfg.model)
      throw MismatchError(from.string() + ": checkpoint holds model '" + cfg.model + "', --model asks for '" + o.model + "'");
    if (!o.parallel.empty() && o.parallel != cfg.parallel)
      throw MismatchError(from.string() + ": checkpoint was written with --parallel " + cfg.parallel + ", this run asks for " + o.parallel);
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
  if (!o.device.empty() && o.device != cfg.device) cfg.reduce = "auto";  // re-chosen for the new device
  if (!o.device.empty()) cfg.device = o.device;
  if (!o.reduce.empty()) cfg.reduce = o.reduce;
  Summary s = train(cfg, comm, from, progress, log);
  return s;
}

Summary evaluate(const stdfs::path& from, const std::optional<std::string>& data_dir, const std::optional<std::uint64_t>& test_limit,
                 const std::string& device) {
  const double t0 = now();
  const Comm solo = Comm::world();
  if (solo.size() > 1) throw UsageError("eval runs in one process (got " + std::to_string(solo.size()) + " MPI ranks)");
  // Gather every parameter (all shards of an mp manifest) into one checkpoint.
  ckpt::Checkpoint all;
  if (from.string().ends_with(".manifest.json")) {
    const ckpt::Manifest m = ckpt::read_manifest(from);
    for (const auto& shard : m.shards) {
      ckpt::Checkpoint c = ckpt::read(from.parent_path() / shard);
      if (all.meta.config.empty()) all.meta = c.meta;
      for (auto& [k, v] : c.model) all.model.emplace(k, std::move(v));
      for (auto& [k, v] : c.optimizer) all.optimizer.emplace(k, std::move(v));
    }
  } else {
    all = ckpt::read(from);
  }
  check_meta(all.meta, from.string());
  TrainConfig cfg = TrainConfig::from_json(all.meta.config, from.string());
  if (data_dir) cfg.data = *data_dir;
  if (test_limit) cfg.test_limit = *test_limit;
  if (!device.empty()) cfg.device = device;
  cfg.parallel = "none";
  cfg.reduce = "auto";  // one process: nothing to reduce
  cfg.limit = 1;  // evaluation needs the test split only
  Run run(cfg, solo);
  run.load_state(all, from.string());
  Data d = load_data(cfg);
  Staging st;
  Summary s = base_summary(cfg, solo);
  s.command = "eval";
  s.device = run.device;
  s.parallel = std::string(ckpt::mode_name(all.meta.mode));
  s.world_size = static_cast<int>(all.meta.world_size);
  s.steps = all.meta.step;
  s.epochs = all.meta.epoch;
  const bool weights_ok = run.weights_finite();
  const auto ev = run.evaluate(d, st);
  s.test_loss = s.final_loss = ev.loss;
  s.test_accuracy = ev.accuracy;
  s.test_auc = ev.auc;
  s.nan_detected = !weights_ok || !std::isfinite(ev.loss);
  s.wall_seconds = now() - t0;
  return s;
}

}  // namespace resil::train
