// --finite: which words are finite for every float layout, and the redraw against an
// HDF5 file whose values make known bits unsafe: exact rejection counts (against a one-candidate-
// at-a-time reference), only finite outcomes, determinism, bounded failure.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "resil/ckpt/io.hpp"
#include "resil/core/error.hpp"
#include "resil/inject/finite.hpp"
#include "resil/inject/flip_log.hpp"
#include "resil/inject/plan.hpp"
#include "resil/inject/storage.hpp"
#include "resil_test/tmpdir.hpp"

using namespace resil;
using namespace resil::inject;
using ckpt::DType;

namespace {

using WordOf = std::function<std::uint64_t(std::uint32_t target, std::uint64_t index)>;

// The definition of docs/reference/ckpt-flip.md "--finite", one candidate at a time: the first draw in the
// order of stream_finite, then each stratum's redraws one by one until it has its share. Finiteness
// from word_to_double, not finite_word.
Sampled sample_finite_reference(std::span<const Target> targets, const PlanOptions& opt, const WordOf& word) {
  SiteDraw draw(targets, opt);
  auto first = draw.first();
  const std::uint64_t key = derive_seed(opt.seed, opt.trial);
  Rng order(key, stream_finite);
  for (std::size_t i = first.size(); i > 1; --i) std::swap(first[i - 1], first[order.below(i)]);
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::vector<Site>> kept;
  Sampled out;
  auto keep = [&](const Site& c) {
    const Target& t = targets[c.target];
    auto chain = kept[{c.target, c.index}];
    chain.push_back(c);
    std::sort(chain.begin(), chain.end());
    std::uint64_t w = word(c.target, c.index);
    for (const auto& s : chain) {
      w = site_fault(opt.model, key, s, w, ckpt::dtype_bits(t.dtype), t.allowed);
      if (!std::isfinite(ckpt::word_to_double(t.dtype, w))) {
        ++out.rejected;
        return false;
      }
    }
    kept[{c.target, c.index}] = chain;
    return true;
  };
  std::vector<std::uint64_t> deficit(draw.strata());
  for (const auto& c : first)
    if (!keep(c)) ++deficit[draw.stratum_of(c)];
  for (std::size_t s = 0; s < draw.strata(); ++s)
    while (deficit[s] > 0) {
      if (draw.undrawn(s) == 0) throw NothingSelectedError("reference: stratum exhausted");
      if (keep(draw.more(s, 1).front())) --deficit[s];
    }
  for (const auto& [k, v] : kept) out.sites.insert(out.sites.end(), v.begin(), v.end());
  return out;
}

template <class T> std::uint64_t bits_of(T v) {
  std::uint64_t w = 0;
  std::memcpy(&w, &v, sizeof v);
  return w;
}

ckpt::Tensor words_tensor(DType t, const std::vector<std::uint64_t>& words) {
  ckpt::Tensor x(t, {words.size()});
  for (std::size_t i = 0; i < words.size(); ++i) std::memcpy(x.bytes().data() + i * ckpt::dtype_size(t), &words[i], ckpt::dtype_size(t));
  return x;
}

// Values chosen so that known bits are unsafe: the fault makes the exponent all ones.
//   /model/w f32[64]: even 1.5f (exponent 0x7f: bit 30 unsafe), odd 0.75f (0x7e: bit 30 safe)
//   /model/h f16[16]: even 65504 (0x7bff: bit 10 unsafe), odd 1.0 (0x3c00: bit 14 unsafe)
//   /model/b bf16[16]: 0x7f00 (exponent 0xfe: bit 7 unsafe)
//   /model/d f64[8]: 1.0 (exponent 0x3ff: bit 62 unsafe)
//   /model/i i32[32]: integers (no effect)
struct Crafted {
  test::TempDir dir{"inject-finite"};
  std::string path = (dir / "crafted.h5").string();
  std::map<std::string, std::vector<std::uint64_t>> words;
  Crafted() {
    auto& w = words["/model/w"];
    for (int i = 0; i < 64; ++i) w.push_back(bits_of(i % 2 ? 0.75f : 1.5f));
    auto& h = words["/model/h"];
    for (int i = 0; i < 16; ++i) h.push_back(i % 2 ? 0x3c00 : 0x7bff);
    words["/model/b"].assign(16, 0x7f00);
    words["/model/d"].assign(8, bits_of(1.0));
    auto& n = words["/model/i"];
    for (std::uint64_t i = 0; i < 32; ++i) n.push_back(i * 0x01010101u);
    const std::map<std::string, DType> types = {{"/model/w", DType::f32}, {"/model/h", DType::f16}, {"/model/b", DType::bf16},
                                                {"/model/d", DType::f64}, {"/model/i", DType::i32}};
    auto f = ckpt::h5::create_file(path);
    for (const auto& [name, t] : types) ckpt::write_tensor(f, name, words_tensor(t, words[name]));
  }
  std::vector<Target> targets(const std::string& bits, const std::vector<std::string>& include = {}) const {
    SelectOptions sel;
    sel.bits = BitSpec::parse(bits);
    sel.include = include;
    return select(open_storage(path, Access::read)->tensors(), sel);
  }
  WordOf word_of(const std::vector<Target>& t) const {
    return [this, &t](std::uint32_t target, std::uint64_t index) { return words.at(t[target].info.path).at(index); };
  }
};

PlanOptions finite_flips(std::uint64_t n, std::uint64_t seed, std::string model = "flip") {
  PlanOptions p;
  p.seed = seed;
  p.flips = n;
  p.model = FaultModel::parse(model);
  p.finite = true;
  return p;
}

}  // namespace

