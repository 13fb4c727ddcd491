// Sets of files opened as one checkpoint (file_set.hpp).
#include "resil/inject/file_set.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "extent_storage.hpp"
#include "format_storages.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/core/error.hpp"
#include "resil/core/fd.hpp"
#include "resil/inject/formats/dcp.hpp"
#include "resil/inject/formats/shard_index.hpp"

namespace resil::inject {

namespace stdfs = std::filesystem;

namespace {

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The regular files and links of a directory, by name, sorted.
std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  stdfs::directory_iterator it(dir, ec);
  if (ec) throw IoError(dir + ": cannot list the directory: " + ec.message());
  for (const auto& e : it) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> shard_indexes_in(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& n : names)
    if (n.size() > 11 && n.ends_with(".index.json")) out.push_back(n);
  return out;
}

// A member of a set: a regular file in `dir`, or a symbolic link to a regular file owned by
// `owner` (the set's owner). `what` says why it is read ("shard named by INDEX").
void check_member(const stdfs::path& dir, const std::string& name, uid_t owner, const std::string& what) {
  const stdfs::path p = dir / name;
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0)
    throw IoError(p.string() + ": " + what + ": " + std::strerror(errno));
  if (S_ISLNK(st.st_mode)) {
    if (::stat(p.c_str(), &st) != 0) throw IoError(p.string() + ": " + what + ": a link to a missing file: " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) throw IoError(p.string() + ": " + what + ": a link to something that is not a regular file");
    if (st.st_uid != owner)
      throw IoError(p.string() + ": " + what + ": a link to a file of another user (uid " + std::to_string(st.st_uid) +
                    ", the set's owner is uid " + std::to_string(owner) + "): refused");
  } else if (!S_ISREG(st.st_mode)) {
    throw IoError(p.string() + ": " + what + ": not a regular file");
  }
  ckpt::fs::require_input_file(p);
}

uid_t owner_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw IoError(path + ": " + std::strerror(errno));
  return st.st_uid;
}

FileSet shard_set_of_index(const stdfs::path& index) {
  ckpt::fs::require_input_file(index);
  FileSet s;
  s.format = Format::shards;
  s.dir = index.parent_path().empty() ? stdfs::path(".") : index.parent_path();
  s.index = index.filename().string();
  const Mapping m = map_for_parsing(index.string());
  const auto ix = parse_named(index.string(), [&] { return formats::parse_shard_index(formats::bytes_of(m.data(), m.size())); });
  s.files = ix.files;
  return s;
}

// A DCP directory: `.metadata` and the data files it names, and any other `*.distcp` there (a rank
// with nothing to write still writes its file).
FileSet dcp_set(const std::string& path) {
  if (!is_directory(path)) throw IoError(path + ": a torch.distributed.checkpoint is named by its directory");
  FileSet s;
  s.format = Format::dcp;
  s.dir = path;
  s.index = ".metadata";
  const std::string md = (s.dir / s.index).string();
  ckpt::fs::require_input_file(md);
  const Mapping m = map_for_parsing(md);
  const auto meta = parse_named(md, [&] { return formats::parse_dcp_metadata(formats::bytes_of(m.data(), m.size())); });
  const uid_t owner = owner_of(path);
  for (const auto& f : meta.files) check_member(s.dir, f, owner, "data file named by " + md);
  s.files = meta.files;
  for (const auto& n : names_in(path))
    if (n.ends_with(".distcp") && !std::binary_search(meta.files.begin(), meta.files.end(), n)) {
      check_member(s.dir, n, owner, "data file of the checkpoint");
      s.files.push_back(n);
    }
  std::sort(s.files.begin(), s.files.end());
  return s;
}

}  // namespace

std::vector<std::string> FileSet::all() const {
  std::vector<std::string> out;
  if (!index.empty()) out.push_back(index);
  out.insert(out.end(), files.begin(), files.end());
  return out;
}

