// Parity deltas: the XOR of a row's bytes before and after its update (weights and Adagrad
// accumulators at once), sent to the m parity holders of its stripe, tagged with the step and
// applied exactly once through the holder's ledger.
//
// Wire format, one buffer per parity holder: per run of rows of one (stripe, data fragment),
// [u64 stripe][u32 fragment][u32 rows] then [u32 offset][old XOR new] per row.
//
// Commit: the deltas of step s leave with step s + 1's row requests (or in a round of their own,
// flush); when every holder has applied them, step s is committed.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "resil/ecrm/recovery.hpp"

namespace resil::ecrm {

class ParityDeltas {
public:
  ParityDeltas(const Transport& net, ShardStore& store, const Recovery& recovery) : net_(net), store_(store), recovery_(recovery) {}

  /// The deltas of `step` for the rows `owned` (sorted; their places `place`, their bytes before the
  /// update in `old`, row_bytes each; the store holds the new bytes), held until sent.
  /// `fresh`: the rows' new bytes as computed (row_bytes each; empty: read them from the store). With
  /// them a flip that lands in a stored row between its update and this call is not carried into
  /// the parity (the row's checksum then finds it, and the parity repairs it: scrub.hpp).
  void build(std::int64_t step, const std::vector<RowId>& owned, const std::vector<ec::RowPlace>& place, std::span<const std::byte> old,
             std::span<const std::byte> fresh = {});
  /// The step whose deltas wait to be sent (-1: none) and, per holder, the buffers (null: none).
  std::int64_t pending_step() const noexcept { return pending_step_; }
  const std::vector<ByteVec>* outgoing() const noexcept { return pending_step_ >= 0 ? &pending_ : nullptr; }
  /// The pending deltas are on their way (they went out with a message).
  void sent() noexcept;
  /// Fold the deltas received for `step` into this rank's parity (exactly once per (step, source));
  /// deltas for a parity fragment that is lost are dropped (it is rebuilt from newer data).
  void apply(std::uint64_t step, std::span<const ByteView> in);
  /// Collective: send and apply the pending deltas now, in a round of their own. Used where the
  /// parities must be current before the next step's first exchange (a failure, a checkpoint, the
  /// end of the run).
  void flush();
  /// With row checksums: each parity row is checked as a delta is folded into it; rows whose
  /// checksum did not match their bytes before the fold are appended here (null: nowhere).
  void report_mismatches(std::vector<MemberRow>* to) noexcept { mismatches_ = to; }

private:
  const Transport& net_;
  ShardStore& store_;
  const Recovery& recovery_;
  std::vector<ByteVec> pending_;  // per holder
  std::int64_t pending_step_ = -1;
  std::vector<MemberRow>* mismatches_ = nullptr;
};

}  // namespace resil::ecrm
