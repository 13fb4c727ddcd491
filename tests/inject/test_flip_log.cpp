#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>

#include "resil/core/error.hpp"
#include "resil/core/rng.hpp"
#include "resil/inject/flip_log.hpp"
#include "resil_test/tmpdir.hpp"

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
  b.dataset = "/model/v";  // a dataset has one dtype
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
  // A finished log with a record removed (or one too many) is refused: revert would leave that
  // flip in the file and say it reverted all.
  for (const std::string& edited : {header_line(h) + "\n" + record_line(a, 0) + "\n" + footer_line(2, "ab") + "\n",
                                    header_line(h) + "\n" + footer_line(2, "ab") + "\n"})
    CHECK_THROWS_WITH(parse_log(edited, "e.jsonl"), Catch::Contains("e.jsonl: holds") && Catch::Contains("records removed or added"));
  // A log cut after the records (killed --in-place run) still parses, without a footer.
  CHECK_FALSE(parse_log(header_line(h) + "\n" + record_line(a, 0) + "\n" + record_line(b, 1) + "\n", "t").complete);
  // One cut before its records were complete, between two whole lines, is refused (replay).
  CHECK_THROWS_WITH(parse_log(header_line(h) + "\n" + record_line(a, 0) + "\n", "c.jsonl"),
                    Catch::Contains("c.jsonl: holds 1 of the 2 planned") && Catch::Contains("cut short"));

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

TEST_CASE("record lines are byte-identical to nlohmann's dump of the same record", "[inject][unit]") {
  // record_line formats by hand for speed; parsing a line and dumping it again with nlohmann must
  // give the same bytes (sorted keys, escapes, shortest round-trip doubles, ".0" on integers).
  resil::Rng rng(7, 0, 0);
  const std::vector<std::pair<ckpt::DType, unsigned>> types = {{ckpt::DType::f64, 64}, {ckpt::DType::f32, 32}, {ckpt::DType::f16, 16},
                                                               {ckpt::DType::bf16, 16}, {ckpt::DType::i8, 8}, {ckpt::DType::u64, 64},
                                                               {ckpt::DType::i32, 32}};
  const std::vector<std::string> names = {"/model/w", "/a \"quoted\" \\ name\t\xc3\xa9", "/optimizer/fc.weight/exp_avg"};
  for (int i = 0; i < 3000; ++i) {
    const auto& [dt, width] = types[static_cast<std::size_t>(i) % types.size()];
    FlipRecord r;
    r.dataset = names[static_cast<std::size_t>(i / 7) % names.size()];
    r.dtype = dt;
    r.width = width;
    const std::uint64_t wmask = width == 64 ? ~0ull : (1ull << width) - 1;
    r.old_bits = rng() & wmask;
    // Special values too: zeros, infinities, NaNs, integral floats, subnormals.
    if (i % 11 == 0) r.old_bits = 0;
    if (i % 13 == 0 && dt == ckpt::DType::f64) r.old_bits = 0x4059000000000000ull;  // 100.0
    if (i % 17 == 0 && dt == ckpt::DType::f32) r.old_bits = 0x7f800000;              // inf
    r.anchor = static_cast<unsigned>(rng() % width);
    r.new_bits = r.old_bits ^ (1ull << r.anchor);
    r.index = rng() >> (i % 64);
    r.nd = {r.index % 5, r.index / 5};
    if (i % 5 == 0) r.global = FlipRecord::Global{rng() >> (i % 64), {rng(), rng() >> 3}, {rng(), 1, static_cast<std::uint64_t>(i)}};
    const std::string line = record_line(r, static_cast<std::uint64_t>(i));
    CHECK(nlohmann::json::parse(line).dump() == line);
  }
}

