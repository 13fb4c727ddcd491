#include <catch2/catch.hpp>
#include <isa-l/erasure_code.h>

#include <algorithm>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "ec_test_util.hpp"
#include "resil/core/error.hpp"
#include "resil/ec/codec.hpp"
#include "resil/ec/reference.hpp"

using namespace resil;
using namespace resil::ec;
using ec::test::Fragments;

namespace {

// Lengths that exercise ISA-L's scalar tail, its 16/32/64-byte vector paths and odd remainders.
std::vector<std::size_t> lengths_for(std::uint64_t seed) {
  Rng rng(seed, 1);
  std::vector<std::size_t> v = {1, 2, 15, 31, 33, 63, 64, 65, 127};
  for (int i = 0; i < 3; ++i) v.push_back(1 + rng.below(5000));
  v.push_back(2 * (1 + rng.below(2000)) + 1);  // odd
  return v;
}

// Every subset of {0..n-1} with 1..max elements, ascending.
std::vector<std::vector<int>> patterns(int n, int max) {
  std::vector<std::vector<int>> out;
  std::vector<int> cur;
  auto rec = [&](auto&& self, int next) -> void {
    if (!cur.empty()) out.push_back(cur);
    if (static_cast<int>(cur.size()) == max) return;
    for (int i = next; i < n; ++i) {
      cur.push_back(i);
      self(self, i + 1);
      cur.pop_back();
    }
  };
  rec(rec, 0);
  return out;
}

std::uint64_t binom(int n, int r) {
  std::uint64_t c = 1;
  for (int i = 1; i <= r; ++i) c = c * static_cast<std::uint64_t>(n - r + i) / static_cast<std::uint64_t>(i);
  return c;
}

}  // namespace

TEST_CASE("GF(2^8) reference arithmetic agrees with ISA-L's", "[ec][unit]") {
  int mismatches = 0;
  for (unsigned a = 0; a < 256; ++a) {
    for (unsigned b = 0; b < 256; ++b) {
      const auto x = static_cast<std::uint8_t>(a), y = static_cast<std::uint8_t>(b);
      mismatches += gf_mul_reference(x, y) != gf_mul(x, y);
    }
    if (a != 0) {
      const auto inv = gf_inv_reference(static_cast<std::uint8_t>(a));
      mismatches += gf_mul_reference(static_cast<std::uint8_t>(a), inv) != 1;
      mismatches += inv != gf_inv(static_cast<std::uint8_t>(a));
    }
  }
  CHECK(mismatches == 0);
  CHECK(gf_mul_reference(0x80, 2) == 0x1D);  // x^8 reduces to x^4 + x^3 + x^2 + 1
}

TEST_CASE("the generator is the systematic Cauchy matrix with an all-ones first parity row", "[ec][unit]") {
  const auto [k, m] = GENERATE(table<int, int>({{1, 1}, {2, 1}, {4, 2}, {6, 3}, {10, 4}, {200, 56}}));
  const Codec codec(k, m);
  const auto ref = cauchy_matrix_reference(k, m);
  REQUIRE(codec.matrix().size() == ref.size());
  CHECK(std::equal(ref.begin(), ref.end(), codec.matrix().begin()));
  const auto g = codec.matrix();
  CHECK(std::all_of(g.begin() + k * k, g.begin() + k * k + k, [](unsigned char x) { return x == 1; }));
  // Column j of the parity rows is the Cauchy column 1 / (i xor j) times (k xor j).
  int bad = 0;
  for (int i = k; i < k + m; ++i)
    for (int j = 0; j < k; ++j)
      bad += g[static_cast<std::size_t>(i * k + j)] !=
             gf_mul_reference(gf_inv_reference(static_cast<std::uint8_t>(i ^ j)), static_cast<std::uint8_t>(k ^ j));
  CHECK(bad == 0);
}

TEST_CASE("encode matches the byte-wise reference for odd, unaligned, end-of-allocation buffers", "[ec][unit]") {
  const auto [k, m] = GENERATE(table<int, int>({{1, 1}, {2, 1}, {3, 2}, {4, 2}, {6, 3}, {10, 4}, {17, 5}}));
  const Codec codec(k, m);
  std::uint64_t trial = 0;
  for (std::size_t len : lengths_for(static_cast<std::uint64_t>(k * 100 + m))) {
    INFO("k=" << k << " m=" << m << " len=" << len);
    Rng rng(11, ++trial);
    Fragments f(k + 2 * m, len, trial);
    for (int i = 0; i < k; ++i) ec::test::fill_random(f[i], rng);
    for (int j = k; j < k + 2 * m; ++j) ec::test::fill_random(f[j], rng);  // stale garbage to overwrite
    codec.encode(f.cspans(0, k), f.spans(k, m));
    encode_reference(k, m, f.cspans(0, k), f.spans(k + m, m));
    int bad = 0;
    for (int j = 0; j < m; ++j) bad += !ec::test::equal(f[k + j], f[k + m + j]);
    CHECK(bad == 0);
  }
}

