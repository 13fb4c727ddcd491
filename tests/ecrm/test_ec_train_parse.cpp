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
  CHECK(differs([](Config& c) { c.bottom_mlp = {512, 256, 64}; }));
  CHECK(differs([](Config& c) { c.top_mlp = {32, 32}; }));
  // The default MLPs add nothing: checkpoints and segments of runs before --bottom-mlp still match.
  CHECK(base.find("mlp\"") == std::string::npos);
  CHECK(base.find("bottom") == std::string::npos);
  // A path with a quote or backslash is JSON-escaped (the key is parsed as JSON by the checkpoint).
  CHECK(nlohmann::json::parse([] { Config c; c.data = "a\"b\\c.tsv"; return c.computation_json(6); }())["data"] == "a\"b\\c.tsv");
  // Not part of it: how long to train, how to protect, where to write.
  CHECK_FALSE(differs([](Config& c) { c.steps = 5; }));
  CHECK_FALSE(differs([](Config& c) { c.ft = resil::ecrm::Ft::ckpt; }));
  CHECK_FALSE(differs([](Config& c) { c.report = "r.json"; }));
  // When the deltas travel changes no byte of the state: a relaunch may switch --commit.
  CHECK_FALSE(differs([](Config& c) { c.commit = resil::ecrm::Commit::in_step; }));
}

TEST_CASE("--commit in-step goes with --ft ec only", "[ec][unit]") {
  Config c;
  c.commit = resil::ecrm::Commit::in_step;
  CHECK_NOTHROW(c.validate(6));
  for (auto ft : {resil::ecrm::Ft::none, resil::ecrm::Ft::ckpt}) {
    c.ft = ft;
    CHECK_THROWS_WITH(c.validate(6), Catch::Contains("--commit in-step goes with --ft ec"));
  }
  CHECK(resil::ecrm::commit_name(resil::ecrm::Commit::next_step) == "next-step");
  CHECK(resil::ecrm::commit_name(resil::ecrm::Commit::in_step) == "in-step");
}

TEST_CASE("--bottom-mlp / --top-mlp: 1 to 8 widths in 1..8192, decimal digits only", "[ec][unit]") {
  using resil::ecrm::parse_mlp;
  CHECK(parse_mlp("512,256,64", "--bottom-mlp") == std::vector<int>{512, 256, 64});
  CHECK(parse_mlp("1", "--top-mlp") == std::vector<int>{1});
  CHECK(parse_mlp("8192,1,1,1,1,1,1,1", "--top-mlp").size() == 8);
  CHECK(resil::ecrm::mlp_text({512, 256, 64}) == "512,256,64");
  for (const char* bad : {"", "0", "8193", "1,,2", "1,", ",1", "+4", " 4", "4 ", "0x10", "-1", "1.5", "1,1,1,1,1,1,1,1,1", "99999999999"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_mlp(bad, "--top-mlp"), Catch::StartsWith("--top-mlp: '"));
  }
}
