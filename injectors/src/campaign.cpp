// The campaign engine: golden reference, per-trial inject -> run -> classify -> restore -> record.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>
#include <set>
#include <sstream>

#include "resil/ckpt/checkpoint.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/config.hpp"
#include "resil/core/error.hpp"
#include "resil/core/fd.hpp"
#include "resil/core/rng.hpp"
#include "resil/inject/names.hpp"
#include "resil/inject/campaign.hpp"
#include "resil/inject/storage.hpp"
#include "resil/inject/apply.hpp"
#include "resil/inject/plan.hpp"
#include "campaign_worker.hpp"

namespace resil::inject {

using nlohmann::json;
namespace stdfs = std::filesystem;

namespace {

inline constexpr const char* campaign_format = "resil-campaign/1";

/// A checkpoint as files: a single HDF5 file, or an mp manifest and its shard files.
struct CkptFiles {
  stdfs::path entry;               // what {ckpt} names
  std::vector<stdfs::path> files;  // HDF5 files, in shard order
  std::vector<std::string> rel;    // names relative to entry's directory ("" for a single file)
};

CkptFiles ckpt_files(const stdfs::path& p) {
  CkptFiles c;
  c.entry = p;
  if (p.string().ends_with(".manifest.json")) {
    for (const auto& s : ckpt::read_manifest(p).shards) {
      c.files.push_back(p.parent_path() / s);
      c.rel.push_back(s.string());
    }
  } else {
    c.files.push_back(p);
    c.rel.push_back("");
  }
  return c;
}

/// Copy `from` to `to`, replacing whatever is at `to` (a trial command may have left a directory or
/// a link there: copying through a link could overwrite the file it points to).
void replace_with_copy(const stdfs::path& from, const stdfs::path& to) {
  stdfs::remove_all(to);
  ckpt::fs::copy_file(from, to);
}

void copy_with_marker(const stdfs::path& from, const stdfs::path& to) {
  stdfs::create_directories(to.parent_path());
  replace_with_copy(from, to);
  const stdfs::path done = from.string() + ".done", to_done = to.string() + ".done";
  if (stdfs::exists(done)) replace_with_copy(done, to_done);
  else stdfs::remove_all(to_done);
}

/// Identity of the file at a path (not following links): a command that deletes, moves or links
/// over {ckpt} leaves another identity (or none) there.
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const FileId&) const = default;
};
FileId file_id(const stdfs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
  return {st.st_dev, st.st_ino};
}

/// Whether the small file `copy` (a manifest, a commit marker) still holds exactly `original`'s bytes.
bool same_small_file(const stdfs::path& original, const stdfs::path& copy) {
  try {
    return file_id(copy) != FileId{} && ckpt::fs::read_file(original) == ckpt::fs::read_file(copy);
  } catch (const Error&) {
    return false;
  }
}

/// Copy a golden checkpoint (file, or manifest + shards keeping their relative layout) into `dir`.
CkptFiles copy_checkpoint(const CkptFiles& src, const stdfs::path& dir) {
  CkptFiles dst;
  dst.entry = dir / src.entry.filename();
  dst.rel = src.rel;
  if (src.rel.size() == 1 && src.rel[0].empty()) {
    copy_with_marker(src.files[0], dst.entry);
    dst.files.push_back(dst.entry);
    return dst;
  }
  for (std::size_t i = 0; i < src.files.size(); ++i) {
    dst.files.push_back(dir / src.rel[i]);
    copy_with_marker(src.files[i], dst.files.back());
  }
  replace_with_copy(src.entry, dst.entry);
  return dst;
}

struct Selection {
  std::vector<Target> targets;
  std::vector<std::size_t> file;  // file index per target
  double bits() const {
    double b = 0;
    for (const auto& t : targets) b += static_cast<double>(t.weight());
    return b;
  }
};

Selection select_all(const CampaignConfig& c, const CkptFiles& files) {
  SelectOptions so;
  so.include = c.include;
  so.exclude = c.exclude;
  so.role = c.role == "model" ? Role::model : c.role == "optimizer" ? Role::optimizer : Role::all;
  so.bits = BitSpec::parse(c.bits.empty() ? "all" : c.bits);
  if (!c.as.empty()) {
    so.as = ckpt::dtype_from_name(c.as);
    if (!so.as) throw UsageError("inject.as: unknown dtype " + c.as);
  }
  Selection s;
  for (std::size_t f = 0; f < files.files.size(); ++f) {
    const auto tensors = open_storage(files.files[f].string(), Access::read)->tensors();  // the storage layer: any format
    std::vector<Target> t;
    try {
      t = select(tensors, so);
    } catch (const NothingSelectedError&) {
      if (files.files.size() == 1) throw;
      continue;  // a shard may hold nothing selected (e.g. an mp stage without parameters)
    }
    for (auto& x : t) {
      s.targets.push_back(std::move(x));
      s.file.push_back(f);
    }
  }
  if (s.targets.empty()) throw NothingSelectedError(files.entry.string() + ": the campaign's selection matched no stored bit");
  return s;
}

