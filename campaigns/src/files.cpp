// A checkpoint as files, private copies, file identity, the campaign's small JSON files (files.hpp).
#include "files.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

#include "resil/ckpt/checkpoint.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/core/error.hpp"
#include "resil/campaign/campaign.hpp"
#include "resil/inject/file_set.hpp"

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
  inject::copy_checkpoint(from.string(), to);  // a file, or a sharded set (its members replaced too)
}

void copy_with_marker(const stdfs::path& from, const stdfs::path& to) {
  stdfs::create_directories(to.parent_path());
  replace_with_copy(from, to);
  const stdfs::path done = from.string() + ".done", to_done = to.string() + ".done";
  if (stdfs::exists(done)) {  // a small marker file (JSON), never a checkpoint
    stdfs::remove_all(to_done);
    ckpt::fs::copy_file(done, to_done);
  }
  else stdfs::remove_all(to_done);
}

FileId file_id(const stdfs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) return {};  // a directory: a set
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

SummaryFile read_summary(const stdfs::path& p) {
  SummaryFile s;
  std::error_code ec;
  const auto st = stdfs::status(p, ec);
  if (!stdfs::exists(st)) {
    s.problem = "no summary at {out}";
    return s;
  }
  if (!stdfs::is_regular_file(st)) {  // a FIFO would block the read forever
    s.problem = "{out} is not a regular file";
    return s;
  }
  std::string text;
  try {
    text = ckpt::fs::read_file(p);
  } catch (const Error&) {
    s.problem = "{out} cannot be read";
    return s;
  }
  if (std::all_of(text.begin(), text.end(), [](unsigned char ch) { return std::isspace(ch); })) {
    s.problem = "{out} is empty";
    return s;
  }
  try {
    s.json = parse_summary(text);
  } catch (const json::exception& e) {
    // nlohmann's text without its "[json.exception.parse_error.101] " tag; the bytes it quotes
    // ("last read: ...") may be anything: a record holds printable ASCII only.
    std::string what = e.what();
    if (const auto close = what.find("] "); what.starts_with("[json.exception") && close != std::string::npos) what = what.substr(close + 2);
    for (char& ch : what)
      if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) > 0x7e) ch = '?';
    if (what.size() > 200) what = what.substr(0, 197) + "...";
    s.problem = "{out} is not JSON: " + what;
  }
  return s;
}

void require_regular_or_absent(const stdfs::path& p) {
  std::error_code ec;
  const auto st = stdfs::status(p, ec);
  if (stdfs::exists(st) && !stdfs::is_regular_file(st)) throw IoError(p.string() + ": not a regular file");
}

}  // namespace resil::inject::detail

namespace resil::inject {

nlohmann::json parse_summary(std::string_view text) {
  using nlohmann::json;
  // nlohmann reads strict JSON only. Each non-finite token outside strings becomes the number 0 in
  // a strict copy, and the number tokens are listed in document order (0: a number as written,
  // else which non-finite value stood there); the parser's callback sees the number values in the
  // same order and puts the non-finite ones back.
  enum : std::uint8_t { as_written, nan, inf, minus_inf };
  std::string strict;
  strict.reserve(text.size());
  std::vector<std::uint8_t> kinds;
  bool nonfinite = false;
  auto word_at = [&](std::size_t k) {
    std::size_t e = k;
    while (e < text.size() && (std::isalnum(static_cast<unsigned char>(text[e])) || text[e] == '+' || text[e] == '-' || text[e] == '.')) ++e;
    return text.substr(k, e - k);
  };
  for (std::size_t i = 0; i < text.size();) {
    const char ch = text[i];
    if (ch == '"') {  // a string (key or value), copied up to its closing quote; escapes skipped
      std::size_t j = i + 1;
      while (j < text.size() && text[j] != '"') j += text[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, text.size());
      strict.append(text.substr(i, j - i));
      i = j;
    } else if (ch == '-' && text.substr(i + 1).starts_with("Infinity") && word_at(i + 1) == "Infinity") {
      strict += '0';
      kinds.push_back(minus_inf);
      nonfinite = true;
      i += 9;
    } else if (ch == '-' || std::isdigit(static_cast<unsigned char>(ch))) {
      const auto w = word_at(i);  // the number's token; the parser checks its syntax
      strict.append(w);
      kinds.push_back(as_written);
      i += w.size();
    } else if (std::isalpha(static_cast<unsigned char>(ch))) {
      const auto w = word_at(i);
      if (w == "NaN" || w == "Infinity") {
        strict += '0';
        kinds.push_back(w == "NaN" ? nan : inf);
        nonfinite = true;
      } else {
        strict.append(w);  // true, false, null, or an error the parser names
      }
      i += w.size();
    } else {
      strict += ch;
      ++i;
    }
  }
  if (!nonfinite) return json::parse(strict);
  std::size_t next = 0;
  return json::parse(strict, [&](int, json::parse_event_t event, json& value) {
    if (event != json::parse_event_t::value || !value.is_number()) return true;
    const std::uint8_t k = next < kinds.size() ? kinds[next] : std::uint8_t{as_written};
    ++next;
    if (k == nan) value = std::numeric_limits<double>::quiet_NaN();
    if (k == inf) value = std::numeric_limits<double>::infinity();
    if (k == minus_inf) value = -std::numeric_limits<double>::infinity();
    return true;
  });
}

}  // namespace resil::inject
