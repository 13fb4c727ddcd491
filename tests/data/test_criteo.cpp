#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "resil/core/error.hpp"
#include "resil/data/criteo.hpp"

namespace fs = std::filesystem;
using namespace resil::data;

namespace {
const std::vector<std::uint32_t> tables(26, 1000);
fs::path tmpfile(const std::string& name) {
  fs::create_directories(RESIL_TEST_TMP);
  return fs::path(RESIL_TEST_TMP) / name;
}
}  // namespace

TEST_CASE("Criteo TSV preprocessing follows DLRM", "[data][unit]") {
  const auto p = tmpfile("one.tsv");
  {
    std::ofstream f(p);
    f << "1\t5\t-3\t\t0\t1\t2\t3\t4\t5\t6\t7\t8\t9";
    f << "\t000003e9\t\t68fd1e64";
    for (int j = 3; j < 26; ++j) f << "\t0000000a";
    f << "\n";
  }
  const ClickSet s = read_criteo_tsv(p, tables);
  REQUIRE(s.n == 1);
  CHECK(s.labels[0] == 1.0f);
  CHECK(s.dense[0] == Approx(std::log(6.0)));
  CHECK(s.dense[1] == 0.0f);  // negative -> 0
  CHECK(s.dense[2] == 0.0f);  // missing -> 0
  CHECK(s.sparse[0] == 1);    // 0x3e9 = 1001 mod 1000
  CHECK(s.sparse[1] == 0);    // missing
  CHECK(s.sparse[2] == static_cast<std::int32_t>(0x68fd1e64u % 1000u));
}

TEST_CASE("synthetic clicks round-trip through TSV and carry a signal", "[data][unit]") {
  const auto raw = synthetic_raw_clicks(400, 11);
  const auto p = tmpfile("syn.tsv");
  write_criteo_tsv(p, raw);
  const ClickSet a = read_criteo_tsv(p, tables);
  const ClickSet b = synthetic_clicks(400, 11, tables);
  CHECK(a.dense == b.dense);
  CHECK(a.sparse == b.sparse);
  CHECK(a.labels == b.labels);
  CHECK(read_criteo_tsv(p, tables, 10).n == 10);
  double pos = 0;
  for (float l : b.labels) pos += l;
  CHECK(pos > 40);   // neither all negative ...
  CHECK(pos < 360);  // ... nor all positive
  CHECK(synthetic_clicks(5, 12, tables).labels.size() == 5);
  // Deterministic and position-addressable: sample 100 alone equals sample 100 of the batch.
  const auto one = synthetic_raw_clicks(1, 11, 100);
  CHECK(one[0].cats[3] == raw[100].cats[3]);
}

TEST_CASE("malformed Criteo lines name file, line and field", "[data][unit]") {
  const auto p = tmpfile("bad.tsv");
  write_criteo_tsv(p, synthetic_raw_clicks(3, 1));
  SECTION("bad integer") {
    std::ofstream(p, std::ios::app) << "0\t1\tx2\t3\n";
    CHECK_THROWS_WITH(read_criteo_tsv(p, tables), Catch::Contains("bad.tsv:4: field 3") && Catch::Contains("not an integer"));
  }
  SECTION("too few fields") {
    std::ofstream(p, std::ios::app) << "0\t1\t2\n";
    CHECK_THROWS_WITH(read_criteo_tsv(p, tables), Catch::Contains("bad.tsv:4") && Catch::Contains("expected 40"));
  }
  SECTION("a NUL byte in a field is shown, not the end of the message") {
    std::ofstream(p, std::ios::app) << std::string("0\0\x31\t2\n", 6);
    CHECK_THROWS_WITH(read_criteo_tsv(p, tables), Catch::Contains("bad.tsv:4: field 1: label '0\\x001' is not 0 or 1"));
  }
  SECTION("bad label") {
    std::ofstream(p, std::ios::app) << "2\n";
    CHECK_THROWS_AS(read_criteo_tsv(p, tables), resil::CorruptInputError);
  }
  SECTION("bad table sizes") { CHECK_THROWS_AS(read_criteo_tsv(p, {1, 2}), resil::UsageError); }
}
