// A campaign's results (docs/reference/campaign.md): one JSONL file of trial records per shard in
// OUT/results/, appended one fsynced record at a time, read back (all shards merged) by a re-run,
// which skips the trials already recorded, and by the report.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "resil/core/fd.hpp"

namespace resil::inject {

/// Append-only JSONL with an fsync per record. A torn last line (process killed mid-write) is cut
/// off when the file is opened, so the next record starts on a line of its own.
/// The file is locked (flock, exclusive) for the life of the object: two processes running the same
/// shard of a campaign would wipe each other's work copy and run every trial twice.
class ResultsFile {
public:
  /// Open (create) and lock `p`: IoError when it cannot be opened or is not a regular file,
  /// UsageError naming `who` when another process holds it.
  ResultsFile(const std::filesystem::path& p, const std::string& who);
  ~ResultsFile() { close(); }
  ResultsFile(const ResultsFile&) = delete;
  ResultsFile& operator=(const ResultsFile&) = delete;
  /// In a job process: the descriptor is the campaign's (the lock stays with the campaign's).
  void close() noexcept { fd_.reset(); }
  /// Append one record (a JSON line without its newline) and fsync; IoError.
  void append(const std::string& line);

private:
  std::filesystem::path path_;
  Fd fd_;
};

/// Every record of OUT/results/*.jsonl, by trial id (a truncated last line is ignored; duplicates
/// keep the first). A record whose trial id is not an integer below the campaign's `trials`
/// (OUT/campaign.json), or whose class is not an outcome name, makes the statistics untrustworthy:
/// CorruptInputError naming the file and line. A results entry that is not a regular file: IoError.
std::map<std::uint64_t, nlohmann::json> read_results(const std::filesystem::path& out);

/// The identity a record carries as "campaign": XXH64 of the configuration (campaign.json's
/// "config", without "mode"). read_results refuses a record whose identity is not OUT's (a shard
/// file of another campaign with the same seed); records written before it existed have none.
std::string campaign_id(nlohmann::json config);

}  // namespace resil::inject
