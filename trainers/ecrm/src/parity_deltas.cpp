#include "resil/ecrm/parity_deltas.hpp"

#include <cstring>
#include <string>

#include "resil/core/error.hpp"

namespace resil::ecrm {

void ParityDeltas::build(std::int64_t step, const std::vector<RowId>& owned, const std::vector<ec::RowPlace>& place,
                         std::span<const std::byte> old, std::span<const std::byte> fresh) {
  const auto& lay = store_.layout();
  const int N = net_.size(), k = store_.k();
  const auto rb = store_.row_bytes();
  const std::size_t head = sizeof(std::uint64_t) + 2 * sizeof(std::uint32_t), per_row = sizeof(std::uint32_t) + rb;
  std::vector<std::pair<std::size_t, std::size_t>> runs;  // [begin, end) of owned rows in one (stripe, fragment)
  for (std::size_t i = 0; i < owned.size();) {
    std::size_t e = i + 1;
    while (e < owned.size() && place[e].stripe == place[i].stripe && place[e].fragment == place[i].fragment) ++e;
    runs.emplace_back(i, e);
    i = e;
  }
  pending_.assign(static_cast<std::size_t>(N), {});
  std::vector<std::size_t> need(static_cast<std::size_t>(N), 0);  // sized up front: one allocation each
  for (const auto& [i, e] : runs)
    for (int j = k; j < lay.n(); ++j) need[static_cast<std::size_t>(lay.rank_of(place[i].stripe, j))] += head + (e - i) * per_row;
  for (int r = 0; r < N; ++r) pending_[static_cast<std::size_t>(r)].reserve(need[static_cast<std::size_t>(r)]);
  // The XOR is computed straight into the first holder's message and copied to the others.
  for (const auto& [i, e] : runs) {
    const auto& p = place[i];
    const std::byte* first = nullptr;  // the first holder's copy of this run's rows
    for (int j = k; j < lay.n(); ++j) {
      Writer w(pending_[static_cast<std::size_t>(lay.rank_of(p.stripe, j))]);
      w.put(p.stripe);
      w.put(static_cast<std::uint32_t>(p.fragment));
      w.put(static_cast<std::uint32_t>(e - i));
      std::byte* out = w.grow((e - i) * per_row);
      if (first) {
        std::memcpy(out, first, (e - i) * per_row);
        continue;
      }
      first = out;
      for (std::size_t q = i; q < e; ++q, out += per_row) {
        const auto off = static_cast<std::uint32_t>(place[q].offset);
        std::memcpy(out, &off, sizeof off);
        const ec::ConstBytes now = fresh.empty() ? ec::ConstBytes(store_.row(owned[q])) : ec::ConstBytes(fresh.data() + q * rb, rb);
        ec::xor_delta(ec::ConstBytes(old.data() + q * rb, rb), now, ec::Bytes(out + sizeof off, rb));
      }
    }
  }
  pending_step_ = step;
}

void ParityDeltas::sent() noexcept {
  pending_step_ = -1;
  pending_.clear();
}

void ParityDeltas::apply(std::uint64_t step, std::span<const ByteView> in) {
  const int me = net_.rank(), k = store_.k();
  const auto& lay = store_.layout();
  const auto rb = store_.row_bytes();
  for (const auto& buf : in) {
    Reader rd(buf, "parity delta");
    while (!rd.done()) {
      const auto stripe = rd.get<std::uint64_t>();
      const auto fragment = rd.get<std::uint32_t>();
      const auto nrows = rd.get<std::uint32_t>();
      if (stripe >= lay.stripes() || fragment >= static_cast<std::uint32_t>(k)) throw EcError("parity delta for stripe " + std::to_string(stripe));
      const int t = lay.table_of(stripe);
      const int j = lay.fragment_on(stripe, me);
      if (j < k) throw EcError("rank " + std::to_string(me) + " got a parity delta for stripe " + std::to_string(stripe) + " it holds no parity of");
      const bool drop = recovery_.lost(me, stripe);
      const auto at = lay.place(stripe, j);  // this rank (fragment_on said so)
      const ec::DeltaTag tag{step, at.slot * static_cast<std::uint64_t>(k) + fragment};
      // One tag per (step, fragment): a duplicate here would be a protocol bug, so it throws.
      if (!drop) store_.require_delta(t, tag);
      // nrows x [u32 offset][row delta]
      const std::size_t per_row = sizeof(std::uint32_t) + rb;
      const std::byte* rows = rd.take(std::size_t{nrows} * per_row);
      if (drop) continue;
      const auto par = store_.member(t, j, at);
      const auto offset = [&](std::size_t q) {
        std::uint32_t off;
        std::memcpy(&off, rows + q * per_row, sizeof off);
        return std::size_t{off};
      };
      for (std::size_t q = 0; q < nrows; ++q) {
        if (q + prefetch_ahead < nrows)
          if (const auto ahead = offset(q + prefetch_ahead); ahead + rb <= par.size()) prefetch_row(par.subspan(ahead, rb));
        const auto off = offset(q);
        if (off + rb > par.size()) throw EcError("parity delta for stripe " + std::to_string(stripe) + " at offset " + std::to_string(off));
        store_.before_write(par.subspan(off, rb));  // the one-step undo record (segment.hpp)
        if (!store_.has_checksums()) {
          store_.codec().update_row(j - k, static_cast<int>(fragment), off, ec::ConstBytes(rows + q * per_row + sizeof(std::uint32_t), rb), par);
          continue;
        }
        // Checked as it is folded: the parity row's bytes against its checksum, then the checksum
        // follows the fold (an error already there stays visible in it).
        const auto prow = static_cast<std::uint32_t>(off / rb);
        auto& sum = store_.checksum(t, j, at, prow);
        const std::uint32_t before = ShardStore::crc(par.subspan(off, rb));
        store_.codec().update_row(j - k, static_cast<int>(fragment), off, ec::ConstBytes(rows + q * per_row + sizeof(std::uint32_t), rb), par);
        if (before != sum && mismatches_) mismatches_->push_back({stripe, static_cast<std::uint32_t>(j), prow});
        store_.before_write(std::as_bytes(std::span(&sum, 1)));
        sum ^= before ^ ShardStore::crc(par.subspan(off, rb));
      }
    }
  }
}

void ParityDeltas::flush() {
  if (pending_step_ < 0) return;  // the same on every rank: all run the same steps
  const auto in = net_.exchange(pending_);
  std::vector<ByteView> parts;
  for (int r = 0; r < in.size(); ++r) parts.push_back(in.from(r));
  apply(static_cast<std::uint64_t>(pending_step_), parts);
  sent();
}

}  // namespace resil::ecrm
