// Durable file-system steps for crash-safe commits: fsync a file and its directory, atomic
// replace by rename, fast whole-file copies.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace resil::ckpt::fs {

namespace stdfs = std::filesystem;

/// fsync the file's data and metadata. Throws IoError naming the path.
void fsync_file(const stdfs::path& p);
/// fsync a directory so a rename inside it is durable.
void fsync_dir(const stdfs::path& dir);
/// rename(from, to) then fsync the directory of `to`.
void durable_rename(const stdfs::path& from, const stdfs::path& to);
/// Write `text` to `p` atomically: p.tmp.<pid>, fsync, rename, fsync dir.
void write_file_atomic(const stdfs::path& p, const std::string& text);
std::string read_file(const stdfs::path& p);
/// Copy a whole file efficiently (copy_file_range / reflink where the filesystem can), then fsync.
void copy_file(const stdfs::path& from, const stdfs::path& to);
/// A temporary sibling name for `p` that the loader never picks: ".<name>.tmp.<pid>".
stdfs::path temp_sibling(const stdfs::path& p);

/// Removes the file in its destructor unless `keep()` was called: no partial outputs on error.
class RemoveOnError {
public:
  explicit RemoveOnError(stdfs::path p) : path_(std::move(p)) {}
  RemoveOnError(const RemoveOnError&) = delete;
  RemoveOnError& operator=(const RemoveOnError&) = delete;
  ~RemoveOnError() {
    if (!kept_) {
      std::error_code ec;
      stdfs::remove(path_, ec);
    }
  }
  void keep() noexcept { kept_ = true; }
  const stdfs::path& path() const noexcept { return path_; }

private:
  stdfs::path path_;
  bool kept_ = false;
};

}  // namespace resil::ckpt::fs
