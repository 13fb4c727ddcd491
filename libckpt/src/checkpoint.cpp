#include "resil/ckpt/checkpoint.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>

#include "resil/config.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/ckpt/h5.hpp"
#include "resil/ckpt/hash.hpp"

namespace resil::ckpt {

namespace stdfs = std::filesystem;
using nlohmann::json;

std::string_view mode_name(ParallelMode m) noexcept {
  switch (m) {
    case ParallelMode::dp: return "dp";
    case ParallelMode::mp: return "mp";
    case ParallelMode::tp: return "tp";
    default: return "none";
  }
}

ParallelMode mode_from_name(std::string_view s) {
  if (s == "none") return ParallelMode::none;
  if (s == "dp") return ParallelMode::dp;
  if (s == "mp") return ParallelMode::mp;
  if (s == "tp") return ParallelMode::tp;
  throw UsageError("unknown parallel mode '" + std::string(s) + "' (expected none, dp, mp or tp)");
}

std::string TpSlice::to_json() const {
  json r = json::array();
  for (const auto& [lo, hi] : ranges) r.push_back({lo, hi});
  return json({{"global_shape", global_shape}, {"dim", dim}, {"ranges", r}}).dump();
}

TpSlice TpSlice::from_json(const std::string& text, const std::string& where) {
  TpSlice s;
  try {
    const json j = json::parse(text);
    s.global_shape = j.at("global_shape").get<Shape>();
    s.dim = j.at("dim").get<std::size_t>();
    for (const auto& r : j.at("ranges")) s.ranges.emplace_back(r.at(0).get<std::uint64_t>(), r.at(1).get<std::uint64_t>());
  } catch (const json::exception& e) {
    throw CorruptInputError(where + ": " + tp_slice_attr + " is not a tp slice: " + e.what());
  }
  if (s.dim >= s.global_shape.size() || s.ranges.empty())
    throw CorruptInputError(where + ": " + tp_slice_attr + " " + text + " names no dimension of its global shape");
  for (const auto& [lo, hi] : s.ranges)
    if (lo >= hi || hi > s.global_shape[s.dim])
      throw CorruptInputError(where + ": " + tp_slice_attr + " " + text + " has a range outside its global shape");
  // A global index held twice would have two local elements: the map from local to global index
  // (a flip's global_index) is one-to-one only for disjoint ranges.
  auto sorted = s.ranges;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i].first < sorted[i - 1].second)
      throw CorruptInputError(where + ": " + tp_slice_attr + " " + text + " has overlapping ranges");
  return s;
}

Shape TpSlice::local_shape() const {
  Shape l = global_shape;
  l[dim] = 0;
  for (const auto& [lo, hi] : ranges) l[dim] += hi - lo;
  return l;
}

std::uint64_t TpSlice::global_index(std::uint64_t local) const {
  const Shape l = local_shape();
  std::uint64_t inner = 1;  // elements per index of `dim`
  for (std::size_t d = dim + 1; d < l.size(); ++d) inner *= l[d];
  const std::uint64_t outer = local / (l[dim] * inner), rest = local % (l[dim] * inner);
  std::uint64_t i = rest / inner;
  const std::uint64_t within = rest % inner;
  std::uint64_t g = 0;
  for (const auto& [lo, hi] : ranges) {
    if (i < hi - lo) {
      g = lo + i;
      break;
    }
    i -= hi - lo;
  }
  return (outer * global_shape[dim] + g) * inner + within;
}

