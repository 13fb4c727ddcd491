#include <catch2/catch.hpp>

#include <bit>

#include "resil/core/error.hpp"
#include "resil/inject/fault_model.hpp"
#include "resil/inject/select_expr.hpp"

using namespace resil;
using namespace resil::inject;

TEST_CASE("fault models change exactly the bits they define", "[inject][unit]") {
  Rng rng(1, 2);
  const std::uint64_t old = 0x3f800000;  // 1.0f
  CHECK(FaultModel::parse("flip").apply(old, 32, 30, ~0ull, rng) == 0x7f800000);
  CHECK(FaultModel::parse("flip").apply(0, 8, 7, ~0ull, rng) == 0x80);
  CHECK(FaultModel::parse("adjacent:3").apply(0, 32, 4, ~0ull, rng) == 0x70);
  CHECK(FaultModel::parse("adjacent:3").apply(0, 16, 15, ~0ull, rng) == 0xe000);  // slides down to fit
  CHECK(FaultModel::parse("stuck-at-0").apply(0xff, 8, 3, ~0ull, rng) == 0xf7);
  CHECK(FaultModel::parse("stuck-at-0").apply(0xf0, 8, 3, ~0ull, rng) == 0xf0);
  CHECK(FaultModel::parse("stuck-at-1").apply(0x00, 8, 3, ~0ull, rng) == 0x08);
  CHECK(FaultModel::parse("zero").apply(0x1234, 16, 3, ~0ull, rng) == 0);
  for (int i = 0; i < 200; ++i) {
    const auto anchor = static_cast<unsigned>(i % 64);
    const auto rb = FaultModel::parse("random-bits:4").apply(old, 64, anchor, ~0ull, rng) ^ old;
    CHECK(std::popcount(rb) == 4);
    CHECK(((rb >> anchor) & 1) == 1);
    const auto rs = FaultModel::parse("random-bits:3").apply(0, 32, 31, 0x80000011ull, rng);  // pool = selected bits
    CHECK(rs == 0x80000011ull);
    const auto bu = FaultModel::parse("burst:2").apply(0, 32, 9, ~0ull, rng);
    CHECK((bu & 0xff00) != 0);
    CHECK((bu & 0xff0000) != 0);
    CHECK((bu & 0xff0000ff) == 0);
    CHECK(FaultModel::parse("random-value").apply(0, 16, 0, ~0ull, rng) <= 0xffff);
  }
  CHECK(FaultModel::parse("adjacent:2").name() == "adjacent:2");
  CHECK(FaultModel::parse("stuck0").name() == "stuck-at-0");
  CHECK_THROWS_AS(FaultModel::parse("adjacent:0"), UsageError);
  CHECK_THROWS_AS(FaultModel::parse("adjacent:x"), UsageError);
  CHECK_THROWS_AS(FaultModel::parse("flip:2"), UsageError);
  CHECK_THROWS_AS(FaultModel::parse("gamma-ray"), UsageError);
  CHECK_THROWS_AS(FaultModel::parse("pattern:/nonexistent/p.json"), IoError);
}

TEST_CASE("pattern tables: masks with probabilities, anchored or absolute", "[inject][unit]") {
  const auto t = parse_pattern_table(R"({"patterns":[{"mask":"0x3","p":3},{"bits":[0,8],"p":1}]})", "p.json");
  REQUIRE(t.entries.size() == 2);
  CHECK(t.entries[0].p == Approx(0.75));
  CHECK(t.anchored);
  const auto m = FaultModel::from_table(t, "pattern:p.json");
  Rng rng(5, 0);
  int a = 0, b = 0;
  for (int i = 0; i < 4000; ++i) {
    const auto w = m.apply(0, 32, 4, ~0ull, rng);
    if (w == 0x30) ++a;
    else if (w == 0x1010) ++b;
    else FAIL("unexpected mask");
  }
  CHECK(a > 2800);
  CHECK(a < 3200);
  const auto abs = FaultModel::from_table(parse_pattern_table(R"({"anchor":"word","patterns":[{"mask":"0x8001"}]})", "q"), "q");
  CHECK(abs.apply(0, 16, 5, ~0ull, rng) == 0x8001);
  CHECK(abs.apply(0, 8, 5, ~0ull, rng) == 0x01);  // truncated to the width
  for (const char* bad : {"", "[]", "{}", R"({"patterns":[]})", R"({"patterns":[{"mask":"0x0"}]})",
                          R"({"patterns":[{"mask":"zz"}]})", R"({"patterns":[{"bits":[64]}]})",
                          R"({"patterns":[{"mask":"0x1","p":-1}]})", R"({"patterns":[{"mask":"0x1","p":0}]})",
                          R"({"anchor":"x","patterns":[{"mask":"0x1"}]})", R"({"patterns":[{"mask":1}]})"})
    CHECK_THROWS_AS(parse_pattern_table(bad, "bad.json"), CorruptInputError);
}
