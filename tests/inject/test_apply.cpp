// plan/apply/revert on real HDF5 files written by libckpt: every dtype, contiguous and
// chunked+gzip+shuffle, 5-D, every fault model. Checks bit-exactness against the log.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <set>

#include "resil/ckpt/checkpoint.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/ckpt/io.hpp"
#include "resil/inject/plan.hpp"
#include "resil/inject/raw.hpp"
#include "resil/inject/diff.hpp"
#include "resil/inject/scan.hpp"
#include "resil_test/tmpdir.hpp"

using namespace resil;
using namespace resil::inject;
using ckpt::DType;

namespace {

ckpt::Tensor filled(DType t, ckpt::Shape shape, std::uint64_t seed) {
  ckpt::Tensor x(t, std::move(shape));
  Rng rng(seed, 0);
  auto bytes = x.bytes();
  const std::size_t sz = ckpt::dtype_size(t);
  for (std::size_t i = 0; i < x.numel(); ++i) {
    // Plausible values: floats from a normal, integers small.
    const double v = ckpt::dtype_is_float(t) ? rng.normal() : static_cast<double>(rng.below(100));
    const std::uint64_t w = ckpt::double_to_word(t, v);
    std::memcpy(bytes.data() + i * sz, &w, sz);
  }
  return x;
}

std::uint64_t word_at(const ckpt::Tensor& t, std::uint64_t i) {
  std::uint64_t w = 0;
  std::memcpy(&w, t.bytes().data() + i * ckpt::dtype_size(t.dtype()), ckpt::dtype_size(t.dtype()));
  return w;
}

// Every dataset of `a` vs `b`: words differ exactly where the records say, by the chained XOR.
void check_only_logged_bits_differ(const std::string& a, const std::string& b, const std::vector<FlipRecord>& recs) {
  std::map<std::pair<std::string, std::uint64_t>, std::uint64_t> expect;  // final XOR per word
  for (const auto& r : recs) expect[{r.dataset, r.index}] ^= r.mask();
  auto fa = ckpt::h5::open_file(a, ckpt::h5::Mode::read);
  auto fb = ckpt::h5::open_file(b, ckpt::h5::Mode::read);
  for (const auto& info : ckpt::list_datasets(fa)) {
    const auto ta = ckpt::read_tensor(fa, info.path), tb = ckpt::read_tensor(fb, info.path);
    REQUIRE(ta.numel() == tb.numel());
    for (std::uint64_t i = 0; i < ta.numel(); ++i) {
      const auto it = expect.find({info.path, i});
      const std::uint64_t x = word_at(ta, i) ^ word_at(tb, i);
      if (x != (it == expect.end() ? 0 : it->second)) FAIL(info.path << "[" << i << "] differs by " << x);
    }
  }
}

}  // namespace

TEST_CASE("inject/revert are bit-exact for every dtype, layout and fault model", "[inject][unit]") {
  test::TempDir dir("inject-apply");
  const auto src = (dir / "src.h5").string();
  {
    auto f = ckpt::h5::create_file(src);
    std::uint64_t seed = 1;
    for (DType t : ckpt::all_dtypes) {
      const std::string name(ckpt::dtype_name(t));
      ckpt::write_tensor(f, "/model/" + name + "/contig", filled(t, {13, 7}, seed++));
      ckpt::WriteOptions chunked{{4, 3}, 4, true};
      ckpt::write_tensor(f, "/model/" + name + "/gzip", filled(t, {13, 7}, seed++), chunked);
    }
    ckpt::write_tensor(f, "/optimizer/w5/m", filled(DType::f32, {3, 2, 4, 2, 5}, 99), ckpt::WriteOptions{{2, 2, 2, 2, 2}, 1, false});
    ckpt::write_tensor(f, "/model/scalar", filled(DType::f64, {}, 5));
  }
  const auto infos = [&] {
    auto f = ckpt::h5::open_file(src, ckpt::h5::Mode::read);
    return ckpt::list_datasets(f);
  }();
  const auto model = GENERATE(as<std::string>{}, "flip", "adjacent:3", "random-bits:3", "burst:2", "stuck-at-0", "stuck-at-1",
                              "random-value", "zero");
  SECTION("model " + model) {
    SelectOptions sel;
    const auto targets = select(infos, sel);
    CHECK(targets.size() == 2 * 12 + 2);  // counters: none; the f64 scalar is a float, so included
    PlanOptions p;
    p.seed = 1234;
    p.flips = 600;
    p.model = FaultModel::parse(model);
    const auto sites = sample_sites(targets, p);
    const auto recs = plan(src, targets, sites, p);
    REQUIRE(recs.size() == 600);
    // Every dtype and both layouts were hit.
    std::map<std::string, int> hit;
    for (const auto& r : recs) ++hit[r.dataset];
    CHECK(hit.size() >= 20);

    const auto out = (dir / "out.h5").string();
    ckpt::fs::copy_file(src, out);
    const auto st = apply(out, recs, Direction::forward);
    CHECK(st.words <= 600);
    check_only_logged_bits_differ(src, out, recs);
    // The checksum attributes were kept: the injection is detectable.
    if (st.changed > 0) CHECK_FALSE(ckpt::verify(out).ok());
    // Replaying on the already-injected file is a no-op; a wrong file is refused.
    CHECK(apply(out, recs, Direction::forward).changed == 0);
    // Exact undo.
    const auto rst = apply(out, recs, Direction::revert);
    CHECK(rst.changed == st.changed);
    CHECK(diff(src, out).identical());
    CHECK(ckpt::verify(out).ok());
  }
}

