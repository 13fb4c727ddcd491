// The run's configuration and summary as JSON: the config stored in the checkpoint's /meta (read
// back strictly: a damaged one is corrupt input naming the field) and the summary of a command.
#include "resil/train/trainer.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <vector>

#include "resil/ckpt/fs.hpp"
#include "resil/config.hpp"
#include "run.hpp"

namespace resil::train {

namespace stdfs = std::filesystem;
using nlohmann::json;

std::string TrainConfig::to_json() const {
  const json j = {{"model", name(model)}, {"parallel", name(parallel)}, {"epochs", epochs}, {"seed", seed}, {"batch", batch},
                  {"micro_batches", micro_batches},
                  {"optimizer", {{"kind", name(optimizer.kind)}, {"lr", optimizer.lr}, {"momentum", optimizer.momentum},
                                 {"beta1", optimizer.beta1}, {"beta2", optimizer.beta2}, {"eps", optimizer.eps},
                                 {"weight_decay", optimizer.weight_decay}, {"lr_decay", optimizer.lr_decay},
                                 {"warmup", optimizer.warmup}, {"decay_steps", optimizer.decay_steps},
                                 {"min_lr_ratio", optimizer.min_lr_ratio}, {"clip", optimizer.clip}}},
                  {"threads", threads}, {"numeric", {{"id", numeric_id}, {"detail", numeric_detail}}}, {"device", name(device)}, {"reduce", name(reduce)}, {"data", data}, {"limit", limit}, {"test_limit", test_limit},
                  {"synthetic_samples", synthetic_samples}, {"ckpt_every", ckpt_every}};
  json out = j;
  if (model == ModelKind::gpt)
    out["gpt"] = {{"layers", gpt.layers}, {"heads", gpt.heads}, {"width", gpt.width}, {"context", gpt.context}, {"seq", seq},
                  {"precision", name(precision)}};
  return out.dump();
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
  // Any u64 (--seed, --limit, --test-limit take the whole range): -1 or 2^64 is not one.
  auto unsigned_integer = [&](const json& o, const std::string& key) {
    const json& v = o.at(key);
    if (!v.is_number_unsigned()) throw bad(key, v, "an integer in 0..18446744073709551615");
    return v.get<std::uint64_t>();
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
  // A name from E's table (resil/train/options.hpp); `dflt` stands in for a field older files lack.
  auto choice = [&]<class E>(const json& o, const std::string& key, std::optional<E> dflt, const std::string& prefix = "") -> E {
    if (!o.contains(key) && dflt) return *dflt;
    const json& v = o.at(key);
    if (v.is_string())
      if (const auto e = from_name<E>(v.get<std::string>())) return *e;
    std::string list;
    for (const auto& [n, e] : Names<E>::table) list += (list.empty() ? "" : " | ") + std::string(n);
    throw bad(prefix + key, v, "one of " + list);
  };
  try {
    // nlohmann keeps the last of two equal keys: a config with "batch" written twice trained at
    // the second one. No run writes a key twice (the safetensors reader refuses them too).
    std::vector<std::set<std::string>> keys;  // the keys seen in each open object
    const json j = json::parse(text, [&](int, json::parse_event_t ev, json& parsed) {
      if (ev == json::parse_event_t::object_start) keys.emplace_back();
      else if (ev == json::parse_event_t::object_end) keys.pop_back();
      else if (ev == json::parse_event_t::key && !keys.back().insert(parsed.get<std::string>()).second)
        throw CorruptInputError(at + ": key " + parsed.dump(-1, ' ', false, json::error_handler_t::replace) + " appears twice in one object");
      return true;
    });
    if (!j.is_object()) throw CorruptInputError(at + ": not a JSON object");
    TrainConfig c;
    c.model = choice(j, "model", std::optional<ModelKind>());
    c.parallel = choice(j, "parallel", std::optional<ckpt::ParallelMode>());
    c.epochs = static_cast<int>(integer(j, "epochs", 1, 100000));
    c.seed = unsigned_integer(j, "seed");
    c.batch = static_cast<int>(integer(j, "batch", 1, 1 << 20));
    c.micro_batches = static_cast<int>(integer(j, "micro_batches", 1, 4096));
    const json& o = j.at("optimizer");
    if (!o.is_object()) throw bad("optimizer", o, "an object");
    const float nan = std::nanf("");  // no default: required
    c.optimizer = {choice(o, "kind", std::optional<OptimizerKind>(), "optimizer."),
                   real(o, "lr", 0, std::numeric_limits<float>::max(), true, false, nan),
                   real(o, "momentum", 0, 1, false, false, nan),
                   real(o, "beta1", 0, 1, false, true, nan),
                   real(o, "beta2", 0, 1, false, true, nan),
                   real(o, "eps", 0, 1, false, false, nan),
                   real(o, "weight_decay", 0, 1, false, false, nan),
                   real(o, "lr_decay", 0, 1, true, false, 1.0f)};
    // Written before the schedule and clipping existed: none of them.
    c.optimizer.warmup = o.contains("warmup") ? integer(o, "warmup", 0, kMaxStep, "optimizer.") : 0;
    c.optimizer.decay_steps = o.contains("decay_steps") ? integer(o, "decay_steps", 0, kMaxStep, "optimizer.") : 0;
    c.optimizer.min_lr_ratio = real(o, "min_lr_ratio", 0, 1, false, false, 0.1f);
    c.optimizer.clip = real(o, "clip", 0, std::numeric_limits<float>::max(), false, false, 0.0f);
    c.threads = static_cast<int>(integer(j, "threads", 1, 256));
    if (j.contains("numeric")) {
      const json& n = j.at("numeric");
      if (!n.is_object() || !n.contains("id") || !n.at("id").is_string() || n.at("id").get<std::string>().empty())
        throw bad("numeric", n, "an object with a non-empty string \"id\"");
      c.numeric_id = n.at("id").get<std::string>();
      c.numeric_detail = n.contains("detail") && n.at("detail").is_string() ? n.at("detail").get<std::string>() : "";
    } else {
      // Written before the numeric configuration was recorded: OpenBLAS's sgemm, whose kernel (and
      // so the bits) depended on the CPU model and OPENBLAS_CORETYPE.
      c.numeric_id = "blas-" + (j.contains("blas") && j.at("blas").is_string() ? j.at("blas").get<std::string>() : std::string("unknown"));
      c.numeric_detail = "not recorded";
    }
    c.device = choice(j, "device", std::optional(DeviceKind::cpu));
    c.reduce = choice(j, "reduce", std::optional(ReduceKind::host));  // written before --reduce existed: the host path
    c.data = j.at("data").get<std::string>();
    c.limit = unsigned_integer(j, "limit");
    c.test_limit = unsigned_integer(j, "test_limit");
    c.synthetic_samples = static_cast<std::uint64_t>(integer(j, "synthetic_samples", 1, std::int64_t{1} << 30));
    c.ckpt_every = static_cast<int>(integer(j, "ckpt_every", 1, 100000));
    if (c.model == ModelKind::gpt) {
      const json& g = j.at("gpt");
      if (!g.is_object()) throw bad("gpt", g, "an object");
      c.gpt.layers = static_cast<int>(integer(g, "layers", 1, 256, "gpt."));
      c.gpt.heads = static_cast<int>(integer(g, "heads", 1, 1024, "gpt."));
      c.gpt.width = static_cast<int>(integer(g, "width", 1, 16384, "gpt."));
      c.gpt.context = static_cast<int>(integer(g, "context", 1, 65536, "gpt."));
      c.seq = static_cast<int>(integer(g, "seq", 1, c.gpt.context, "gpt."));
      if (c.gpt.width % c.gpt.heads != 0) throw bad("gpt.heads", g.at("heads"), "a divisor of gpt.width");
      c.precision = choice(g, "precision", std::optional(Precision::fp32), "gpt.");
    }
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
            {"test_loss", std::isfinite(test_loss) ? json(test_loss) : json(nullptr)},
            {"numeric", {{"id", numeric_id}, {"detail", numeric_detail}}}, {"test_accuracy", std::isfinite(test_accuracy) ? json(test_accuracy) : json(nullptr)},
            {"nan_detected", nan_detected}, {"nan_step", nan_step}, {"preempted", preempted}, {"wall_seconds", wall_seconds},
            {"last_checkpoint", last_checkpoint}, {"exit_code", exit_code}, {"error", error},
            {"program_version", resil::version}};
  if (test_auc >= 0) j["test_auc"] = test_auc;
  if (model == "gpt" && std::isfinite(test_loss)) j["test_bpb"] = bits_per_byte(test_loss);
  if (!mpi_wait.empty()) j["mpi_wait"] = mpi_wait;
  if (has_loss_curve) {
    json c = json::array();
    for (const double v : loss_curve) c.push_back(std::isfinite(v) ? json(v) : json(nullptr));
    j["loss_curve"] = c;
  }
  if (divergence)
    j["replica_divergence"] = {{"ranks_differing", divergence->ranks_differing}, {"elements_differing", divergence->elements_differing},
                               {"elements", divergence->elements},
                               {"max_abs_difference", std::isfinite(divergence->max_abs_difference) ? json(divergence->max_abs_difference) : json(nullptr)}};
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

Summary base_summary(const TrainConfig& c, const Comm& comm) {
  Summary s;
  s.model = name(c.model);
  s.parallel = name(c.parallel);
  s.world_size = comm.size();
  if (comm.size() > 1) s.mpi_wait = poll_name(comm.poll_us());
  s.seed = c.seed;
  return s;
}
}  // namespace resil::train
