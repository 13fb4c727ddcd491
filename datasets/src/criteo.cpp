#include "resil/data/criteo.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>

#include "resil/core/dmath.hpp"
#include "resil/core/error.hpp"

namespace resil::data {

void append_preprocessed(ClickSet& out, const RawClick& r) {
  for (std::size_t j = 0; j < criteo_num_dense; ++j)
    out.dense.push_back(dmath::log1p(static_cast<float>(std::max<std::int64_t>(r.ints[j], 0))));
  for (std::size_t j = 0; j < criteo_num_sparse; ++j)
    out.sparse.push_back(static_cast<std::int32_t>(r.cats[j] % out.table_sizes[j]));
  out.labels.push_back(static_cast<float>(r.label));
  ++out.n;
}

namespace {
// A field quoted in a message: what() is a C string, so a NUL byte in it cut the error (and the
// summary's "error") there. Other bytes are escaped where the line is printed.
std::string shown(std::string_view f) {
  std::string s;
  for (const char c : f) s += c == '\0' ? std::string("\\x00") : std::string(1, c);
  return s;
}

void check_tables(const std::vector<std::uint32_t>& t) {
  if (t.size() != criteo_num_sparse) throw UsageError("Criteo needs 26 embedding table sizes, got " + std::to_string(t.size()));
  for (auto s : t)
    if (s == 0 || s > (1u << 31)) throw UsageError("embedding table size " + std::to_string(s) + " is not in 1..2^31");
}
}  // namespace

ClickSet read_criteo_tsv(const std::filesystem::path& p, const std::vector<std::uint32_t>& table_sizes, std::size_t limit) {
  check_tables(table_sizes);
  // A directory "opens" and fails on the first read; a FIFO blocks the open until a writer comes.
  std::error_code fs_ec;
  if (std::filesystem::exists(p, fs_ec) && !std::filesystem::is_regular_file(p, fs_ec))
    throw IoError(p.string() + ": not a regular file (a directory, FIFO or device), expected a Criteo TSV file");
  std::ifstream in(p, std::ios::binary);
  if (!in) throw IoError(p.string() + ": cannot open");
  ClickSet out;
  out.table_sizes = table_sizes;
  std::string line;
  std::size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    auto fail = [&](std::size_t field, const std::string& why) {
      throw CorruptInputError(p.string() + ":" + std::to_string(lineno) + ": field " + std::to_string(field + 1) + ": " + why);
    };
    RawClick r;
    std::size_t field = 0, pos = 0;
    for (;; ++field) {
      const std::size_t tab = line.find('\t', pos);
      const std::string_view f(line.data() + pos, (tab == std::string::npos ? line.size() : tab) - pos);
      if (field >= 40) fail(field, "more than 40 tab-separated fields");
      const char* b = f.data();
      const char* e = f.data() + f.size();
      if (field == 0) {
        if (f != "0" && f != "1") fail(field, "label '" + shown(f) + "' is not 0 or 1");
        r.label = f == "1";
      } else if (field <= criteo_num_dense) {
        if (!f.empty()) {
          auto [ptr, ec] = std::from_chars(b, e, r.ints[field - 1]);
          if (ec != std::errc() || ptr != e) fail(field, "'" + shown(f) + "' is not an integer");
        }
      } else if (!f.empty()) {
        std::uint64_t v = 0;
        auto [ptr, ec] = std::from_chars(b, e, v, 16);
        if (ec != std::errc() || ptr != e) fail(field, "'" + shown(f) + "' is not a hexadecimal category");
        r.cats[field - 1 - criteo_num_dense] = static_cast<std::uint32_t>(v ^ (v >> 32));
      }
      if (tab == std::string::npos) break;
      pos = tab + 1;
    }
    if (field + 1 != 40) fail(field, "line has " + std::to_string(field + 1) + " fields, expected 40");
    append_preprocessed(out, r);
    if (limit > 0 && out.n >= limit) break;
  }
  if (in.bad()) throw IoError(p.string() + ": read error");
  return out;
}

void write_criteo_tsv(const std::filesystem::path& p, const std::vector<RawClick>& rows) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  if (!out) throw IoError(p.string() + ": cannot create");
  char buf[32];
  for (const auto& r : rows) {
    out << r.label;
    for (auto v : r.ints) out << '\t' << v;
    for (auto c : r.cats) {
      std::snprintf(buf, sizeof buf, "%08x", c);
      out << '\t' << buf;
    }
    out << '\n';
  }
  if (!out) throw IoError(p.string() + ": write failed");
}

}  // namespace resil::data