TEST_CASE("finite_word: Inf and NaN of every float layout, nothing for integers", "[inject][unit]") {
  // Every dtype there is (fp8 too once ckpt::DType has it): exhaustive up to 16 bits, against the
  // decoded value.
  for (unsigned i = 0; ckpt::dtype_name(static_cast<DType>(i)) != "?"; ++i) {
    const auto t = static_cast<DType>(i);
    INFO(ckpt::dtype_name(t));
    if (ckpt::dtype_bits(t) <= 16) {
      for (std::uint64_t w = 0; w < (std::uint64_t{1} << ckpt::dtype_bits(t)); ++w)
        if (finite_word(t, w) != std::isfinite(ckpt::word_to_double(t, w))) FAIL("word " << w);
    } else {
      const auto l = ckpt::float_layout(t);
      Rng rng(5, 0);
      for (int k = 0; k < 200000; ++k) {
        std::uint64_t w = rng() & width_mask(ckpt::dtype_bits(t));
        if (l && k % 2) w |= width_mask(l->exponent_bits) << l->mantissa_bits;  // half of them at the edge
        if (finite_word(t, w) != std::isfinite(ckpt::word_to_double(t, w))) FAIL("word " << w);
      }
    }
  }
  CHECK(finite_word(DType::f32, 0x7f7fffff));
  CHECK_FALSE(finite_word(DType::f32, 0x7f800000));
  CHECK_FALSE(finite_word(DType::f32, 0xffc00000));
  CHECK(finite_word(DType::i32, 0xffffffff));
  CHECK(finite_word(DType::u8, 0xff));
  // fp8: E4M3FN (no Inf, NaN only S.1111.111) and E5M2 (IEEE: Inf at 0x7c, NaN 0x7d-0x7f, each sign).
  std::set<std::uint64_t> e4m3, e5m2;
  for (std::uint64_t w = 0; w < 256; ++w) {
    if (!finite_bits({3, 4}, w)) e4m3.insert(w);
    if (!finite_bits({2, 5}, w)) e5m2.insert(w);
  }
  CHECK(e4m3 == std::set<std::uint64_t>{0x7f, 0xff});
  CHECK(e5m2 == std::set<std::uint64_t>{0x7c, 0x7d, 0x7e, 0x7f, 0xfc, 0xfd, 0xfe, 0xff});
  CHECK(finite_bits({3, 4}, 0x7e));  // 448, the largest E4M3 value, has the all-ones exponent
}