TEST_CASE("a tp shard's record names its element in the global tensor; the parser checks it", "[inject][unit]") {
  LogHeader h;
  h.planned = 1;
  FlipRecord r;
  r.dataset = "/model/h.0.mlp.c_fc.weight";
  r.dtype = ckpt::DType::f32;
  r.width = 32;
  r.index = 65;  // local [1, 1] of a 64 x 64 shard holding rows 64..127 of a 128 x 64 tensor
  r.nd = {1, 1};
  r.anchor = 3;
  r.old_bits = 0x3f800000;
  r.new_bits = 0x3f800008;
  r.global = FlipRecord::Global{65 * 64 + 1, {65, 1}, {128, 64}};
  const std::string hdr = header_line(h) + "\n", line = record_line(r, 0);
  CHECK(line.find(R"("dtype":"f32","global_index":4161,"global_nd":[65,1],"global_shape":[128,64],"index":65,)") != std::string::npos);
  const auto log = parse_log(hdr + line + "\n", "tp.jsonl");
  REQUIRE(log.records.size() == 1);
  CHECK(log.records[0].global == r.global);
  CHECK(record_line(log.records[0], 0) == line);
  // A record without the keys (every dataset that is not a tp slice) has none.
  FlipRecord plain = r;
  plain.global.reset();
  CHECK_FALSE(parse_log(hdr + record_line(plain, 0) + "\n", "p").records[0].global);

  auto edited = [&](const std::string& from, const std::string& to) {
    std::string l = line;
    l.replace(l.find(from), from.size(), to);
    return hdr + l + "\n";
  };
  const std::pair<std::string, std::string> bad[] = {
      {R"("global_index":4161)", R"("global_index":4162)"},                  // not the N-d index's position
      {R"("global_nd":[65,1])", R"("global_nd":[128,1])"},                   // outside the shape
      {R"("global_nd":[65,1])", R"("global_nd":[65])"},                      // another rank than the shape
      {R"("global_shape":[128,64])", R"("global_shape":[])"},                // no dimension
      {R"("global_shape":[128,64])", R"("global_shape":[128,-64])"},         // not a count
      {R"("global_nd":[65,1],)", ""},                                        // one key missing
      {R"("global_shape":[128,64])", R"("global_shape":"128x64")"},          // not an array
      // a flat index beyond 2^64 - 1, whatever the shape claims
      {R"("global_index":4161,"global_nd":[65,1],"global_shape":[128,64])",
       R"("global_index":0,"global_nd":[18446744073709551615,18446744073709551615],"global_shape":[18446744073709551615,18446744073709551615])"}};
  for (const auto& [from, to] : bad) CHECK_THROWS_WITH(parse_log(edited(from, to), "tp.jsonl"), Catch::Contains("tp.jsonl:2") && Catch::Contains("global"));
}

TEST_CASE("LogWriter::records writes record_line of every record in order, on one or two threads", "[inject][unit]") {
  test::TempDir dir("flip-log-records");
  resil::Rng rng(8, 0, 0);
  const std::vector<std::string> names = {"/model/w", "/model/b", "/optimizer/\"q\""};
  for (const std::size_t n : {std::size_t{0}, std::size_t{5}, std::size_t{4095}, std::size_t{4096}, std::size_t{10001},
                             std::size_t{65536 + 4097}}) {  // the last: a second batch, itself on two threads
    INFO("records " << n);
    std::vector<FlipRecord> recs(n);
    std::string want = "{\"type\":\"header\"}\n";
    for (std::size_t i = 0; i < n; ++i) {
      FlipRecord& r = recs[i];
      r.dataset = names[(i / 100) % names.size()];  // runs of one dataset, as plans come
      r.dtype = i % 3 ? ckpt::DType::f32 : ckpt::DType::f64;
      r.width = i % 3 ? 32 : 64;
      r.old_bits = rng() & (r.width == 64 ? ~0ull : 0xffffffffull);
      r.anchor = static_cast<unsigned>(rng() % r.width);
      r.new_bits = r.old_bits ^ (1ull << r.anchor);
      r.index = rng() % 1000000;
      r.nd = {r.index};
      want += record_line(r, i) + "\n";
    }
    want += "{\"type\":\"footer\"}\n";
    const auto path = dir / ("log" + std::to_string(n) + ".jsonl");
    LogWriter w(path);
    w.line("{\"type\":\"header\"}");
    w.records(recs);
    w.line("{\"type\":\"footer\"}");
    w.close();
    std::ifstream in(path, std::ios::binary);
    const std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(got == want);
  }
}

