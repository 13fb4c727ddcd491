#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

#include "resil/core/error.hpp"
#include "resil/data/sampler.hpp"

using namespace resil::data;

TEST_CASE("epoch order is a permutation, a pure function of (seed, epoch)", "[data][unit]") {
  const auto a = epoch_order(1000, 42, 3);
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::uint32_t> iota(1000);
  std::iota(iota.begin(), iota.end(), 0u);
  CHECK(sorted == iota);
  CHECK(epoch_order(1000, 42, 3) == a);
  CHECK(epoch_order(1000, 42, 4) != a);
  CHECK(epoch_order(1000, 43, 3) != a);
  CHECK(a != iota);
}

TEST_CASE("rank batches partition the global batch in rank order", "[data][unit]") {
  const auto order = epoch_order(100, 7, 0);
  const int world = GENERATE(1, 2, 4);
  CHECK(steps_per_epoch(100, 8) == 12);
  for (std::size_t step = 0; step < 12; ++step) {
    std::vector<std::uint32_t> joined;
    for (int r = 0; r < world; ++r) {
      auto s = rank_batch(order, step, 8, r, world);
      CHECK(s.size() == 8u / static_cast<unsigned>(world));
      joined.insert(joined.end(), s.begin(), s.end());
    }
    CHECK(std::equal(joined.begin(), joined.end(), order.begin() + static_cast<long>(step * 8)));
  }
  CHECK_THROWS_AS(rank_batch(order, 0, 6, 0, 4), resil::UsageError);
  CHECK_THROWS_AS(rank_batch(order, 12, 8, 0, 1), resil::UsageError);
}
