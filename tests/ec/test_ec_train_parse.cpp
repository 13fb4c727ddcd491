// ec-train's command-line pieces that need no MPI: --fail parsing and the resume-compatibility key.
#include <catch2/catch.hpp>

#include "resil/ecrm/config.hpp"
#include "resil/core/error.hpp"

#include <nlohmann/json.hpp>

using resil::ecrm::Config;
using resil::ecrm::parse_failures;

TEST_CASE("--fail RANK@STEP lists parse", "[ec][unit]") {
  const auto f = parse_failures("2@100,3@100,0@7");
  REQUIRE(f.size() == 3);
  CHECK(f[0].rank == 2);
  CHECK(f[0].step == 100);
  CHECK(f[1].rank == 3);
  CHECK(f[2].rank == 0);
  CHECK(f[2].step == 7);
  CHECK(parse_failures("").empty());  // not given
}

TEST_CASE("malformed --fail items are usage errors naming the item", "[ec][unit]") {
  // Only decimal digits (std::stoi took "+5", " 5"); an empty item (a stray comma) is refused.
  for (const char* bad : {"2", "@5", "2@", "x@5", "2@5x", "2@0", "-1@5", "2@@5", "2 @5", " 2@5", "2@+5", "+2@5", "0x2@5", "2@5.0"}) {
    INFO(bad);
    try {
      (void)parse_failures(std::string("1@3,") + bad);
      FAIL("accepted");
    } catch (const resil::UsageError& e) {
      CHECK(std::string(e.what()).find(std::string("'") + bad + "'") != std::string::npos);
    }
  }
}

TEST_CASE("a --fail or --kill item listed twice is refused, a stray comma too", "[ec][unit]") {
  CHECK_THROWS_WITH(parse_failures("1@5,2@6,1@5"), Catch::Contains("'1@5' is listed twice"));
  CHECK_THROWS_WITH(resil::ecrm::parse_kills("1@5,1@5:node"), Catch::Contains("'1@5:node' is listed twice"));
  CHECK_THROWS_WITH(parse_failures("1@5,"), Catch::Contains("an empty item in '1@5,'"));
  CHECK_THROWS_AS(resil::ecrm::parse_kills("1@5,"), resil::UsageError);
  CHECK(resil::ecrm::parse_kills("1@5,2@5:node").size() == 2);
}

TEST_CASE("the resume key changes with every setting that defines the computation", "[ec][unit]") {
  Config a;
  const auto base = a.computation_json(6);
  CHECK(base != a.computation_json(7));
  auto differs = [&](auto change) {
    Config c;
    change(c);
    return c.computation_json(6) != base;
  };
  CHECK(differs([](Config& c) { c.k = 3; }));
  CHECK(differs([](Config& c) { c.m = 1; }));
  CHECK(differs([](Config& c) { c.seed = 9; }));
  CHECK(differs([](Config& c) { c.rows = 100; }));
  CHECK(differs([](Config& c) { c.dim = 4; }));
  CHECK(differs([](Config& c) { c.batch = 7; }));
  CHECK(differs([](Config& c) { c.lr = 0.5f; }));
  CHECK(differs([](Config& c) { c.data = "x.tsv"; }));
  // A path with a quote or backslash is JSON-escaped (the key is parsed as JSON by the checkpoint).
  CHECK(nlohmann::json::parse([] { Config c; c.data = "a\"b\\c.tsv"; return c.computation_json(6); }())["data"] == "a\"b\\c.tsv");
  // Not part of it: how long to train, how to protect, where to write.
  CHECK_FALSE(differs([](Config& c) { c.steps = 5; }));
  CHECK_FALSE(differs([](Config& c) { c.ft = resil::ecrm::Ft::ckpt; }));
  CHECK_FALSE(differs([](Config& c) { c.report = "r.json"; }));
}