TEST_CASE("flip log records are checked against each other: seq order, chains, bits, footer, format", "[inject][unit]") {
  // Hand-edited logs: a reordered or duplicated record, a lying footer, bits or format is refused,
  // never reverted in part and reported as done.
  LogHeader h;
  h.planned = 3;
  FlipRecord a;  // two records on one word (a chain), then one on another word
  a.dataset = "/w";
  a.index = 4;
  a.nd = {4};
  a.dtype = ckpt::DType::f32;
  a.width = 32;
  a.anchor = 1;
  a.old_bits = 0x1;
  a.new_bits = 0x3;
  FlipRecord a2 = a;
  a2.anchor = 2;
  a2.old_bits = 0x3;
  a2.new_bits = 0x7;
  FlipRecord c = a;
  c.index = 5;
  c.nd = {5};
  const std::string hdr = header_line(h) + "\n";
  const auto line = [](const FlipRecord& r, std::uint64_t seq) { return record_line(r, seq) + "\n"; };
  const std::string foot = footer_line(2, "") + "\n";
  const auto log = parse_log(hdr + line(a, 0) + line(a2, 1) + line(c, 2) + foot, "ok.jsonl");
  CHECK(log.records.size() == 3);
  const auto refused = [](const std::string& text, const std::string& what) {
    INFO(text);
    CHECK_THROWS_WITH(parse_log(text, "e.jsonl"), Catch::Contains(what));
    CHECK_THROWS_WITH(parse_log(text, "e.jsonl", Tail::may_be_cut), Catch::Contains(what));
  };
  // seq: reordered, duplicated, missing.
  refused(hdr + line(a2, 1) + line(a, 0) + line(c, 2) + foot, "e.jsonl:2: \"seq\" must be 0");
  refused(hdr + line(a, 0) + line(a2, 1) + line(a, 0) + foot, "e.jsonl:4: \"seq\" must be 2");
  std::string noseq = line(a, 0);
  noseq.replace(noseq.find(",\"seq\":0"), 8, "");
  refused(hdr + noseq + line(a2, 1) + line(c, 2) + foot, "e.jsonl:2: \"seq\"");
  // Renumbered after reordering: the chain of the word breaks.
  refused(hdr + line(a2, 0) + line(a, 1) + line(c, 2) + foot, "e.jsonl:3: \"old\" 0x00000001 is not 0x00000007");
  refused(hdr + line(a, 0) + line(a, 1) + line(c, 2) + foot, "e.jsonl:3: \"old\"");
  // The footer counts the words changed (2 here: the chain's word and c's).
  refused(hdr + line(a, 0) + line(a2, 1) + line(c, 2) + footer_line(3, "") + "\n", "e.jsonl:5: \"applied\" is 3");
  FlipRecord back = a2;  // a chain back to the first old changes nothing overall
  back.old_bits = 0x3;
  back.new_bits = 0x1;
  CHECK_NOTHROW(parse_log(hdr + line(a, 0) + line(back, 1) + line(c, 2) + footer_line(1, "") + "\n", "t"));
  // bits must be the mask's set bits; a 1-d nd the index; a dataset keeps its dtype.
  std::string bits = line(c, 2);
  bits.replace(bits.find("\"bits\":[1]"), 10, "\"bits\":[5]");
  refused(hdr + line(a, 0) + line(a2, 1) + bits + foot, "e.jsonl:4: \"bits\"");
  std::string nd = line(c, 2);
  nd.replace(nd.find("\"nd\":[5]"), 8, "\"nd\":[6]");
  refused(hdr + line(a, 0) + line(a2, 1) + nd + foot, "e.jsonl:4: \"nd\" does not match");
  FlipRecord other = c;
  other.dtype = ckpt::DType::i32;
  refused(hdr + line(a, 0) + line(a2, 1) + line(other, 2) + foot, "e.jsonl:4: dataset /w has another dtype");
  // A file_format no adapter has.
  LogHeader hf = h;
  hf.file_format = "xyz";
  refused(header_line(hf) + "\n" + line(a, 0) + line(a2, 1) + line(c, 2) + foot, "e.jsonl:1: unknown \"file_format\"");
  hf.file_format = "torch";
  CHECK(parse_log(header_line(hf) + "\n" + line(a, 0) + line(a2, 1) + line(c, 2) + foot, "t").header.file_format == "torch");
  // More records than planned, footer or not.
  FlipRecord d = c;
  d.index = 6;
  d.nd = {6};
  refused(hdr + line(a, 0) + line(a2, 1) + line(c, 2) + line(d, 3), "records removed or added");
  // Fewer records and no footer, every line whole: cut by a kill between two writes. Revert's
  // reading says nothing was applied; strict reading (replay) refuses it.
  for (const std::string& cut : {hdr, hdr + line(a, 0), hdr + line(a, 0) + line(a2, 1)}) {
    CHECK(parse_log(cut, "t", Tail::may_be_cut).cut_before_records_complete());
    CHECK_THROWS_WITH(parse_log(cut, "t"), Catch::Contains("cut short"));
  }
  CHECK_FALSE(parse_log(hdr + line(a, 0) + line(a2, 1) + line(c, 2), "t", Tail::may_be_cut).cut_before_records_complete());
}