TEST_CASE("every erasure pattern up to m is recovered bit-exactly", "[ec][unit]") {
  const auto [k, m] = GENERATE(table<int, int>({{1, 1}, {2, 1}, {1, 3}, {3, 2}, {4, 2}, {6, 3}, {10, 4}}));
  const Codec codec(k, m);
  const int n = k + m;
  const auto all = patterns(n, m);
  std::uint64_t expected_patterns = 0;
  for (int r = 1; r <= m; ++r) expected_patterns += binom(n, r);
  REQUIRE(all.size() == expected_patterns);

  const auto lens = lengths_for(static_cast<std::uint64_t>(k * 1000 + m));
  Rng pick(5, static_cast<std::uint64_t>(k * 1000 + m));
  std::vector<std::size_t> mismatched;
  for (std::size_t p = 0; p < all.size(); ++p) {
    // One length per pattern, rotating through the list; the seed fixes the data.
    const std::size_t len = lens[p % lens.size()];
    Fragments stripe(n, len, p);
    Rng rng(17, p);
    for (int i = 0; i < k; ++i) ec::test::fill_random(stripe[i], rng);
    codec.encode(stripe.cspans(0, k), stripe.spans(k, m));

    // Erased fragments in a shuffled order, to check out[i] receives erased[i].
    std::vector<int> erased = all[p];
    std::shuffle(erased.begin(), erased.end(), pick);
    const auto& plan = codec.plan(erased);
    std::vector<ConstBytes> sources;
    for (int s : plan.sources()) sources.push_back(stripe[s]);
    Fragments out(static_cast<int>(erased.size()), len, p + 1);
    for (int i = 0; i < out.size(); ++i) ec::test::fill_random(out[i], rng);
    codec.decode(erased, sources, out.spans(0, out.size()));
    bool ok = true;
    for (std::size_t i = 0; i < erased.size(); ++i) ok &= ec::test::equal(out[static_cast<int>(i)], stripe[erased[i]]);
    if (!ok) mismatched.push_back(p);
  }
  CHECK(mismatched.empty());
  CHECK(codec.cached_plans() == all.size());
  // Repeating a pattern reuses its plan.
  const std::vector<int> again = all.back();
  CHECK(&codec.plan(again) == &codec.plan(again));
  CHECK(codec.cached_plans() == all.size());
}

TEST_CASE("decode reads any k survivors and works on a byte range", "[ec][unit]") {
  const auto [k, m] = GENERATE(table<int, int>({{2, 1}, {4, 2}, {6, 3}, {10, 4}}));
  const Codec codec(k, m);
  const int n = k + m;
  const std::size_t len = 1000 + static_cast<std::size_t>(k);
  Fragments stripe(n, len, 3);
  Rng rng(23, static_cast<std::uint64_t>(k));
  for (int i = 0; i < k; ++i) ec::test::fill_random(stripe[i], rng);
  codec.encode(stripe.cspans(0, k), stripe.spans(k, m));

  for (int trial = 0; trial < 50; ++trial) {
    // A random set of m erasures, and a random choice of k of the survivors as sources.
    std::vector<int> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<int> erased(order.begin(), order.begin() + m);
    std::vector<int> src(order.begin() + m, order.end());
    std::sort(src.begin(), src.end());
    const auto& plan = codec.plan(erased, src);
    REQUIRE(std::vector<int>(plan.sources().begin(), plan.sources().end()) == src);
    // Degraded read of bytes [off, off + w): the same subspan of every fragment.
    const std::size_t off = rng.below(len), w = 1 + rng.below(len - off);
    std::vector<ConstBytes> in;
    for (int s : plan.sources()) in.push_back(stripe[s].subspan(off, w));
    Fragments out(m, w, static_cast<std::uint64_t>(trial));
    codec.decode(plan, in, out.spans(0, m));
    for (int t = 0; t < m; ++t) {
      INFO("trial " << trial << " target " << plan.targets()[static_cast<std::size_t>(t)]);
      CHECK(ec::test::equal(out[t], stripe[plan.targets()[static_cast<std::size_t>(t)]].subspan(off, w)));
    }
  }
}

