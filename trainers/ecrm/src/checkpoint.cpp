// Checkpoints of the sharded job through resil::ckpt: one shard file per rank (its embedding rows
// with their Adagrad accumulators, the MLP replica, its Adam state and step in /meta/optimizer_step),
// committed by ckpt::save_sharded (shards, then the manifest), the ranks agreeing on each phase.
// Used by --ft ckpt (every --ckpt-interval steps), by --fallback-ckpt and by preemption.
#include <cstring>
#include <iostream>

#include <nlohmann/json.hpp>

#include "engine_impl.hpp"
#include "resil/ckpt/checkpoint.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/config.hpp"
#include "resil/core/error.hpp"
#include "resil/train/agree.hpp"

namespace resil::ecrm {

namespace {
constexpr const char* model_name = "ec-train-dlrm";
std::string emb_name(int t) { return "emb" + std::to_string(t) + ".shard"; }

ckpt::Shape shape_of(const train::Tensor& t) {
  ckpt::Shape s;
  for (int d : t.dims()) s.push_back(static_cast<std::uint64_t>(d));
  return s;
}

void load_tensor(train::Tensor& dst, const ckpt::Checkpoint& c, const ckpt::Tensor* src, const std::string& what,
                 const std::filesystem::path& file) {
  if (!src || src->dtype() != ckpt::DType::f32 || src->numel() != dst.numel())
    throw MismatchError(file.string() + ": " + what + " is missing or has the wrong shape for this run");
  (void)c;
  const auto v = src->as<float>();
  dst.from_host(std::vector<float>(v.begin(), v.end()));
}
}  // namespace

std::string Engine::meta_config(bool preempted) const {
  nlohmann::json j;
  j["computation"] = nlohmann::json::parse(cfg_.computation_json(net_.size()));
  j["ft"] = std::string(ft_name(cfg_.ft));
  j["preempted"] = preempted;
  return j.dump();
}

void Engine::save_ckpt(std::int64_t step, bool preempted) {
  // A lost fragment's store holds garbage until it is rebuilt: finish the rebuild first (from
  // parities that hold every delta up to `step`).
  flush();
  while (recovery_.any_lost()) {
    const double r0 = now_seconds();
    recovery_.rebuild(0, static_cast<std::uint64_t>(step));
    after_rebuild(step, now_seconds() - r0);
  }
  // --scrub: a full sweep first, so no corruption the cadence has not reached yet is written. The
  // checkpoint is what a fallback and a preempted job's next launch load, and loading seals its rows
  // with fresh checksums: a corrupt row written here would be trusted from then on. A codeword
  // beyond repair ends this save with ScrubLossError (a fallback then goes to the checkpoint before).
  if (cfg_.scrub) {
    const auto done = full_scrub(step);
    if (!done.empty() && net_.rank() == 0)
      std::cerr << "ec-train: checkpoint of step " << step << ": scrub repaired " << done.size() << " row(s) first\n";
  }
  const double t0 = now_seconds();
  const int me = net_.rank(), N = net_.size();
  const auto& lay = store_.layout();
  const auto d = static_cast<std::size_t>(cfg_.dim);
  ckpt::Checkpoint c;
  c.meta.step = step;
  c.meta.world_size = N;
  c.meta.rank = me;
  c.meta.mode = ckpt::ParallelMode::mp;
  c.meta.model = model_name;
  c.meta.config = meta_config(preempted);
  c.meta.seed = cfg_.seed;
  c.meta.data_cursor = static_cast<std::uint64_t>(step) * static_cast<std::uint64_t>(cfg_.batch);
  c.meta.program_version = resil::version;
  for (int t = 0; t < cfg_.tables; ++t) {
    // The data store row by row, split into /model (weights) and /optimizer (accumulators).
    const auto store = store_.data_store(t);
    const std::size_t rows = lay.data_slots(me, t) * lay.rows_per_fragment();
    std::vector<float> w(rows * d), s(rows * d);
    for (std::size_t r = 0; r < rows; ++r) {
      std::memcpy(w.data() + r * d, store.data() + r * store_.row_bytes(), d * sizeof(float));
      std::memcpy(s.data() + r * d, store.data() + r * store_.row_bytes() + d * sizeof(float), d * sizeof(float));
    }
    c.model[emb_name(t)] = ckpt::Tensor::from<float>({rows, d}, w);
    c.optimizer[emb_name(t)]["sum"] = ckpt::Tensor::from<float>({rows, d}, s);
  }
  for (auto& p : net_model_.params()) {
    const auto h = p.value->to_host();
    c.model[p.name] = ckpt::Tensor::from<float>(shape_of(*p.value), h);
  }
  for (auto& [param, slots] : opt_.slots())
    for (auto& [name, t] : slots) {
      const auto h = t.to_host();
      c.optimizer[param][name] = ckpt::Tensor::from<float>(shape_of(t), h);
    }
  c.meta.optimizer_step = opt_.step();
  ckpt::save_sharded(cfg_.ckpt_dir, c, [&](const std::function<void()>& phase) { train::agree(net_, phase); });
  last_ckpt_ = std::max(last_ckpt_, step);
  ++ckpt_writes_;
  ckpt_write_s_ += now_seconds() - t0;
}

std::int64_t Engine::load_ckpt(const std::filesystem::path& manifest) {
  const int me = net_.rank();
  const auto man = ckpt::read_manifest(manifest);
  if (man.model != model_name || man.world_size != net_.size())
    throw MismatchError(manifest.string() + ": checkpoint of model '" + man.model + "' with " + std::to_string(man.world_size) +
                        " ranks; this job runs " + model_name + " with " + std::to_string(net_.size()));
  const auto file = manifest.parent_path() / man.shards.at(static_cast<std::size_t>(me));
  const auto c = ckpt::read(file, true);
  const auto cfg = nlohmann::json::parse(c.meta.config, nullptr, false);
  const auto want = nlohmann::json::parse(cfg_.computation_json(net_.size()));
  if (cfg.is_discarded() || !cfg.contains("computation") || cfg["computation"] != want)
    throw MismatchError(file.string() + ": written by a run with other settings (" + (cfg.is_discarded() ? std::string("?") : cfg.value("computation", nlohmann::json{}).dump()) +
                        "); this run: " + want.dump());
  const auto& lay = store_.layout();
  const auto d = static_cast<std::size_t>(cfg_.dim);
  for (int t = 0; t < cfg_.tables; ++t) {
    const auto w = c.model.find(emb_name(t));
    const auto so = c.optimizer.find(emb_name(t));
    const std::size_t rows = lay.data_slots(me, t) * lay.rows_per_fragment();
    if (w == c.model.end() || so == c.optimizer.end() || !so->second.count("sum") || w->second.numel() != rows * d ||
        so->second.at("sum").numel() != rows * d)
      throw MismatchError(file.string() + ": shard of table " + std::to_string(t) + " is missing or has the wrong size");
    const auto wv = w->second.as<float>();
    const auto sv = so->second.at("sum").as<float>();
    auto store = store_.data_store(t);
    for (std::size_t r = 0; r < rows; ++r) {
      std::memcpy(store.data() + r * store_.row_bytes(), wv.data() + r * d, d * sizeof(float));
      std::memcpy(store.data() + r * store_.row_bytes() + d * sizeof(float), sv.data() + r * d, d * sizeof(float));
    }
  }
  for (auto& p : net_model_.params()) {
    const auto it = c.model.find(p.name);
    load_tensor(*p.value, c, it == c.model.end() ? nullptr : &it->second, "/model/" + p.name, file);
  }
  for (auto& [param, slots] : opt_.slots())
    for (auto& [name, t] : slots) {
      const auto it = c.optimizer.find(param);
      const ckpt::Tensor* src = nullptr;
      if (it != c.optimizer.end() && it->second.count(name)) src = &it->second.at(name);
      load_tensor(t, c, src, "/optimizer/" + param + "/" + name, file);
    }
  if (c.meta.optimizer_step) {
    opt_.set_step(*c.meta.optimizer_step);
  } else if (c.meta.format_version == 1 && c.meta.rng_state.size() == 1) {
    opt_.set_step(static_cast<std::int64_t>(c.meta.rng_state[0]));  // version 1: ec-train kept it there
  } else {
    throw CorruptInputError(file.string() + ": /meta has no optimizer_step (format version " + std::to_string(c.meta.format_version) +
                            "), which an ec-train checkpoint needs");
  }
  last_ckpt_ = std::max(last_ckpt_, c.meta.step);
  return c.meta.step;
}

// --resume DIR|MANIFEST, or the newest checkpoint in --ckpt-dir when a preemption wrote it.
std::optional<std::filesystem::path> Engine::resume_source() {
  if (!cfg_.resume.empty()) {
    const std::filesystem::path p = cfg_.resume;
    if (std::filesystem::is_directory(p)) {
      auto l = ckpt::latest(p);
      if (l && !l->string().ends_with(".manifest.json")) {
        // The shards' own directory (ckpt-stepN/): its manifest sits beside it.
        auto q = p.lexically_normal();
        if (q.filename().empty()) q = q.parent_path();  // "ckpt-step00000010/"
        const auto m = std::filesystem::path(q.string() + ".manifest.json");
        if (!std::filesystem::exists(m))
          throw UsageError("--resume " + p.string() + ": holds checkpoint shards but no ec-train manifest; name the directory that holds the *.manifest.json files, or a manifest");
        l = m;
      }
      if (!l) throw UsageError("--resume " + p.string() + ": no complete checkpoint in that directory");
      if (!cfg_.seed_given) cfg_.seed = ckpt::read_meta(l->parent_path() / ckpt::read_manifest(*l).shards.at(0)).seed;
      return l;
    }
    if (!std::filesystem::exists(p)) throw UsageError("--resume " + p.string() + ": no such file or directory");
    if (!cfg_.seed_given) cfg_.seed = ckpt::read_meta(p.parent_path() / ckpt::read_manifest(p).shards.at(0)).seed;
    return p;
  }
  if (!std::filesystem::is_directory(cfg_.ckpt_dir)) return std::nullopt;
  const auto l = ckpt::latest(cfg_.ckpt_dir);
  if (!l) return std::nullopt;
  const auto meta = ckpt::read_meta(l->parent_path() / ckpt::read_manifest(*l).shards.at(0));
  const auto j = nlohmann::json::parse(meta.config, nullptr, false);
  if (j.is_discarded() || !j.value("preempted", false)) return std::nullopt;
  // Resumed once and completed (retire_preempt_source): the directory's history, not a run to continue.
  if (std::filesystem::exists(l->string() + ".resumed")) return std::nullopt;
  // Another configuration's (the seed aside when this run draws one): not this run's to continue.
  auto mine = nlohmann::json::parse(cfg_.computation_json(net_.size()));
  auto theirs = j.value("computation", nlohmann::json::object());
  if (!cfg_.seed_given) mine.erase("seed"), theirs.erase("seed");
  if (mine != theirs || j.value("ft", std::string()) != ft_name(cfg_.ft)) {
    if (net_.rank() == 0) std::cout << "ec-train: not resuming from the preemption checkpoint " << l->string() << ": written by a run with other settings\n";
    return std::nullopt;
  }
  if (!cfg_.seed_given) cfg_.seed = meta.seed;
  if (net_.rank() == 0) std::cout << "ec-train: resuming from the preemption checkpoint " << l->string() << "\n";
  preempt_source_ = *l;
  return l;
}

// A run that resumed from a preemption checkpoint on its own has completed: mark it so that the
// next run in this --ckpt-dir starts afresh instead of resuming it again (the checkpoint stays).
void Engine::retire_preempt_source() const {
  if (net_.rank() != 0 || preempt_source_.empty()) return;
  ckpt::fs::write_file_atomic(preempt_source_.string() + ".resumed", "{\"completed_steps\": " + std::to_string(cfg_.steps) + "}\n");
}

}  // namespace resil::ecrm
