// The sharded embedding tables of one rank: its data fragments and parity fragments.
//
// Table t is rows x dim fp32 plus one Adagrad accumulator per value; each row is stored as
// [dim weights | dim accumulators] (row_bytes = 8 * dim), so one row's update is one contiguous
// byte range and its XOR delta covers parameters and optimizer state at once. Rows are placed by
// ec::StripeLayout: this rank keeps a data store (its data fragments) and a parity store (its
// parity fragments) per table, and per table a delta ledger for its parity fragments.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "resil/ckpt/hash.hpp"
#include "resil/ec/codec.hpp"
#include "resil/ec/ledger.hpp"
#include "resil/ec/stripe.hpp"
#include "resil/ecrm/transport.hpp"

namespace resil::ecrm {

/// One (table, row) of the embedding tables.
struct RowId {
  std::uint32_t table = 0, row = 0;
  auto operator<=>(const RowId&) const = default;
};

/// A byte range of one member (data or parity fragment) held by some rank.
struct FetchReq {
  std::uint32_t table = 0, parity = 0;  // parity: 0 = data store, 1 = parity store
  std::uint64_t slot = 0, offset = 0, len = 0;
};

/// One row of one member of a stripe: row `row` (0 <= row < rows per fragment) of member `member`
/// (0..k-1 data, k..n-1 parity). Rows at the same `row` of a stripe's members form one codeword.
struct MemberRow {
  std::uint64_t stripe = 0;
  std::uint32_t member = 0, row = 0;
  auto operator<=>(const MemberRow&) const = default;
};

class UndoSink;

/// How many rows ahead a loop over scattered rows asks for the next ones (prefetch_row).
inline constexpr std::size_t prefetch_ahead = 8;

/// Start loading a row that a loop will write a few rows from now. The rows a step touches are
/// scattered over the whole store: in a store of 1 GiB each costs a TLB and a cache miss (~300 ns
/// here, measured in docs/design/ec-train-protocol.md, "Steady-state cost of a commit"), and loops that ask ahead overlap those misses.
inline void prefetch_row(std::span<const std::byte> row) noexcept {
  for (std::size_t i = 0; i < row.size(); i += 64) __builtin_prefetch(row.data() + i, 1);
}

class ShardStore {
public:
  /// With `own_memory` false the store has no bytes until use_memory() (the engine places them in
  /// its shared-memory segment, segment.hpp, so that they outlive the process).
  /// `checksums`: keep a CRC-32C per row of every data and parity fragment (ec-train --scrub,
  /// scrub.hpp), in the store's memory after each table's ledger words.
  ShardStore(const Transport& net, int k, int m, int tables, std::uint32_t rows, int dim, std::uint32_t rows_per_fragment,
             bool own_memory = true, bool checksums = false);

  /// Bytes of all data and parity fragments of this rank and the parity ledgers' words.
  std::size_t memory_bytes() const noexcept { return bytes_; }
  /// Work in `mem` (memory_bytes() long, kept by the caller) from now on; its bytes are the store's.
  void use_memory(std::span<std::byte> mem);
  /// Where the old bytes of a range go before the store's owner overwrites it in place (null: nowhere).
  void set_undo(UndoSink* undo) noexcept { undo_ = undo; }
  /// Record `range` (inside this store) in the undo sink before overwriting it.
  void before_write(std::span<const std::byte> range);

  const ec::StripeLayout& layout() const noexcept { return lay_; }
  const ec::Codec& codec() const noexcept { return codec_; }
  int k() const noexcept { return k_; }
  int dim() const noexcept { return dim_; }
  std::size_t row_bytes() const noexcept { return row_bytes_; }
  std::span<std::byte> data_store(int t) { return data_[static_cast<std::size_t>(t)]; }
  /// The stored bytes of a row this rank owns (meaningful only while its fragment is not lost).
  std::span<std::byte> row(RowId r);
  /// The same for a row whose place (layout().locate()) the caller already has: no second locate.
  std::span<std::byte> row(RowId r, const ec::RowPlace& p) {
    return data_[r.table].subspan(p.slot * lay_.fragment_bytes(static_cast<int>(r.table)) + p.offset, row_bytes_);
  }
  /// This rank's fragment j of `stripe`.
  std::span<std::byte> member(std::uint64_t stripe, int j);
  /// The same, of table t, at `p` = layout().place(stripe, j) (the caller has it: no second place).
  std::span<std::byte> member(int t, int j, const ec::FragmentPlace& p) {
    auto& store = j < k_ ? data_[static_cast<std::size_t>(t)] : parity_[static_cast<std::size_t>(t)];
    const auto fb = lay_.fragment_bytes(t);
    return store.subspan(p.slot * fb, fb);
  }
  /// Table t's ledger: source = parity slot * k + data fragment. Its words are part of the store's
  /// memory (after the table's fragments), so they live in the segment with the bytes they describe.
  ec::DeltaLedger& ledger(int t) { return ledgers_[static_cast<std::size_t>(t)]; }
  /// Admit a parity delta into table t's ledger (EcError for a duplicate), recording the ledger
  /// word's old value in the undo sink first: a rollback restores it with the parity bytes.
  void require_delta(int t, ec::DeltaTag tag);

