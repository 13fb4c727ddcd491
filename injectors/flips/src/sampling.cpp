// Site sampling: uniform over the selected stored bits, exact counts without replacement (Floyd),
// or an independent Bernoulli trial per stored bit (geometric gaps, cost proportional to hits);
// SiteDraw keeps a draw open for --finite redraws.
#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <unordered_set>

#include "resil/inject/counts.hpp"
#include "resil/inject/plan.hpp"
#include "resil/inject/sampling.hpp"

namespace resil::inject {

uint128_t below(Rng& rng, uint128_t n) {
  if (n <= (uint128_t{1} << 64)) return n == (uint128_t{1} << 64) ? rng() : rng.below(static_cast<std::uint64_t>(n));
  // n > 2^64: 128 random bits masked to the bit length of n - 1, rejected until below n (on
  // average fewer than 2 tries).
  const uint128_t top = n - 1;
  const int bits = 128 - std::countl_zero(static_cast<std::uint64_t>(top >> 64));
  const uint128_t mask = bits >= 128 ? ~uint128_t{0} : (uint128_t{1} << bits) - 1;
  for (;;) {
    const uint128_t hi = rng(), lo = rng();
    const uint128_t x = ((hi << 64) | lo) & mask;
    if (x < n) return x;
  }
}

namespace {
struct Hash128 {
  std::size_t operator()(uint128_t v) const noexcept {
    return std::hash<std::uint64_t>{}(static_cast<std::uint64_t>(v) ^ (static_cast<std::uint64_t>(v >> 64) * 0x9E3779B97F4A7C15ull));
  }
};
}  // namespace

std::vector<uint128_t> draw_without_replacement(uint128_t total, std::uint64_t n, Rng& rng) {
  if (n > total) throw UsageError("cannot draw " + std::to_string(n) + " distinct sites from " + count_string(total));
  if (n > max_sites) throw UsageError(std::to_string(n) + " sites exceed the limit of " + std::to_string(max_sites));
  // Floyd's algorithm: exactly n distinct values, each n-subset equally likely, O(n) draws.
  std::unordered_set<uint128_t, Hash128> chosen;
  chosen.reserve(n * 2);
  std::vector<uint128_t> out;
  out.reserve(n);
  for (uint128_t j = total - n; j < total; ++j) {
    const uint128_t t = below(rng, j + 1);
    const uint128_t v = chosen.insert(t).second ? t : (chosen.insert(j), j);
    out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<uint128_t> draw_bernoulli(uint128_t total, double p, Rng& rng) {
  if (!(p >= 0.0 && p <= 1.0)) throw UsageError("--ber must lie in [0, 1]");
  if (static_cast<double>(total) * p > static_cast<double>(max_sites))
    throw UsageError("--ber " + std::to_string(p) + " over " + count_string(total) + " bits expects more than " +
                     std::to_string(max_sites) + " flips");
  std::vector<uint128_t> out;
  if (p <= 0.0 || total == 0) return out;
  if (p >= 1.0) {
    for (uint128_t i = 0; i < total; ++i) out.push_back(i);
    return out;
  }
  // Gaps between successes of independent Bernoulli(p) trials are geometric: jump from hit to hit.
  const double log_q = std::log1p(-p);
  uint128_t pos = 0;
  for (;;) {
    double u = rng.uniform();
    while (u <= 0.0) u = rng.uniform();
    const double gap = std::floor(std::log(u) / log_q);
    if (gap >= static_cast<double>(total - pos)) break;
    pos += static_cast<uint128_t>(gap);
    out.push_back(pos);
    if (++pos >= total) break;
  }
  return out;
}

namespace {

// A sampling space: the union of (target, bit set) segments, each weighing numel x |bits|.
struct Segment {
  std::uint32_t target;
  std::vector<unsigned> bits;
  std::uint64_t numel;
  uint128_t weight() const noexcept { return static_cast<uint128_t>(numel) * bits.size(); }
};

std::vector<unsigned> bit_list(std::uint64_t m) {
  std::vector<unsigned> b;
  for (unsigned i = 0; i < 64; ++i)
    if ((m >> i) & 1) b.push_back(i);
  return b;
}

void map_sites(const std::vector<Segment>& space, const std::vector<uint128_t>& draws, std::vector<Site>& out) {
  std::size_t seg = 0;
  uint128_t base = 0;
  for (const uint128_t x : draws) {  // draws are sorted: walk the segments once
    while (x - base >= space[seg].weight()) {
      base += space[seg].weight();
      ++seg;
    }
    const uint128_t local = x - base;
    const auto nb = space[seg].bits.size();
    out.push_back({space[seg].target, static_cast<std::uint64_t>(local / nb), space[seg].bits[static_cast<std::size_t>(local % nb)]});
  }
}


// A stratum: its segments (prefix sums for single lookups), its stream, and for redraws the set
// of positions drawn so far.
struct Stratum {
  std::vector<Segment> segs;
  std::vector<uint128_t> ends;  // ends[i]: sum of the weights of segs[0..i]
  uint128_t weight = 0;
  Rng rng;
  std::vector<uint128_t> first;  // the first draw's positions (sorted)
  // Redraws: drawn positions in a hash set while they are at most half the stratum (a uniform
  // pick is then under 2 tries on average); beyond, the undrawn positions listed in a pool.
  bool tracking = false, pooled = false;
  std::unordered_set<uint128_t, Hash128> drawn;
  std::vector<uint128_t> pool;
  std::vector<uint128_t> last;  // the latest more()'s positions, in draw order

  // The weight cannot overflow: at most 2^32 segments of at most (2^63 - 1) x 64 bits each.
  Stratum(std::vector<Segment> s, Rng r) : segs(std::move(s)), rng(r) {
    for (const auto& g : segs) ends.push_back(weight += g.weight());
  }
  Site site_at(uint128_t x) const {
    const auto seg = static_cast<std::size_t>(std::upper_bound(ends.begin(), ends.end(), x) - ends.begin());
    const uint128_t local = x - (ends[seg] - segs[seg].weight());
    const auto nb = segs[seg].bits.size();
    return {segs[seg].target, static_cast<std::uint64_t>(local / nb), segs[seg].bits[static_cast<std::size_t>(local % nb)]};
  }
  uint128_t undrawn() const { return pooled ? pool.size() : weight - (tracking ? drawn.size() : first.size()); }
  uint128_t pick() {
    if (!tracking) {
      drawn.insert(first.begin(), first.end());
      tracking = true;
    }
    if (!pooled && drawn.size() * 2 >= weight) {
      // At most about 2 x max draws of a --finite plan: the stratum is small, list what is left.
      for (uint128_t x = 0; x < weight; ++x)
        if (!drawn.count(x)) pool.push_back(x);
      pooled = true;
      drawn.clear();
    }
    if (pooled) {
      const auto i = static_cast<std::size_t>(below(rng, pool.size()));
      const uint128_t x = pool[i];
      pool[i] = pool.back();
      pool.pop_back();
      return x;
    }
    for (;;) {
      const uint128_t x = below(rng, weight);
      if (drawn.insert(x).second) return x;
    }
  }
};

}  // namespace

struct SiteDraw::Impl {
  Stratify stratify;
  std::vector<Stratum> strata;
  std::vector<std::size_t> of_bit;  // Stratify::bits: stratum of each bit position
  std::optional<std::uint64_t> flips;
  std::optional<double> ber;
  std::uint64_t key;
};

SiteDraw::SiteDraw(std::span<const Target> targets, const PlanOptions& opt) : impl_(std::make_unique<Impl>()) {
  if (opt.flips.has_value() == opt.ber.has_value()) throw UsageError("give exactly one of --flips N and --ber RATE");
  if (opt.ber && opt.stratify != Stratify::none) throw UsageError("--stratify applies to --flips, not --ber");
  auto& m = *impl_;
  m.stratify = opt.stratify;
  m.flips = opt.flips;
  m.ber = opt.ber;
  m.key = derive_seed(opt.seed, opt.trial);
  std::vector<std::vector<Segment>> segs;
  switch (opt.stratify) {
    case Stratify::none: {
      std::vector<Segment> all;
      for (std::uint32_t t = 0; t < targets.size(); ++t) all.push_back({t, bit_list(targets[t].allowed), targets[t].info.numel()});
      segs.push_back(std::move(all));
      break;
    }
    case Stratify::dataset:
      for (std::uint32_t t = 0; t < targets.size(); ++t)
        segs.push_back({{t, bit_list(targets[t].allowed), targets[t].info.numel()}});
      break;
    case Stratify::bits:
      m.of_bit.assign(64, 0);
      for (unsigned b = 0; b < 64; ++b) {
        std::vector<Segment> s;
        for (std::uint32_t t = 0; t < targets.size(); ++t)
          if ((targets[t].allowed >> b) & 1) s.push_back({t, {b}, targets[t].info.numel()});
        if (!s.empty()) {
          m.of_bit[b] = segs.size();
          segs.push_back(std::move(s));
        }
      }
      break;
  }
  // One stratum draws from stream_sites itself, several each from their own stream.
  for (std::size_t i = 0; i < segs.size(); ++i)
    m.strata.emplace_back(std::move(segs[i]), Rng(m.key, segs.size() == 1 ? stream_sites : stream_sites + 16 + i));
}

SiteDraw::~SiteDraw() = default;

std::vector<Site> SiteDraw::first() {
  auto& m = *impl_;
  std::vector<Site> sites;
  if (m.ber) {
    auto& s = m.strata[0];
    s.first = draw_bernoulli(s.weight, *m.ber, s.rng);
    map_sites(s.segs, s.first, sites);
  } else {
    // Equal shares per stratum; the remainder goes to strata picked at random.
    const std::uint64_t n = *m.flips, ns = m.strata.size();
    Rng pick(m.key, stream_strata);
    const auto extra = draw_without_replacement(ns, n % ns, pick);
    for (std::uint64_t i = 0; i < ns; ++i) {
      auto& s = m.strata[i];
      const std::uint64_t share = n / ns + (std::binary_search(extra.begin(), extra.end(), i) ? 1 : 0);
      if (share > s.weight)
        throw UsageError("--flips " + std::to_string(n) + ": a stratum has only " + count_string(s.weight) +
                         " selected stored bits (asked for " + std::to_string(share) + ")");
      s.first = draw_without_replacement(s.weight, share, s.rng);
      map_sites(s.segs, s.first, sites);
    }
  }
  std::sort(sites.begin(), sites.end());
  return sites;
}

std::size_t SiteDraw::strata() const noexcept { return impl_->strata.size(); }

std::size_t SiteDraw::stratum_of(const Site& s) const {
  switch (impl_->stratify) {
    case Stratify::none: return 0;
    case Stratify::dataset: return s.target;
    case Stratify::bits: return impl_->of_bit.at(s.bit);
  }
  return 0;
}

uint128_t SiteDraw::undrawn(std::size_t s) const { return impl_->strata.at(s).undrawn(); }

std::vector<Site> SiteDraw::more(std::size_t s, std::uint64_t k) {
  auto& st = impl_->strata.at(s);
  if (k > st.undrawn()) throw std::logic_error("SiteDraw::more: more sites than are left");
  st.last.clear();
  std::vector<Site> out;
  out.reserve(k);
  for (std::uint64_t i = 0; i < k; ++i) {
    st.last.push_back(st.pick());
    out.push_back(st.site_at(st.last.back()));
  }
  return out;
}

void SiteDraw::put_back(std::size_t s, std::uint64_t count) {
  auto& st = impl_->strata.at(s);
  if (count > st.last.size()) throw std::logic_error("SiteDraw::put_back: more sites than the last draw");
  for (; count > 0; --count) {
    if (st.pooled) st.pool.push_back(st.last.back());
    else st.drawn.erase(st.last.back());
    st.last.pop_back();
  }
}

std::vector<Site> sample_sites(std::span<const Target> targets, const PlanOptions& opt) {
  if (opt.finite) throw UsageError("--finite needs the values of the file (sample_sites with a WordReader)");
  return SiteDraw(targets, opt).first();
}

WordReader words_of(Storage& file, std::span<const Target> targets) {
  return [&file, targets](std::uint32_t t, std::vector<std::uint64_t> indices, const Storage::BlockFn& fn) {
    file.edit(targets[t].info.path, std::move(indices), fn);
  };
}

}  // namespace resil::inject
