// --finite: candidates tested against the file's words, rejected ones redrawn in their stratum.
#include "resil/inject/finite.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "resil/core/error.hpp"
#include "resil/inject/select_expr.hpp"

namespace resil::inject {

bool finite_bits(ckpt::FloatLayout l, std::uint64_t word) noexcept {
  const std::uint64_t all_ones = width_mask(l.exponent_bits);
  if (((word >> l.mantissa_bits) & all_ones) != all_ones) return true;
  // E4M3FN spends the all-ones exponent on finite values (256 to 448) except S.1111.111, its NaN.
  if (l.exponent_bits == 4 && l.mantissa_bits == 3) return (word & width_mask(3)) != width_mask(3);
  return false;
}

bool finite_word(ckpt::DType t, std::uint64_t word) noexcept {
  // FNUZ fp8: every exponent holds finite values; 0x80 (a negative zero elsewhere) is the one NaN.
  if (t == ckpt::DType::f8_e4m3fnuz || t == ckpt::DType::f8_e5m2fnuz) return (word & 0xff) != 0x80;
  const auto l = ckpt::float_layout(t);
  return !l || finite_bits(*l, word);
}

std::uint64_t site_fault(const FaultModel& m, std::uint64_t key, const Site& s, std::uint64_t old, unsigned width,
                         std::uint64_t allowed) {
  Rng rng(derive_seed(derive_seed(derive_seed(key, s.target), s.index), s.bit), stream_model);
  return m.apply(old, width, s.bit, allowed, rng);
}

std::uint64_t max_rejected_draws(std::uint64_t requested) noexcept {
  constexpr std::uint64_t base = 1'000'000, per_fault = 100;
  return requested > (~std::uint64_t{0} - base) / per_fault ? ~std::uint64_t{0} : base + per_fault * requested;
}

namespace {

using WordKey = std::pair<std::uint32_t, std::uint64_t>;  // (target, element)

// The candidates' original words (read once each) and the sites kept so far per word.
class Words {
public:
  Words(std::span<const Target> targets, const PlanOptions& opt, const WordReader& read)
      : targets_(targets), opt_(opt), read_(read), key_(derive_seed(opt.seed, opt.trial)) {}

  /// Reads the words of `sites` not read yet, one read per target (integers need none).
  void load(std::span<const Site> sites) {
    original_.reserve(original_.size() + sites.size());
    std::map<std::uint32_t, std::vector<std::uint64_t>> unread;
    for (const auto& s : sites)
      if (ckpt::float_layout(targets_[s.target].dtype) && !original_.count({s.target, s.index})) unread[s.target].push_back(s.index);
    for (auto& [t, idx] : unread) {
      std::sort(idx.begin(), idx.end());
      idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
      read_(t, std::move(idx), [&](std::span<const std::uint64_t> i, std::span<std::uint64_t> w) {
        for (std::size_t k = 0; k < i.size(); ++k) original_[{t, i[k]}] = w[k];
      });
    }
  }

  /// Keeps `c` when its word's chain with it stays finite at every record (non-float: always).
  bool try_keep(const Site& c) {
    const Target& t = targets_[c.target];
    const WordKey k{c.target, c.index};
    const auto it = kept_.find(k);
    if (!ckpt::float_layout(t.dtype)) {
      add(it, k, c);
      return true;
    }
    const unsigned width = ckpt::dtype_bits(t.dtype);
    const std::uint64_t old = original_.at(k);
    if (it == kept_.end()) {  // the common case: the first site of its word
      if (!finite_word(t.dtype, site_fault(opt_.model, key_, c, old, width, t.allowed))) return false;
    } else {
      std::vector<Site> chain = it->second;
      chain.insert(std::upper_bound(chain.begin(), chain.end(), c), c);
      std::uint64_t w = old;
      for (const auto& s : chain) {
        w = site_fault(opt_.model, key_, s, w, width, t.allowed);
        if (!finite_word(t.dtype, w)) return false;
      }
    }
    add(it, k, c);
    return true;
  }