TEST_CASE("plan is deterministic and only reads: same seed, same records", "[inject][unit]") {
  test::TempDir dir("inject-det");
  const auto src = (dir / "src.h5").string();
  {
    auto f = ckpt::h5::create_file(src);
    ckpt::write_tensor(f, "/model/w", filled(DType::f32, {100, 50}, 3), ckpt::WriteOptions{{10, 50}, 6, true});
  }
  const auto before = ckpt::sha256_file(src);
  auto f = ckpt::h5::open_file(src, ckpt::h5::Mode::read);
  const auto targets = select(ckpt::list_datasets(f), {});
  PlanOptions p;
  p.seed = 77;
  p.flips = 50;
  p.model = FaultModel::parse("random-bits:2");
  const auto a = plan(src, targets, sample_sites(targets, p), p);
  const auto b = plan(src, targets, sample_sites(targets, p), p);
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(record_line(a[i], i) == record_line(b[i], i));
  CHECK(ckpt::sha256_file(src) == before);
}

TEST_CASE("a replay onto a different file is refused unless forced", "[inject][unit]") {
  test::TempDir dir("inject-mismatch");
  const auto a = (dir / "a.h5").string(), b = (dir / "b.h5").string();
  for (const auto& [p, seed] : {std::pair{a, 1}, std::pair{b, 2}}) {
    auto f = ckpt::h5::create_file(p);
    ckpt::write_tensor(f, "/model/w", filled(DType::f32, {64}, static_cast<std::uint64_t>(seed)));
  }
  auto f = ckpt::h5::open_file(a, ckpt::h5::Mode::read);
  const auto targets = select(ckpt::list_datasets(f), {});
  PlanOptions p;
  p.seed = 1;
  p.flips = 5;
  const auto recs = plan(a, targets, sample_sites(targets, p), p);
  CHECK_THROWS_AS(apply(b, recs, Direction::forward), MismatchError);
  CHECK_THROWS_AS(apply(b, recs, Direction::revert), MismatchError);
  CHECK(apply(b, recs, Direction::forward, true).changed == 5);
}

