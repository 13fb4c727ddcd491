#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include "resil/core/error.hpp"
#include "resil/ec/stripe.hpp"

using namespace resil;
using namespace resil::ec;

TEST_CASE("stripe layout invariants for N = k+m .. 16 ranks", "[ec][unit]") {
  const auto [k, m] = GENERATE(table<int, int>({{2, 1}, {3, 1}, {4, 2}, {6, 3}, {10, 4}, {1, 2}}));
  const auto rpf = GENERATE(1u, 3u);
  // Table sizes: empty, smaller than a stripe, exact multiples and ragged ends; different row sizes.
  const std::vector<TableShape> shapes = {{0, 8}, {1, 4}, {37, 16}, {static_cast<std::uint64_t>(k) * rpf * 5, 12},
                                          {101, 256}};
  for (int ranks = k + m; ranks <= 16; ++ranks) {
    INFO("k=" << k << " m=" << m << " rows/fragment=" << rpf << " ranks=" << ranks);
    const StripeLayout lay(k, m, ranks, shapes, rpf);
    const int n = k + m;

    // Each stripe: n members on n distinct ranks, fragment_on inverts rank_of, the roles
    // shift by one rank from one stripe to the next (RAID-5 rotation).
    int bad_members = 0;
    for (std::uint64_t s = 0; s < lay.stripes(); ++s) {
      std::set<int> members;
      for (int j = 0; j < n; ++j) {
        const int r = lay.rank_of(s, j);
        members.insert(r);
        bad_members += lay.fragment_on(s, r) != j;
        if (s + 1 < lay.stripes()) bad_members += lay.rank_of(s + 1, j) != (r + 1) % ranks;
      }
      bad_members += static_cast<int>(members.size()) != n;
      int outsiders = 0;
      for (int r = 0; r < ranks; ++r) outsiders += lay.fragment_on(s, r) < 0;
      bad_members += outsiders != ranks - n;
    }
    CHECK(bad_members == 0);

    // Slots: for each (rank, table) the data (parity) fragments fill slots 0..count-1 exactly once,
    // in increasing stripe order.
    int bad_slots = 0;
    std::vector<std::uint64_t> data_total(static_cast<std::size_t>(ranks)), parity_total(static_cast<std::size_t>(ranks));
    for (int t = 0; t < lay.tables(); ++t) {
      std::vector<std::vector<std::uint64_t>> data(static_cast<std::size_t>(ranks)), parity(static_cast<std::size_t>(ranks));
      for (std::uint64_t s = lay.first_stripe(t); s < lay.first_stripe(t) + lay.stripes(t); ++s) {
        bad_slots += lay.table_of(s) != t;
        for (int j = 0; j < n; ++j) {
          const auto p = lay.place(s, j);
          (j < k ? data : parity)[static_cast<std::size_t>(p.rank)].push_back(p.slot);
        }
      }
      for (int r = 0; r < ranks; ++r) {
        const auto& d = data[static_cast<std::size_t>(r)];
        const auto& q = parity[static_cast<std::size_t>(r)];
        bad_slots += d.size() != lay.data_slots(r, t) || q.size() != lay.parity_slots(r, t);
        for (std::size_t i = 0; i < d.size(); ++i) bad_slots += d[i] != i;
        for (std::size_t i = 0; i < q.size(); ++i) bad_slots += q[i] != i;
        data_total[static_cast<std::size_t>(r)] += d.size();
        parity_total[static_cast<std::size_t>(r)] += q.size();
      }
    }
    CHECK(bad_slots == 0);

    // Balance: over all stripes the per-rank counts differ by at most one stripe's worth.
    const auto [dmin, dmax] = std::minmax_element(data_total.begin(), data_total.end());
    const auto [pmin, pmax] = std::minmax_element(parity_total.begin(), parity_total.end());
    CHECK(*dmax - *dmin <= static_cast<std::uint64_t>(k));
    CHECK(*pmax - *pmin <= static_cast<std::uint64_t>(m));
    if (lay.stripes() % static_cast<std::uint64_t>(ranks) == 0) {
      CHECK(*dmax == *dmin);
      CHECK(*pmax == *pmin);
    }

    // Rows: every row has one home (rank, table, slot, offset), consistent with place() and
    // first_row(), inside the owner's store, and no two rows share it.
    int bad_rows = 0;
    std::set<std::tuple<int, int, std::uint64_t, std::size_t>> homes;
    std::uint64_t total_rows = 0;
    for (int t = 0; t < lay.tables(); ++t) {
      const auto& shape = lay.table(t);
      total_rows += shape.rows;
      for (std::uint64_t row = 0; row < shape.rows; ++row) {
        const auto p = lay.locate(t, row);
        const auto fp = lay.place(p.stripe, p.fragment);
        bad_rows += fp.rank != p.rank || fp.slot != p.slot || lay.table_of(p.stripe) != t;
        bad_rows += p.fragment < 0 || p.fragment >= k;
        bad_rows += lay.first_row(p.stripe, p.fragment) + p.offset / shape.row_bytes != row;
        bad_rows += p.offset % shape.row_bytes != 0 || p.offset + shape.row_bytes > lay.fragment_bytes(t);
        bad_rows += p.slot >= lay.data_slots(p.rank, t);
        homes.emplace(p.rank, t, p.slot, p.offset);
      }
    }
    CHECK(bad_rows == 0);
    CHECK(homes.size() == total_rows);
  }
}

TEST_CASE("stripe layout rejects impossible configurations", "[ec][unit]") {
  CHECK_THROWS_WITH(StripeLayout(4, 2, 5, {{10, 4}}), Catch::Contains("only 5"));
  CHECK_THROWS_AS(StripeLayout(0, 2, 5, {{10, 4}}), UsageError);
  CHECK_THROWS_AS(StripeLayout(2, 1, 3, {{10, 0}}), UsageError);
  CHECK_THROWS_AS(StripeLayout(2, 1, 3, {{10, 4}}, 0), UsageError);
  const StripeLayout lay(2, 1, 3, {{10, 4}, {3, 8}});
  CHECK(lay.stripes() == 5 + 2);
  CHECK(lay.locate(1, 0).stripe == 5);
  CHECK_THROWS_WITH(lay.locate(1, 3), Catch::Contains("row 3 of table 1"));
  CHECK_THROWS_AS(lay.locate(2, 0), UsageError);
  CHECK_THROWS_AS(lay.rank_of(0, 3), UsageError);
  CHECK_THROWS_AS(lay.fragment_on(0, 3), UsageError);
  CHECK_THROWS_AS(lay.place(7, 0), UsageError);
  CHECK_THROWS_AS(lay.first_row(0, 2), UsageError);
}
