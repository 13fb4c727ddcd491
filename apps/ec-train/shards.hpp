// The sharded, erasure-coded embedding tables of one rank, and the collective operations on them.
//
// Table t is rows x dim fp32 plus one Adagrad accumulator per value; each row is stored as
// [dim weights | dim accumulators] (row_bytes = 8 * dim), so one row's update is one contiguous
// byte range and its XOR delta covers parameters and optimizer state at once. Rows are placed by
// ec::StripeLayout: this rank keeps a data store (its data fragments) and a parity store (its
// parity fragments) per table.
//
// Failure state is global knowledge: every rank keeps the same table of which (rank, stripe)
// members are lost (wiped and not rebuilt yet), changed only by events every rank sees in the same
// order (a failure announced by a collective, a rebuild round every rank takes part in). So all
// ranks agree, without extra messages, which members are erased, when a stripe is over the limit
// and which collectives (degraded reads, rebuild rounds) to enter.
#pragma once

#include <functional>

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "mpi_comm.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/ec/codec.hpp"
#include "resil/ec/ledger.hpp"
#include "resil/ec/stripe.hpp"

namespace resil::ectrain {

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

class Shards {
public:
  Shards(const Mpi& mpi, int k, int m, int tables, std::uint32_t rows, int dim, std::uint32_t rows_per_fragment);

  const ec::StripeLayout& layout() const noexcept { return lay_; }
  const ec::Codec& codec() const noexcept { return codec_; }
  int dim() const noexcept { return dim_; }
  std::size_t row_bytes() const noexcept { return row_bytes_; }
  std::span<std::byte> data_store(int t) { return data_[static_cast<std::size_t>(t)]; }
  /// The stored bytes of a row this rank owns (valid only while its fragment is not lost).
  std::span<std::byte> row(RowId r);

  /// Initial values: weights uniform in +-sqrt(1/rows) keyed by (seed, table, row), accumulators 0.
  void init_rows(std::uint64_t seed);
  /// Collective: every parity fragment freshly encoded from the data, ledgers cleared, nothing lost.
  void encode_all();
  /// Collective: every parity holder re-encodes its fragments from the data and compares; returns
  /// the number of mismatching parity fragments over all ranks.
  std::uint64_t verify_parity();

  // ---- failures (global state, identical on every rank) ----
  /// `rank` lost its memory: every member it holds is lost; on that rank the stores are wiped
  /// (filled with garbage, so any use of lost bytes shows up in the state hash) and ledgers cleared.
  void fail(int rank);
  /// Nothing lost anywhere (after a restart from a checkpoint).
  void clear_lost();
  bool any_lost() const noexcept;
  bool lost(int rank, std::uint64_t stripe) const;
  std::uint64_t pending(int rank) const { return pending_[static_cast<std::size_t>(rank)]; }
  /// Fragment indices of stripe s that are lost, ascending.
  std::vector<int> erased(std::uint64_t stripe) const;
  /// A stripe with more than m lost members, if any (the lowest).
  std::optional<std::uint64_t> over_limit() const;

  // ---- collective data movement ----
  /// Byte ranges of members from the ranks holding them: reqs[r] go to rank r; returns, per rank,
  /// the requested bytes concatenated in request order. Serving a lost member is a bug (EcError).
  Inbox fetch(const std::vector<std::vector<FetchReq>>& reqs);
  /// Fetch the k data fragments of every stripe where this rank holds parity member j, then call
  /// fn(stripe, j, sources) for each, in stripe order (initial encode and the end-of-run check).
  void for_each_parity_stripe(const std::function<void(std::uint64_t, int, const std::vector<ec::ConstBytes>&)>& fn);
  // ---- recovery (no request round: every rank knows the lost members and the rebuild cursors) ----
  /// One stripe a replacement rebuilds in a rebuild round; `erased` is taken before the round.
  struct RebuildJob {
    int rank = 0;
    std::uint64_t stripe = 0;
    std::vector<int> erased;
  };
  /// The next rebuild round, identical on every rank (advances the cursors): each replacement's
  /// next `stripes_per_rank` lost stripes (0 = all of them).
  std::vector<RebuildJob> take_rebuild_jobs(std::uint64_t stripes_per_rank);
  /// Sender side: append the whole source fragments that rank `dest` needs from this rank for its
  /// jobs, in job order, then source order.
  void put_rebuild_sources(const std::vector<RebuildJob>& jobs, int dest, Writer& w);
  /// Receiver side: decode this rank's jobs from the sources read from `from[r]` (in the order
  /// put_rebuild_sources wrote them), write them into its stores, then mark every job's member as
  /// no longer lost (on every rank). The data must be as of the end of `committed_step`: rebuilt
  /// parity holds every delta up to it, later ones must still come.
  void finish_rebuild(const std::vector<RebuildJob>& jobs, std::vector<Reader>& from, std::uint64_t committed_step);
  /// Collective: a rebuild round in an exchange of its own (before a checkpoint, end of the run).
  void rebuild(std::uint64_t stripes_per_rank, std::uint64_t committed_step);

  /// Degraded reads: the decode plan for the stripe's current erasures (its sources are the
  /// fragments to read), the bytes [offset, offset + len) of this rank's member j, and the decode of
  /// member `target` from the plan's sources read from `from[rank of source]`, in plan order.
  const ec::DecodePlan& plan_of(std::uint64_t stripe);
  void put_member_bytes(std::uint64_t stripe, int j, std::size_t offset, std::size_t len, Writer& w);
  void decode_member(std::uint64_t stripe, const ec::DecodePlan& plan, int target, std::vector<Reader>& from, std::size_t len,
                     ec::Bytes dst);
  /// Fold the deltas received for `step` into this rank's parity (exactly once per (step, source));
  /// deltas for a parity fragment that is lost are dropped (it is rebuilt from newer data).
  void apply_deltas(std::uint64_t step, std::span<const ByteView> in);
  /// Collective: hash of every row (table order, row order) into `h` on rank 0.
  void hash_into(ckpt::Xxh64& h);

private:
  std::span<std::byte> member(std::uint64_t stripe, int j);  // this rank's fragment j of `stripe`

  const Mpi& mpi_;
  int k_, m_, dim_;
  std::size_t row_bytes_;
  ec::StripeLayout lay_;
  ec::Codec codec_;
  std::vector<std::vector<std::byte>> data_, parity_;
  std::vector<ec::DeltaLedger> ledgers_;             // per table: source = parity slot * k + fragment
  std::vector<std::vector<std::uint8_t>> lost_;      // [rank][stripe]
  std::vector<std::uint64_t> pending_, cursor_;      // per rank: lost members, next stripe to rebuild
  std::vector<std::byte> scratch_;                   // decoded targets nobody here asked for
  std::vector<ec::ConstBytes> src_;                  // decode_member's source and output lists
  std::vector<ec::Bytes> out_;
  std::vector<const ec::DecodePlan*> plan_cache_;    // per stripe: plan of its current erasures, or null
};

}  // namespace resil::ectrain
