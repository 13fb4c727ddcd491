// Lost members and their recovery: degraded reads (decoding a lost member's bytes from k
// survivors) and rebuild rounds (a replacement decoding its lost fragments, a few stripes per step).
//
// Failure state is global knowledge: every rank keeps the same table of which (rank, stripe)
// members are lost (wiped and not rebuilt yet), changed only by events every rank sees in the same
// order (a failure announced by a collective, a rebuild round every rank takes part in). So all
// ranks agree, without extra messages, which members are erased, when a stripe is over the limit
// and which collectives (degraded reads, rebuild rounds) to enter.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "resil/ecrm/shard_store.hpp"

namespace resil::ecrm {

class Recovery {
public:
  Recovery(const Transport& net, ShardStore& store, int m);

  // ---- the lost-member table (identical on every rank) ----
  /// `rank` lost its memory: every member it holds is lost; on that rank the store is wiped
  /// (its bytes only when `wipe`: a relaunched replacement's new segment is zeros already).
  void fail(int rank, bool wipe = true);
  /// Nothing lost anywhere (after a restart from a checkpoint).
  void clear_lost();
  bool any_lost() const noexcept;
  bool lost(int rank, std::uint64_t stripe) const { return lost_[static_cast<std::size_t>(rank)][stripe] != 0; }
  /// Lost members of `rank` not rebuilt yet.
  std::uint64_t pending(int rank) const { return pending_[static_cast<std::size_t>(rank)]; }
  /// Fragment indices of stripe s that are lost, ascending.
  std::vector<int> erased(std::uint64_t stripe) const;
  /// A stripe with more than m lost members, if any (the lowest).
  std::optional<std::uint64_t> over_limit() const;

  /// The table and the rebuild cursors as bytes (the segment's small state), and back.
  void save(Writer& w) const;
  void load(Reader& r);

  // ---- degraded reads ----
  /// The decode plan for the stripe's current erasures (its sources are the fragments to read).
  const ec::DecodePlan& plan_of(std::uint64_t stripe);
  /// Append the bytes [offset, offset + len) of this rank's member j (a source of someone's decode).
  void put_member_bytes(std::uint64_t stripe, int j, std::size_t offset, std::size_t len, Writer& w);
  /// Decode member `target` of `stripe` into `dst` from the plan's sources, read (len bytes each)
  /// from `from[rank of source]` in plan order.
  void decode_member(std::uint64_t stripe, const ec::DecodePlan& plan, int target, std::vector<Reader>& from, std::size_t len,
                     ec::Bytes dst);

  // ---- rebuild rounds (no request round: every rank knows the lost members and the cursors) ----
  /// One stripe a replacement rebuilds in a round; `erased` is taken before the round.
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
  /// put_rebuild_sources wrote them), write them into its store, then mark every job's member as
  /// no longer lost (on every rank). The data must be as of the end of `committed_step`: rebuilt
  /// parity holds every delta up to it, later ones must still come.
  void finish_rebuild(const std::vector<RebuildJob>& jobs, std::vector<Reader>& from, std::uint64_t committed_step);
  /// Collective: a rebuild round in an exchange of its own (before a checkpoint, end of the run).
  void rebuild(std::uint64_t stripes_per_rank, std::uint64_t committed_step);

private:
  const Transport& net_;
  ShardStore& store_;
  int m_;
  std::vector<std::vector<std::uint8_t>> lost_;      // [rank][stripe]
  std::vector<std::uint64_t> pending_, cursor_;      // per rank: lost members, next stripe to rebuild
  std::vector<std::byte> scratch_;                   // decoded targets nobody here asked for
  std::vector<ec::ConstBytes> src_;                  // decode_member's source and output lists
  std::vector<ec::Bytes> out_;
  std::vector<const ec::DecodePlan*> plan_cache_;    // per stripe: plan of its current erasures, or null
};

}  // namespace resil::ecrm
