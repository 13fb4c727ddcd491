// Stripe placement: which rank owns which embedding row, and where each stripe's parity lives.
//
// Table t (rows x row_bytes) is cut into data fragments of `rows_per_fragment` consecutive rows;
// k consecutive fragments form the data of one stripe, and the stripe adds m parity fragments of
// the same size. Stripes are numbered globally, table after table (table t owns stripes
// [first_stripe(t), first_stripe(t) + stripes(t))), and never span two tables, so tables may have
// different row sizes. Rows past a table's end in its last stripe are zero padding: stored by
// their owner, never updated, recovered like any other bytes.
//
// Member j of global stripe s (fragments 0..k-1 data, k..n-1 parity) lives on rank (s + j) mod N.
// Since n = k + m <= N, the n members of a stripe are on n distinct ranks, so losing one rank
// loses at most one fragment per stripe, and the roles rotate by one rank per stripe (RAID-5
// style): over any N consecutive stripes every rank holds exactly k data and m parity fragments.
//
// Each rank stores, per table, its data fragments in a "data store" and its parity fragments in a
// "parity store", both arrays of fragment_bytes(t)-sized slots in increasing stripe order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace resil::ec {

struct TableShape {
  std::uint64_t rows = 0;
  std::size_t row_bytes = 0;  // e.g. dim * sizeof(float) (plus optimizer slots stored alongside)
};

/// Where one embedding row lives.
struct RowPlace {
  std::uint64_t stripe = 0;  // global stripe number
  int fragment = 0;          // data fragment index in [0, k)
  int rank = 0;              // owner rank
  std::uint64_t slot = 0;    // slot of that fragment in the owner's data store of the table
  std::size_t offset = 0;    // byte offset of the row inside the fragment (Codec::update offset)
};

/// Where one member (data or parity fragment) of a stripe lives.
struct FragmentPlace {
  int rank = 0;
  std::uint64_t slot = 0;  // data-store slot for fragment < k, parity-store slot otherwise
};

class StripeLayout {
public:
  /// Throws UsageError unless 1 <= k, 1 <= m, k + m <= ranks, k + m <= 256, rows_per_fragment >= 1
  /// and every row_bytes >= 1.
  StripeLayout(int k, int m, int ranks, std::vector<TableShape> tables, std::uint32_t rows_per_fragment = 1);

  int k() const noexcept { return k_; }
  int m() const noexcept { return m_; }
  int n() const noexcept { return k_ + m_; }
  int ranks() const noexcept { return ranks_; }
  std::uint32_t rows_per_fragment() const noexcept { return rows_per_fragment_; }
  int tables() const noexcept { return static_cast<int>(tables_.size()); }
  const TableShape& table(int t) const;

  std::uint64_t stripes() const noexcept { return first_stripe_.back(); }
  std::uint64_t stripes(int table) const;
  std::uint64_t first_stripe(int table) const;
  int table_of(std::uint64_t stripe) const;
  std::size_t fragment_bytes(int table) const;

  /// Owner, stripe, fragment, slot and in-fragment offset of row `row` of table `table`.
  RowPlace locate(int table, std::uint64_t row) const;
  /// First table row held by data fragment `fragment` of `stripe` (>= rows for pure padding).
  std::uint64_t first_row(std::uint64_t stripe, int fragment) const;

  /// Inline: every parity delta and degraded read asks it (one 64-bit division, then int arithmetic).
  int rank_of(std::uint64_t stripe, int fragment) const {
    if (fragment < 0 || fragment >= n()) bad_fragment(fragment);
    const int r = static_cast<int>(stripe % static_cast<std::uint64_t>(ranks_)) + fragment;
    return r < ranks_ ? r : r - ranks_;
  }
  /// The fragment index `rank` holds in `stripe`, or -1 when it is not a member.
  int fragment_on(std::uint64_t stripe, int rank) const;
  FragmentPlace place(std::uint64_t stripe, int fragment) const;

  /// Slots in `rank`'s data and parity stores of `table`.
  std::uint64_t data_slots(int rank, int table) const;
  std::uint64_t parity_slots(int rank, int table) const;

private:
  // Number of stripes s in [0, x) in which `rank` holds a data (parity) fragment.
  std::uint64_t count_before(int rank, std::uint64_t x, bool parity) const;
  void check_table(int t) const;
  void check_stripe(std::uint64_t s) const;
  [[noreturn]] void bad_fragment(int fragment) const;

  int k_, m_, ranks_;
  std::uint32_t rows_per_fragment_;
  std::vector<TableShape> tables_;
  std::vector<std::uint64_t> first_stripe_;  // tables + 1 entries
  std::vector<std::uint32_t> prefix_data_, prefix_parity_;  // ranks x (ranks + 1)
};

}  // namespace resil::ec