void TpSlice::place(const Tensor& local, Tensor& global) const {
  if (local.shape() != local_shape() || global.shape() != global_shape || local.dtype() != global.dtype())
    throw MismatchError("a tp slice of " + shape_string(local_shape()) + " in " + shape_string(global_shape) + " does not fit tensors " +
                        shape_string(local.shape()) + " and " + shape_string(global.shape()));
  const std::size_t es = dtype_size(local.dtype());
  std::uint64_t inner = es;
  for (std::size_t d = dim + 1; d < global_shape.size(); ++d) inner *= global_shape[d];
  std::uint64_t outer = 1;
  for (std::size_t d = 0; d < dim; ++d) outer *= global_shape[d];
  const std::uint64_t local_rows = local_shape()[dim];
  const std::byte* src = local.bytes().data();
  std::byte* dst = global.bytes().data();
  for (std::uint64_t o = 0; o < outer; ++o) {
    std::uint64_t li = 0;
    for (const auto& [lo, hi] : ranges) {
      std::memcpy(dst + (o * global_shape[dim] + lo) * inner, src + (o * local_rows + li) * inner, (hi - lo) * inner);
      li += hi - lo;
    }
  }
}

void write(hid_t file, const Checkpoint& c, const WriteOptions& opt) {
  std::vector<std::pair<std::string, const Tensor*>> all;
  for (const auto& [name, t] : c.model) all.emplace_back("/model/" + name, &t);
  for (const auto& [param, slots] : c.optimizer)
    for (const auto& [slot, t] : slots) all.emplace_back("/optimizer/" + param + "/" + slot, &t);
  // Checksums are computed on a second thread while HDF5 writes the data (HDF5 is not
  // thread-safe, but the hash thread only reads tensor memory): hashing overlaps the I/O instead
  // of adding a pass over the data to the save time.
  auto sums = std::async(std::launch::async, [&all] {
    std::vector<std::uint64_t> out;
    out.reserve(all.size());
    for (const auto& [path, t] : all) out.push_back(xxh64(t->bytes()));
    return out;
  });
  for (const auto& [path, t] : all) write_tensor_data(file, path, *t, opt);
  const std::vector<std::uint64_t> checksums = sums.get();
  for (std::size_t i = 0; i < all.size(); ++i) set_checksum(file, all[i].first, checksums[i]);
  for (const auto& [param, slice] : c.slices) {
    std::vector<std::string> paths = {"/model/" + param};
    if (auto it = c.optimizer.find(param); it != c.optimizer.end())
      for (const auto& [slot, t] : it->second) paths.push_back("/optimizer/" + param + "/" + slot);
    for (const auto& path : paths) {
      if (!h5::exists(file, path)) continue;
      h5::Dataset d = h5::open_dataset(file, path, "");
      h5::write_attr_str(d, tp_slice_attr, slice);
    }
  }
  h5::Group meta(RESIL_H5_CHECK(H5Gcreate2(file, "/meta", H5P_DEFAULT, h5::untimed_create_plist(H5P_GROUP_CREATE), H5P_DEFAULT), "create /meta"));
  const Meta& m = c.meta;
  h5::write_attr_i64(meta, "format_version", m.format_version);
  h5::write_attr_i64(meta, "step", m.step);
  h5::write_attr_i64(meta, "epoch", m.epoch);
  h5::write_attr_i64(meta, "world_size", m.world_size);
  h5::write_attr_i64(meta, "rank", m.rank);
  h5::write_attr_str(meta, "mode", std::string(mode_name(m.mode)));
  h5::write_attr_str(meta, "stage_layout", m.stage_layout);
  h5::write_attr_str(meta, "model", m.model);
  h5::write_attr_str(meta, "config", m.config);
  h5::write_attr_u64(meta, "seed", m.seed);
  h5::write_attr_u64(meta, "data_cursor", m.data_cursor);
  h5::write_attr_str(meta, "program_version", m.program_version.empty() ? std::string(resil::version) : m.program_version);
  if (m.optimizer_step) h5::write_attr_i64(meta, "optimizer_step", *m.optimizer_step);
  write_tensor(file, "/meta/rng_state",
               Tensor::from<std::uint64_t>({m.rng_state.size()}, std::span<const std::uint64_t>(m.rng_state)));
}

