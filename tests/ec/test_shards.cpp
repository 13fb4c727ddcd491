// The three libec pieces used together the way ec-train uses them, without MPI: N ranks' data
// and parity stores in memory, row updates shipped as XOR deltas to the parity holders through
// their ledgers (with resends), m ranks wiped and rebuilt by decoding, training continuing after.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <vector>

#include "ec_test_util.hpp"
#include "resil/core/error.hpp"
#include "resil/ec/codec.hpp"
#include "resil/ec/ledger.hpp"
#include "resil/ec/stripe.hpp"

using namespace resil;
using namespace resil::ec;

namespace {

struct Rank {
  std::vector<std::vector<std::byte>> data, parity;  // per table
  std::vector<DeltaLedger> ledgers;                  // per table: source = parity slot * k + fragment
};

struct Cluster {
  StripeLayout lay;
  Codec codec;
  std::vector<Rank> ranks;

  Cluster(int k, int m, int n_ranks, std::vector<TableShape> shapes, std::uint32_t rpf)
      : lay(k, m, n_ranks, std::move(shapes), rpf), codec(k, m), ranks(static_cast<std::size_t>(n_ranks)) {
    for (int r = 0; r < n_ranks; ++r) reset(r);
  }
  void reset(int r) {  // a fresh (or wiped) rank: garbage in its stores, an empty ledger
    auto& rk = ranks[static_cast<std::size_t>(r)];
    rk.data.clear();
    rk.parity.clear();
    rk.ledgers.clear();
    for (int t = 0; t < lay.tables(); ++t) {
      rk.data.emplace_back(lay.data_slots(r, t) * lay.fragment_bytes(t), std::byte{0xEE});
      rk.parity.emplace_back(lay.parity_slots(r, t) * lay.fragment_bytes(t), std::byte{0xEE});
      rk.ledgers.emplace_back(lay.parity_slots(r, t) * static_cast<std::uint64_t>(lay.k()));
    }
  }
  Bytes fragment(std::uint64_t s, int j) {
    const int t = lay.table_of(s);
    const auto p = lay.place(s, j);
    auto& store = (j < lay.k() ? ranks[static_cast<std::size_t>(p.rank)].data
                               : ranks[static_cast<std::size_t>(p.rank)].parity)[static_cast<std::size_t>(t)];
    return Bytes(store).subspan(p.slot * lay.fragment_bytes(t), lay.fragment_bytes(t));
  }
  std::vector<Bytes> parity_of(std::uint64_t s) {
    std::vector<Bytes> v;
    for (int j = lay.k(); j < lay.n(); ++j) v.push_back(fragment(s, j));
    return v;
  }
  std::vector<ConstBytes> data_of(std::uint64_t s) {
    std::vector<ConstBytes> v;
    for (int j = 0; j < lay.k(); ++j) v.push_back(fragment(s, j));
    return v;
  }
  Bytes row(int t, std::uint64_t r) {
    const auto p = lay.locate(t, r);
    return fragment(p.stripe, p.fragment).subspan(p.offset, lay.table(t).row_bytes);
  }
  // Ship one fragment's delta of `step` to every parity holder of its stripe.
  int send_delta(std::uint64_t step, std::uint64_t s, int f, std::size_t off, ConstBytes delta) {
    int applied = 0;
    const int t = lay.table_of(s);
    for (int j = lay.k(); j < lay.n(); ++j) {
      const auto p = lay.place(s, j);
      // Each holder owns one parity member of the stripe and updates only that row.
      auto& rk = ranks[static_cast<std::size_t>(p.rank)];
      const DeltaTag tag{step, p.slot * static_cast<std::uint64_t>(lay.k()) + static_cast<std::uint64_t>(f)};
      if (!apply_once(codec, rk.ledgers[static_cast<std::size_t>(t)], tag, f, off, delta, j - lay.k(), fragment(s, j)))
        continue;
      ++applied;
    }
    return applied;
  }
  bool parity_consistent() {
    for (std::uint64_t s = 0; s < lay.stripes(); ++s) {
      const auto len = lay.fragment_bytes(lay.table_of(s));
      ec::test::Fragments fresh(lay.m(), len);
      codec.encode(data_of(s), fresh.spans(0, lay.m()));
      for (int j = 0; j < lay.m(); ++j)
        if (!ec::test::equal(fresh[j], fragment(s, lay.k() + j))) return false;
    }
    return true;
  }
};

}  // namespace

