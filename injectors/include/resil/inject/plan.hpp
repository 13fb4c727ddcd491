// inject::select -> inject::sample_sites -> inject::plan -> inject::apply: the library steps a CLI
// run or a campaign trial takes. Sampling is uniform over stored bits (a dataset weighs numel x
// its selected bits), counter-based: trial t of seed s is reproducible on its own.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "resil/ckpt/io.hpp"
#include "resil/core/rng.hpp"
#include "resil/inject/fault_model.hpp"
#include "resil/inject/flip_log.hpp"
#include "resil/inject/selection.hpp"

namespace resil::inject {

class WordFile;

enum class Role { all, model, optimizer };

struct SelectOptions {
  std::vector<std::string> include, exclude;  // globs on dataset paths
  Role role = Role::all;                      // our schema: /model/..., /optimizer/...
  BitSpec bits;                               // empty: every stored bit
  std::optional<ckpt::DType> as;              // e.g. bf16: read uint16 datasets as bfloat16
};

/// A dataset that can be hit, with its selected bits.
struct Target {
  ckpt::DatasetInfo info;
  ckpt::DType dtype;           // after --as
  std::uint64_t allowed = 0;   // selected bits of a word
  unsigned nbits = 0;          // popcount(allowed)
  /// Selected stored bits: numel x nbits, which exceeds 64 bits on a large enough dataset (2^62
  /// f64 elements are 2^68 bits), so every fault-space sum and draw is 128-bit.
  uint128_t weight() const noexcept { return static_cast<uint128_t>(info.numel()) * nbits; }
};

/// A fault may make HDF5 allocate storage that was never written: a chunk (HDF5 bounds its size by
/// 4 GiB), or a whole contiguous dataset, which is only selected up to this size.
inline constexpr std::uint64_t max_fault_allocation = std::uint64_t{64} << 20;

/// Whether faults can land in a dataset at all: a supported integer/float type, stored here (not
/// virtual: its data lives in other files), with at least one element, and not a never-written
/// contiguous dataset larger than max_fault_allocation.
bool flippable(const ckpt::DatasetInfo& d);
/// Stored bits of a dataset (0 unless flippable): numel x element width, exact.
uint128_t fault_bits(const ckpt::DatasetInfo& d);
/// Whether a glob matches the dataset under any of its paths (hard links: `aliases`).
bool matches_any_path(const Glob& g, const ckpt::DatasetInfo& d);

/// Counters and bookkeeping that are skipped unless an --include names them: num_batches_tracked,
/// optimizer step counters, integer scalars, and everything under /meta.
bool is_counter(const ckpt::DatasetInfo& d);

/// Filter the file's datasets. Throws NothingSelectedError when no stored bit remains.
std::vector<Target> select(const std::vector<ckpt::DatasetInfo>& datasets, const SelectOptions& opt);

enum class Stratify { none, bits, dataset };

struct PlanOptions {
  std::uint64_t seed = 0;
  std::uint64_t trial = 0;              // campaign trial: its own counter-based streams
  std::optional<std::uint64_t> flips;   // exact count, sites without replacement
  std::optional<double> ber;            // per stored bit
  Stratify stratify = Stratify::none;
  FaultModel model;
};

struct Site {
  std::uint32_t target = 0;
  std::uint64_t index = 0;  // flat element index
  unsigned bit = 0;
  auto operator<=>(const Site&) const = default;
};

/// Draw the fault sites (sorted by target, index, bit). Pure function of (targets, options).
std::vector<Site> sample_sites(std::span<const Target> targets, const PlanOptions& opt);

/// Sites -> flip records: reads the touched words of `file` (read-only) and applies the fault
/// model in site order. Records hitting one word chain (old of the second = new of the first).
std::vector<FlipRecord> plan(const std::string& file, std::span<const Target> targets, std::span<const Site> sites,
                             const PlanOptions& opt);
/// The same through an open WordFile (e.g. Access::in_place, then passed on to apply(): one open,
/// one mapping and one chunk-address lookup for both steps; each touched page faults in once). Only
/// reads: nothing is written, whatever the access.
std::vector<FlipRecord> plan(WordFile& file, std::span<const Target> targets, std::span<const Site> sites,
                             const PlanOptions& opt);

enum class Direction { forward, revert };
struct ApplyStats {
  std::uint64_t words = 0;       // distinct words the records touch
  std::uint64_t changed = 0;     // words written
  std::uint64_t unchanged = 0;   // already in the target state (e.g. revert of an interrupted run)
};

/// Apply records to `file` (forward: replay/inject; revert: exact undo, in reverse order).
/// Per word the current bits must be a state of its record chain (forward: the first old or the
/// last new; revert: the first old or any new); otherwise MismatchError names dataset and index,
/// unless `force`. Raw records are applied to the file's bytes.
/// Crash safety (`crash_safe`, i.e. in place): HDF5 is opened read-only, never read-write (a
/// superblock v2/3 file opened for writing and killed would no longer open). Contiguous data and
/// allocated chunks of unfiltered datasets are changed word by word with pwrite at their file
/// addresses. A change HDF5 alone can make - a filtered chunk (HDF5 may relocate it and update the
/// chunk index later), an unallocated chunk, compact or unallocated data - stages the file: copy to
/// a temporary sibling, edit there through HDF5, fsync, rename over `file` (always before or
/// after). Which way is decided by a read-only probe before any byte changes. Stale
/// `.NAME.tmp.PID` siblings of dead processes are removed first.
/// `sync` false (in place only): the file's edited bytes are not fsynced at the end (the staged
/// path always is). A crash then may lose some of the edits, never tear a word; the log's
/// old/new chains let revert and replay finish from any such state.
ApplyStats apply(const std::string& file, std::span<const FlipRecord> records, Direction dir, bool force = false,
                 bool crash_safe = true, bool sync = true);
/// The same through an open WordFile, which it closes (its set_sync applies): Access::in_place is the
/// crash-safe way (a staged edit closes it and works on a copy of its path), Access::rewrite the
/// other; Access::read is a UsageError. Raw records reopen the file by path.
ApplyStats apply(WordFile& file, std::span<const FlipRecord> records, Direction dir, bool force = false);

/// Flat index -> N-d index (C order).
std::vector<std::uint64_t> unravel_index(std::uint64_t flat, const ckpt::Shape& shape);

}  // namespace resil::inject
