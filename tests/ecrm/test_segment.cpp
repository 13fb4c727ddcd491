// The persistent state segment (resil::ecrm::Segment): a real POSIX shared-memory segment under
// /dev/shm per test. Identity checks, commit and rollback through the one-step undo records, and
// what a process killed half-way through a commit leaves behind.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "resil/core/error.hpp"
#include "resil/ecrm/segment.hpp"

using namespace resil;
using namespace resil::ecrm;

namespace {
const SegmentLayout lay{4096 * 3, 4096, 1024, 16};

std::string job(const std::string& what) { return "unit-" + what + "-" + std::to_string(::getpid()); }

std::vector<std::byte> bytes(const std::string& s) {
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

// Overwrite store bytes [at, at + n) with `v` the way the engine does: undo first.
void write(Segment& s, std::size_t at, std::size_t n, std::uint8_t v) {
  auto r = s.store().subspan(at, n);
  s.save(r);
  std::memset(r.data(), v, n);
}

struct Cleanup {
  std::string j;
  ~Cleanup() { Segment::cleanup(j); }
};
}  // namespace

TEST_CASE("segment: create, attach, refuse another identity", "[ec][unit][segment]") {
  const auto j = job("id");
  Cleanup c{j};
  const SegmentIdentity id{0xABCDEF, 11, 1, 4};
  CHECK_FALSE(Segment::attach(j, id, lay).has_value());
  {
    auto s = Segment::create(j, id, lay);
    CHECK(std::filesystem::exists(Segment::path(j, 1)));
    CHECK_FALSE(s.committed().has_value());
    std::memset(s.store().data(), 7, 16);
    s.commit(0, bytes("state-0"));
  }
  CHECK(Segment::peek_seed(j, 1) == std::optional<std::uint64_t>(11));
  {
    auto s = Segment::attach(j, id, lay);
    REQUIRE(s.has_value());
    REQUIRE(s->committed().has_value());
    CHECK(s->committed()->step == 0);
    CHECK(std::string(reinterpret_cast<const char*>(s->small_state().data()), s->small_state().size()) == "state-0");
    CHECK(s->store()[15] == std::byte{7});
  }
  const auto refused = [&](SegmentIdentity other, ExitCode code) {
    try {
      (void)Segment::attach(j, other, lay);
      FAIL("attached");
    } catch (const Error& e) {
      CHECK(e.exit_code() == code);
      CHECK(std::string(e.what()).find(Segment::path(j, 1)) != std::string::npos);
    }
  };
  SECTION("config hash") { refused({0xABCDEE, 11, 1, 4}, ExitCode::mismatch); }
  SECTION("a setting only one side records is named, the other side's as its default") {
    const auto j2 = job("id-settings");
    Cleanup c2{j2};
    (void)Segment::create(j2, {0x1, 11, 1, 4, R"({"--k":2,"--bottom-mlp":[64]})"}, lay);
    const auto message = [&](const std::string& ours) {
      try {
        (void)Segment::attach(j2, {0x2, 11, 1, 4, ours}, lay);
      } catch (const Error& e) {
        return std::string(e.what());
      }
      return std::string("attached");
    };
    CHECK_THAT(message(R"({"--k":2})"), Catch::Contains("--bottom-mlp [64] (this run: (default))"));
    CHECK_THAT(message(R"({"--k":2,"--bottom-mlp":[64],"--top-mlp":[16]})"), Catch::Contains("--top-mlp (default) (this run: [16])"));
    CHECK_THAT(message(R"({"--k":3,"--bottom-mlp":[64]})"), Catch::Contains("--k 2 (this run: 3)"));
  }
  SECTION("world size") { refused({0xABCDEF, 11, 1, 5}, ExitCode::mismatch); }
  SECTION("rank") {
    // rank 2 looks for its own name: absent; a segment renamed to rank 2's name is refused
    std::filesystem::copy_file(Segment::path(j, 1), Segment::path(j, 2));
    try {
      (void)Segment::attach(j, {0xABCDEF, 11, 2, 4}, lay);
      FAIL("attached");
    } catch (const MismatchError& e) {
      CHECK(std::string(e.what()).find(Segment::path(j, 2)) != std::string::npos);
    }
  }
  SECTION("layout") {
    try {
      (void)Segment::attach(j, id, SegmentLayout{4096 * 4, 4096, 1024, 16});
      FAIL("attached");
    } catch (const CorruptInputError&) {
    }
  }
  SECTION("magic and version") {
    const auto p = Segment::path(j, 1);
    std::FILE* f = std::fopen(p.c_str(), "r+b");
    REQUIRE(f);
    SECTION("magic") {
      std::fputs("XXXX", f);
      std::fclose(f);
      refused(id, ExitCode::corrupt_input);
    }
    SECTION("version") {
      std::fseek(f, 8, SEEK_SET);
      const std::uint32_t v = 99;
      std::fwrite(&v, sizeof v, 1, f);
      std::fclose(f);
      refused(id, ExitCode::mismatch);
    }
  }
  SECTION("cleanup") {
    CHECK(Segment::cleanup(j) == 1);
    CHECK_FALSE(std::filesystem::exists(Segment::path(j, 1)));
  }
}

TEST_CASE("segment: undo rolls back one or two commits", "[ec][unit][segment]") {
  const auto j = job("undo");
  Cleanup c{j};
  auto s = Segment::create(j, {1, 2, 0, 1}, lay);
  // step 0: all zero
  s.commit(0, bytes("s0"));
  write(s, 0, 8, 1);      // step 1 changes [0, 8)
  write(s, 100, 8, 1);
  s.commit(1, bytes("s1"));
  write(s, 4, 8, 2);      // step 2 changes [4, 12) and [100, 108) again
  write(s, 100, 8, 2);
  s.commit(2, bytes("s2"));
  write(s, 0, 16, 3);     // step 3 is under way (not committed)
  const auto at = [&](std::size_t i) { return static_cast<int>(s.store()[i]); };

  SECTION("to the committed step") {
    REQUIRE(s.can_roll_back_to(2));
    s.rollback_to(2);
    CHECK(at(0) == 1);
    CHECK(at(4) == 2);
    CHECK(at(12) == 0);
    CHECK(at(100) == 2);
    CHECK(s.committed()->step == 2);
    s.rollback_to(2);  // idempotent
    CHECK(at(0) == 1);
  }
  SECTION("one step further back (a rank one step ahead)") {
    REQUIRE(s.can_roll_back_to(1));
    CHECK_FALSE(s.can_roll_back_to(0));
    s.rollback_to(1);
    CHECK(at(0) == 1);
    CHECK(at(7) == 1);
    CHECK(at(8) == 0);
    CHECK(at(11) == 0);
    CHECK(at(100) == 1);
    CHECK(s.committed()->step == 1);
    CHECK(std::string(reinterpret_cast<const char*>(s.small_state().data()), 2) == "s1");
    // and training goes on from there
    write(s, 0, 4, 9);
    s.commit(2, bytes("s2'"));
    s.rollback_to(1);
    CHECK(at(0) == 1);
  }
  SECTION("a rollback killed half-way is redone") {
    // replaying an undo record twice (a kill after replaying, before the record was emptied)
    REQUIRE(s.can_roll_back_to(1));
    s.rollback_to(1);
    CHECK_NOTHROW(s.rollback_to(1));
    CHECK(at(4) == 1);
    CHECK(at(100) == 1);
  }
  SECTION("invalidated: no rollback, no committed state") {
    s.invalidate();
    CHECK_FALSE(s.committed().has_value());
    CHECK_FALSE(s.can_roll_back_to(2));
    CHECK_THROWS_AS(s.rollback_to(2), EcError);
  }
}

TEST_CASE("segment: a torn write of the small state or the commit record leaves the last commit", "[ec][unit][segment]") {
  const auto j = job("torn");
  Cleanup c{j};
  const SegmentIdentity id{5, 6, 0, 1};
  {
    auto s = Segment::create(j, id, lay);
    s.commit(0, bytes("s0"));
    write(s, 0, 8, 1);
    s.commit(1, bytes("s1"));
    write(s, 0, 8, 2);  // step 2 under way
  }
  const auto p = Segment::path(j, 0);
  auto poke = [&](long off, std::uint8_t v) {
    std::FILE* f = std::fopen(p.c_str(), "r+b");
    REQUIRE(f);
    std::fseek(f, off, SEEK_SET);
    std::fputc(v, f);
    std::fclose(f);
  };
  SECTION("torn slot of the next commit: not referenced, last commit stands") {
    // the free slot is slot 0 (step 1 went to slot 1): garbage there changes nothing
    const long slot0 = 4096 + 3 * 4096 + 2 * 4096;  // header, store, two undo records
    poke(slot0 + 32, 0x55);                          // first byte of its body
    auto s = Segment::attach(j, id, lay);
    REQUIRE(s->committed());
    CHECK(s->committed()->step == 1);
    s->rollback_to(1);
    CHECK(static_cast<int>(s->store()[0]) == 1);
    CHECK_FALSE(s->can_roll_back_to(0));  // the older slot is damaged: no second step back
  }
  SECTION("torn slot of the committed step: no committed state") {
    const long slot1 = 4096 + 3 * 4096 + 2 * 4096 + 4096;
    poke(slot1 + 32, 0x55);  // first byte of its body
    auto s = Segment::attach(j, id, lay);
    CHECK_FALSE(s->committed().has_value());
  }
  SECTION("torn commit record: the one before stands, with its undo record") {
    // header: rec[0] holds step 0 (seq 1), rec[1] step 1 (seq 2); tear rec[1]'s step field
    const long rec1 = 8 + 8 + 8 + 8 + 8 + 5 * 8 + 40 + 8;
    poke(rec1, 0x77);
    auto s = Segment::attach(j, id, lay);
    REQUIRE(s->committed());
    CHECK(s->committed()->step == 0);
  }
}