TEST_CASE("wide codes recover m random erasures up to the GF(2^8) limit", "[ec][unit]") {
  const auto [k, m] = GENERATE(table<int, int>({{20, 8}, {200, 56}}));
  const Codec codec(k, m);
  const int n = k + m;
  const std::size_t len = 67;
  Fragments stripe(n, len, 8);
  Rng rng(37, static_cast<std::uint64_t>(k));
  for (int i = 0; i < k; ++i) ec::test::fill_random(stripe[i], rng);
  codec.encode(stripe.cspans(0, k), stripe.spans(k, m));
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<int> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    const std::vector<int> erased(order.begin(), order.begin() + m);
    const auto& plan = codec.plan(erased);
    std::vector<ConstBytes> src;
    for (int s : plan.sources()) src.push_back(stripe[s]);
    Fragments out(m, len, 9);
    codec.decode(erased, src, out.spans(0, m));
    int bad = 0;
    for (int i = 0; i < m; ++i) bad += !ec::test::equal(out[i], stripe[erased[static_cast<std::size_t>(i)]]);
    CHECK(bad == 0);
  }
}

TEST_CASE("delta updates in any order equal a fresh encode", "[ec][unit]") {
  const auto [k, m] = GENERATE(table<int, int>({{2, 1}, {4, 2}, {6, 3}, {10, 4}}));
  const Codec codec(k, m);
  const std::size_t len = 777;
  Fragments stripe(k + m, len, 9);
  Rng rng(31, static_cast<std::uint64_t>(k * 10 + m));
  for (int i = 0; i < k; ++i) ec::test::fill_random(stripe[i], rng);
  codec.encode(stripe.cspans(0, k), stripe.spans(k, m));

  // Random row rewrites (overlapping ranges allowed); each yields old XOR new at its offset.
  struct Delta {
    int fragment;
    std::size_t offset;
    std::vector<std::byte> bytes;
  };
  std::vector<Delta> deltas;
  for (int u = 0; u < 200; ++u) {
    const int f = static_cast<int>(rng.below(static_cast<std::uint64_t>(k)));
    const std::size_t off = rng.below(len), w = 1 + rng.below(std::min<std::size_t>(64, len - off));
    std::vector<std::byte> fresh(w), delta(w);
    ec::test::fill_random(fresh, rng);
    auto row = stripe[f].subspan(off, w);
    xor_delta(row, fresh, delta);
    std::copy(fresh.begin(), fresh.end(), row.begin());
    deltas.push_back({f, off, std::move(delta)});
  }
  std::shuffle(deltas.begin(), deltas.end(), rng);
  for (const auto& d : deltas) codec.update(d.fragment, d.offset, d.bytes, stripe.spans(k, m));

  Fragments fresh(m, len, 10);
  codec.encode(stripe.cspans(0, k), fresh.spans(0, m));
  for (int j = 0; j < m; ++j) CHECK(ec::test::equal(stripe[k + j], fresh[j]));
}

TEST_CASE("row-wise encode and update (one parity holder) equal the full ones", "[ec][unit]") {
  const auto [k, m] = GENERATE(table<int, int>({{2, 1}, {4, 2}, {6, 3}, {10, 4}}));
  const Codec codec(k, m);
  const std::size_t len = 301;
  Fragments f(k + 2 * m, len, 6);
  Rng rng(47, static_cast<std::uint64_t>(k));
  for (int i = 0; i < k; ++i) ec::test::fill_random(f[i], rng);
  codec.encode(f.cspans(0, k), f.spans(k, m));
  for (int j = 0; j < m; ++j) codec.encode_row(j, f.cspans(0, k), f[k + m + j]);
  for (int j = 0; j < m; ++j) CHECK(ec::test::equal(f[k + j], f[k + m + j]));
  for (int u = 0; u < 30; ++u) {
    const int frag = static_cast<int>(rng.below(static_cast<std::uint64_t>(k)));
    const std::size_t off = rng.below(len), w = 1 + rng.below(len - off);
    std::vector<std::byte> delta(w);
    ec::test::fill_random(delta, rng);
    codec.update(frag, off, delta, f.spans(k, m));
    for (int j = 0; j < m; ++j) codec.update_row(j, frag, off, delta, f[k + m + j]);
  }
  for (int j = 0; j < m; ++j) CHECK(ec::test::equal(f[k + j], f[k + m + j]));
  CHECK_THROWS_AS(codec.update_row(m, 0, 0, f[0].first(1), f[k]), UsageError);
  CHECK_THROWS_AS(codec.encode_row(0, f.cspans(0, k), f[k].first(len - 1)), UsageError);
}

TEST_CASE("a delta applied twice cancels itself", "[ec][unit]") {
  const Codec codec(4, 2);
  const std::size_t len = 96;
  Fragments stripe(6, len, 1);
  Rng rng(41, 0);
  for (int i = 0; i < 4; ++i) ec::test::fill_random(stripe[i], rng);
  codec.encode(stripe.cspans(0, 4), stripe.spans(4, 2));
  const std::vector<std::byte> p0(stripe[4].begin(), stripe[4].end()), p1(stripe[5].begin(), stripe[5].end());
  std::vector<std::byte> delta(17);
  ec::test::fill_random(delta, rng);
  delta[0] = std::byte{1};  // never the all-zero delta
  codec.update(2, 40, delta, stripe.spans(4, 2));
  CHECK_FALSE(ec::test::equal(stripe[4], p0));
  codec.update(2, 40, delta, stripe.spans(4, 2));
  CHECK(ec::test::equal(stripe[4], p0));
  CHECK(ec::test::equal(stripe[5], p1));
}

