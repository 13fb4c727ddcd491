#include "resil/ec/stripe.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "resil/core/error.hpp"

namespace resil::ec {

StripeLayout::StripeLayout(int k, int m, int ranks, std::vector<TableShape> tables, std::uint32_t rows_per_fragment)
    : k_(k), m_(m), ranks_(ranks), rows_per_fragment_(rows_per_fragment), tables_(std::move(tables)) {
  if (k < 1 || m < 1 || k + m > 256) {
    throw UsageError("ec::StripeLayout: need 1 <= k, 1 <= m, k + m <= 256, got k=" + std::to_string(k) +
                     ", m=" + std::to_string(m));
  }
  if (ranks < k + m) {
    throw UsageError("ec::StripeLayout: k + m = " + std::to_string(k + m) + " stripe members need as many distinct " +
                     "ranks, but there are only " + std::to_string(ranks));
  }
  if (rows_per_fragment < 1) throw UsageError("ec::StripeLayout: rows_per_fragment must be >= 1");
  first_stripe_.assign(1, 0);
  const std::uint64_t rows_per_stripe = std::uint64_t{rows_per_fragment} * static_cast<std::uint64_t>(k);
  for (std::size_t t = 0; t < tables_.size(); ++t) {
    if (tables_[t].row_bytes < 1) {
      throw UsageError("ec::StripeLayout: table " + std::to_string(t) + " has row_bytes = 0");
    }
    first_stripe_.push_back(first_stripe_.back() + (tables_[t].rows + rows_per_stripe - 1) / rows_per_stripe);
  }
  const auto nr = static_cast<std::size_t>(ranks);
  prefix_data_.assign(nr * (nr + 1), 0);
  prefix_parity_.assign(nr * (nr + 1), 0);
  for (int r = 0; r < ranks; ++r) {
    for (int i = 0; i < ranks; ++i) {
      const int f = fragment_on(static_cast<std::uint64_t>(i), r);
      const auto at = static_cast<std::size_t>(r) * (nr + 1) + static_cast<std::size_t>(i);
      prefix_data_[at + 1] = prefix_data_[at] + (f >= 0 && f < k_ ? 1 : 0);
      prefix_parity_[at + 1] = prefix_parity_[at] + (f >= k_ ? 1 : 0);
    }
  }
}

void StripeLayout::check_table(int t) const {
  if (t < 0 || t >= tables()) {
    throw UsageError("ec::StripeLayout: table " + std::to_string(t) + " out of range [0, " + std::to_string(tables()) +
                     ")");
  }
}

void StripeLayout::check_stripe(std::uint64_t s) const {
  if (s >= stripes()) {
    throw UsageError("ec::StripeLayout: stripe " + std::to_string(s) + " out of range [0, " +
                     std::to_string(stripes()) + ")");
  }
}

const TableShape& StripeLayout::table(int t) const {
  check_table(t);
  return tables_[static_cast<std::size_t>(t)];
}

std::uint64_t StripeLayout::stripes(int t) const {
  check_table(t);
  return first_stripe_[static_cast<std::size_t>(t) + 1] - first_stripe_[static_cast<std::size_t>(t)];
}

std::uint64_t StripeLayout::first_stripe(int t) const {
  check_table(t);
  return first_stripe_[static_cast<std::size_t>(t)];
}

int StripeLayout::table_of(std::uint64_t s) const {
  check_stripe(s);
  // The table whose range [first, next) holds s: the last first_stripe <= s among non-empty tables.
  const auto it = std::upper_bound(first_stripe_.begin(), first_stripe_.end(), s);
  return static_cast<int>(it - first_stripe_.begin()) - 1;
}

std::size_t StripeLayout::fragment_bytes(int t) const { return table(t).row_bytes * rows_per_fragment_; }

RowPlace StripeLayout::locate(int t, std::uint64_t row) const {
  check_table(t);
  const auto& shape = tables_[static_cast<std::size_t>(t)];
  if (row >= shape.rows) {
    throw UsageError("ec::StripeLayout: row " + std::to_string(row) + " of table " + std::to_string(t) +
                     " out of range [0, " + std::to_string(shape.rows) + ")");
  }
  const std::uint64_t frag_global = row / rows_per_fragment_;
  RowPlace p;
  p.stripe = first_stripe_[static_cast<std::size_t>(t)] + frag_global / static_cast<std::uint64_t>(k_);
  p.fragment = static_cast<int>(frag_global % static_cast<std::uint64_t>(k_));
  p.rank = rank_of(p.stripe, p.fragment);
  p.slot = count_before(p.rank, p.stripe, false) - count_before(p.rank, first_stripe_[static_cast<std::size_t>(t)], false);
  p.offset = static_cast<std::size_t>(row % rows_per_fragment_) * shape.row_bytes;
  return p;
}

std::uint64_t StripeLayout::first_row(std::uint64_t s, int fragment) const {
  const int t = table_of(s);
  if (fragment < 0 || fragment >= k_) {
    throw UsageError("ec::StripeLayout: data fragment " + std::to_string(fragment) + " out of range [0, " +
                     std::to_string(k_) + ")");
  }
  const std::uint64_t local = s - first_stripe_[static_cast<std::size_t>(t)];
  return (local * static_cast<std::uint64_t>(k_) + static_cast<std::uint64_t>(fragment)) * rows_per_fragment_;
}

void StripeLayout::bad_fragment(int fragment) const {
  throw UsageError("ec::StripeLayout: fragment " + std::to_string(fragment) + " out of range [0, " + std::to_string(n()) +
                   ")");
}

int StripeLayout::fragment_on(std::uint64_t s, int rank) const {
  if (rank < 0 || rank >= ranks_) {
    throw UsageError("ec::StripeLayout: rank " + std::to_string(rank) + " out of range [0, " +
                     std::to_string(ranks_) + ")");
  }
  const auto nr = static_cast<std::uint64_t>(ranks_);
  const auto j = static_cast<int>((static_cast<std::uint64_t>(rank) + nr - s % nr) % nr);
  return j < n() ? j : -1;
}

FragmentPlace StripeLayout::place(std::uint64_t s, int fragment) const {
  const int t = table_of(s);
  const int r = rank_of(s, fragment);
  const bool parity = fragment >= k_;
  return {r, count_before(r, s, parity) - count_before(r, first_stripe_[static_cast<std::size_t>(t)], parity)};
}

std::uint64_t StripeLayout::data_slots(int rank, int t) const {
  check_table(t);
  (void)fragment_on(0, rank);  // validates rank
  return count_before(rank, first_stripe_[static_cast<std::size_t>(t) + 1], false) -
         count_before(rank, first_stripe_[static_cast<std::size_t>(t)], false);
}

std::uint64_t StripeLayout::parity_slots(int rank, int t) const {
  check_table(t);
  (void)fragment_on(0, rank);
  return count_before(rank, first_stripe_[static_cast<std::size_t>(t) + 1], true) -
         count_before(rank, first_stripe_[static_cast<std::size_t>(t)], true);
}

std::uint64_t StripeLayout::count_before(int rank, std::uint64_t x, bool parity) const {
  const auto nr = static_cast<std::uint64_t>(ranks_);
  const auto& prefix = parity ? prefix_parity_ : prefix_data_;
  const std::uint64_t per_cycle = static_cast<std::uint64_t>(parity ? m_ : k_);
  return (x / nr) * per_cycle + prefix[static_cast<std::size_t>(rank) * (nr + 1) + static_cast<std::size_t>(x % nr)];
}

}  // namespace resil::ec
