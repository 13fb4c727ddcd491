#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <set>

#include "resil/core/error.hpp"
#include "resil/inject/plan.hpp"
#include "resil/inject/sampling.hpp"

using namespace resil;
using namespace resil::inject;
using ckpt::DType;

namespace {
Target make_target(const std::string& path, DType t, ckpt::Shape shape, std::uint64_t allowed = ~0ull) {
  Target x{};
  x.info.path = path;
  x.info.dtype = t;
  x.info.shape = std::move(shape);
  x.dtype = t;
  x.allowed = allowed & width_mask(ckpt::dtype_bits(t));
  x.nbits = static_cast<unsigned>(std::popcount(x.allowed));
  return x;
}
std::vector<Target> mixed() {
  return {make_target("/a", DType::f32, {10}), make_target("/b", DType::f64, {10, 10}), make_target("/c", DType::f16, {37}),
          make_target("/d", DType::u8, {500}), make_target("/e", DType::bf16, {2, 1, 3, 1, 2})};
}
PlanOptions flips(std::uint64_t n, std::uint64_t seed = 42, std::uint64_t trial = 0) {
  PlanOptions p;
  p.seed = seed;
  p.trial = trial;
  p.flips = n;
  return p;
}
}  // namespace

TEST_CASE("--flips N gives exactly N distinct sites inside the selection", "[inject][unit]") {
  const auto t = mixed();
  std::uint64_t total = 0;
  for (const auto& x : t) total += x.weight();
  for (std::uint64_t n : {std::uint64_t{1}, std::uint64_t{7}, std::uint64_t{1000}, total}) {
    const auto s = sample_sites(t, flips(n));
    CHECK(s.size() == n);
    CHECK(std::set<Site>(s.begin(), s.end()).size() == n);
    for (const auto& x : s) {
      CHECK(x.index < t[x.target].info.numel());
      CHECK(((t[x.target].allowed >> x.bit) & 1) == 1);
    }
  }
  CHECK_THROWS_AS(sample_sites(t, flips(total + 1)), UsageError);
}

TEST_CASE("sampling is uniform over stored bits (chi-square)", "[inject][unit]") {
  // Cells = (dataset, bit position); a cell's expected share is numel / total stored bits.
  const auto t = mixed();
  std::uint64_t total = 0;
  for (const auto& x : t) total += x.weight();
  std::map<std::pair<std::uint32_t, unsigned>, double> count;
  std::uint64_t draws = 0;
  for (std::uint64_t trial = 0; trial < 100; ++trial) {
    for (const auto& s : sample_sites(t, flips(2000, 7, trial))) count[{s.target, s.bit}] += 1;
    draws += 2000;
  }
  double chi2 = 0;
  std::size_t cells = 0;
  for (std::uint32_t i = 0; i < t.size(); ++i)
    for (unsigned b = 0; b < ckpt::dtype_bits(t[i].dtype); ++b) {
      const double expected = static_cast<double>(draws) * static_cast<double>(t[i].info.numel()) / static_cast<double>(total);
      const double o = count[{i, b}];
      chi2 += (o - expected) * (o - expected) / expected;
      ++cells;
    }
  // df = cells - 1 = 135; P(chi2 > 240) < 1e-7 for a uniform sampler (deterministic seed).
  INFO("chi2 = " << chi2 << " over " << cells << " cells");
  CHECK(cells == 136);
  CHECK(chi2 < 240);
  CHECK(chi2 > 60);  // and not suspiciously perfect either

  // Element positions inside one large dataset: 50 equal bins.
  const std::vector<Target> one{make_target("/w", DType::f32, {100000})};
  std::vector<double> bins(50);
  for (std::uint64_t trial = 0; trial < 20; ++trial)
    for (const auto& s : sample_sites(one, flips(5000, 9, trial))) bins[s.index / 2000] += 1;
  double c2 = 0;
  for (double o : bins) c2 += (o - 2000) * (o - 2000) / 2000;
  INFO("chi2 = " << c2);
  CHECK(c2 < 120);  // df 49; P > 1e-7
}

TEST_CASE("seeds: same (seed, trial) same sites; trials differ; draws are counter-based", "[inject][unit]") {
  const auto t = mixed();
  CHECK(sample_sites(t, flips(100, 5, 3)) == sample_sites(t, flips(100, 5, 3)));
  CHECK(sample_sites(t, flips(100, 5, 3)) != sample_sites(t, flips(100, 5, 4)));
  CHECK(sample_sites(t, flips(100, 5, 3)) != sample_sites(t, flips(100, 6, 3)));
}

TEST_CASE("--ber is per stored bit: mean count matches and sites are distinct", "[inject][unit]") {
  const std::vector<Target> one{make_target("/w", DType::f32, {1000000})};
  PlanOptions p;
  p.seed = 11;
  p.ber = 1e-4;  // 32e6 bits -> expect 3200, sd ~56.6
  const auto s = sample_sites(one, p);
  CHECK(std::fabs(static_cast<double>(s.size()) - 3200.0) < 6 * 56.6);
  CHECK(std::set<Site>(s.begin(), s.end()).size() == s.size());
  p.ber = 0.0;
  CHECK(sample_sites(one, p).empty());
  p.ber = 1.0;
  const std::vector<Target> tiny{make_target("/t", DType::u8, {3})};
  CHECK(sample_sites(tiny, p).size() == 24);
}

TEST_CASE("stratified sampling spreads flips evenly over bits or datasets", "[inject][unit]") {
  const auto t = mixed();
  PlanOptions p = flips(640);
  p.stratify = Stratify::bits;  // 64 bit positions present (f64 has all)
  std::map<unsigned, int> per_bit;
  for (const auto& s : sample_sites(t, p)) ++per_bit[s.bit];
  CHECK(per_bit.size() == 64);
  for (const auto& [b, n] : per_bit) CHECK(n == 10);
  p.flips = 52;
  p.stratify = Stratify::dataset;
  std::map<std::uint32_t, int> per_ds;
  for (const auto& s : sample_sites(t, p)) ++per_ds[s.target];
  CHECK(per_ds.size() == 5);
  for (const auto& [d, n] : per_ds) CHECK((n == 10 || n == 11));
  p.flips = 5 * 100;  // /e has only 12 x 16 = 192 bits, /a 320: fine; 500 needs 100 per dataset
  CHECK_NOTHROW(sample_sites(t, p));
  p.flips = 5 * 200;
  CHECK_THROWS_AS(sample_sites(t, p), UsageError);
}