TEST_CASE("codec misuse is reported with the offending sizes and indices", "[ec][unit]") {
  CHECK_THROWS_AS(Codec(0, 1), UsageError);
  CHECK_THROWS_AS(Codec(1, 0), UsageError);
  CHECK_THROWS_AS(Codec(200, 57), UsageError);
  const Codec codec(4, 2);
  Fragments f(6, 32);
  Fragments shorter(1, 31);

  SECTION("encode") {
    CHECK_THROWS_AS(codec.encode(f.cspans(0, 3), f.spans(4, 2)), UsageError);
    auto data = f.cspans(0, 4);
    data[2] = shorter[0];
    CHECK_THROWS_WITH(codec.encode(data, f.spans(4, 2)), Catch::Contains("data fragment 2 has 31 bytes"));
  }
  SECTION("update") {
    CHECK_THROWS_AS(codec.update(4, 0, f[0].first(1), f.spans(4, 2)), UsageError);
    CHECK_THROWS_AS(codec.update(-1, 0, f[0].first(1), f.spans(4, 2)), UsageError);
    CHECK_THROWS_WITH(codec.update(1, 30, f[0].first(3), f.spans(4, 2)), Catch::Contains("exceeds parity fragment"));
    CHECK_NOTHROW(codec.update(1, 29, f[0].first(3), f.spans(4, 2)));
  }
  SECTION("decode") {
    const std::vector<int> three = {0, 1, 5};
    CHECK_THROWS_AS(codec.plan(three), DataLossError);
    CHECK_THROWS_WITH(codec.plan(three), Catch::Contains("tolerates at most 2"));
    CHECK_THROWS_AS(codec.plan(std::vector<int>{6}), UsageError);
    CHECK_THROWS_AS(codec.plan(std::vector<int>{1, 1}), UsageError);
    CHECK_THROWS_AS(codec.plan(std::vector<int>{1}, std::vector<int>{0, 1, 2, 3}), UsageError);  // 1 is erased
    CHECK_THROWS_AS(codec.plan(std::vector<int>{1}, std::vector<int>{0, 2, 3}), UsageError);     // too few
    const std::vector<int> erased = {1};
    const auto src = f.cspans(0, 4);
    CHECK_THROWS_WITH(codec.decode(erased, src, f.spans(4, 2)), Catch::Contains("1 erased fragments but 2 output"));
    CHECK_THROWS_WITH(codec.decode(erased, src, shorter.spans(0, 1)), Catch::Contains("output 0 has 31 bytes"));
    CHECK_THROWS_AS(codec.decode(erased, f.cspans(0, 3), f.spans(5, 1)), UsageError);
  }
}

TEST_CASE("empty inputs are no-ops", "[ec][unit]") {
  const Codec codec(3, 2);
  Fragments f(5, 0);
  CHECK_NOTHROW(codec.encode(f.cspans(0, 3), f.spans(3, 2)));
  CHECK_NOTHROW(codec.update(0, 0, ConstBytes{}, f.spans(3, 2)));
  Fragments g(5, 8);
  CHECK_NOTHROW(codec.decode(std::vector<int>{}, g.cspans(0, 3), std::vector<Bytes>{}));
}

TEST_CASE("plans may be built and used from several threads at once", "[ec][unit]") {
  const Codec codec(6, 3);
  const std::size_t len = 512;
  Fragments stripe(9, len, 2);
  Rng rng(61, 0);
  for (int i = 0; i < 6; ++i) ec::test::fill_random(stripe[i], rng);
  codec.encode(stripe.cspans(0, 6), stripe.spans(6, 3));
  const auto all = patterns(9, 3);
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      // Every thread walks all patterns from a different start, so plans are built concurrently.
      Fragments out(3, len, static_cast<std::uint64_t>(t));
      for (std::size_t i = 0; i < all.size(); ++i) {
        const auto& erased = all[(i + static_cast<std::size_t>(t) * 37) % all.size()];
        const auto& plan = codec.plan(erased);
        std::vector<ConstBytes> src;
        for (int s : plan.sources()) src.push_back(stripe[s]);
        auto dst = out.spans(0, static_cast<int>(erased.size()));
        codec.decode(erased, src, dst);
        for (std::size_t e = 0; e < erased.size(); ++e) failures[static_cast<std::size_t>(t)] += !ec::test::equal(dst[e], stripe[erased[e]]);
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures == std::vector<int>(4, 0));
  CHECK(codec.cached_plans() == all.size());
}