TEST_CASE("--finite on a crafted HDF5 file: exact rejections, finite outcomes only, same seed same sites", "[inject][unit]") {
  const Crafted c;
  struct Case {
    std::string bits;
    std::uint64_t unsafe, flips;
    std::string model;
  };
  // Unsafe sites by construction: bit 30 of the 32 even /model/w words, bit 10 of the 8 even and
  // bit 14 of the 8 odd /model/h words, bit 7 of all 16 /model/b words, bit 62 of the 8 /model/d.
  const auto k = GENERATE(Case{"30", 32, 20, "flip"}, Case{"30", 32, 32, "flip"}, Case{"exponent", 72, 150, "flip"},
                          Case{"exponent,sign", 72, 300, "flip"}, Case{"exponent", 0, 300, "adjacent:2"},
                          Case{"exponent", 0, 200, "random-bits:3"}, Case{"all", 0, 2000, "burst:1"},
                          Case{"exponent", 0, 300, "stuck-at-1"}, Case{"all", 0, 500, "random-value"});
  // Bit 30 alone: of /model/w only (one site per word).
  const auto targets = k.bits == "30" ? c.targets(k.bits, {"/model/w"}) : c.targets(k.bits);
  const auto storage = open_storage(c.path, Access::read);
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    INFO("bits " << k.bits << " model " << k.model << " seed " << seed);
    const auto opt = finite_flips(k.flips, seed, k.model);
    const Sampled got = sample_sites(targets, opt, words_of(*storage, targets));
    const Sampled ref = sample_finite_reference(targets, opt, c.word_of(targets));
    CHECK(got.rejected == ref.rejected);
    CHECK(got.sites == ref.sites);
    REQUIRE(got.sites.size() == k.flips);
    CHECK(std::set<Site>(got.sites.begin(), got.sites.end()).size() == k.flips);
    for (const auto& s : got.sites) CHECK(((targets[s.target].allowed >> s.bit) & 1) == 1);
    // One selected bit per word: no chains, so the unsafe sites are exactly those listed above and
    // a rejection is one of them (every one of them once the draw needs all 32 safe ones, barring
    // those never reached).
    if (k.bits == "30") {
      CHECK(got.rejected <= k.unsafe);
      for (const auto& s : got.sites) CHECK(s.index % 2 == 1);
    }
    // Every record plan() makes from the sites (chains of one word included) ends in a finite value.
    for (const auto& r : plan(*storage, targets, got.sites, opt))
      if (!std::isfinite(ckpt::word_to_double(r.dtype, r.new_bits))) FAIL(r.dataset << "[" << r.index << "] -> " << r.new_bits);
    // Same seed, same sites and count.
    const Sampled again = sample_sites(targets, opt, words_of(*storage, targets));
    CHECK(again.sites == got.sites);
    CHECK(again.rejected == got.rejected);
  }
}

TEST_CASE("--finite where the flip cannot leave a NaN or Inf: sample_sites' sites, nothing rejected", "[inject][unit]") {
  const Crafted c;
  // Bit 29 of f32 0.75/1.5 and every bit of the integers: nothing unsafe.
  for (const auto& [bits, include] : {std::pair<std::string, std::string>{"29", "/model/w"}, {"all", "/model/i"}}) {
    const auto targets = c.targets(bits, {include});
    const auto storage = open_storage(c.path, Access::read);
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
      auto opt = finite_flips(20, seed);
      const Sampled got = sample_sites(targets, opt, words_of(*storage, targets));
      CHECK(got.rejected == 0);
      auto plain = opt;
      plain.finite = false;
      CHECK(got.sites == sample_sites(targets, plain));
      const auto a = plan(*storage, targets, got.sites, opt), b = plan(*storage, targets, got.sites, plain);
      REQUIRE(a.size() == b.size());
      for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].new_bits == b[i].new_bits);
    }
  }
}

TEST_CASE("--finite keeps exactly the safe sites, then fails naming how many there are", "[inject][unit]") {
  const Crafted c;
  const auto targets = c.targets("30", {"/model/w"});  // 64 sites, the 32 even ones unsafe
  const auto storage = open_storage(c.path, Access::read);
  const Sampled all = sample_sites(targets, finite_flips(32, 3), words_of(*storage, targets));
  REQUIRE(all.sites.size() == 32);
  for (std::size_t i = 0; i < 32; ++i) CHECK(all.sites[i].index == 2 * i + 1);
  CHECK(all.rejected <= 32);
  try {
    (void)sample_sites(targets, finite_flips(33, 3), words_of(*storage, targets));
    FAIL("no error");
  } catch (const NothingSelectedError& e) {
    CHECK_THAT(e.what(), Catch::Contains("only 32 of the 64 selected sites keep a finite value") && Catch::Contains("asked for 33"));
  }
  // Stratified by dataset: the stratum that runs out is named.
  // (/model/b: bit 7 of 0x7f00 is Inf in all 16 words; /model/w: bit 7 is mantissa.)
  const auto two = c.targets("7,30", {"/model/w", "/model/b"});
  auto opt = finite_flips(2, 1);
  opt.stratify = Stratify::dataset;
  CHECK_THROWS_WITH(sample_sites(two, opt, words_of(*storage, two)),
                    Catch::Contains("only 0 of the 16 selected sites in the stratum of dataset /model/b"));
  // Without the file's words --finite cannot draw.
  CHECK_THROWS_AS(sample_sites(targets, finite_flips(1, 1)), UsageError);
}