  // ---- row checksums (only with `checksums`) ----
  /// CRC-32C (ISA-L crc32_iscsi) of a row's bytes. Affine over XOR for one length: crc(a) ^ crc(b)
  /// ^ crc(c) = crc(a ^ b ^ c), which is what lets a checksum follow a delta without reading the row.
  static std::uint32_t crc(ec::ConstBytes bytes) noexcept;
  bool has_checksums() const noexcept { return checksums_; }
  std::uint32_t rows_per_fragment() const noexcept { return lay_.rows_per_fragment(); }
  /// The checksum word of row `row` (0 <= row < B) of this rank's member j of a stripe of table t at `p`.
  std::uint32_t& checksum(int t, int j, const ec::FragmentPlace& p, std::uint32_t row) {
    const auto base = j < k_ ? std::uint64_t{0} : lay_.data_slots(net_.rank(), t);
    return sums_[static_cast<std::size_t>(t)][(base + p.slot) * lay_.rows_per_fragment() + row];
  }
  /// A row of a member changed from `before` to `after` (same length): its checksum follows
  /// (sum ^= crc(before) ^ crc(after)), the old word going to the undo record first. An error
  /// already in `before` (sum != crc(before)) stays visible in the new sum.
  void follow(std::uint32_t& sum, ec::ConstBytes before, ec::ConstBytes after);
  /// Set a row's checksum to the crc of its current (known good) bytes, through the undo record.
  void seal(std::uint32_t& sum, ec::ConstBytes bytes);
  /// Every checksum from the current bytes (after an initial encode, a checkpoint load), no undo.
  void seal_all();
  /// Every row of this rank's member j of stripe s from its current bytes (after a rebuild), no undo.
  void seal_member(std::uint64_t stripe, int j);

  /// Initial values: weights uniform in +-sqrt(1/rows) keyed by (seed, table, row), accumulators 0.
  void init_rows(std::uint64_t seed);
  /// This rank lost its memory: the stores hold garbage (so any use of lost bytes shows up in the
  /// state hash) and the ledgers forget everything. `bytes` false: the ledgers only (a relaunched
  /// replacement's new segment is zeros, as lost; filling it would fault in every page of it).
  void wipe(bool bytes = true);

  // ---- collectives ----
  /// Byte ranges of members from the ranks holding them: reqs[r] go to rank r; returns, per rank,
  /// the requested bytes concatenated in request order.
  Inbox fetch(const std::vector<std::vector<FetchReq>>& reqs);
  /// Fetch the k data fragments of every stripe where this rank holds parity member j, then call
  /// fn(stripe, j, sources) for each, in stripe order (initial encode and the end-of-run check).
  void for_each_parity_stripe(const std::function<void(std::uint64_t, int, const std::vector<ec::ConstBytes>&)>& fn);
  /// Every parity fragment freshly encoded from the data, ledgers cleared.
  void encode_all();
  /// Every parity holder re-encodes its fragments from the data and compares; returns the number
  /// of mismatching parity fragments over all ranks.
  std::uint64_t verify_parity();
  /// Hash of every row (table order, row order) into `h` on rank 0.
  void hash_into(ckpt::Xxh64& h);

private:
  std::uint64_t sources(int t) const noexcept;
  std::size_t sum_bytes(int t) const noexcept;  // table t's checksum words, padded to 8 bytes

  const Transport& net_;
  int k_, dim_;
  std::size_t row_bytes_;
  ec::StripeLayout lay_;
  ec::Codec codec_;
  std::size_t bytes_ = 0;
  std::vector<std::byte> own_;                       // without a segment
  std::vector<std::span<std::byte>> data_, parity_;  // per table, inside own_ or the segment
  UndoSink* undo_ = nullptr;
  std::vector<ec::DeltaLedger> ledgers_;             // per table, over words inside own_ or the segment
  bool checksums_ = false;
  std::vector<std::span<std::uint32_t>> sums_;       // per table: data rows, then parity rows (slot order)
};

}  // namespace resil::ecrm