TEST_CASE("shards with exactly-once deltas survive m wiped ranks bit-exactly", "[ec][unit]") {
  const auto [k, m, n_ranks] = GENERATE(table<int, int, int>({{2, 1, 3}, {4, 2, 7}, {3, 2, 8}}));
  INFO("k=" << k << " m=" << m << " N=" << n_ranks);
  Cluster c(k, m, n_ranks, {{50, 24}, {23, 40}}, 2);
  Rng rng(71, static_cast<std::uint64_t>(k * 100 + n_ranks));

  // Initial values (the zero padding past each table's end stays zero), then a full encode.
  for (std::uint64_t s = 0; s < c.lay.stripes(); ++s)
    for (int j = 0; j < k; ++j) std::fill(c.fragment(s, j).begin(), c.fragment(s, j).end(), std::byte{0});
  for (int t = 0; t < c.lay.tables(); ++t)
    for (std::uint64_t r = 0; r < c.lay.table(t).rows; ++r) ec::test::fill_random(c.row(t, r), rng);
  for (std::uint64_t s = 0; s < c.lay.stripes(); ++s) c.codec.encode(c.data_of(s), c.parity_of(s));

  std::uint64_t step = 0;
  auto train = [&](int steps) {
    for (int i = 0; i < steps; ++i, ++step) {
      // Touch random rows; the owner snapshots each touched fragment once, so a fragment sends
      // one delta per step however many of its rows changed.
      std::map<std::pair<std::uint64_t, int>, std::vector<std::byte>> before;
      for (int u = 0; u < 12; ++u) {
        const int t = static_cast<int>(rng.below(2));
        const auto r = rng.below(c.lay.table(t).rows);
        const auto p = c.lay.locate(t, r);
        auto frag = c.fragment(p.stripe, p.fragment);
        before.try_emplace({p.stripe, p.fragment}, frag.begin(), frag.end());
        ec::test::fill_random(c.row(t, r), rng);
      }
      for (auto& [key, old] : before) {
        auto now = c.fragment(key.first, key.second);
        xor_delta(old, now, old);
        REQUIRE(c.send_delta(step, key.first, key.second, 0, old) == m);
        if (rng.below(4) == 0) CHECK(c.send_delta(step, key.first, key.second, 0, old) == 0);  // a resend
      }
    }
  };
  train(15);
  REQUIRE(c.parity_consistent());

  // Snapshot, wipe m ranks, rebuild every fragment they held from k survivors.
  const auto snapshot = c.ranks;
  std::vector<int> failed;
  for (int r = 0; r < m; ++r) failed.push_back((2 * r + 1) % n_ranks);
  for (int r : failed) c.reset(r);
  for (std::uint64_t s = 0; s < c.lay.stripes(); ++s) {
    std::vector<int> erased;
    for (int r : failed)
      if (const int f = c.lay.fragment_on(s, r); f >= 0) erased.push_back(f);
    if (erased.empty()) continue;
    const auto& plan = c.codec.plan(erased);
    std::vector<ConstBytes> src;
    for (int f : plan.sources()) src.push_back(c.fragment(s, f));
    std::vector<Bytes> out;
    for (int f : erased) out.push_back(c.fragment(s, f));
    c.codec.decode(erased, src, out);
    // A rebuilt parity fragment already holds every delta up to the last committed step.
    for (int f : erased) {
      if (f < k) continue;
      const auto p = c.lay.place(s, f);
      for (int i = 0; i < k; ++i) {
        c.ranks[static_cast<std::size_t>(p.rank)].ledgers[static_cast<std::size_t>(c.lay.table_of(s))].mark(
            p.slot * static_cast<std::uint64_t>(k) + static_cast<std::uint64_t>(i), step - 1);
      }
    }
  }
  int differing = 0;
  for (int r : failed) {
    const auto& a = c.ranks[static_cast<std::size_t>(r)];
    const auto& b = snapshot[static_cast<std::size_t>(r)];
    differing += a.data != b.data;
    differing += a.parity != b.parity;
  }
  CHECK(differing == 0);

  // Training goes on with the rebuilt ranks, and the parity stays exact.
  train(10);
  CHECK(c.parity_consistent());

  // One failure more than m in some stripe cannot be recovered, and says so.
  std::vector<int> too_many;
  for (int j = 0; j <= m; ++j) too_many.push_back(j);
  CHECK_THROWS_AS(c.codec.plan(too_many), DataLossError);
}
