// A campaign's results files: append, read back (resil/campaign/results.hpp).
#include "resil/campaign/results.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <span>
#include <sstream>
#include <vector>

#include "resil/ckpt/fs.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/core/error.hpp"
#include "resil/campaign/campaign.hpp"
#include "files.hpp"

namespace resil::inject {

using nlohmann::json;
namespace stdfs = std::filesystem;

ResultsFile::ResultsFile(const stdfs::path& p, const std::string& who) : path_(p) {
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

void ResultsFile::append(const std::string& line) {
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

std::string campaign_id(json config) {
  if (config.is_object()) config.erase("mode");
  const std::string text = config.dump();
  return ckpt::hex_u64(ckpt::xxh64(std::as_bytes(std::span(text.data(), text.size()))));
}

std::map<std::uint64_t, json> read_results(const stdfs::path& out) {
  std::map<std::uint64_t, json> m;
  const stdfs::path dir = out / "results";
  std::error_code ec;
  if (!stdfs::is_directory(dir, ec)) return m;
  // The planned trial ids, when the campaign directory says (a record beyond them is not ours),
  // and the campaign's seed (a record of another seed is another campaign's, copied in).
  std::optional<std::uint64_t> trials, seed;
  std::optional<std::string> id;
  if (const auto meta = detail::read_json_file(out / "campaign.json"); meta && meta->is_object()) {
    const json cfg = meta->value("config", json());
    if (cfg.is_object()) id = campaign_id(cfg);
    if (cfg.is_object() && cfg.contains("trials") && cfg.at("trials").is_number_unsigned()) trials = cfg.at("trials").get<std::uint64_t>();
    if (cfg.is_object() && cfg.contains("seed") && cfg.at("seed").is_number_unsigned()) seed = cfg.at("seed").get<std::uint64_t>();
  }
  std::map<std::uint64_t, std::string> first_seen;  // trial -> "file:line" of its first record
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
        // A trial writes records a few levels deep; a deeper one would overflow the stack of the
        // recursive comparison and dump of json values later (a few hundred KB nested 200,000 deep).
        j = json::parse(line, [](int depth, json::parse_event_t, json&) {
          if (depth > 64) throw std::runtime_error("nested deeper than 64 levels");
          return true;
        });
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
      // The fields the report reads, typed as a trial writes them (a wrong type failed later, naming no file).
      for (const char* key : {"wall_seconds", "cpu_seconds"})
        if (j.contains(key) && !j.at(key).is_number())
          throw CorruptInputError(where + "trial " + std::to_string(t) + ": \"" + key + "\" " + j.at(key).dump() + " is not a number");
      if (j.contains("strata")) {
        const auto& st = j.at("strata");
        if (!st.is_object()) throw CorruptInputError(where + "trial " + std::to_string(t) + ": \"strata\" is not an object");
        for (const auto& [k, v] : st.items())
          if (!v.is_string()) throw CorruptInputError(where + "trial " + std::to_string(t) + ": \"strata\" \"" + k + "\" " + v.dump() + " is not a string");
      }
      if (seed && j.contains("seed") && !(j.at("seed").is_number_unsigned() && j.at("seed").get<std::uint64_t>() == *seed))
        throw CorruptInputError(where + "trial " + std::to_string(t) + " was drawn with seed " + j.at("seed").dump() + ", this campaign's is " +
                                std::to_string(*seed) + ": a record of another campaign (move it out of " + dir.string() + ")");
      if (id && j.contains("campaign") && j.at("campaign") != *id)
        throw CorruptInputError(where + "trial " + std::to_string(t) + " belongs to campaign " + j.at("campaign").dump() + ", not to this one (" + *id +
                                ", from " + (out / "campaign.json").string() + "): a record of another campaign (move it out of " + dir.string() + ")");
      if (const auto it = m.find(t); it != m.end()) {
        // The same trial twice: harmless when both say the same (a merged copy of the records);
        // otherwise one is foreign or the trial did not repeat, and either would bias the rates.
        for (const char* k : {"trial_seed", "flips", "class", "metric"})
          if (it->second.value(k, json()) != j.value(k, json()))
            throw CorruptInputError(where + "trial " + std::to_string(t) + " is recorded again with another \"" + k + "\" than in " +
                                    first_seen[t] + ": a foreign record, or a trial that did not repeat; keep one of them");
        continue;
      }
      first_seen[t] = f.string() + ":" + std::to_string(lineno);
      m.emplace(t, std::move(j));
    }
  }
  return m;
}

}  // namespace resil::inject