std::uint64_t field_mask(ckpt::DType t, const std::string& field) {
  const unsigned w = ckpt::dtype_bits(t);
  const auto fl = ckpt::float_layout(t);
  if (!fl) return field == "integer" ? width_mask(w) : 0;
  if (field == "sign") return std::uint64_t{1} << (w - 1);
  if (field == "exponent") return width_mask(fl->exponent_bits) << fl->mantissa_bits;
  if (field == "mantissa") return width_mask(fl->mantissa_bits);
  return 0;
}

std::string tensor_key(const Selection& s, const CkptFiles& f, std::size_t i) {
  return display_name(s.targets[i].info.path) + (f.rel[s.file[i]].empty() || f.files.size() == 1 ? "" : "@" + f.rel[s.file[i]]);
}

struct Stratum {
  std::string label;
  Selection sel;
};

/// The sampling strata: the selection split along one dimension (empty strata dropped).
std::vector<Stratum> make_strata(const CampaignConfig& c, const Selection& base, const CkptFiles& files) {
  std::vector<Stratum> out;
  auto add_filtered = [&](const std::string& label, const std::function<std::uint64_t(std::size_t)>& mask_of) {
    Stratum st{label, {}};
    for (std::size_t i = 0; i < base.targets.size(); ++i) {
      Target t = base.targets[i];
      t.allowed &= mask_of(i);
      t.nbits = static_cast<unsigned>(std::popcount(t.allowed));
      if (t.nbits == 0) continue;
      st.sel.targets.push_back(std::move(t));
      st.sel.file.push_back(base.file[i]);
    }
    if (!st.sel.targets.empty()) out.push_back(std::move(st));
  };
  const std::uint64_t all = ~std::uint64_t{0};
  if (c.strata == "none") {
    out.push_back({"all", base});
  } else if (c.strata == "field") {
    for (const std::string f : {"sign", "exponent", "mantissa", "integer"})
      add_filtered(f, [&](std::size_t i) { return field_mask(base.targets[i].dtype, f); });
  } else if (c.strata == "bit") {
    for (unsigned b = 0; b < 64; ++b) add_filtered(std::to_string(b), [&](std::size_t) { return std::uint64_t{1} << b; });
  } else {
    std::vector<std::string> labels;
    auto label_of = [&](std::size_t i) -> std::string {
      if (c.strata == "role") return role_of(base.targets[i].info.path);
      if (c.strata == "dtype") return std::string(ckpt::dtype_name(base.targets[i].dtype));
      return tensor_key(base, files, i);
    };
    for (std::size_t i = 0; i < base.targets.size(); ++i)
      if (std::find(labels.begin(), labels.end(), label_of(i)) == labels.end()) labels.push_back(label_of(i));
    for (const auto& l : labels) add_filtered(l, [&](std::size_t i) { return label_of(i) == l ? all : 0; });
  }
  return out;
}

FaultSpace space_of(const Selection& s, const CkptFiles& files) {
  FaultSpace sp;
  sp.total = s.bits();
  for (std::size_t i = 0; i < s.targets.size(); ++i) {
    const Target& t = s.targets[i];
    const double n = static_cast<double>(t.info.numel()), w = static_cast<double>(t.weight());
    const std::string dt(ckpt::dtype_name(t.dtype));
    for (unsigned b = 0; b < 64; ++b) {
      if (!((t.allowed >> b) & 1)) continue;
      sp.by["bit"][std::to_string(b)] += n;
      sp.by["field"][field_of(dt, b)] += n;
    }
    sp.by["role"][role_of(t.info.path)] += w;
    sp.by["dtype"][dt] += w;
    sp.by["tensor"][tensor_key(s, files, i)] += w;
  }
  return sp;
}