TEST_CASE("--finite gives up after 10^6 + 100 per fault rejected draws when nothing stays finite", "[inject][unit]") {
  // 2^40 f16 words of 65504, bit 10 only: every site makes a NaN, and there are too many to try all.
  Target t{};
  t.info.path = "/huge";
  t.info.dtype = DType::f16;
  t.info.shape = {std::uint64_t{1} << 40};
  t.dtype = DType::f16;
  t.allowed = 1u << 10;
  t.nbits = 1;
  const std::vector<Target> targets{t};
  std::uint64_t read = 0;
  const WordReader reader = [&](std::uint32_t, std::vector<std::uint64_t> idx, const Storage::BlockFn& fn) {
    std::vector<std::uint64_t> w(idx.size(), 0x7bff);
    read += idx.size();
    fn(idx, w);
  };
  CHECK_THROWS_WITH(sample_sites(targets, finite_flips(3, 9), reader), Catch::Contains("gave up after 1000301 drawn sites"));
  // Bounded work: the words read are those of the drawn sites, not the 2^40 of the tensor.
  CHECK(read >= 1000301);
  CHECK(read <= 2 * 1000301);
  CHECK(max_rejected_draws(3) == 1000300);
  CHECK(max_rejected_draws(~std::uint64_t{0}) == ~std::uint64_t{0});
}

TEST_CASE("--finite --ber: the Bernoulli count of the plain draw, moved to finite sites", "[inject][unit]") {
  const Crafted c;
  const auto targets = c.targets("exponent");
  const auto storage = open_storage(c.path, Access::read);
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    PlanOptions opt;
    opt.seed = seed;
    opt.ber = 0.2;
    const auto plain = sample_sites(targets, opt);
    opt.finite = true;
    const Sampled got = sample_sites(targets, opt, words_of(*storage, targets));
    CHECK(got.sites.size() == plain.size());
    const Sampled ref = sample_finite_reference(targets, opt, c.word_of(targets));
    CHECK(got.sites == ref.sites);
    CHECK(got.rejected == ref.rejected);
  }
}

TEST_CASE("--finite is uniform over the sites that stay finite (chi-square)", "[inject][unit]") {
  // /model/w, bit 30: 64 sites, the 32 even ones unsafe; each odd one should be kept in 3/32 of the
  // trials.
  const Crafted c;
  const auto targets = c.targets("30", {"/model/w"});
  const auto word = c.word_of(targets);
  const WordReader reader = [&](std::uint32_t tg, std::vector<std::uint64_t> idx, const Storage::BlockFn& fn) {
    std::vector<std::uint64_t> w;
    for (auto i : idx) w.push_back(word(tg, i));
    fn(idx, w);
  };
  std::map<std::pair<std::uint64_t, unsigned>, double> count;
  const int trials = 6000;
  for (int trial = 0; trial < trials; ++trial) {
    auto opt = finite_flips(3, 11);
    opt.trial = static_cast<std::uint64_t>(trial);
    for (const auto& s : sample_sites(targets, opt, reader).sites) count[{s.index, s.bit}] += 1;
  }
  double chi2 = 0;
  for (std::uint64_t i = 0; i < 64; ++i) {
    const double o = count[{i, 30u}];
    if (i % 2 == 0) {
      CHECK(o == 0);
      continue;
    }
    const double expected = trials * 3.0 / 32.0;
    chi2 += (o - expected) * (o - expected) / expected;
  }
  // df = 31: P(chi2 > 75) < 1e-5 for a uniform draw (fixed seeds: deterministic).
  INFO("chi2 = " << chi2);
  CHECK(chi2 < 75);
}

TEST_CASE("the log header records --finite and its rejected draws; a header without them reads as not finite, 0 rejected", "[inject][unit]") {
  LogHeader h;
  h.seed = 4;
  h.model = "flip";
  h.finite = true;
  h.rejected = 17;
  const auto line = header_line(h);
  CHECK_THAT(line, Catch::Contains("\"finite\":true") && Catch::Contains("\"rejected\":17"));
  const auto back = parse_log(line + "\n", "h.jsonl").header;
  CHECK(back.finite);
  CHECK(back.rejected == 17);
  h.finite = false;
  const auto plain = header_line(h);
  CHECK_THAT(plain, !Catch::Contains("finite") && !Catch::Contains("rejected"));
  const auto old = parse_log(plain + "\n", "h.jsonl").header;
  CHECK_FALSE(old.finite);
  CHECK(old.rejected == 0);
  CHECK_THROWS_AS(parse_log(R"({"type":"header","format":"resil-flip-log/1","seed":1,"finite":true,"rejected":-1})" "\n", "h.jsonl"),
                  CorruptInputError);
}
