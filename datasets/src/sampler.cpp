#include "resil/data/sampler.hpp"

#include <numeric>
#include <string>

#include "resil/core/error.hpp"
#include "resil/core/rng.hpp"

namespace resil::data {

std::vector<std::uint32_t> epoch_order(std::size_t n, std::uint64_t seed, std::uint64_t epoch) {
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  Rng rng(derive_seed(seed, shuffle_purpose), epoch);
  for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  return order;
}

std::size_t steps_per_epoch(std::size_t n, std::size_t batch) { return batch == 0 ? 0 : n / batch; }

std::span<const std::uint32_t> rank_batch(std::span<const std::uint32_t> order, std::size_t step, std::size_t batch,
                                          int rank, int world) {
  if (world < 1 || rank < 0 || rank >= world) throw UsageError("rank_batch: rank " + std::to_string(rank) + " of world " + std::to_string(world));
  if (batch % static_cast<std::size_t>(world) != 0)
    throw UsageError("--batch " + std::to_string(batch) + " is not divisible by the world size " + std::to_string(world));
  const std::size_t local = batch / static_cast<std::size_t>(world);
  const std::size_t begin = step * batch + static_cast<std::size_t>(rank) * local;
  if (begin + local > order.size()) throw UsageError("rank_batch: step " + std::to_string(step) + " is past the end of the epoch");
  return order.subspan(begin, local);
}

}  // namespace resil::data