std::optional<Format> directory_format(const std::string& dir) {
  const auto names = names_in(dir);
  if (std::find(names.begin(), names.end(), ".metadata") != names.end()) return Format::dcp;
  const auto indexes = shard_indexes_in(names);
  if (indexes.size() > 1)
    throw UsageError(dir + ": holds " + std::to_string(indexes.size()) + " shard indexes (" + indexes[0] + ", " + indexes[1] +
                     (indexes.size() > 2 ? ", ..." : "") + "): name the index file of the checkpoint meant");
  if (!indexes.empty()) return Format::shards;
  for (const auto& n : names)
    if (n.ends_with(".safetensors")) return Format::shards;
  return std::nullopt;
}

bool is_file_set(const std::string& path) {
  if (is_directory(path)) return true;
  // A file: a shard index when its content parses as one (any other JSON file is a file).
  try {
    if (detect_format(path) != Format::shards) return false;
    const Mapping m = map_for_parsing(path);
    (void)formats::parse_shard_index(formats::bytes_of(m.data(), m.size()));
    return true;
  } catch (const Error&) {
    return false;
  }
}

FileSet file_set(const std::string& path, Format format) {
  if (format == Format::automatic) format = resolve_format(path, format);
  if (format == Format::dcp) return dcp_set(path);
  if (format != Format::shards) throw UsageError(path + ": not a set of files (format " + std::string(format_name(format)) + ")");
  FileSet s;
  if (is_directory(path)) {
    const auto names = names_in(path);
    const auto indexes = shard_indexes_in(names);
    if (indexes.size() > 1) directory_format(path);  // throws, naming them
    if (indexes.size() == 1) {
      s = shard_set_of_index(stdfs::path(path) / indexes[0]);
    } else {
      s.dir = path;
      for (const auto& n : names)
        if (n.ends_with(".safetensors")) s.files.push_back(n);
      if (s.files.empty())
        throw IoError(path + ": is a directory without a shard index (*.index.json) or *.safetensors files, not a checkpoint");
    }
  } else {
    s = shard_set_of_index(path);
  }
  const uid_t owner = owner_of(s.dir.string());
  const std::string what = s.index.empty() ? "shard of the directory" : "shard named by " + (s.dir / s.index).string();
  for (const auto& f : s.files) check_member(s.dir, f, owner, what);
  return s;
}

void require_input(const std::string& path) {
  if (is_directory(path)) {
    if (::access(path.c_str(), R_OK | X_OK) != 0) throw IoError(path + ": cannot read the directory: " + std::strerror(errno));
    return;
  }
  ckpt::fs::require_input_file(path);
}

std::string checkpoint_hash(const std::string& path, ckpt::FileHash h) {
  if (h == ckpt::FileHash::none) return {};
  if (!is_file_set(path)) return ckpt::file_hash(path, h);
  const FileSet s = file_set(path);
  std::string listing;
  for (const auto& n : s.all()) listing += ckpt::file_hash(s.dir / n, h) + "  " + n + "\n";
  return ckpt::sha256_hex(std::span(reinterpret_cast<const std::byte*>(listing.data()), listing.size()));
}

void copy_checkpoint(const std::string& from, const stdfs::path& to, Format format) {
  if (!is_file_set(from)) {
    ckpt::fs::copy_file(from, to);
    return;
  }
  const FileSet s = file_set(from, format);
  stdfs::path dest = to;
  if (is_directory(from)) {
    ckpt::fs::create_new_directory(to, ckpt::fs::derived_directory_mode(from));
  } else {
    dest = to.parent_path().empty() ? stdfs::path(".") : to.parent_path();
    ckpt::fs::copy_file(s.dir / s.index, to);
  }
  // Whatever is at a member's place goes first: copying through a link left there would write the
  // file it points to.
  for (const auto& n : is_directory(from) ? s.all() : s.files) {
    std::error_code ec;
    stdfs::remove_all(dest / n, ec);
    ckpt::fs::copy_file(s.dir / n, dest / n);
  }
}

std::string lock_file_of(const std::string& path) {
  if (!is_file_set(path)) return path;
  try {
    const FileSet s = file_set(path);
    return (s.dir / (s.index.empty() ? s.files.front() : s.index)).string();
  } catch (const Error&) {
    return path;  // the edit's own open says what is wrong, in its words
  }
}

}  // namespace resil::inject
