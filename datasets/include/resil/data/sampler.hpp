// Deterministic per-epoch shuffling and per-rank sharding.
//
// The order of epoch e is a Fisher-Yates permutation drawn from resil::Rng keyed by
// (derive_seed(seed, shuffle_purpose), e): a pure function of (seed, epoch, n), so a run resumed
// at epoch e sees exactly the order an uninterrupted run sees. Batches are consecutive slices of
// that order (the incomplete last batch is dropped so every step has the same global batch);
// in data-parallel runs rank r takes the r-th contiguous sub-slice of each global batch, so the
// union over ranks of one step is exactly the serial run's batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace resil::data {

inline constexpr std::uint64_t shuffle_purpose = 0x5348554646ull;  // "SHUFF"

/// Permutation of [0, n) for epoch `epoch`.
std::vector<std::uint32_t> epoch_order(std::size_t n, std::uint64_t seed, std::uint64_t epoch);

/// Number of full global batches of size `batch` in `n` samples.
std::size_t steps_per_epoch(std::size_t n, std::size_t batch);

/// Sample indices of step `step` (0-based within the epoch) for `rank` of `world`:
/// order[step*batch + rank*batch/world, ... + batch/world). `batch` must be divisible by `world`
/// (UsageError otherwise).
std::span<const std::uint32_t> rank_batch(std::span<const std::uint32_t> order, std::size_t step, std::size_t batch,
                                          int rank, int world);

}  // namespace resil::data
