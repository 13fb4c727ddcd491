// Fault models: what happens to one stored word when a fault hits bit `anchor` of it.
// Parsing (incl. pattern JSON) has no HDF5 dependency so it can be fuzzed on its own.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "resil/core/rng.hpp"

namespace resil::inject {

/// A table of bit-mask patterns with probabilities (low-level fault data drives the injector).
/// JSON: {"anchor": "bit"|"word", "patterns": [{"mask": "0x3", "p": 0.7}, {"bits": [0, 8], "p": 0.3}]}
/// anchor "bit" (default): the mask's bit 0 lands on the sampled bit (bits shifted past the word's
/// width are dropped); "word": masks are absolute bit positions in the word.
struct PatternTable {
  struct Entry {
    std::uint64_t mask = 0;
    double p = 0;
  };
  bool anchored = true;
  std::vector<Entry> entries;  // p normalised to sum 1
};
/// Throws CorruptInputError naming `source` on malformed JSON, empty table, zero masks, bad weights.
PatternTable parse_pattern_table(std::string_view json_text, const std::string& source);

class FaultModel {
public:
  enum class Kind : std::uint8_t { flip, adjacent, random_bits, burst, stuck0, stuck1, random_value, zero, pattern };

  /// "flip" (default), "adjacent:K", "random-bits:K", "burst[:K]" (K bytes), "stuck-at-0", "stuck-at-1",
  /// "random-value", "zero", "pattern:FILE.json". Throws UsageError (CorruptInputError for a bad pattern file).
  static FaultModel parse(std::string_view spec);
  static FaultModel from_table(PatternTable t, std::string name);

  /// The new stored word when the fault hits bit `anchor` (0 = LSB) of `old`, a word of `width`
  /// bits; `allowed` is the selected bit set (random-bits draws its extra bits from it).
  /// Draws from `rng` only as the model needs; the result is masked to `width`.
  std::uint64_t apply(std::uint64_t old, unsigned width, unsigned anchor, std::uint64_t allowed, Rng& rng) const;

  Kind kind() const noexcept { return kind_; }
  unsigned k() const noexcept { return k_; }
  const std::string& name() const noexcept { return name_; }  // canonical text, as logged

private:
  Kind kind_ = Kind::flip;
  unsigned k_ = 1;
  std::string name_ = "flip";
  PatternTable table_;
};

}  // namespace resil::inject