namespace {

Meta read_meta_from(hid_t f, const std::string& fname) {
  if (!h5::exists(f, "/meta")) throw CorruptInputError(fname + ": not a resil checkpoint (no /meta group)");
  h5::SilenceErrors quiet;
  // The link exists: a /meta that does not open as a group is damaged or not ours (a dataset).
  const hid_t gid = H5Gopen2(f, "/meta", H5P_DEFAULT);
  if (gid < 0) throw CorruptInputError(fname + ": /meta cannot be opened as a group (damaged HDF5, or not a group): " + h5::error_stack_text());
  h5::Group g(gid);
  Meta m;
  try {
    m.format_version = h5::read_attr_i64(g, "format_version");
    if (m.format_version > format_version)
      throw CorruptInputError("format version " + std::to_string(m.format_version) + " is newer than this resil reads (" +
                              std::to_string(format_version) + ")");
    m.step = h5::read_attr_i64(g, "step");
    m.epoch = h5::read_attr_i64(g, "epoch");
    m.world_size = h5::read_attr_i64(g, "world_size");
    m.rank = h5::read_attr_i64(g, "rank");
    m.mode = mode_from_name(h5::read_attr_str(g, "mode"));
    m.stage_layout = h5::read_attr_str(g, "stage_layout");
    m.model = h5::read_attr_str(g, "model");
    m.config = h5::read_attr_str(g, "config");
    m.seed = h5::read_attr_u64(g, "seed");
    m.data_cursor = h5::read_attr_u64(g, "data_cursor");
    m.program_version = h5::read_attr_str(g, "program_version");
    if (H5Aexists(g, "optimizer_step") > 0) m.optimizer_step = h5::read_attr_i64(g, "optimizer_step");
  } catch (const UsageError& e) {
    throw CorruptInputError(fname + ": /meta: " + e.what());
  } catch (const Error& e) {
    throw CorruptInputError(fname + ": /meta: " + e.what());
  }
  if (h5::exists(f, "/meta/rng_state")) {
    const Tensor r = read_tensor(f, "/meta/rng_state", fname);
    if (r.dtype() != DType::u64 || r.rank() != 1) throw CorruptInputError(fname + ": /meta/rng_state must be a 1-D u64 dataset");
    auto v = r.as<std::uint64_t>();
    m.rng_state.assign(v.begin(), v.end());
  }
  return m;
}

std::string marker_of(const stdfs::path& p) { return p.string() + ".done"; }

}  // namespace

Meta read_meta(const stdfs::path& p) {
  h5::File f = h5::open_file(p.string(), h5::Mode::read);
  return read_meta_from(f, p.string());
}

Checkpoint read(const stdfs::path& p, bool verify_checksums) {
  const std::string fname = p.string();
  h5::File f = h5::open_file(fname, h5::Mode::read);
  Checkpoint c;
  c.meta = read_meta_from(f, fname);
  for (const auto& info : list_datasets(f)) {
    if (verify_checksums && info.checksum && dataset_checksum(f, info.path) != *info.checksum)
      throw CorruptInputError(fname + ": dataset " + info.path + ": checksum mismatch (stored " + std::to_string(*info.checksum) + ")");
    if (info.path.starts_with("/model/")) {
      c.model.emplace(info.path.substr(7), read_tensor(f, info.path, fname));
      h5::Dataset d = h5::open_dataset(f, info.path, fname);
      if (h5::has_attr(d, tp_slice_attr)) c.slices.emplace(info.path.substr(7), h5::read_attr_str(d, tp_slice_attr));
    } else if (info.path.starts_with("/optimizer/")) {
      const std::string rest = info.path.substr(11);
      const auto slash = rest.rfind('/');
      if (slash == std::string::npos) throw CorruptInputError(fname + ": dataset " + info.path + ": expected /optimizer/<param>/<slot>");
      c.optimizer[rest.substr(0, slash)].emplace(rest.substr(slash + 1), read_tensor(f, info.path, fname));
    }
  }
  return c;
}

std::string file_name_for_step(std::int64_t step) {
  char b[64];
  std::snprintf(b, sizeof b, "ckpt-step%08lld.h5", static_cast<long long>(step));
  return b;
}

