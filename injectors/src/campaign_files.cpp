// A checkpoint as files, private copies, file identity, the campaign's small JSON files (campaign_files.hpp).
#include "campaign_files.hpp"

#include <sys/stat.h>

#include "resil/ckpt/checkpoint.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/core/error.hpp"

namespace resil::inject::detail {

using nlohmann::json;
namespace stdfs = std::filesystem;

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

FileId file_id(const stdfs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
  return {st.st_dev, st.st_ino};
}

bool same_small_file(const stdfs::path& original, const stdfs::path& copy) {
  try {
    return file_id(copy) != FileId{} && ckpt::fs::read_file(original) == ckpt::fs::read_file(copy);
  } catch (const Error&) {
    return false;
  }
}

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

std::optional<json> read_json_file(const stdfs::path& p) {
  std::error_code ec;
  if (!stdfs::is_regular_file(p, ec)) return std::nullopt;
  try {
    return json::parse(ckpt::fs::read_file(p));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void require_regular_or_absent(const stdfs::path& p) {
  std::error_code ec;
  const auto st = stdfs::status(p, ec);
  if (stdfs::exists(st) && !stdfs::is_regular_file(st)) throw IoError(p.string() + ": not a regular file");
}

}  // namespace resil::inject::detail
