// Scrubbing the shard store for silent corruption (ec-train --scrub): every row of every data and
// parity fragment has a CRC-32C (ShardStore's row checksums) that follows each update; a row whose
// bytes no longer match its checksum is *located* by it, and *repaired* by the erasure code itself,
// as an erasure: the codeword (the rows at one offset of a stripe's n members) is decoded from k
// members that are neither suspect nor lost. More than m bad or lost members in one codeword cannot
// be repaired: Scrub::repair throws ScrubLossError naming where (exit 8, or --fallback-ckpt).
//
// Where checks happen (the ordering invariant, docs/design/ec-train-protocol.md, "Scrubbing"):
//   - a parity row as each delta is folded into it (ParityDeltas::report_mismatches);
//   - the rows a step serves, after the last step's deltas are applied and before any of them is
//     read for a reply, an update or a delta (check_rows, then the collective repair);
//   - a background sweep of a few stripes per step (sweep);
//   - while members are lost, this rank's rows that the step's degraded reads and rebuild read;
//   - the other members of every codeword a repair decodes, before it reads them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "resil/core/error.hpp"
#include "resil/ecrm/recovery.hpp"
#include "resil/ecrm/shard_store.hpp"

namespace resil::ecrm {

/// A codeword with more bad (or lost) members than m: the scrub cannot repair it.
class ScrubLossError : public DataLossError {
public:
  using DataLossError::DataLossError;
};

/// One repaired row. kind: "data" or "parity" (its bytes were wrong), "checksum" (its bytes were
/// right and its checksum word wrong).
struct ScrubRepair {
  std::int64_t step = 0;
  std::uint64_t stripe = 0;
  std::uint32_t member = 0, row = 0;
  int rank = 0;
  std::string kind;
  double t = 0;  // seconds since the run started (the caller's clock)
};

struct ScrubStats {
  std::uint64_t rows_checked = 0;    // this rank
  std::uint64_t rounds = 0;          // collective repair rounds that found something
  std::uint64_t repaired_data = 0, repaired_parity = 0, repaired_checksum = 0;
  double check_s = 0, repair_s = 0;  // this rank
};

class Scrub {
public:
  Scrub(const Transport& net, ShardStore& store, const Recovery& recovery) : net_(net), store_(store), rec_(recovery) {}

  /// Local: verify the rows in `owned` (this rank's, any order); mismatches become suspects.
  void check_rows(const std::vector<RowId>& owned);
  /// Local, while members are lost: verify what this step's decodes will read from this rank: its
  /// member's row of each of `rows` (lost rows whose degraded read or decode it is a source of) and
  /// every row of its source members of the rebuild `jobs`.
  void check_sources(const std::vector<RowId>& rows, const std::vector<Recovery::RebuildJob>& jobs);
  /// Local: verify every row of this rank's members of the next `stripes` stripes of the sweep.
  /// The cursor is the same on every rank and wraps at the end of the store.
  void sweep(std::uint64_t stripes);
  std::uint64_t sweep_cursor() const noexcept { return cursor_; }
  void set_sweep_cursor(std::uint64_t c) noexcept { cursor_ = c; }
  /// Rows found bad and not yet repaired (ParityDeltas appends the parity rows it finds).
  std::vector<MemberRow>& suspects() noexcept { return suspects_; }

  /// Collective: if any rank has suspects, repair them all. The parity must be current (the last
  /// step's deltas applied). Throws ScrubLossError when a codeword has more than m bad or lost
  /// members. Returns every repair (the same list on every rank).
  std::vector<ScrubRepair> repair(std::int64_t step, double t_now);

  const ScrubStats& stats() const noexcept { return stats_; }
  /// Called on this rank right after each repaired row is written (a test's kill inside a repair).
  void on_repaired_write(std::function<void()> fn) { after_write_ = std::move(fn); }

private:
  bool verify(const MemberRow& r);
  std::vector<MemberRow> all_gather(const std::vector<MemberRow>& mine);

  const Transport& net_;
  ShardStore& store_;
  const Recovery& rec_;
  std::vector<MemberRow> suspects_;
  std::uint64_t cursor_ = 0;
  ScrubStats stats_;
  std::function<void()> after_write_;
};

}  // namespace resil::ecrm
