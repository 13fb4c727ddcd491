// Fortune-format corpora: records, the deterministic split, windows and n-gram baselines.
#include "resil/data/text.hpp"

#include <algorithm>
#include <array>
#include <fstream>
#include <iterator>
#include <system_error>

#include "resil/core/dmath.hpp"
#include "resil/core/error.hpp"

namespace resil::data {

namespace stdfs = std::filesystem;

namespace {

std::string read_all(const stdfs::path& p) {
  std::error_code ec;
  if (!stdfs::exists(p, ec)) throw IoError(p.string() + ": no such file or directory");
  if (!stdfs::is_regular_file(p, ec)) throw IoError(p.string() + ": not a regular file (a FIFO or device), expected a text file");
  std::ifstream in(p, std::ios::binary);
  if (!in) throw IoError(p.string() + ": cannot open");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw IoError(p.string() + ": read error");
  return s;
}

/// The fortune databases of a directory: regular files F with F.dat beside them, by name.
std::vector<stdfs::path> fortune_files(const stdfs::path& dir) {
  std::vector<stdfs::path> out;
  std::error_code ec;
  stdfs::directory_iterator it(dir, ec), end;
  // Only the listing's own errors: a file without its index (F.dat not found) is no error.
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code skip;
    const stdfs::path& p = it->path();
    if (p.extension() == ".dat" || it->is_symlink(skip) || !it->is_regular_file(skip)) continue;
    if (stdfs::is_regular_file(stdfs::path(p.string() + ".dat"), skip)) out.push_back(p);
  }
  if (ec) throw IoError(dir.string() + ": cannot list: " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

/// Append the non-empty records of `text` (separated by lines holding a single '%') to the
/// streams, numbering them from `next`.
void split_records(const std::string& text, std::size_t& next, TextCorpus& c) {
  std::size_t begin = 0;
  auto emit = [&](std::size_t end) {
    if (end > begin) {
      auto& out = next % valid_every == valid_every - 1 ? c.valid : c.train;
      out.insert(out.end(), text.begin() + static_cast<std::ptrdiff_t>(begin), text.begin() + static_cast<std::ptrdiff_t>(end));
      if (text[end - 1] != '\n') out.push_back('\n');
      out.push_back('%');
      out.push_back('\n');
      ++next;
    }
  };
  std::size_t line = 0;
  while (line < text.size()) {
    std::size_t eol = text.find('\n', line);
    if (eol == std::string::npos) eol = text.size();
    if (eol - line == 1 && text[line] == '%') {
      emit(line);
      begin = eol + 1;
    }
    line = eol + 1;
  }
  emit(text.size());
}

}  // namespace

TextCorpus load_text(const stdfs::path& path) {
  std::error_code ec;
  if (!stdfs::exists(path, ec)) throw IoError(path.string() + ": no such file or directory");
  std::vector<stdfs::path> files;
  if (stdfs::is_directory(path, ec)) {
    files = fortune_files(path);
    if (files.empty())
      throw CorruptInputError(path.string() + ": no fortune file in the directory (a text file F with its strfile index F.dat)");
  } else {
    files.push_back(path);
  }
  TextCorpus c;
  std::size_t next = 0;
  for (const auto& f : files) split_records(read_all(f), next, c);
  c.files = files.size();
  c.records = next;
  if (next < valid_every)
    throw CorruptInputError(path.string() + ": " + std::to_string(next) + " records (lines of a single '%' separate them); at least " +
                            std::to_string(valid_every) + " are needed for training and validation text");
  return c;
}

std::size_t text_windows(std::size_t bytes, int seq) {
  if (seq < 1 || bytes <= static_cast<std::size_t>(seq)) return 0;
  return (bytes - 1) / static_cast<std::size_t>(seq);
}

NgramBaselines ngram_baselines(const std::vector<std::uint8_t>& train, const std::vector<std::uint8_t>& valid) {
  std::array<double, 256> uni{};
  std::vector<double> bi(256 * 256, 0.0);
  for (std::size_t i = 0; i < train.size(); ++i) {
    uni[train[i]] += 1.0;
    if (i) bi[train[i - 1] * 256u + train[i]] += 1.0;
  }
  std::array<double, 256> ctx{};
  for (std::size_t a = 0; a < 256; ++a)
    for (std::size_t b = 0; b < 256; ++b) ctx[a] += bi[a * 256 + b];
  const double n = static_cast<double>(train.size());
  NgramBaselines r;
  if (valid.size() < 2) return r;
  // Each validation byte after the first is predicted: the targets a next-byte model is scored on.
  double uni_bits = 0.0, bi_bits = 0.0;
  const double inv_ln2 = 1.0 / dmath::log(2.0);
  for (std::size_t i = 1; i < valid.size(); ++i) {
    const std::uint8_t a = valid[i - 1], b = valid[i];
    uni_bits -= dmath::log((uni[b] + 1.0) / (n + 256.0)) * inv_ln2;
    bi_bits -= dmath::log((bi[a * 256u + b] + 1.0) / (ctx[a] + 256.0)) * inv_ln2;
  }
  const double m = static_cast<double>(valid.size() - 1);
  r.unigram_bpb = uni_bits / m;
  r.bigram_bpb = bi_bits / m;
  return r;
}

}  // namespace resil::data
