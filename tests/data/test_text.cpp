// Fortune-format text: records, the 1-in-10 validation split, file order, windows, baselines and
// the errors of a path that holds no corpus.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "resil/core/error.hpp"
#include "resil/data/text.hpp"

namespace fs = std::filesystem;
using namespace resil::data;

namespace {
fs::path tmpdir(const std::string& name) {
  fs::path d = fs::path(RESIL_TEST_TMP) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}
void write_bytes(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }
std::string str(const std::vector<std::uint8_t>& v) { return std::string(v.begin(), v.end()); }

/// n records "r<i>\n" separated by '%' lines.
std::string records(int first, int n) {
  std::string s;
  for (int i = first; i < first + n; ++i) s += "r" + std::to_string(i) + "\n%\n";
  return s;
}
}  // namespace

TEST_CASE("records split 9:1 into training and validation in file order", "[data][unit]") {
  const auto d = tmpdir("text_split");
  // Two databases (b sorts after a whatever the directory order), an index each; a file without
  // an index and the index files themselves are not text.
  write_bytes(d / "b", records(12, 8));
  write_bytes(d / "b.dat", "index");
  write_bytes(d / "a", records(0, 12));
  write_bytes(d / "a.dat", "index");
  write_bytes(d / "notes", records(100, 5));
  // More files without an index: in almost any directory order one of them is listed last.
  for (int i = 0; i < 16; ++i) write_bytes(d / ("README" + std::to_string(i)), "not a database\n");
  const TextCorpus c = load_text(d);
  CHECK(c.files == 2);
  CHECK(c.records == 20);
  CHECK(str(c.valid) == "r9\n%\nr19\n%\n");
  std::string train;
  for (int i = 0; i < 20; ++i)
    if (i % 10 != 9) train += "r" + std::to_string(i) + "\n%\n";
  CHECK(str(c.train) == train);
  // Deterministic: the same files give the same streams.
  const TextCorpus again = load_text(d);
  CHECK(again.train == c.train);
  CHECK(again.valid == c.valid);
}

TEST_CASE("a single file: empty records skipped, a last record without its separator kept", "[data][unit]") {
  const auto d = tmpdir("text_file");
  std::string s = "%\n%\n" + records(0, 9) + "last line";  // two empty records first, no final newline
  write_bytes(d / "f.txt", s);
  const TextCorpus c = load_text(d / "f.txt");
  CHECK(c.records == 10);
  CHECK(str(c.valid) == "last line\n%\n");
  // A '%' inside a line is text, not a separator.
  write_bytes(d / "g.txt", "50% off\n%\n" + records(1, 9));
  CHECK(str(load_text(d / "g.txt").train).rfind("50% off\n%\n", 0) == 0);
}

TEST_CASE("windows overlap by one token", "[data][unit]") {
  CHECK(text_windows(0, 4) == 0);
  CHECK(text_windows(4, 4) == 0);
  CHECK(text_windows(5, 4) == 1);   // tokens 0..4
  CHECK(text_windows(8, 4) == 1);
  CHECK(text_windows(9, 4) == 2);   // tokens 0..4, 4..8
  CHECK(text_windows(100, 0) == 0);
}

TEST_CASE("n-gram baselines in bits per byte", "[data][unit]") {
  // Training text of one repeated byte pair: the bigram model is nearly sure, the unigram not.
  std::vector<std::uint8_t> train;
  for (int i = 0; i < 1000; ++i) {
    train.push_back('a');
    train.push_back('b');
  }
  const std::vector<std::uint8_t> valid = {'a', 'b', 'a', 'b', 'a'};
  const auto r = ngram_baselines(train, valid);
  // unigram: each of a, b has (1000 + 1) / (2000 + 256)
  CHECK(r.unigram_bpb == Approx(-std::log2(1001.0 / 2256.0)).epsilon(1e-12));
  // bigram: a->b seen 1000 times in context a (1000 times), b->a 999 times in context b (999)
  const double ab = -std::log2(1001.0 / 1256.0), ba = -std::log2(1000.0 / 1255.0);
  CHECK(r.bigram_bpb == Approx((2 * ab + 2 * ba) / 4).epsilon(1e-12));
  CHECK(r.bigram_bpb < r.unigram_bpb);
}

TEST_CASE("paths that hold no corpus", "[data][unit]") {
  const auto d = tmpdir("text_bad");
  CHECK_THROWS_AS(load_text(d / "missing"), resil::IoError);
  CHECK_THROWS_WITH(load_text(d), Catch::Contains("no fortune file"));  // an empty directory
  // Files without an index only: no fortune file, not a listing error (whatever the directory order).
  for (int i = 0; i < 5; ++i) write_bytes(d / ("notes" + std::to_string(i)), records(0, 12));
  CHECK_THROWS_WITH(load_text(d), Catch::Contains("no fortune file") && !Catch::Contains("cannot list"));
  write_bytes(d / "few", records(0, 9));
  CHECK_THROWS_AS(load_text(d / "few"), resil::CorruptInputError);
  CHECK_THROWS_WITH(load_text(d / "few"), Catch::Contains("9 records"));
}