  std::vector<Site> sites() const {
    std::vector<Site> out;
    for (const auto& [k, v] : kept_) out.insert(out.end(), v.begin(), v.end());
    return out;  // map order (target, index), each chain in bit order: sorted
  }

private:
  using Kept = std::map<WordKey, std::vector<Site>>;
  void add(Kept::iterator it, const WordKey& k, const Site& c) {
    if (it == kept_.end()) it = kept_.emplace(k, std::vector<Site>{}).first;
    it->second.insert(std::upper_bound(it->second.begin(), it->second.end(), c), c);
  }

  std::span<const Target> targets_;
  const PlanOptions& opt_;
  const WordReader& read_;
  std::uint64_t key_;
  struct KeyHash {
    std::size_t operator()(const WordKey& k) const noexcept { return std::hash<std::uint64_t>{}(k.second * 0x9E3779B97F4A7C15ull ^ k.first); }
  };
  std::unordered_map<WordKey, std::uint64_t, KeyHash> original_;
  Kept kept_;
};

std::string stratum_name(const PlanOptions& opt, std::span<const Target> targets, const Site& s) {
  switch (opt.stratify) {
    case Stratify::none: return "";
    case Stratify::dataset: return " in the stratum of dataset " + targets[s.target].info.path;
    case Stratify::bits: return " in the stratum of bit " + std::to_string(s.bit);
  }
  return "";
}

}  // namespace

Sampled sample_finite(std::span<const Target> targets, const PlanOptions& opt, const WordReader& read) {
  SiteDraw draw(targets, opt);
  std::vector<Site> first = draw.first();
  const std::uint64_t requested = first.size();
  const std::uint64_t limit = max_rejected_draws(requested);
  Rng order(derive_seed(opt.seed, opt.trial), stream_finite);
  for (std::size_t i = first.size(); i > 1; --i) std::swap(first[i - 1], first[order.below(i)]);

  Words words(targets, opt, read);
  Sampled out;
  std::vector<std::uint64_t> deficit(draw.strata()), tested(draw.strata()), kept(draw.strata());
  std::vector<Site> example(draw.strata());  // a site of each stratum (for messages)
  auto test = [&](const Site& c) {
    const std::size_t s = draw.stratum_of(c);
    ++tested[s];
    if (words.try_keep(c)) {
      ++kept[s];
      return true;
    }
    example[s] = c;
    if (++out.rejected > limit)
      throw NothingSelectedError("--finite: gave up after " + std::to_string(out.rejected) +
                                 " drawn sites whose fault leaves a NaN or Inf (at most 10^6 + 100 per requested fault); " +
                                 "select other bits or datasets");
    return false;
  };
  words.load(first);
  for (const auto& c : first)
    if (!test(c)) ++deficit[draw.stratum_of(c)];
  for (std::size_t s = 0; s < draw.strata(); ++s) {
    while (deficit[s] > 0) {
      const uint128_t left = draw.undrawn(s);
      if (left == 0)
        throw NothingSelectedError("--finite: only " + std::to_string(kept[s]) + " of the " + std::to_string(tested[s]) +
                                   " selected sites" + stratum_name(opt, targets, example[s]) +
                                   " keep a finite value after the fault (asked for " +
                                   std::to_string(kept[s] + deficit[s]) + "); select other bits or datasets");
      // As many as the acceptance seen so far suggests will do, within [deficit, 2^20]; the ones
      // not looked at go back.
      const double p = (static_cast<double>(kept[s]) + 1) / (static_cast<double>(tested[s]) + 2);
      const double want = std::min(static_cast<double>(deficit[s]) / p, 1048576.0);
      std::uint64_t k = std::max(deficit[s], static_cast<std::uint64_t>(want));
      if (static_cast<uint128_t>(k) > left) k = static_cast<std::uint64_t>(left);
      const auto batch = draw.more(s, k);
      words.load(batch);
      std::uint64_t looked = 0;
      for (const auto& c : batch) {
        ++looked;
        if (test(c) && --deficit[s] == 0) break;
      }
      draw.put_back(s, batch.size() - looked);
    }
  }
  out.sites = words.sites();
  return out;
}

Sampled sample_sites(std::span<const Target> targets, const PlanOptions& opt, const WordReader& read) {
  if (opt.finite) return sample_finite(targets, opt, read);
  return {sample_sites(targets, opt), 0};
}

}  // namespace resil::inject
