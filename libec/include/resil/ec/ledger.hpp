// Exactly-once bookkeeping for parity deltas, kept by each parity holder.
//
// A parity update is an XOR, so applying a delta twice silently cancels it: the parity would
// then decode to wrong data with no error anywhere. Every delta therefore carries a tag
// (step, source): `source` is whatever sends at most one delta per step to this holder — in
// ec-train one data fragment of one stripe, numbered by the holder (e.g. parity slot * k +
// fragment). All of a source's changes within a step go into that one delta (several byte ranges
// may be applied under one admitted tag). A source's deltas arrive in increasing step order (MPI
// does not overtake messages between one pair of ranks), so one number per source suffices: the
// last step applied. A tag at or below it is a duplicate (a resend after a failure, a replayed
// message) and is refused.
//
// Not thread-safe: one ledger per thread that applies deltas, or an outside lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "resil/ec/codec.hpp"

namespace resil::ec {

struct DeltaTag {
  std::uint64_t step = 0;
  std::uint64_t source = 0;
};

class DeltaLedger {
public:
  /// Sources are numbered 0 .. sources-1.
  explicit DeltaLedger(std::uint64_t sources);
  /// A ledger kept in memory the caller owns (one word per source, zero = nothing applied), such
  /// as a shared-memory segment that outlives the process: the words are the ledger, so nothing
  /// needs saving, and an undo log can restore them (entry()).
  explicit DeltaLedger(std::span<std::uint64_t> words) noexcept : last_plus_one_(words) {}
  DeltaLedger(const DeltaLedger& o) : own_(o.own_), last_plus_one_(o.owns() ? std::span(own_) : o.last_plus_one_), admitted_(o.admitted_), refused_(o.refused_) {}
  DeltaLedger(DeltaLedger&& o) noexcept = default;  // a moved vector keeps its buffer: the span stays valid
  DeltaLedger& operator=(DeltaLedger o) noexcept {
    std::swap(own_, o.own_);
    std::swap(last_plus_one_, o.last_plus_one_);
    admitted_ = o.admitted_, refused_ = o.refused_;
    return *this;
  }

  std::uint64_t sources() const noexcept { return last_plus_one_.size(); }
  /// The bytes that hold `source`'s record (for an undo log written before admit() or mark()).
  std::span<const std::byte> entry(std::uint64_t source) const;

  /// True: the tag is new, it is now recorded as applied and the caller must apply the delta.
  /// False: a duplicate or older step, refused and counted; the caller must drop the delta.
  /// UsageError for a source out of range.
  [[nodiscard]] bool admit(DeltaTag tag);
  /// Whether admit(tag) would accept it; records nothing.
  bool fresh(DeltaTag tag) const;
  /// As admit, but a refused tag throws EcError naming it (for protocols where a duplicate is a bug).
  void require(DeltaTag tag);

  /// The last step applied from `source`, if any.
  std::optional<std::uint64_t> last_step(std::uint64_t source) const;
  /// Declare every step up to `step` of `source` applied: after a parity fragment was rebuilt
  /// (decoded) from data as of `step`, those deltas are already inside it.
  void mark(std::uint64_t source, std::uint64_t step);
  /// Forget everything (the holder's memory was wiped).
  void clear() noexcept;

  std::uint64_t admitted() const noexcept { return admitted_; }
  std::uint64_t refused() const noexcept { return refused_; }

private:
  void check(std::uint64_t source) const;
  bool owns() const noexcept { return last_plus_one_.data() == own_.data(); }
  std::vector<std::uint64_t> own_;            // the words, unless the caller keeps them
  std::span<std::uint64_t> last_plus_one_;    // 0: nothing applied yet
  std::uint64_t admitted_ = 0, refused_ = 0;
};

/// Admit `tag` and, when new, fold `delta` (old XOR new bytes [offset, offset + size) of data
/// fragment `fragment`) into `parity`. Returns false, leaving parity untouched, for a duplicate.
[[nodiscard]] bool apply_once(const Codec& codec, DeltaLedger& ledger, DeltaTag tag, int fragment, std::size_t offset,
                              ConstBytes delta, std::span<const Bytes> parity);

/// As above for a holder of the single parity fragment k + j (Codec::update_row).
[[nodiscard]] bool apply_once(const Codec& codec, DeltaLedger& ledger, DeltaTag tag, int fragment, std::size_t offset,
                              ConstBytes delta, int j, Bytes parity_j);

}  // namespace resil::ec