bool is_checkpoint_name_in(const stdfs::path& p, const stdfs::path& dir) {
  // Absolute first: weakly_canonical leaves a relative path with no existing prefix as it is
  // ("ck/x", but "/cwd/ck/x" for "./ck/x"), and the two spellings would not compare.
  std::error_code ec;
  const auto rel = stdfs::weakly_canonical(stdfs::absolute(p, ec), ec).lexically_relative(stdfs::weakly_canonical(stdfs::absolute(dir, ec), ec));
  return !ec && !rel.empty() && rel.begin()->string().starts_with("ckpt-step");
}

stdfs::path save(const stdfs::path& path, const Checkpoint& c, const WriteOptions& opt) {
  const stdfs::path tmp = fs::temp_sibling(path);
  fs::RemoveOnError guard(tmp);
  {
    h5::File f = h5::create_new_file(tmp.string());
    write(f, c, opt);
    RESIL_H5_CHECK(H5Fflush(f, H5F_SCOPE_LOCAL), tmp.string() + ": flush");
  }
  fs::fsync_file(tmp);
  // An older marker for the same name must not vouch for the new file: drop it before the rename.
  std::error_code ec;
  if (stdfs::remove(marker_of(path), ec)) fs::fsync_dir(path.parent_path());
  fs::durable_rename(tmp, path);
  guard.keep();
  const json marker = {{"file", path.filename().string()},
                       {"bytes", stdfs::file_size(path)},
                       {"step", c.meta.step},
                       {"epoch", c.meta.epoch},
                       {"rank", c.meta.rank}};
  fs::write_file_atomic(marker_of(path), marker.dump() + "\n");
  return path;
}

bool is_committed(const stdfs::path& path) {
  std::error_code ec;
  if (!stdfs::is_regular_file(path, ec) || !stdfs::is_regular_file(marker_of(path), ec)) return false;
  try {
    const json m = json::parse(fs::read_file(marker_of(path)));
    return m.at("bytes").get<std::uintmax_t>() == stdfs::file_size(path);
  } catch (const std::exception&) {
    return false;
  }
}

stdfs::path shard_path(const stdfs::path& dir, std::int64_t step, int rank) {
  char b[64];
  std::snprintf(b, sizeof b, "ckpt-step%08lld", static_cast<long long>(step));
  return dir / b / ("rank-" + std::to_string(rank) + ".h5");
}

stdfs::path manifest_path(const stdfs::path& dir, std::int64_t step) {
  char b[64];
  std::snprintf(b, sizeof b, "ckpt-step%08lld.manifest.json", static_cast<long long>(step));
  return dir / b;
}

void write_manifest(const stdfs::path& p, const Manifest& m) {
  json shards = json::array();
  for (const auto& s : m.shards) shards.push_back(s.string());
  const json j = {{"format_version", m.format_version}, {"step", m.step},        {"epoch", m.epoch},
                  {"world_size", m.world_size},         {"mode", mode_name(m.mode)}, {"model", m.model},
                  {"shards", shards}};
  fs::write_file_atomic(p, j.dump(2) + "\n");
}