TEST_CASE("selection: roles, counters, include/exclude, --bits, --as", "[inject][unit]") {
  test::TempDir dir("inject-select");
  const auto src = (dir / "c.h5").string();
  {
    ckpt::Checkpoint c;
    c.model["fc.weight"] = filled(DType::f32, {4, 4}, 1);
    c.model["bn.num_batches_tracked"] = filled(DType::i64, {}, 2);
    c.model["emb"] = filled(DType::u16, {8}, 3);
    c.optimizer["fc.weight"]["m"] = filled(DType::f32, {4, 4}, 4);
    c.optimizer["fc.weight"]["step"] = filled(DType::f32, {}, 5);
    c.meta.rng_state = {1, 2};  // an empty rng_state trips UBSan in libckpt (memcpy of 0 bytes from nullptr): reported
    auto f = ckpt::h5::create_file(src);
    ckpt::write(f, c);
  }
  auto f = ckpt::h5::open_file(src, ckpt::h5::Mode::read);
  const auto infos = ckpt::list_datasets(f);
  auto paths = [](const std::vector<Target>& t) {
    std::set<std::string> s;
    for (const auto& x : t) s.insert(x.info.path);
    return s;
  };
  CHECK(paths(select(infos, {})) == std::set<std::string>{"/model/emb", "/model/fc.weight", "/optimizer/fc.weight/m"});
  SelectOptions s;
  s.role = Role::model;
  CHECK(paths(select(infos, s)) == std::set<std::string>{"/model/emb", "/model/fc.weight"});
  s.role = Role::optimizer;
  CHECK(paths(select(infos, s)) == std::set<std::string>{"/optimizer/fc.weight/m"});
  s = {};
  s.include = {"*num_batches_tracked"};
  CHECK(paths(select(infos, s)) == std::set<std::string>{"/model/bn.num_batches_tracked"});
  s = {};
  s.exclude = {"/optimizer/**", "emb"};
  CHECK(paths(select(infos, s)) == std::set<std::string>{"/model/fc.weight"});
  s = {};
  s.bits = BitSpec::parse("exponent");
  CHECK(paths(select(infos, s)) == std::set<std::string>{"/model/fc.weight", "/optimizer/fc.weight/m"});
  s.as = DType::bf16;
  const auto t = select(infos, s);
  CHECK(paths(t).count("/model/emb") == 1);
  for (const auto& x : t)
    if (x.info.path == "/model/emb") CHECK(x.allowed == 0x7f80);
  s = {};
  s.include = {"/nothing/*"};
  CHECK_THROWS_AS(select(infos, s), NothingSelectedError);
}

TEST_CASE("raw faults hit file bytes and revert exactly", "[inject][unit]") {
  test::TempDir dir("inject-raw");
  const auto src = (dir / "r.h5").string(), out = (dir / "o.h5").string();
  {
    auto f = ckpt::h5::create_file(src);
    ckpt::write_tensor(f, "/model/w", filled(DType::f32, {256}, 1));
  }
  ckpt::fs::copy_file(src, out);
  PlanOptions p;
  p.seed = 3;
  p.flips = 40;
  const auto recs = plan_raw(out, p);
  REQUIRE(recs.size() == 40);
  apply(out, recs, Direction::forward);
  CHECK(ckpt::sha256_file(out) != ckpt::sha256_file(src));
  apply(out, recs, Direction::revert);
  CHECK(ckpt::sha256_file(out) == ckpt::sha256_file(src));
}

TEST_CASE("scan flags exponent flips, NaN/Inf and checksum mismatches; clean files pass", "[inject][unit]") {
  test::TempDir dir("inject-scan");
  const auto src = (dir / "s.h5").string();
  {
    auto f = ckpt::h5::create_file(src);
    ckpt::write_tensor(f, "/model/w", filled(DType::f32, {5000}, 1));
    ckpt::write_tensor(f, "/model/h", filled(DType::f16, {300}, 2), ckpt::WriteOptions{{100}, 1, false});
  }
  CHECK_FALSE(scan(src).suspect());
  SelectOptions s;
  s.include = {"/model/w"};
  s.bits = BitSpec::parse("exponent-msb");
  const auto targets = [&] {
    auto f = ckpt::h5::open_file(src, ckpt::h5::Mode::read);
    return select(ckpt::list_datasets(f), s);
  }();
  PlanOptions p;
  p.seed = 8;
  p.flips = 3;
  const auto recs = plan(src, targets, sample_sites(targets, p), p);
  apply(src, recs, Direction::forward);
  const auto rep = scan(src);
  CHECK(rep.suspect());
  for (const auto& d : rep.datasets)
    if (d.path == "/model/w") {
      CHECK(d.checksum == "mismatch");
      CHECK(d.outliers + d.inf + d.nan == 3);  // each |x| < 2 exponent-MSB flip jumps by 2^128 or to Inf/NaN
    }
}