/// Append-only JSONL with an fsync per record. A torn last line (process killed mid-write) is cut
/// off when the file is opened, so the next record starts on a line of its own.
/// The file is locked (flock, exclusive) for the life of the object: two processes running the same
/// shard of a campaign would wipe each other's work copy and run every trial twice.
class ResultsFile {
public:
  ResultsFile(const stdfs::path& p, const std::string& who) : path_(p) {
    fd_.reset(::open(p.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0644));
    if (!fd_) throw IoError(p.string() + ": cannot open the results file: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_.get(), &st) != 0 || !S_ISREG(st.st_mode)) throw IoError(p.string() + ": the results file is not a regular file");
    if (::flock(fd_.get(), LOCK_EX | LOCK_NB) != 0) {
      const int e = errno;
      if (e == EWOULDBLOCK) throw UsageError(p.string() + ": " + who + " of this campaign is already running in another process");
      throw IoError(p.string() + ": cannot lock the results file: " + std::strerror(e));
    }
    const std::string text = ckpt::fs::read_file(p);
    if (!text.empty() && text.back() != '\n') {
      const auto keep = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
      if (::ftruncate(fd_.get(), static_cast<off_t>(keep)) != 0) throw IoError(p.string() + ": cannot cut a torn last line");
    }
  }
  ~ResultsFile() { close(); }
  /// In a job process: the descriptor is the campaign's (the lock stays with the campaign's).
  void close() noexcept { fd_.reset(); }
  ResultsFile(const ResultsFile&) = delete;
  ResultsFile& operator=(const ResultsFile&) = delete;
  void append(const std::string& line) {
    const std::string s = line + "\n";
    std::size_t done = 0;
    while (done < s.size()) {
      const ssize_t w = ::write(fd_.get(), s.data() + done, s.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) throw IoError(path_.string() + ": cannot append a record: " + std::strerror(errno));
      done += static_cast<std::size_t>(w);
    }
    if (::fsync(fd_.get()) != 0) throw IoError(path_.string() + ": fsync failed: " + std::strerror(errno));
  }

private:
  stdfs::path path_;
  Fd fd_;
};

/// The JSON in `p`; nothing when it is absent, unreadable, not JSON or not a regular file (a FIFO
/// would block the read forever: a trial command may leave anything at {out}).
std::optional<json> read_json_file(const stdfs::path& p) {
  std::error_code ec;
  if (!stdfs::is_regular_file(p, ec)) return std::nullopt;
  try {
    return json::parse(ckpt::fs::read_file(p));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

json flip_json(const FlipRecord& r, const std::string& file) {
  const bool fl = ckpt::dtype_is_float(r.dtype);
  json j = {{"index", r.index}, {"nd", r.nd}, {"dtype", ckpt::dtype_name(r.dtype)}, {"bit", r.anchor},
            {"mask", hex_bits(r.mask(), r.width)}, {"old", hex_bits(r.old_bits, r.width)}, {"new", hex_bits(r.new_bits, r.width)}};
  if (fl) {
    j["old_value"] = value_json(ckpt::word_to_double(r.dtype, r.old_bits));
    j["new_value"] = value_json(ckpt::word_to_double(r.dtype, r.new_bits));
  }
  if (!file.empty()) j["file"] = file;
  put_name(j, "dataset", r.dataset);  // names that are not UTF-8: escaped and flagged (names.hpp)
  return j;
}

std::string shard_name(const ShardSpec& s) { return "shard-" + std::to_string(s.index) + "-of-" + std::to_string(s.count); }

/// A file the campaign itself keeps (campaign.json, golden.json, the golden summary) must be a regular
/// file when it exists: anything else is refused rather than read as "absent" and overwritten.
void require_regular_or_absent(const stdfs::path& p) {
  std::error_code ec;
  const auto st = stdfs::status(p, ec);
  if (stdfs::exists(st) && !stdfs::is_regular_file(st)) throw IoError(p.string() + ": not a regular file");
}

/// Checksums of every dataset of the golden files: (file index, path) -> XXH64 of the stored bytes.
std::map<std::pair<std::size_t, std::string>, std::uint64_t> golden_checksums(const CkptFiles& f) {
  std::map<std::pair<std::size_t, std::string>, std::uint64_t> m;
  for (std::size_t i = 0; i < f.files.size(); ++i) {
    auto h = ckpt::h5::open_file(f.files[i].string(), ckpt::h5::Mode::read);
    for (const auto& d : ckpt::list_datasets(h))
      if (d.dtype) m[{i, d.path}] = ckpt::dataset_checksum(h, d.path);
  }
  return m;
}

/// The final weights named by a summary's "last_checkpoint", when it is a readable checkpoint (a
/// trial may name a file it never finished or damaged: then the weights are unknown, not an error).
std::optional<std::string> final_weights_of(const json& summary) {
  if (!summary.is_object() || !summary.contains("last_checkpoint") || !summary.at("last_checkpoint").is_string()) return std::nullopt;
  const std::string last = summary.at("last_checkpoint").get<std::string>();
  std::error_code ec;
  if (last.empty() || !stdfs::is_regular_file(last, ec)) return std::nullopt;
  try {
    return model_weights_hash(last);
  } catch (const Error&) {
    return std::nullopt;
  }
}

/// The golden reference (OUT/golden.json, else the given summary, else a golden run of the command
/// on `work`; `ran` tells the caller the command has had the work copy).
Golden golden_reference(const CampaignConfig& c, const RunOptions& o, const CkptFiles& work, const stdfs::path& wdir, bool& ran) {
  ran = false;
  const stdfs::path gpath = o.out / "golden.json";
  require_regular_or_absent(gpath);
  if (auto j = read_json_file(gpath)) {
    try {
      return Golden::from_json(*j);
    } catch (const json::exception& e) {
      throw CorruptInputError(gpath.string() + ": not a golden record: " + e.what());
    }
  }
  Golden g;
  if (!c.golden_summary.empty()) {
    require_regular_or_absent(c.golden_summary);
    auto s = read_json_file(c.golden_summary);
    if (!s || !s->is_object()) throw IoError(c.golden_summary + ": cannot read the golden summary JSON");
    if (!s->contains(c.metric) || !s->at(c.metric).is_number())
      throw UsageError(c.golden_summary + ": golden summary has no numeric \"" + c.metric + "\"");
    g.summary = *s;
    g.metric = s->at(c.metric).get<double>();
    if (!c.golden_final_checkpoint.empty()) g.final_weights = model_weights_hash(c.golden_final_checkpoint);
  } else {
    // The golden run: the trial command on the unaltered private copy.
    const stdfs::path scratch = wdir / "scratch", out = wdir / "summary.json";
    stdfs::remove_all(scratch);
    stdfs::create_directories(scratch);
    stdfs::remove(out);
    const auto argv = substitute(c.command, {{"ckpt", work.entry.string()}, {"out", out.string()}, {"dir", scratch.string()},
                                             {"trial", "golden"}, {"seed", std::to_string(c.seed)}});
    const auto r = run_command(argv, c.timeout_s, o.out / "golden.log");
    ran = true;
    if (r.timed_out || r.signal || r.exit_code != 0)
      throw UsageError("campaign " + c.name + ": the golden run failed (" +
                       (r.timed_out ? std::string("timeout") : r.signal ? "signal " + std::to_string(r.signal) : "exit " + std::to_string(r.exit_code)) +
                       "); see " + (o.out / "golden.log").string());
    const auto s = read_json_file(out);
    if (!s || !s->is_object() || !s->contains(c.metric) || !s->at(c.metric).is_number())
      throw UsageError("campaign " + c.name + ": the golden run wrote no summary with a numeric \"" + c.metric + "\" to {out}");
    g.summary = *s;
    g.metric = s->at(c.metric).get<double>();
    g.wall_seconds = r.wall_seconds;
    g.final_weights = final_weights_of(*s);
    stdfs::remove_all(scratch);
  }
  ckpt::fs::write_file_atomic(gpath, g.to_json().dump(2) + "\n");
  return g;
}

/// The campaign writes OUT/campaign.json, OUT/golden.json and OUT/golden.log and deletes and rewrites
/// OUT/work/ and OUT/results/: an input there (the golden checkpoint, its summary) would be lost.
void refuse_inputs_inside_outputs(const CampaignConfig& c, const CkptFiles& golden, const stdfs::path& out) {
  std::error_code ec;
  if (stdfs::exists(out, ec) && !stdfs::is_directory(out, ec)) throw UsageError("--out " + out.string() + ": exists and is not a directory");
  auto canon = [](const stdfs::path& p) {
    std::error_code e;
    const auto canonical = stdfs::weakly_canonical(stdfs::absolute(p, e), e);
    return e ? stdfs::absolute(p).lexically_normal() : canonical;
  };
  const stdfs::path o = canon(out);
  std::vector<stdfs::path> inputs{golden.entry};
  for (const auto& f : golden.files) {
    inputs.push_back(f);
    inputs.push_back(f.string() + ".done");
  }
  if (!c.golden_summary.empty()) inputs.push_back(c.golden_summary);
  if (!c.golden_final_checkpoint.empty()) inputs.push_back(c.golden_final_checkpoint);
  for (const auto& in : inputs) {
    const stdfs::path p = canon(in);
    auto inside = [&](const stdfs::path& d) {
      auto [a, b] = std::mismatch(d.begin(), d.end(), p.begin(), p.end());
      return a == d.end();
    };
    for (const char* owned : {"work", "results", "campaign.json", "golden.json", "golden.log"})
      if (inside(o / owned))
        throw UsageError(in.string() + ": an input of the campaign lies in " + (o / owned).string() + ", which the campaign writes or deletes; use another --out");
  }
}

/// Everything one job needs to run trials: the shared campaign state (read-only) and its own
/// private checkpoint copy, scratch directory and (in worker mode) trial worker.
struct TrialContext {
  const CampaignConfig& c;
  const Golden& golden;
  const FaultModel& fmodel;
  const std::vector<Stratum>& strata;
  const CkptFiles& golden_files;
  const std::map<std::pair<std::size_t, std::string>, std::uint64_t>& gsum;
  ShardSpec shard;
  stdfs::path wdir;
  CkptFiles work;
  std::vector<FileId> work_ids;
  std::unique_ptr<detail::TrialWorker> worker;

  void prepare() {
    for (const auto& f : work.files) work_ids.push_back(file_id(f));
    if (c.mode == "worker")
      worker = std::make_unique<detail::TrialWorker>(c.command[0], golden_files.entry.string(), wdir / "worker.log", std::max(c.timeout_s, 60.0));
  }

  /// The record of trial t. In worker mode a worker that dies without a result is restarted and the
  /// trial run again (from golden bytes, as restored); a second death is recorded as crash.
  json run(std::uint64_t t) {
    if (auto rec = attempt(t, !worker)) return *rec;
    worker->restart();
    return *attempt(t, true);
  }

  /// One run of trial t; nothing when the worker died and `last` is false (restored, no record).
  std::optional<json> attempt(std::uint64_t t, bool last) {
  const stdfs::path scratch = wdir / "scratch", sum_path = wdir / "summary.json", tlog = wdir / "trial.log";
  const Stratum& st = strata[t % strata.size()];
  PlanOptions popt;
  popt.seed = c.seed;
  popt.trial = t;
  popt.flips = c.flips;
  popt.model = fmodel;
  popt.finite = c.finite;
  // --finite reads the candidates' words from this job's copy (still the golden bytes here).
  std::map<std::size_t, std::unique_ptr<Storage>> readers;
  const auto sampled = sample_sites(st.sel.targets, popt, [&](std::uint32_t tg, std::vector<std::uint64_t> idx, const Storage::BlockFn& fn) {
    auto& r = readers[st.sel.file[tg]];
    if (!r) r = open_storage(work.files[st.sel.file[tg]].string(), Access::read);
    r->edit(st.sel.targets[tg].info.path, std::move(idx), fn);
  });
  readers.clear();
  const auto& sites = sampled.sites;
  // Plan per file: the sites of each file against that file's targets.
  std::map<std::size_t, std::vector<FlipRecord>> recs;
  {
    std::map<std::size_t, std::pair<std::vector<Target>, std::vector<Site>>> per;
    std::map<std::uint32_t, std::uint32_t> remap;
    for (const auto& s : sites) {
      const std::size_t f = st.sel.file[s.target];
      auto& [tg, ss] = per[f];
      if (!remap.count(s.target)) {
        remap[s.target] = static_cast<std::uint32_t>(tg.size());
        tg.push_back(st.sel.targets[s.target]);
      }
      ss.push_back({remap[s.target], s.index, s.bit});
    }
    for (auto& [f, ts] : per) recs[f] = plan(work.files[f].string(), ts.first, ts.second, popt);
  }
  CkptFiles trial_files = work;
  if (c.copies) {
    stdfs::remove_all(wdir / "copy");
    trial_files = copy_checkpoint(golden_files, wdir / "copy");
  }
  // The log of every file is durable before the file changes (revert works after a kill).
  json flips = json::array();
  bool nonfinite = false;
  std::set<std::pair<std::size_t, std::string>> touched;
  std::map<std::string, std::string> labels;
  for (const auto& [f, rv] : recs) {
    LogHeader h;
    h.tool_version = resil::version;
    h.seed = c.seed;
    h.trial = t;
    h.model = fmodel.name();
    h.input = h.output = trial_files.files[f].string();
    h.in_place = true;
    h.planned = rv.size();
    h.finite = c.finite;
    h.rejected = sampled.rejected;  // the trial's, in each of its files' logs
    const stdfs::path pending = wdir / ("pending-" + std::to_string(f) + ".jsonl");
    stdfs::remove_all(pending);  // never write through whatever an earlier command left there
    LogWriter lw(pending);
    lw.line(header_line(h));
    lw.records(rv);
    lw.close();
    for (const auto& r : rv) {
      flips.push_back(flip_json(r, golden_files.files.size() > 1 ? golden_files.rel[f] : ""));
      touched.insert({f, r.dataset});
      if (ckpt::dtype_is_float(r.dtype) && !std::isfinite(ckpt::word_to_double(r.dtype, r.new_bits))) nonfinite = true;
      if (labels.empty()) {
        const std::string dt(ckpt::dtype_name(r.dtype));
        labels = {{"field", field_of(dt, r.anchor)}, {"bit", std::to_string(r.anchor)}, {"role", role_of(r.dataset)}, {"dtype", dt},
                  {"tensor", display_name(r.dataset) + (golden_files.files.size() > 1 ? "@" + golden_files.rel[f] : "")}};
      }
    }
    apply(trial_files.files[f].string(), rv, Direction::forward);
  }
  stdfs::remove_all(scratch);
  stdfs::create_directories(scratch);
  stdfs::remove(sum_path);
  const auto argv = substitute(c.command, {{"ckpt", trial_files.entry.string()}, {"out", sum_path.string()}, {"dir", scratch.string()},
                                           {"trial", std::to_string(t)}, {"seed", std::to_string(derive_seed(c.seed, t))}});
  std::optional<CommandResult> ran;
  if (worker) {
    // The worker forks ckpt-train with argv[1..]: the request carries the whole argv.
    ran = worker->run(argv, c.timeout_s, tlog);
  } else {
    ran = run_command(argv, c.timeout_s, tlog);
  }
  const bool worker_died = !ran;
  CommandResult r = ran ? *ran : CommandResult{};
  Classified k;
  if (worker_died) {
    r.output_tail = detail::tail_of(tlog, 400);
    k.outcome = Outcome::crash;
    k.note = "the trial worker died twice without a result";
  } else {
    r.summary = read_json_file(sum_path);
    k = classify(c, golden, r, nonfinite, std::nullopt);
    if (k.outcome == Outcome::masked && golden.final_weights && r.summary)
      if (const auto fw = final_weights_of(*r.summary)) k = classify(c, golden, r, nonfinite, fw);
  }
  // Restore: exact revert from the log, verified against the golden checksums. The command may
  // have rewritten, truncated, deleted or replaced {ckpt}: then the file is copied again from
  // golden and the trial recorded like any other (never an abort: a re-run would stop there again).
  std::string restore = "copy";
  bool damaged = false;
  if (c.copies) {
    stdfs::remove_all(wdir / "copy");
  } else {
    restore = "reverted";
    for (std::size_t f = 0; f < work.files.size(); ++f) {
      bool ok = file_id(work.files[f]) == work_ids[f];
      if (ok) {
        try {
          if (const auto it = recs.find(f); it != recs.end()) apply(work.files[f].string(), it->second, Direction::revert, true);
          auto h = ckpt::h5::open_file(work.files[f].string(), ckpt::h5::Mode::read);
          for (const auto& [key, sum] : gsum) {
            if (key.first != f || (c.verify == "touched" && !touched.count(key))) continue;
            if (ckpt::dataset_checksum(h, key.second) != sum) ok = false;
          }
        } catch (const Error&) {
          ok = false;
          damaged = true;
        }
      } else {
        damaged = true;
      }
      if (!ok) {  // the command altered the file itself (or a revert failed): start again from golden
        copy_with_marker(golden_files.files[f], work.files[f]);
        work_ids[f] = file_id(work.files[f]);
        restore = "recopied";
      }
      const stdfs::path marker = golden_files.files[f].string() + ".done", work_marker = work.files[f].string() + ".done";
      const bool marker_ok = stdfs::exists(marker) ? same_small_file(marker, work_marker) : !stdfs::exists(stdfs::symlink_status(work_marker));
      if (!marker_ok) {
        copy_with_marker(golden_files.files[f], work.files[f]);
        work_ids[f] = file_id(work.files[f]);
        restore = "recopied";
        damaged = true;
      }
    }
    if (work.entry != work.files[0] && !same_small_file(golden_files.entry, work.entry)) {  // the mp manifest
      replace_with_copy(golden_files.entry, work.entry);
      restore = "recopied";
      damaged = true;
    }
  }
  if (damaged) k.note += std::string(k.note.empty() ? "" : "; ") + "the command deleted, replaced or damaged {ckpt}: copied again from golden";
  for (const auto& [f, rv] : recs) stdfs::remove(wdir / ("pending-" + std::to_string(f) + ".jsonl"));
  stdfs::remove_all(scratch);
  if (worker_died && !last) return std::nullopt;

  json rec = {{"trial", t},
              {"shard", std::to_string(shard.index) + "/" + std::to_string(shard.count)},
              {"seed", c.seed},
              {"trial_seed", derive_seed(c.seed, t)},
              {"stratum", st.label},
              {"class", outcome_name(k.outcome)},
              {"note", k.note},
              {"exit_code", r.timed_out || worker_died ? json(nullptr) : json(r.exit_code)},
              {"signal", r.signal ? json(r.signal) : json(nullptr)},
              {"metric", k.metric ? json(*k.metric) : json(nullptr)},
              {"golden_metric", golden.metric},
              {"delta", k.delta ? json(*k.delta) : json(nullptr)},
              {"n_flips", flips.size()},
              {"flips", flips},
              {"strata", labels},
              {"injected_nonfinite", nonfinite},
              {"restore", restore},
              {"wall_seconds", r.wall_seconds}};
  if (r.summary && r.summary->is_object()) {
    json s;
    for (const char* key : {"final_loss", "test_loss", "test_accuracy", "test_auc", "nan_detected", "nan_step", "steps", "error"})
      if (r.summary->contains(key)) s[key] = r.summary->at(key);
    rec["summary"] = s;
  }
  if (k.outcome == Outcome::crash || k.outcome == Outcome::load_failure || k.outcome == Outcome::hang) rec["output_tail"] = r.output_tail;
  return rec;
  }
};

}  // namespace

FaultSpace fault_space(const CampaignConfig& c) {
  const auto files = ckpt_files(c.checkpoint);
  return space_of(select_all(c, files), files);
}

std::map<std::uint64_t, json> read_results(const stdfs::path& out) {
  std::map<std::uint64_t, json> m;
  const stdfs::path dir = out / "results";
  std::error_code ec;
  if (!stdfs::is_directory(dir, ec)) return m;
  // The planned trial ids, when the campaign directory says (a record beyond them is not ours).
  std::optional<std::uint64_t> trials;
  if (const auto meta = read_json_file(out / "campaign.json"); meta && meta->is_object()) {
    const json cfg = meta->value("config", json());
    if (cfg.is_object() && cfg.contains("trials") && cfg.at("trials").is_number_unsigned()) trials = cfg.at("trials").get<std::uint64_t>();
  }
  std::vector<stdfs::path> files;
  for (const auto& e : stdfs::directory_iterator(dir))
    if (e.path().extension() == ".jsonl") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    // A FIFO would block the read forever; a directory cannot hold records.
    if (!stdfs::is_regular_file(f, ec)) throw IoError(f.string() + ": a results file that is not a regular file");
    const std::string text = ckpt::fs::read_file(f);
    std::istringstream in(text);
    std::string line;
    std::size_t lineno = 0, pos = 0;
    while (std::getline(in, line)) {
      ++lineno;
      pos += line.size() + 1;
      if (line.empty()) continue;
      json j;
      try {
        j = json::parse(line);
        if (!j.is_object() || !j.contains("trial")) throw std::runtime_error("not a trial record");
      } catch (const std::exception& e) {
        if (pos > text.size()) break;  // torn last line of an interrupted run: that trial re-runs
        throw CorruptInputError(f.string() + ":" + std::to_string(lineno) + ": malformed record: " + e.what());
      }
      const std::string where = f.string() + ":" + std::to_string(lineno) + ": ";
      if (!j.at("trial").is_number_unsigned()) throw CorruptInputError(where + "trial id " + j.at("trial").dump() + " is not an integer >= 0");
      const auto t = j.at("trial").get<std::uint64_t>();
      if (trials && t >= *trials)
        throw CorruptInputError(where + "trial id " + std::to_string(t) + " is outside the campaign's " + std::to_string(*trials) +
                                " trials (0.." + std::to_string(*trials - 1) + "): not a record of this campaign");
      // An unknown class would be dropped from every rate: refuse rather than report wrong statistics.
      if (!j.contains("class") || !j.at("class").is_string() || !outcome_from_name(j.at("class").get<std::string>()))
        throw CorruptInputError(where + "trial " + std::to_string(t) + " has no known outcome class (" +
                                (j.contains("class") ? j.at("class").dump() : std::string("none")) + ")");
      m.emplace(t, std::move(j));
    }
  }
  return m;
}

RunSummary run_campaign(const CampaignConfig& c, const RunOptions& o, const TrialCallback& on_trial) {
  if (o.out.empty()) throw UsageError("campaign: --out DIR is required");
  c.validate("campaign " + c.name);
  if (o.jobs < 1 || o.jobs > max_jobs) throw UsageError("campaign: --jobs " + std::to_string(o.jobs) + ": need 1 to " + std::to_string(max_jobs));
  if (o.shard.count == 0 || o.shard.index >= o.shard.count) throw UsageError("campaign: shard " + shard_name(o.shard) + ": need 0 <= i < n");
  const auto golden_files = ckpt_files(c.checkpoint);
  for (const auto& f : golden_files.files) {
    std::error_code ec;
    if (!stdfs::exists(f, ec)) throw IoError(f.string() + ": golden checkpoint file not found");
    if (!stdfs::is_regular_file(f, ec)) throw IoError(f.string() + ": the golden checkpoint is not a regular file");
  }
  refuse_inputs_inside_outputs(c, golden_files, o.out);
  const FaultModel fmodel = FaultModel::parse(c.model);
  const Selection base = select_all(c, golden_files);
  const auto strata = make_strata(c, base, golden_files);
  const FaultSpace space = space_of(base, golden_files);

  stdfs::create_directories(o.out / "results");
  // One process per shard at a time: a second one would wipe the first's work copy under it.
  RunSummary rs;
  rs.results = o.out / "results" / (shard_name(o.shard) + ".jsonl");
  ResultsFile results(rs.results, "shard " + std::to_string(o.shard.index) + "/" + std::to_string(o.shard.count));
  // campaign.json: the configuration and fault space every shard and the report agree on.
  const json meta = {{"format", campaign_format}, {"tool_version", resil::version}, {"config", c.to_json()}, {"space", space.to_json()},
                     {"strata", json::array()}};
  json meta_full = meta;
  for (const auto& s : strata) meta_full["strata"].push_back({{"label", s.label}, {"bits", s.sel.bits()}});
  require_regular_or_absent(o.out / "campaign.json");
  if (auto old = read_json_file(o.out / "campaign.json")) {
    json old_cfg = old->is_object() ? old->value("config", json()) : json();
    // How trials run ("mode") is not part of what they compute: a campaign may continue in another mode.
    json new_cfg = meta_full["config"];
    if (old_cfg.is_object()) old_cfg.erase("mode");
    new_cfg.erase("mode");
    if (old_cfg != new_cfg)
      throw UsageError(o.out.string() + " already holds a campaign with a different configuration (" +
                       (old_cfg.is_object() && old_cfg.contains("name") ? old_cfg.at("name").dump() : std::string("?")) + "); use another --out");
  } else {
    ckpt::fs::write_file_atomic(o.out / "campaign.json", meta_full.dump(2) + "\n");
  }

  // Trial ids are visited lazily (t = i, i + n, ...): nothing is allocated per planned trial, so
  // 1e15 planned trials cost no memory; only the records already written are held.
  const auto done_before = read_results(o.out);
  rs.planned = o.shard.trials_of(c.trials);
  for (const auto& [t, r] : done_before) {
    if (t % o.shard.count != o.shard.index) continue;
    ++rs.skipped;
    ++rs.counts[r.at("class").get<std::string>()];
  }
  const std::uint64_t left = rs.planned - rs.skipped;
  const std::uint64_t to_run = o.max_trials ? std::min(left, *o.max_trials) : left;

  // A private copy of the golden checkpoint for this shard; never the user's file.
  const stdfs::path wdir = o.out / "work" / shard_name(o.shard);
  stdfs::remove_all(wdir);
  stdfs::create_directories(wdir);
  CkptFiles work = copy_checkpoint(golden_files, wdir / "ckpt");
  bool golden_ran = false;
  const Golden golden = golden_reference(c, o, work, wdir, golden_ran);
  if (golden_ran) {  // the command has had the work copy: start the trials from golden bytes again
    stdfs::remove_all(wdir / "ckpt");
    work = copy_checkpoint(golden_files, wdir / "ckpt");
  }
  auto cleanup = [&] {
    if (o.keep_work) return;
    std::error_code ec;
    stdfs::remove_all(wdir, ec);
    stdfs::remove(o.out / "work", ec);  // only when no other shard is working there
  };
  if (to_run == 0) {
    cleanup();
    return rs;
  }
  const auto gsum = golden_checksums(golden_files);
  auto make_context = [&](const stdfs::path& dir) {
    return std::make_unique<TrialContext>(TrialContext{c, golden, fmodel, strata, golden_files, gsum, o.shard, dir, {}, {}, {}});
  };
  // Trial ids in order, skipping those already recorded, until to_run have been handed out.
  std::uint64_t next_t = o.shard.index, handed = 0;
  auto next = [&]() -> std::optional<std::uint64_t> {
    if (handed == to_run) return std::nullopt;
    while (done_before.count(next_t)) next_t += o.shard.count;
    const std::uint64_t t = next_t;
    next_t += o.shard.count;
    ++handed;
    return t;
  };
  std::uint64_t done = rs.skipped;
  auto record = [&](const json& rec) {
    results.append(rec.dump());
    ++rs.ran;
    ++rs.counts[rec.at("class").get<std::string>()];
    ++done;
    if (on_trial) on_trial(rec, done, rs.planned, rs.counts);
  };
  const unsigned jobs = static_cast<unsigned>(std::min<std::uint64_t>(o.jobs, to_run));
  if (jobs <= 1) {
    auto ctx = make_context(wdir);
    ctx->work = work;
    ctx->prepare();
    while (const auto t = next()) record(ctx->run(*t));
  } else {
    // Each job process works in OUT/work/<shard>/job-<k>/ on its own copy of the golden checkpoint;
    // only this process appends records (one writer, one lock, one fsync per record).
    std::unique_ptr<TrialContext> ctx;
    detail::run_jobs(
        jobs, next,
        [&](unsigned k) -> detail::TrialRunner {
          const stdfs::path dir = wdir / ("job-" + std::to_string(k));
          stdfs::remove_all(dir);
          stdfs::create_directories(dir);
          ctx = make_context(dir);
          ctx->work = copy_checkpoint(golden_files, dir / "ckpt");
          ctx->prepare();
          return [&](std::uint64_t t) { return ctx->run(t); };
        },
        record, [&] { results.close(); });
  }
  cleanup();
  return rs;
}

}  // namespace resil::inject
