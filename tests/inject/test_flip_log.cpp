#include <catch2/catch.hpp>

#include "resil/core/error.hpp"
#include "resil/inject/flip_log.hpp"

using namespace resil;
using namespace resil::inject;

TEST_CASE("flip log lines round-trip and reject malformed input", "[inject][unit]") {
  LogHeader h;
  h.seed = 0xffffffffffffffffull;
  h.model = "flip";
  h.args = {"ckpt-flip", "inject"};
  h.planned = 2;
  FlipRecord a;
  a.dataset = "/model/w";
  a.index = 17;
  a.nd = {1, 7};
  a.dtype = ckpt::DType::f32;
  a.width = 32;
  a.anchor = 30;
  a.old_bits = 0x3f800000;
  a.new_bits = 0x7f800000;
  FlipRecord b = a;
  b.dtype = ckpt::DType::f64;
  b.width = 64;
  b.anchor = 63;
  b.old_bits = 0;
  b.new_bits = 0x8000000000000000ull;
  const std::string text = header_line(h) + "\n" + record_line(a, 0) + "\n" + record_line(b, 1) + "\n" + footer_line(2, "ab") + "\n";
  const auto log = parse_log(text, "t.jsonl");
  CHECK(log.header.seed == h.seed);
  CHECK(log.complete);
  REQUIRE(log.records.size() == 2);
  CHECK(log.records[0].dataset == "/model/w");
  CHECK(log.records[0].nd == std::vector<std::uint64_t>{1, 7});
  CHECK(log.records[0].old_bits == 0x3f800000);
  CHECK(log.records[0].new_bits == 0x7f800000);
  CHECK(log.records[1].mask() == 0x8000000000000000ull);
  CHECK(record_line(a, 0).find("\"new_value\":\"inf\"") != std::string::npos);
  // A log cut after the records (killed --in-place run) still parses, without a footer.
  CHECK_FALSE(parse_log(header_line(h) + "\n" + record_line(a, 0) + "\n", "t").complete);

  const std::string hdr = header_line(h) + "\n";
  for (const std::string& bad : {std::string(""), std::string("{}\n"), record_line(a, 0) + "\n", hdr + "not json\n",
                                hdr + R"({"type":"flip"})" "\n", hdr + R"({"type":"what"})" "\n",
                                hdr + footer_line(0, "") + "\n" + record_line(a, 0) + "\n"}) {
    CHECK_THROWS_AS(parse_log(bad, "bad.jsonl"), CorruptInputError);
  }
  std::string wide = record_line(a, 0);
  wide.replace(wide.find("\"new\":\"0x7f800000\""), 18, "\"new\":\"0x17f800000\"");
  CHECK_THROWS_AS(parse_log(hdr + wide + "\n", "w"), CorruptInputError);  // beyond the word width
  std::string badmask = record_line(a, 0);
  badmask.replace(badmask.find("\"mask\":\"0x40000000\""), 19, "\"mask\":\"0x40000001\"");
  CHECK_THROWS_AS(parse_log(hdr + badmask + "\n", "m"), CorruptInputError);
  try {
    parse_log(hdr + "garbage\n", "x.jsonl");
  } catch (const CorruptInputError& e) {
    CHECK(std::string(e.what()).find("x.jsonl:2") != std::string::npos);
  }
}
