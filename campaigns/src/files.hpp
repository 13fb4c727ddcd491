// Internal to the campaign engine: a checkpoint as files (one HDF5 file, or an mp manifest and its
// shards), private copies of it, the identity of a file at a path, and the small JSON files the
// campaign reads (which a trial command may have replaced by anything).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace resil::inject::detail {

/// A checkpoint as files: a single HDF5 file, or an mp manifest and its shard files.
struct CkptFiles {
  std::filesystem::path entry;               // what {ckpt} names
  std::vector<std::filesystem::path> files;  // HDF5 files, in shard order
  std::vector<std::string> rel;              // names relative to entry's directory ("" for a single file)
};
CkptFiles ckpt_files(const std::filesystem::path& p);

/// Copy `from` to `to`, replacing whatever is at `to` (a trial command may have left a directory or
/// a link there: copying through a link could overwrite the file it points to).
void replace_with_copy(const std::filesystem::path& from, const std::filesystem::path& to);
/// replace_with_copy, and the same for the commit marker `from`.done (removed at `to` when `from` has none).
void copy_with_marker(const std::filesystem::path& from, const std::filesystem::path& to);
/// Copy a golden checkpoint (file, or manifest + shards keeping their relative layout) into `dir`.
CkptFiles copy_checkpoint(const CkptFiles& src, const std::filesystem::path& dir);

/// Identity of the file at a path (not following links): a command that deletes, moves or links
/// over {ckpt} leaves another identity (or none) there.
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const FileId&) const = default;
};
FileId file_id(const std::filesystem::path& p);
/// Whether the small file `copy` (a manifest, a commit marker) still holds exactly `original`'s bytes.
bool same_small_file(const std::filesystem::path& original, const std::filesystem::path& copy);

/// The JSON in `p`; nothing when it is absent, unreadable, not JSON or not a regular file (a FIFO
/// would block the read forever: a trial command may leave anything at {out}).
std::optional<nlohmann::json> read_json_file(const std::filesystem::path& p);
/// A trial's summary as its command left it at {out}: the JSON, or why there is none (`problem`,
/// naming {out} by its placeholder: the same words in every job's record). Non-finite numbers as
/// Python's json module writes them (NaN, Infinity, -Infinity) are read as such (parse_summary).
struct SummaryFile {
  std::optional<nlohmann::json> json;
  std::string problem;
};
SummaryFile read_summary(const std::filesystem::path& p);
/// A file the campaign itself keeps (campaign.json, golden.json, the golden summary) must be a regular
/// file when it exists: anything else is refused (IoError) rather than read as "absent" and overwritten.
void require_regular_or_absent(const std::filesystem::path& p);

}  // namespace resil::inject::detail
