#include <catch2/catch.hpp>

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "ec_test_util.hpp"
#include "resil/core/error.hpp"
#include "resil/ec/ledger.hpp"

using namespace resil;
using namespace resil::ec;
using ec::test::Fragments;

TEST_CASE("the ledger admits each (step, source) once", "[ec][unit]") {
  DeltaLedger ledger(3);
  CHECK_FALSE(ledger.last_step(0).has_value());
  CHECK(ledger.admit({0, 0}));  // step 0 is a real step
  CHECK_FALSE(ledger.admit({0, 0}));
  CHECK(ledger.admit({0, 1}));  // sources are independent
  CHECK(ledger.admit({5, 0}));  // a source may skip steps (its rows were not touched)
  CHECK_FALSE(ledger.admit({3, 0}));  // older than the last applied: a replay
  CHECK_FALSE(ledger.admit({5, 0}));
  CHECK(ledger.last_step(0) == 5u);
  CHECK(ledger.admitted() == 3);
  CHECK(ledger.refused() == 3);
  CHECK_THROWS_WITH(ledger.require({5, 0}), Catch::Contains("(step 5, source 0) refused"));
  CHECK_NOTHROW(ledger.require({6, 0}));
  CHECK_THROWS_AS(ledger.admit({1, 3}), UsageError);

  SECTION("a rebuilt parity fragment already contains the deltas up to its step") {
    ledger.mark(2, 10);
    CHECK_FALSE(ledger.fresh({10, 2}));
    CHECK_FALSE(ledger.admit({9, 2}));
    CHECK(ledger.admit({11, 2}));
  }
  SECTION("a wiped holder starts over") {
    ledger.clear();
    CHECK_FALSE(ledger.last_step(0).has_value());
    CHECK(ledger.admit({0, 0}));
  }
}

TEST_CASE("a ledger over the caller's memory keeps its records in those words", "[ec][unit]") {
  std::vector<std::uint64_t> words(4, 0);
  DeltaLedger ledger{std::span(words)};
  CHECK(ledger.sources() == 4);
  CHECK(ledger.admit({7, 2}));
  CHECK(words == std::vector<std::uint64_t>{0, 0, 8, 0});  // last step + 1; 0 = nothing applied
  // entry() is the word itself: restoring its old bytes (an undo log) undoes the admission.
  const auto e = ledger.entry(2);
  CHECK(e.data() == reinterpret_cast<const std::byte*>(&words[2]));
  CHECK(e.size() == sizeof(std::uint64_t));
  CHECK_THROWS_AS(ledger.entry(4), UsageError);
  words[2] = 0;
  CHECK(ledger.admit({7, 2}));
  // Words written by an earlier process (a shared-memory segment attached again) are the ledger.
  words[0] = 4;
  CHECK_FALSE(ledger.admit({3, 0}));
  CHECK(ledger.last_step(0) == 3u);

  SECTION("a copy of a view is a view of the same words; a copy of an owning ledger is its own") {
    DeltaLedger view = ledger;
    CHECK(view.admit({9, 1}));
    CHECK(words[1] == 10);
    DeltaLedger owning(2), copy = owning;
    CHECK(copy.admit({1, 0}));
    CHECK_FALSE(owning.last_step(0).has_value());
    DeltaLedger moved = std::move(copy);
    CHECK(moved.last_step(0) == 1u);
    owning = moved;
    CHECK(owning.admit({2, 0}));
    CHECK(moved.last_step(0) == 1u);
  }
}

TEST_CASE("apply_once refuses a duplicate delta, so the parity stays right", "[ec][unit]") {
  const auto [k, m] = GENERATE(table<int, int>({{2, 1}, {4, 2}, {6, 3}}));
  const Codec codec(k, m);
  const std::size_t len = 257;
  Fragments stripe(k + m, len, 4);
  Rng rng(53, static_cast<std::uint64_t>(k));
  for (int i = 0; i < k; ++i) ec::test::fill_random(stripe[i], rng);
  codec.encode(stripe.cspans(0, k), stripe.spans(k, m));
  // Source id = data fragment index: one delta per fragment per step.
  DeltaLedger ledger(static_cast<std::uint64_t>(k));

  for (std::uint64_t step = 0; step < 20; ++step) {
    const int f = static_cast<int>(rng.below(static_cast<std::uint64_t>(k)));
    const std::size_t off = rng.below(len - 8);
    std::vector<std::byte> fresh(8), delta(8);
    ec::test::fill_random(fresh, rng);
    fresh[0] = ~stripe[f][off];  // the row really changes, so a second application would show
    auto row = stripe[f].subspan(off, 8);
    xor_delta(row, fresh, delta);
    std::copy(fresh.begin(), fresh.end(), row.begin());
    const DeltaTag tag{step, static_cast<std::uint64_t>(f)};
    REQUIRE(apply_once(codec, ledger, tag, f, off, delta, stripe.spans(k, m)));
    // The resend (e.g. after the sender's replacement replays its last step) is refused.
    CHECK_FALSE(apply_once(codec, ledger, tag, f, off, delta, stripe.spans(k, m)));
  }
  CHECK(ledger.refused() == 20);
  Fragments fresh(m, len, 5);
  codec.encode(stripe.cspans(0, k), fresh.spans(0, m));
  for (int j = 0; j < m; ++j) CHECK(ec::test::equal(stripe[k + j], fresh[j]));

  // Without the ledger the same resend corrupts the parity: this is what the ledger prevents.
  std::vector<std::byte> delta(8, std::byte{0x5A});
  codec.update(0, 0, delta, stripe.spans(k, m));
  codec.update(0, 0, delta, stripe.spans(k, m));
  for (int i = 0; i < 8; ++i) stripe[0][i] ^= std::byte{0x5A};  // the data changed once...
  codec.encode(stripe.cspans(0, k), fresh.spans(0, m));
  CHECK_FALSE(ec::test::equal(stripe[k], fresh[0]));  // ...but the parity saw it twice (cancelled)
}

TEST_CASE("apply_once does not burn a tag on a malformed delta", "[ec][unit]") {
  const Codec codec(2, 1);
  Fragments f(3, 16);
  DeltaLedger ledger(2);
  const std::vector<std::byte> delta(4);
  CHECK_THROWS_AS(apply_once(codec, ledger, {1, 0}, 0, 14, delta, f.spans(2, 1)), UsageError);
  CHECK(ledger.fresh({1, 0}));
  CHECK(apply_once(codec, ledger, {1, 0}, 0, 12, delta, f.spans(2, 1)));
}
