// inject::select: which datasets of a file faults can land in, and which of their bits (the first
// step of select -> sample_sites -> plan -> apply).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "resil/ckpt/io.hpp"
#include "resil/core/rng.hpp"
#include "resil/inject/fault_model.hpp"
#include "resil/inject/select_expr.hpp"
#include "resil/inject/storage.hpp"

namespace resil::inject {

/// What --role selects: model weights, the fp32 master weights of mixed precision (bf16 training
/// keeps them in the optimizer state), the rest of the optimizer state (moments), or everything.
enum class Role { all, model, master, optimizer };
/// The names of Role on the command line and in campaign configurations.
inline constexpr std::pair<std::string_view, Role> role_names[] = {
    {"all", Role::all}, {"model", Role::model}, {"master", Role::master}, {"optimizer", Role::optimizer}};

/// The names of SelectOptions::as on the command line and in campaign configurations.
inline constexpr std::pair<std::string_view, ckpt::DType> as_names[] = {{"bf16", ckpt::DType::bf16}, {"f16", ckpt::DType::f16}};

struct SelectOptions {
  std::vector<std::string> include, exclude;  // globs on dataset paths
  Role role = Role::all;                      // our schema: /model/..., /optimizer/<p>/master, /optimizer/...
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

/// The role --role filters on: the adapter's, or the resil schema's from a path (or alias) under
/// /model/ or /optimizer/ (`master` for /optimizer/<p>/master).
TensorRole effective_role(const Tensor& t);
constexpr const char* role_name(TensorRole r) noexcept {
  switch (r) {
    case TensorRole::model: return "model";
    case TensorRole::master: return "master";
    case TensorRole::optimizer: return "optimizer";
    case TensorRole::other: break;
  }
  return "other";
}
/// Whether select() skips a tensor unless an --include names it (is_counter or the adapter's flag).
inline bool counter_of(const Tensor& t) { return t.counter || is_counter(t.info); }

/// Filter a file's tensors (Storage::tensors()). A tensor whose bytes another one owns
/// (`shared_with`) is never a target: shared bytes count once. Throws NothingSelectedError when no
/// stored bit remains.
std::vector<Target> select(const std::vector<Tensor>& tensors, const SelectOptions& opt);
/// The same over bare descriptions (roles from the resil schema's paths alone).
std::vector<Target> select(const std::vector<ckpt::DatasetInfo>& datasets, const SelectOptions& opt);

}  // namespace resil::inject