Manifest read_manifest(const stdfs::path& p) {
  try {
    const json j = json::parse(fs::read_file(p));
    Manifest m;
    m.format_version = j.at("format_version").get<std::int64_t>();
    if (m.format_version > format_version)  // as in /meta: a newer writer may mean something else by the rest
      throw CorruptInputError("format version " + std::to_string(m.format_version) + " is newer than this resil reads (" +
                              std::to_string(format_version) + ")");
    m.step = j.at("step").get<std::int64_t>();
    m.epoch = j.at("epoch").get<std::int64_t>();
    m.world_size = j.at("world_size").get<std::int64_t>();
    m.mode = mode_from_name(j.at("mode").get<std::string>());
    m.model = j.at("model").get<std::string>();
    for (const auto& s : j.at("shards")) {
      // Shards lie below the manifest's directory, each once: readers open them relative to it and
      // campaigns copy, flip and remove them, so "/abs/x.h5" or "../x.h5" would reach files the
      // manifest does not own (a campaign removed a user's file through one).
      const stdfs::path sp = s.get<std::string>();
      const auto norm = sp.lexically_normal();
      if (sp.empty() || sp.is_absolute() || norm.empty() || *norm.begin() == ".." || norm == ".")
        throw CorruptInputError("shard path '" + sp.string() + "' is not a relative path below the manifest's directory");
      for (const auto& other : m.shards)
        if (other.lexically_normal() == norm) throw CorruptInputError("shard '" + sp.string() + "' is listed twice");
      m.shards.push_back(sp);
    }
    if (static_cast<std::int64_t>(m.shards.size()) != m.world_size)
      throw CorruptInputError("lists " + std::to_string(m.shards.size()) + " shards for world size " + std::to_string(m.world_size));
    // Nor one file under two names (a linked directory): it would count in a fault space twice.
    for (std::size_t a = 0; a < m.shards.size(); ++a)
      for (std::size_t b = a + 1; b < m.shards.size(); ++b) {
        std::error_code ea, eb;
        const auto pa = p.parent_path() / m.shards[a], pb = p.parent_path() / m.shards[b];
        if (stdfs::exists(pa, ea) && stdfs::exists(pb, eb) && fs::same_file(pa, pb))
          throw CorruptInputError("shards '" + m.shards[a].string() + "' and '" + m.shards[b].string() + "' are the same file");
      }
    return m;
  } catch (const IoError&) {
    throw;
  } catch (const std::exception& e) {
    throw CorruptInputError(p.string() + ": malformed manifest: " + e.what());
  }
}

stdfs::path save_sharded(const stdfs::path& dir, const Checkpoint& shard, const std::function<void(const std::function<void()>&)>& collective,
                         const WriteOptions& opt) {
  const Meta& m = shard.meta;
  const auto rank = static_cast<int>(m.rank);
  collective([&] {
    if (rank != 0) return;
    const auto step_dir = shard_path(dir, m.step, 0).parent_path();
    std::error_code ec;
    stdfs::create_directories(step_dir, ec);
    if (ec) throw IoError("cannot create checkpoint directory " + step_dir.string() + ": " + ec.message());
  });
  collective([&] { save(shard_path(dir, m.step, rank), shard, opt); });
  const auto out = manifest_path(dir, m.step);
  collective([&] {  // every shard is committed before the manifest vouches for the set
    if (rank != 0) return;
    Manifest man;
    man.step = m.step;
    man.epoch = m.epoch;
    man.world_size = m.world_size;
    man.mode = m.mode;
    man.model = m.model;
    for (int r = 0; r < m.world_size; ++r) man.shards.push_back(shard_path(dir, m.step, r).lexically_relative(dir));
    write_manifest(out, man);
  });
  return out;
}

bool manifest_complete(const stdfs::path& manifest) {
  try {
    const Manifest m = read_manifest(manifest);
    for (const auto& s : m.shards)
      if (!is_committed(manifest.parent_path() / s)) return false;
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::optional<stdfs::path> latest(const stdfs::path& dir) {
  std::error_code ec;
  if (!stdfs::is_directory(dir, ec)) throw IoError(dir.string() + ": not a directory");
  std::optional<stdfs::path> best;
  std::int64_t best_step = -1;
  for (const auto& e : stdfs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name[0] == '.') continue;  // temporaries
    std::int64_t step = -1;
    if (name.ends_with(".manifest.json")) {
      if (!manifest_complete(e.path())) continue;
      step = read_manifest(e.path()).step;
    } else if (name.ends_with(".h5")) {
      if (!is_committed(e.path())) continue;
      try {
        step = json::parse(fs::read_file(marker_of(e.path()))).at("step").get<std::int64_t>();
      } catch (const std::exception&) {
        continue;
      }
    } else {
      continue;
    }
    if (step > best_step || (step == best_step && best && e.path() > *best)) {
      best_step = step;
      best = e.path();
    }
  }
  return best;
}

}  // namespace resil::ckpt
