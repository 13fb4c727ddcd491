#include "resil/ec/ledger.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "resil/core/error.hpp"

namespace resil::ec {

DeltaLedger::DeltaLedger(std::uint64_t sources) : own_(sources, 0), last_plus_one_(own_) {}

std::span<const std::byte> DeltaLedger::entry(std::uint64_t source) const {
  check(source);
  return std::as_bytes(last_plus_one_.subspan(source, 1));
}

void DeltaLedger::check(std::uint64_t source) const {
  if (source >= last_plus_one_.size()) {
    throw UsageError("ec::DeltaLedger: source " + std::to_string(source) + " out of range [0, " +
                     std::to_string(last_plus_one_.size()) + ")");
  }
}

bool DeltaLedger::fresh(DeltaTag tag) const {
  check(tag.source);
  return tag.step != UINT64_MAX && tag.step + 1 > last_plus_one_[tag.source];
}

bool DeltaLedger::admit(DeltaTag tag) {
  check(tag.source);
  if (tag.step == UINT64_MAX) throw UsageError("ec::DeltaLedger: step 2^64-1 is reserved");
  auto& last = last_plus_one_[tag.source];
  if (tag.step + 1 <= last) {
    ++refused_;
    return false;
  }
  last = tag.step + 1;
  ++admitted_;
  return true;
}

void DeltaLedger::require(DeltaTag tag) {
  if (!admit(tag)) {
    throw EcError("ec::DeltaLedger: delta (step " + std::to_string(tag.step) + ", source " +
                  std::to_string(tag.source) + ") refused: step " + std::to_string(last_plus_one_[tag.source] - 1) +
                  " of that source was already applied");
  }
}

std::optional<std::uint64_t> DeltaLedger::last_step(std::uint64_t source) const {
  check(source);
  const auto v = last_plus_one_[source];
  return v == 0 ? std::nullopt : std::optional<std::uint64_t>(v - 1);
}

void DeltaLedger::mark(std::uint64_t source, std::uint64_t step) {
  check(source);
  if (step == UINT64_MAX) throw UsageError("ec::DeltaLedger: step 2^64-1 is reserved");
  last_plus_one_[source] = step + 1;
}

void DeltaLedger::clear() noexcept {
  std::fill(last_plus_one_.begin(), last_plus_one_.end(), 0);
  admitted_ = refused_ = 0;
}

bool apply_once(const Codec& codec, DeltaLedger& ledger, DeltaTag tag, int fragment, std::size_t offset,
                ConstBytes delta, std::span<const Bytes> parity) {
  if (!ledger.fresh(tag)) return ledger.admit(tag);  // counts the refusal, returns false
  // Apply first: a malformed delta throws from the codec without burning the tag.
  codec.update(fragment, offset, delta, parity);
  return ledger.admit(tag);
}

bool apply_once(const Codec& codec, DeltaLedger& ledger, DeltaTag tag, int fragment, std::size_t offset,
                ConstBytes delta, int j, Bytes parity_j) {
  if (!ledger.fresh(tag)) return ledger.admit(tag);
  codec.update_row(j, fragment, offset, delta, parity_j);
  return ledger.admit(tag);
}

}  // namespace resil::ec
