// plan/apply/revert on real HDF5 files written by libckpt: every dtype, contiguous and
// chunked+gzip+shuffle, 5-D, every fault model. Checks bit-exactness against the log.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "resil/ckpt/checkpoint.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/ckpt/io.hpp"
#include "resil/inject/apply.hpp"
#include "resil/inject/plan.hpp"
#include "resil/inject/raw.hpp"
#include "resil/inject/diff.hpp"
#include "resil/inject/scan.hpp"
#include "resil/inject/hdf5_storage.hpp"
#include "resil_test/tensors.hpp"
#include "resil_test/tmpdir.hpp"

using namespace resil;
using namespace resil::inject;
using ckpt::DType;
using test::filled;

namespace {

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
    c.optimizer["emb"]["master"] = filled(DType::f32, {8}, 6);  // mixed precision's fp32 copy of a 16-bit weight
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
  CHECK(paths(select(infos, {})) == std::set<std::string>{"/model/emb", "/model/fc.weight", "/optimizer/emb/master", "/optimizer/fc.weight/m"});
  SelectOptions s;
  s.role = Role::model;
  CHECK(paths(select(infos, s)) == std::set<std::string>{"/model/emb", "/model/fc.weight"});
  s.role = Role::optimizer;  // the moments: master weights are a role of their own
  CHECK(paths(select(infos, s)) == std::set<std::string>{"/optimizer/fc.weight/m"});
  s.role = Role::master;
  CHECK(paths(select(infos, s)) == std::set<std::string>{"/optimizer/emb/master"});
  CHECK(schema_role("/optimizer/emb/master") == TensorRole::master);
  CHECK(schema_role("/optimizer/master/exp_avg") == TensorRole::optimizer);  // a parameter named master: its moments
  CHECK(schema_role("/model/master") == TensorRole::model);
  s = {};
  s.include = {"*num_batches_tracked"};
  CHECK(paths(select(infos, s)) == std::set<std::string>{"/model/bn.num_batches_tracked"});
  s = {};
  s.exclude = {"/optimizer/**", "emb"};
  CHECK(paths(select(infos, s)) == std::set<std::string>{"/model/fc.weight"});
  s = {};
  s.bits = BitSpec::parse("exponent");
  CHECK(paths(select(infos, s)) == std::set<std::string>{"/model/fc.weight", "/optimizer/emb/master", "/optimizer/fc.weight/m"});
  s.as = DType::bf16;
  const auto t = select(infos, s);
  CHECK(paths(t).count("/model/emb") == 1);
  for (const auto& x : t)
    if (x.info.path == "/model/emb") CHECK(x.allowed == 0x7f80);
  s = {};
  s.include = {"/nothing/*"};
  CHECK_THROWS_AS(select(infos, s), NothingSelectedError);
}

TEST_CASE("selection: an empty selection names the filter that emptied it", "[inject][unit]") {
  auto why = [](const std::vector<Tensor>& ts, const SelectOptions& s) {
    try {
      (void)select(ts, s);
    } catch (const NothingSelectedError& e) {
      return std::string(e.what());
    }
    return std::string("selected");
  };
  auto tensor = [](const std::string& path, DType d, std::uint64_t n, TensorRole role, bool counter = false) {
    Tensor t;
    t.info.path = path;
    t.info.dtype = d;
    t.info.type_desc = "x";
    t.info.shape = {n};
    t.info.stored_bytes = t.info.logical_bytes = n * dtype_size(d);
    t.role = role;
    t.counter = counter;
    return t;
  };
  // Names outside the resil schema (a torch.save layout): the role comes from the adapter alone.
  const std::vector<Tensor> ts = {tensor("/state_dict/w", DType::f32, 4, TensorRole::model), tensor("/epoch_t", DType::f32, 1, TensorRole::other),
                                  tensor("/optimizer_states/0/state/0/step", DType::f32, 1, TensorRole::optimizer, true)};
  SelectOptions s;
  s.role = Role::optimizer;
  CHECK_THAT(why(ts, s), Catch::Contains("every tensor left is a counter (1)"));
  s.bits = BitSpec::parse("exponent");
  CHECK_THAT(why(ts, s), Catch::Contains("counter") && !Catch::Contains("--bits"));
  s = {};
  s.role = Role::optimizer;
  CHECK_THAT(why({ts[0], ts[1]}, s), Catch::Contains("--role optimizer matched no tensor (this file's tensors: 1 model, 0 optimizer, 1 other"));
  s.role = Role::master;
  CHECK_THAT(why({ts[0], ts[1]}, s), Catch::Contains("--role master matched no tensor (this file's tensors: 1 model, 0 master, 0 optimizer, 1 other"));
  s = {};
  s.include = {"/nothing/*"};
  CHECK_THAT(why(ts, s), Catch::Contains("--include /nothing/* matched no tensor"));
  s = {};
  s.exclude = {"/state_dict/**", "/epoch_t"};
  CHECK_THAT(why(ts, s), Catch::Contains("--exclude /state_dict/** /epoch_t removed every tensor left"));
  s = {};
  s.bits = BitSpec::parse("exponent");
  CHECK_THAT(why({tensor("/i", DType::i32, 4, TensorRole::model)}, s), Catch::Contains("--bits exponent selects no bit of the 1 tensor(s) left"));
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

namespace {
// A one-tensor safetensors file of raw little-endian words.
void write_safetensors_words(const std::string& path, const std::string& st_dtype, unsigned size, const std::vector<std::uint64_t>& words) {
  std::string header = R"({"w":{"dtype":")" + st_dtype + R"(","shape":[)" + std::to_string(words.size()) +
                       R"(],"data_offsets":[0,)" + std::to_string(words.size() * size) + "]}}";
  while (header.size() % 8) header += ' ';
  std::ofstream out(path, std::ios::binary);
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out << header;
  for (const auto w : words)
    for (unsigned i = 0; i < size; ++i) out.put(static_cast<char>((w >> (8 * i)) & 0xff));
}

// 4096 words of `scale` x N(0, 1) in dtype t (seeded), written to PATH as safetensors tag `st`; the
// file must scan clean.
std::vector<std::uint64_t> clean_normal_words(const std::string& path, DType t, const char* st, unsigned size, double scale,
                                              std::uint64_t seed) {
  Rng rng(seed, 0);
  std::vector<std::uint64_t> words(4096);
  for (auto& w : words) w = ckpt::double_to_word(t, scale * rng.normal());
  write_safetensors_words(path, st, size, words);
  const auto clean = scan(path);
  CHECK_FALSE(clean.suspect());
  return words;
}

const DatasetScan& only_dataset(const ScanReport& rep) {
  REQUIRE(rep.datasets.size() == 1);
  return rep.datasets.front();
}

}  // namespace

TEST_CASE("scan: an exponent-MSB flip of a typical weight is caught in every float dtype", "[inject][unit]") {
  // Gaussian weights of a dtype-typical scale; the flip of the exponent field's top bit of one
  // typical weight (|v| < 2: the bit is clear) multiplies it by 2^(2^(E-1)): 2^8 in E4M3, 2^16 in
  // f16 and E5M2, 2^128 in f32/bf16. A fixed 24-binade margin missed every 4- and 5-bit exponent.
  test::TempDir dir("inject-scan-msb");
  struct Case { DType t; const char* st; unsigned size, mbits, ebits; double scale; };
  for (const Case c : {Case{DType::f64, "F64", 8, 52, 11, 0.02}, Case{DType::f32, "F32", 4, 23, 8, 0.02},
                       Case{DType::bf16, "BF16", 2, 7, 8, 0.02}, Case{DType::f16, "F16", 2, 10, 5, 0.02},
                       Case{DType::f8_e4m3, "F8_E4M3", 1, 3, 4, 0.1}, Case{DType::f8_e5m2, "F8_E5M2", 1, 2, 5, 0.02},
                       Case{DType::f8_e4m3fnuz, "F8_E4M3FNUZ", 1, 3, 4, 0.1}, Case{DType::f8_e5m2fnuz, "F8_E5M2FNUZ", 1, 2, 5, 0.02}}) {
    INFO(c.st);
    const auto path = (dir / (std::string(c.st) + ".safetensors")).string();
    auto words = clean_normal_words(path, c.t, c.st, c.size, c.scale, 11);
    // A typical weight: |v| near the scale, so its exponent field is well inside the finite range.
    const auto it = std::find_if(words.begin(), words.end(), [&](std::uint64_t w) {
      const double v = std::fabs(ckpt::word_to_double(c.t, w));
      return v > 0.7 * c.scale && v < 1.5 * c.scale;
    });
    REQUIRE(it != words.end());
    const double before = ckpt::word_to_double(c.t, *it);
    *it ^= std::uint64_t{1} << (c.mbits + c.ebits - 1);
    const double after = ckpt::word_to_double(c.t, *it);
    INFO(before << " -> " << after);
    REQUIRE(std::isfinite(after));
    write_safetensors_words(path, c.st, c.size, words);
    const auto rep = scan(path);
    const auto& d = only_dataset(rep);
    CHECK(d.suspect());
    CHECK(d.outliers == 1);
  }
}

TEST_CASE("scan: outliers up to 10% of a tensor cannot raise the threshold over themselves", "[inject][unit]") {
  test::TempDir dir("inject-scan-share");
  const auto path = (dir / "w.safetensors").string();
  for (const std::size_t bad : {std::size_t{1}, std::size_t{20}, std::size_t{500}, std::size_t{1000}}) {
    INFO(bad << " of 10000 at 1.3e37");
    Rng rng(5, 0);
    std::vector<std::uint64_t> words(10000);
    for (auto& w : words) w = ckpt::double_to_word(DType::f32, 0.02 * rng.normal());
    write_safetensors_words(path, "F32", 4, words);
    CHECK_FALSE(scan(path).suspect());
    for (std::size_t i = 0; i < bad; ++i) words[i * 10] = ckpt::double_to_word(DType::f32, 1.3e37);
    write_safetensors_words(path, "F32", 4, words);
    const auto rep = scan(path);
    const auto& d = only_dataset(rep);
    CHECK(d.outliers == bad);
  }
}

TEST_CASE("scan: subnormal values count in the exponent histogram, so the MSB flip of one is caught", "[inject][unit]") {
  // Tiny optimizer state in f16 (sigma 1e-5: nearly every value subnormal) and f32 (1e-40): left
  // out of the histogram, the flipped value itself became the reference and nothing was flagged.
  test::TempDir dir("inject-scan-subnormal");
  struct Case {
    DType t;
    const char* st;
    unsigned size, msb;
    double scale;
  };
  for (const auto& c : {Case{DType::f16, "F16", 2, 14, 1e-5}, Case{DType::f32, "F32", 4, 30, 1e-40}}) {
    INFO(c.st);
    const auto path = (dir / (std::string(c.st) + ".safetensors")).string();
    auto words = clean_normal_words(path, c.t, c.st, c.size, c.scale, 3);
    REQUIRE(only_dataset(scan(path)).threshold_exponent);
    const auto it = std::find_if(words.begin(), words.end(), [&](std::uint64_t w) { return ckpt::word_to_double(c.t, w) > 0; });
    REQUIRE(it != words.end());
    *it ^= std::uint64_t{1} << c.msb;
    INFO("flipped to " << ckpt::word_to_double(c.t, *it));
    write_safetensors_words(path, c.st, c.size, words);
    const auto rep = scan(path);
    CHECK(only_dataset(rep).suspect());
    CHECK(only_dataset(rep).outliers == 1);
  }
}

TEST_CASE("scan: a tensor without a finite non-zero value has no reference exponent; all NaN, no max |x|", "[inject][unit]") {
  test::TempDir dir("inject-scan-none");
  const auto path = (dir / "w.safetensors").string();
  const std::uint64_t nan = ckpt::double_to_word(DType::f32, std::nan(""));
  write_safetensors_words(path, "F32", 4, std::vector<std::uint64_t>(8, nan));
  const auto all_nan = scan(path);
  const auto& d = only_dataset(all_nan);
  CHECK(d.nan == 8);
  CHECK_FALSE(d.median_exponent);
  CHECK_FALSE(d.threshold_exponent);
  CHECK_FALSE(d.max_abs);
  const auto j = all_nan.to_json().at("datasets").at(0);
  CHECK(j.at("median_exponent").is_null());
  CHECK(j.at("threshold_exponent").is_null());
  CHECK(j.at("max_abs").is_null());
  write_safetensors_words(path, "F32", 4, std::vector<std::uint64_t>(8, 0));
  const auto zeros = scan(path);
  CHECK_FALSE(only_dataset(zeros).threshold_exponent);
  REQUIRE(only_dataset(zeros).max_abs);
  CHECK(*only_dataset(zeros).max_abs == 0.0);
  CHECK_FALSE(zeros.suspect());
}

TEST_CASE("scan: median and threshold exponents use each dtype's bias (FNUZ fp8: 8 and 16)", "[inject][unit]") {
  test::TempDir dir("inject-scan-bias");
  for (const auto& [t, st] : std::vector<std::pair<DType, const char*>>{{DType::f8_e4m3, "F8_E4M3"}, {DType::f8_e5m2, "F8_E5M2"},
                                                                         {DType::f8_e4m3fnuz, "F8_E4M3FNUZ"},
                                                                         {DType::f8_e5m2fnuz, "F8_E5M2FNUZ"}, {DType::f16, "F16"},
                                                                         {DType::bf16, "BF16"}}) {
    INFO(st);
    const auto path = (dir / (std::string(st) + ".safetensors")).string();
    const unsigned size = static_cast<unsigned>(ckpt::dtype_size(t));
    write_safetensors_words(path, st, size, std::vector<std::uint64_t>(64, ckpt::double_to_word(t, 1.5)));
    const auto one = scan(path);
    CHECK(only_dataset(one).median_exponent == 0);  // 1.5 = 1.1b x 2^0
    write_safetensors_words(path, st, size, std::vector<std::uint64_t>(64, ckpt::double_to_word(t, 0.375)));
    const auto quarter = scan(path);
    CHECK(only_dataset(quarter).median_exponent == -2);
  }
}

// ---------------------------------------------------------------------------------------------
// In-place edits (HDF5 read-only; words changed through the file mapping) of unfiltered chunked
// data and of files with a user block, vs the staged path (temporary copy renamed over the file).
// Files are written with the HDF5 C API so layouts the library would not choose are covered:
// partial edge chunks, chunks never written, user blocks, both superblock formats.

namespace {

std::uint64_t inode_of(const std::string& p) {
  struct stat s {};
  REQUIRE(::stat(p.c_str(), &s) == 0);
  return static_cast<std::uint64_t>(s.st_ino);
}

std::vector<unsigned char> file_bytes(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE(in);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::set<std::string> dir_entries(const test::TempDir& dir) {
  std::set<std::string> s;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) s.insert(e.path().filename().string());
  return s;
}

// Words of a dataset through HDF5 (unallocated chunks read as the fill value).
std::vector<std::uint64_t> words_of(const std::string& file, const std::string& dataset) {
  auto f = ckpt::h5::open_file(file, ckpt::h5::Mode::read);
  const auto t = ckpt::read_tensor(f, dataset, file);
  std::vector<std::uint64_t> w(t.numel());
  for (std::uint64_t i = 0; i < t.numel(); ++i) w[i] = word_at(t, i);
  return w;
}

// Hand-made records: flip `bit` of element `index`, chained when an element repeats.
struct FlipAt {
  std::uint64_t index;
  unsigned bit;
};
std::vector<FlipRecord> flips_at(const std::string& file, const std::string& dataset, DType t, const ckpt::Shape& shape,
                                 const std::vector<FlipAt>& at) {
  auto cur = words_of(file, dataset);
  std::vector<FlipRecord> out;
  for (const auto& a : at) {
    FlipRecord r;
    r.dataset = dataset;
    r.index = a.index;
    r.nd = unravel_index(a.index, shape);
    r.dtype = t;
    r.width = ckpt::dtype_bits(t);
    r.anchor = a.bit;
    r.old_bits = cur.at(a.index);
    r.new_bits = r.old_bits ^ (std::uint64_t{1} << a.bit);
    cur[a.index] = r.new_bits;
    out.push_back(r);
  }
  return out;
}

// Every dataset's words: `after` differs from `before` exactly by the records' chained XOR.
void check_exact_change(const std::map<std::string, std::vector<std::uint64_t>>& before, const std::string& file,
                        const std::vector<FlipRecord>& recs) {
  std::map<std::pair<std::string, std::uint64_t>, std::uint64_t> expect;
  for (const auto& r : recs) expect[{r.dataset, r.index}] ^= r.mask();
  for (const auto& [name, w0] : before) {
    const auto w1 = words_of(file, name);
    REQUIRE(w1.size() == w0.size());
    std::uint64_t bad = 0;
    for (std::uint64_t i = 0; i < w0.size(); ++i) {
      const auto it = expect.find({name, i});
      if ((w0[i] ^ w1[i]) != (it == expect.end() ? 0 : it->second)) ++bad;
    }
    INFO(file << ": " << name);
    CHECK(bad == 0);
  }
}

std::map<std::string, std::vector<std::uint64_t>> snapshot(const std::string& file, const std::vector<std::string>& names) {
  std::map<std::string, std::vector<std::uint64_t>> m;
  for (const auto& n : names) m[n] = words_of(file, n);
  return m;
}

// An HDF5 file with an optional user block, in the earliest or the latest file format.
ckpt::h5::File create_raw_file(const std::string& path, hsize_t user_block, bool latest) {
  ckpt::h5::PropList fcpl(H5Pcreate(H5P_FILE_CREATE));
  ckpt::h5::PropList fapl(H5Pcreate(H5P_FILE_ACCESS));
  REQUIRE(H5Pset_userblock(fcpl, user_block) >= 0);
  if (latest) REQUIRE(H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST) >= 0);
  ckpt::h5::File f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl, fapl));
  REQUIRE(f.valid());
  return f;
}

// Random words of the dataset's type (f32/f64: normal values; integers: all bits random).
std::vector<unsigned char> random_data(hid_t type, std::uint64_t n, std::uint64_t seed) {
  const std::size_t sz = H5Tget_size(type);
  std::vector<unsigned char> b(n * sz);
  Rng rng(seed, 0);
  for (std::uint64_t i = 0; i < n; ++i) {
    if (H5Tget_class(type) == H5T_FLOAT && sz == 4) {
      const float v = static_cast<float>(rng.normal());
      std::memcpy(b.data() + i * sz, &v, sz);
    } else if (H5Tget_class(type) == H5T_FLOAT) {
      const double v = rng.normal();
      std::memcpy(b.data() + i * sz, &v, sz);
    } else {
      const std::uint64_t v = rng();
      std::memcpy(b.data() + i * sz, &v, sz);
    }
  }
  return b;
}

// A dataset of native `type`: contiguous (chunk empty) or chunked without filters. Chunks listed in
// `skip` (row-major ids over the chunk grid, 2-D) are never written, so they stay unallocated.
void make_dataset(hid_t f, const std::string& name, hid_t type, const std::vector<hsize_t>& shape,
                  const std::vector<hsize_t>& chunk, std::uint64_t seed, const std::set<std::uint64_t>& skip = {}) {
  const int rank = static_cast<int>(shape.size());
  ckpt::h5::Dataspace space(H5Screate_simple(rank, shape.data(), nullptr));
  ckpt::h5::PropList dcpl(H5Pcreate(H5P_DATASET_CREATE));
  if (!chunk.empty()) REQUIRE(H5Pset_chunk(dcpl, rank, chunk.data()) >= 0);
  ckpt::h5::make_parents(f, name);
  ckpt::h5::Dataset d(H5Dcreate2(f, name.c_str(), type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
  REQUIRE(d.valid());
  std::uint64_t n = 1;
  for (auto s : shape) n *= s;
  const auto data = random_data(type, n, seed);
  if (skip.empty()) {
    REQUIRE(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()) >= 0);
    return;
  }
  REQUIRE(rank == 2);
  const hsize_t gr = (shape[0] + chunk[0] - 1) / chunk[0], gc = (shape[1] + chunk[1] - 1) / chunk[1];
  for (hsize_t r = 0; r < gr; ++r)
    for (hsize_t c = 0; c < gc; ++c) {
      if (skip.contains(r * gc + c)) continue;
      const hsize_t start[2] = {r * chunk[0], c * chunk[1]};
      const hsize_t count[2] = {std::min(chunk[0], shape[0] - start[0]), std::min(chunk[1], shape[1] - start[1])};
      ckpt::h5::Dataspace sel(H5Scopy(space));
      REQUIRE(H5Sselect_hyperslab(sel, H5S_SELECT_SET, start, nullptr, count, nullptr) >= 0);
      REQUIRE(H5Dwrite(d, type, sel, sel, H5P_DEFAULT, data.data()) >= 0);
    }
}

std::uint64_t flat(const ckpt::Shape& shape, std::uint64_t r, std::uint64_t c) { return r * shape[1] + c; }

}  // namespace

TEST_CASE("unfiltered chunks with partial edge chunks are edited in place, not staged", "[inject][unit]") {
  test::TempDir dir("inject-inplace-chunks");
  const auto file = (dir / "c.h5").string();
  const bool latest = GENERATE(false, true);
  const bool sync = GENERATE(true, false);
  const ckpt::Shape shape{13, 7};  // chunks 4x3: grid 4x3, the last chunk row and column are partial
  {
    auto f = create_raw_file(file, 0, latest);
    make_dataset(f, "/w", H5T_NATIVE_FLOAT, {13, 7}, {4, 3}, 11);
  }
  // Sites from the sampler, plus every corner of the partial edge chunks, plus a repeated word.
  const auto targets = [&] {
    auto f = ckpt::h5::open_file(file, ckpt::h5::Mode::read);
    return select(ckpt::list_datasets(f), {});
  }();
  REQUIRE(targets.size() == 1);
  PlanOptions p;
  p.seed = 21;
  p.flips = 30;
  auto recs = plan(file, targets, sample_sites(targets, p), p);
  REQUIRE(recs.size() == 30);
  std::set<std::uint64_t> planned;
  for (const auto& r : recs) planned.insert(r.index);
  std::vector<FlipAt> edge;
  for (const std::uint64_t i : {flat(shape, 12, 6), flat(shape, 12, 0), flat(shape, 0, 6), flat(shape, 11, 6), flat(shape, 12, 5)})
    if (!planned.contains(i)) edge.push_back({i, 30});
  edge.push_back({edge.front().index, 0});  // a chain of two records on one word
  {
    auto more = flips_at(file, "/w", DType::f32, shape, edge);
    recs.insert(recs.end(), more.begin(), more.end());
  }
  const auto before = snapshot(file, {"/w"});
  const auto bytes0 = file_bytes(file);
  const auto ino = inode_of(file);
  const auto entries = dir_entries(dir);

  const auto st = apply(file, recs, Direction::forward, false, true, sync);
  CHECK(st.changed == st.words);
  CHECK(inode_of(file) == ino);  // not staged: no rename over the file
  CHECK(dir_entries(dir) == entries);
  check_exact_change(before, file, recs);
  // Only raw data bytes changed: no HDF5 metadata (superblock flags, chunk index) was rewritten.
  const auto bytes1 = file_bytes(file);
  REQUIRE(bytes1.size() == bytes0.size());
  std::uint64_t differ = 0;
  for (std::size_t i = 0; i < bytes0.size(); ++i) differ += bytes0[i] != bytes1[i];
  CHECK(differ > 0);
  CHECK(differ <= st.changed * 4);

  const auto rst = apply(file, recs, Direction::revert, false, true, sync);
  CHECK(rst.changed == st.changed);
  CHECK(inode_of(file) == ino);
  CHECK(snapshot(file, {"/w"}) == before);
  CHECK(file_bytes(file) == bytes0);
  CHECK(dir_entries(dir) == entries);
}

TEST_CASE("a flip in a never-written chunk is staged; flips elsewhere in that file stay in place", "[inject][unit]") {
  test::TempDir dir("inject-unalloc");
  const auto file = (dir / "u.h5").string();
  const bool latest = GENERATE(false, true);
  const ckpt::Shape shape{13, 7};
  // Chunk (1,1) (rows 4-7, cols 3-5) and the partial corner chunk (3,2) are never written.
  const std::set<std::uint64_t> skip{1 * 3 + 1, 3 * 3 + 2};
  {
    auto f = create_raw_file(file, 0, latest);
    make_dataset(f, "/w", H5T_NATIVE_FLOAT, {13, 7}, {4, 3}, 12, skip);
  }
  {
    auto f = ckpt::h5::open_file(file, ckpt::h5::Mode::read);
    auto d = ckpt::h5::open_dataset(f, "/w", file);
    ckpt::h5::Dataspace space(H5Dget_space(d));
    hsize_t n = 0;
    REQUIRE(H5Dget_num_chunks(d, space, &n) >= 0);
    REQUIRE(n == 12 - skip.size());
  }
  const auto before = snapshot(file, {"/w"});
  CHECK(before.at("/w")[flat(shape, 5, 4)] == 0);   // the fill value
  CHECK(before.at("/w")[flat(shape, 12, 6)] == 0);
  const auto ino = inode_of(file);

  SECTION("allocated chunks only: in place") {
    const auto recs = flips_at(file, "/w", DType::f32, shape, {{flat(shape, 0, 0), 31}, {flat(shape, 12, 2), 3}, {flat(shape, 4, 6), 23}});
    const auto st = apply(file, recs, Direction::forward);
    CHECK(st.changed == 3);
    CHECK(inode_of(file) == ino);
    check_exact_change(before, file, recs);
    apply(file, recs, Direction::revert);
    CHECK(inode_of(file) == ino);
    CHECK(snapshot(file, {"/w"}) == before);
  }
  SECTION("an unallocated chunk is hit: staged, values right, then revert") {
    const auto corner = GENERATE(true, false);
    const std::uint64_t hole = corner ? flat(shape, 12, 6) : flat(shape, 5, 4);
    const auto recs = flips_at(file, "/w", DType::f32, shape, {{flat(shape, 0, 0), 31}, {hole, 30}, {flat(shape, 8, 1), 7}});
    const auto entries = dir_entries(dir);
    const auto st = apply(file, recs, Direction::forward);
    CHECK(st.changed == 3);
    CHECK(inode_of(file) != ino);        // staged: a copy was renamed over the file
    CHECK(dir_entries(dir) == entries);  // and no temporary is left behind
    check_exact_change(before, file, recs);
    {
      float v = 0;
      const auto w = words_of(file, "/w")[hole];
      std::memcpy(&v, &w, 4);
      CHECK(v == 2.0f);  // 0x40000000: bit 30 of +0.0
    }
    // HDF5 allocated the chunk in the staged copy; the other holes stay unallocated.
    {
      auto f = ckpt::h5::open_file(file, ckpt::h5::Mode::read);
      auto d = ckpt::h5::open_dataset(f, "/w", file);
      ckpt::h5::Dataspace space(H5Dget_space(d));
      hsize_t n = 0;
      REQUIRE(H5Dget_num_chunks(d, space, &n) >= 0);
      CHECK(n == 12 - skip.size() + 1);
    }
    const auto ino2 = inode_of(file);
    const auto rst = apply(file, recs, Direction::revert);
    CHECK(rst.changed == 3);
    CHECK(inode_of(file) == ino2);  // every touched chunk is allocated now: in place
    CHECK(snapshot(file, {"/w"}) == before);
  }
}

TEST_CASE("files with a user block: contiguous and chunked words change in place, the user block does not",
          "[inject][unit]") {
  test::TempDir dir("inject-userblock");
  const hsize_t ub = GENERATE(hsize_t{512}, hsize_t{4096});
  const bool latest = GENERATE(false, true);
  const auto file = (dir / "ub.h5").string();
  const ckpt::Shape s64{9, 5}, s32{11, 10};
  {
    auto f = create_raw_file(file, ub, latest);
    make_dataset(f, "/model/c64", H5T_NATIVE_DOUBLE, {9, 5}, {}, 31);
    make_dataset(f, "/model/k32", H5T_NATIVE_INT32, {11, 10}, {4, 4}, 32);  // edge chunks 3 rows, 2 cols
  }
  {
    // A recognisable pattern in the user block (HDF5 leaves it zero).
    std::vector<unsigned char> pat(ub);
    for (std::size_t i = 0; i < pat.size(); ++i) pat[i] = static_cast<unsigned char>((i * 37 + 11) ^ (i >> 8));
    const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(::pwrite(fd, pat.data(), pat.size(), 0) == static_cast<ssize_t>(pat.size()));
    ::close(fd);
  }
  const auto bytes0 = file_bytes(file);
  const std::vector<unsigned char> user_block(bytes0.begin(), bytes0.begin() + static_cast<std::ptrdiff_t>(ub));
  const auto before = snapshot(file, {"/model/c64", "/model/k32"});
  const auto ino = inode_of(file);

  auto recs = flips_at(file, "/model/c64", DType::f64, s64,
                       {{0, 63}, {flat(s64, 8, 4), 52}, {flat(s64, 4, 2), 0}, {flat(s64, 4, 2), 40}});
  {
    auto more = flips_at(file, "/model/k32", DType::i32, s32,
                         {{0, 0}, {flat(s32, 10, 9), 31}, {flat(s32, 5, 5), 17}, {flat(s32, 3, 8), 9}, {flat(s32, 9, 0), 4}});
    recs.insert(recs.end(), more.begin(), more.end());
  }
  // Sampled sites on top, on the chunked dataset only (the hand-made ones cover the contiguous one).
  {
    SelectOptions sel;
    sel.include = {"/model/k32"};
    const auto targets = [&] {
      auto f = ckpt::h5::open_file(file, ckpt::h5::Mode::read);
      return select(ckpt::list_datasets(f), sel);
    }();
    REQUIRE(targets.size() == 1);
    PlanOptions p;
    p.seed = 5;
    p.flips = 20;
    p.model = FaultModel::parse("flip");
    auto sampled = plan(file, targets, sample_sites(targets, p), p);
    // Keep words the hand-made records do not touch, so every chain stays in log order.
    std::set<std::uint64_t> taken;
    for (const auto& r : recs)
      if (r.dataset == "/model/k32") taken.insert(r.index);
    for (auto& r : sampled)
      if (!taken.contains(r.index)) recs.push_back(r);
  }

  const bool sync = GENERATE(true, false);
  const auto st = apply(file, recs, Direction::forward, false, true, sync);
  CHECK(st.changed == st.words);
  CHECK(inode_of(file) == ino);
  check_exact_change(before, file, recs);
  const auto bytes1 = file_bytes(file);
  REQUIRE(bytes1.size() == bytes0.size());
  CHECK(std::equal(user_block.begin(), user_block.end(), bytes1.begin()));
  std::uint64_t differ = 0;
  for (std::size_t i = 0; i < bytes0.size(); ++i) differ += bytes0[i] != bytes1[i];
  CHECK(differ > 0);
  CHECK(differ <= st.changed * 8);

  apply(file, recs, Direction::revert, false, true, sync);
  CHECK(inode_of(file) == ino);
  CHECK(file_bytes(file) == bytes0);
}

TEST_CASE("sync=false leaves the same bytes as sync=true", "[inject][unit]") {
  test::TempDir dir("inject-nosync");
  const hsize_t ub = GENERATE(hsize_t{0}, hsize_t{512});
  const auto a = (dir / "a.h5").string(), b = (dir / "b.h5").string();
  const ckpt::Shape shape{13, 7};
  {
    auto f = create_raw_file(a, ub, true);
    make_dataset(f, "/w", H5T_NATIVE_FLOAT, {13, 7}, {4, 3}, 41);
    make_dataset(f, "/c", H5T_NATIVE_DOUBLE, {20}, {}, 42);
  }
  ckpt::fs::copy_file(a, b);
  REQUIRE(file_bytes(a) == file_bytes(b));
  auto recs = flips_at(a, "/w", DType::f32, shape, {{0, 1}, {flat(shape, 12, 6), 31}, {flat(shape, 6, 4), 22}});
  {
    auto more = flips_at(a, "/c", DType::f64, {20}, {{19, 63}, {3, 50}});
    recs.insert(recs.end(), more.begin(), more.end());
  }
  const auto before = snapshot(a, {"/w", "/c"});
  const auto ia = inode_of(a), ib = inode_of(b);
  const auto sa = apply(a, recs, Direction::forward, false, true, true);
  const auto sb = apply(b, recs, Direction::forward, false, true, false);
  CHECK(sa.changed == 5);
  CHECK(sb.changed == sa.changed);
  CHECK(inode_of(a) == ia);
  CHECK(inode_of(b) == ib);
  CHECK(file_bytes(a) == file_bytes(b));
  check_exact_change(before, b, recs);
  apply(a, recs, Direction::revert, false, true, true);
  apply(b, recs, Direction::revert, false, true, false);
  CHECK(file_bytes(a) == file_bytes(b));
  CHECK(snapshot(b, {"/w", "/c"}) == before);
}

namespace {

// Pins the process-wide word I/O for one test.
struct WordIoScope {
  WordIo saved = word_io();
  explicit WordIoScope(WordIo io) { set_word_io(io); }
  ~WordIoScope() { set_word_io(saved); }
};

}  // namespace

TEST_CASE("word I/O: mapped, syscalls and automatic leave the same bytes, synced or not", "[inject][unit]") {
  test::TempDir dir("inject-wordio");
  const hsize_t ub = GENERATE(hsize_t{0}, hsize_t{512});
  const bool sync = GENERATE(true, false);
  const auto ref = (dir / "ref.h5").string();
  const ckpt::Shape shape{13, 7};
  {
    auto f = create_raw_file(ref, ub, false);
    make_dataset(f, "/w", H5T_NATIVE_FLOAT, {13, 7}, {4, 3}, 51);  // raw chunks, edge chunks
    make_dataset(f, "/c", H5T_NATIVE_DOUBLE, {300}, {}, 52);       // contiguous
    make_dataset(f, "/s", H5T_NATIVE_INT16, {40}, {}, 53);
  }
  auto recs = flips_at(ref, "/w", DType::f32, shape, {{0, 1}, {flat(shape, 12, 6), 31}, {flat(shape, 6, 4), 22}});
  for (auto more : {flips_at(ref, "/c", DType::f64, {300}, {{299, 63}, {3, 50}, {150, 0}}),
                    flips_at(ref, "/s", DType::i16, {40}, {{0, 15}, {39, 2}})})
    recs.insert(recs.end(), more.begin(), more.end());
  const auto before = snapshot(ref, {"/w", "/c", "/s"});
  const auto bytes0 = file_bytes(ref);
  std::vector<std::vector<unsigned char>> after;
  for (const WordIo io : {WordIo::mapped, WordIo::syscalls, WordIo::automatic}) {
    INFO("word io " << static_cast<int>(io) << ", sync " << sync << ", user block " << ub);
    WordIoScope scope(io);
    const auto p = (dir / ("f" + std::to_string(static_cast<int>(io)) + ".h5")).string();
    ckpt::fs::copy_file(ref, p);
    const auto ino = inode_of(p);
    const auto st = apply(p, recs, Direction::forward, false, true, sync);
    CHECK(st.changed == 8);
    CHECK(inode_of(p) == ino);
    check_exact_change(before, p, recs);
    after.push_back(file_bytes(p));
    // Applying again finds every word already new: nothing changes.
    CHECK(apply(p, recs, Direction::forward, false, true, sync).unchanged == 8);
    apply(p, recs, Direction::revert, false, true, sync);
    CHECK(file_bytes(p) == bytes0);
  }
  CHECK(after[0] == after[1]);
  CHECK(after[1] == after[2]);
}

TEST_CASE("word I/O: thousands of stores through the mapping (two processes) give the bytes pwrite gives", "[inject][unit]") {
  // From 2048 words a block's stores through the mapping are split over this process and a forked
  // child (at a 2 MiB region of the file), its sparse preads over two threads; every flip must land
  // exactly once, as with one pwrite per word, and revert must restore the file. /w: ~3,300 flips
  // over 4 MB (two regions and more), sparse for pread (one per word), dense enough for the
  // mapping's reads. /d: 3,000 words in one region (no child).
  test::TempDir dir("inject-wordio-many");
  const auto ref = (dir / "ref.h5").string();
  const ckpt::Shape shape{1000, 1000};
  {
    auto f = create_raw_file(ref, 0, false);
    make_dataset(f, "/w", H5T_NATIVE_FLOAT, {1000, 1000}, {}, 61);  // contiguous, 1,000,000 words
    make_dataset(f, "/d", H5T_NATIVE_DOUBLE, {3000}, {}, 62);      // 8-byte words
  }
  std::vector<FlipAt> at_w, at_d;
  resil::Rng rng(5, 0, 0);
  for (std::uint64_t i = 0; i < 1000000; i += 1 + rng() % 600) at_w.push_back({i, static_cast<unsigned>(rng() % 32)});
  for (std::uint64_t i = 0; i < 3000; ++i) at_d.push_back({i, static_cast<unsigned>(rng() % 64)});
  REQUIRE(at_w.size() > 2048);
  auto recs = flips_at(ref, "/w", DType::f32, shape, at_w);
  for (const auto& r : flips_at(ref, "/d", DType::f64, {3000}, at_d)) recs.push_back(r);
  const auto before = snapshot(ref, {"/w", "/d"});
  const auto bytes0 = file_bytes(ref);
  std::vector<std::vector<unsigned char>> after;
  for (const WordIo io : {WordIo::mapped, WordIo::syscalls}) {
    WordIoScope scope(io);
    const auto p = (dir / ("f" + std::to_string(static_cast<int>(io)) + ".h5")).string();
    ckpt::fs::copy_file(ref, p);
    CHECK(apply(p, recs, Direction::forward, false, true, false).changed == recs.size());
    check_exact_change(before, p, recs);
    after.push_back(file_bytes(p));
    apply(p, recs, Direction::revert, false, true, false);
    CHECK(file_bytes(p) == bytes0);
  }
  CHECK(after[0] == after[1]);
  SECTION("with SIGCHLD ignored (the child's exit status is lost) apply still succeeds with every store landed") {
    WordIoScope scope(WordIo::mapped);
    const auto p = (dir / "ign.h5").string();
    ckpt::fs::copy_file(ref, p);
    struct sigaction ign {}, old {};
    ign.sa_handler = SIG_IGN;
    REQUIRE(::sigaction(SIGCHLD, &ign, &old) == 0);
    const auto st = apply(p, recs, Direction::forward, false, true, false);
    ::sigaction(SIGCHLD, &old, nullptr);
    CHECK(st.changed == recs.size());
    CHECK(file_bytes(p) == after[0]);
  }
}

TEST_CASE("word I/O: automatic picks syscalls when syncing sparse words of a written file, else mapped; env override", "[inject][unit]") {
  test::TempDir dir("inject-wordio-pick");
  const auto p = (dir / "f.h5").string();
  {
    auto f = create_raw_file(p, 0, false);
    make_dataset(f, "/c", H5T_NATIVE_FLOAT, {100}, {}, 1);
  }
  WordIoScope scope(WordIo::automatic);
  const char* env = std::getenv("RESIL_INJECT_WORD_IO");
  const std::string saved_env = env ? env : "";
  ::unsetenv("RESIL_INJECT_WORD_IO");
  {
    Hdf5Storage wf(p, Access::in_place);
    CHECK(wf.io_for(10'000, std::uint64_t{1} << 30) == WordIo::syscalls);  // sync (the default), 26 pages per word
    CHECK(wf.io_for(10'000, std::uint64_t{100} << 20) == WordIo::mapped);   // 2.4 pages per word
    CHECK(wf.io_for(1, 4) == WordIo::mapped);
    wf.set_sync(false);
    CHECK(wf.io_for(10'000, std::uint64_t{1} << 30) == WordIo::mapped);
    wf.close();
    Hdf5Storage rd(p, Access::read);  // reading never syncs anything
    CHECK(rd.io_for(10'000, std::uint64_t{1} << 30) == WordIo::mapped);
  }
  {
    WordIoScope pinned(WordIo::mapped);
    Hdf5Storage wf(p, Access::in_place);
    CHECK(wf.io_for(10'000, std::uint64_t{1} << 30) == WordIo::mapped);
  }
  ::setenv("RESIL_INJECT_WORD_IO", "syscalls", 1);
  {
    Hdf5Storage wf(p, Access::in_place);
    wf.set_sync(false);
    CHECK(wf.io_for(1, 4) == WordIo::syscalls);
  }
  ::setenv("RESIL_INJECT_WORD_IO", "mmap", 1);
  CHECK_THROWS_AS(Hdf5Storage(p, Access::in_place), UsageError);
  if (saved_env.empty()) ::unsetenv("RESIL_INJECT_WORD_IO");
  else ::setenv("RESIL_INJECT_WORD_IO", saved_env.c_str(), 1);
}

TEST_CASE("word I/O: one Hdf5Storage reads each sparse word once and sees its own writes", "[inject][unit]") {
  // pread/pwrite keeps the words it read or wrote: a second edit of the same words must see what
  // the first one wrote, and a revert through the same Hdf5Storage restores the file byte for byte.
  test::TempDir dir("inject-wordio-known");
  const auto p = (dir / "f.h5").string();
  {
    auto f = create_raw_file(p, 0, false);
    make_dataset(f, "/c", H5T_NATIVE_DOUBLE, {5000}, {}, 7);
  }
  const auto bytes0 = file_bytes(p);
  WordIoScope scope(WordIo::syscalls);
  const std::vector<std::uint64_t> idx{0, 1, 999, 4999};
  std::vector<std::uint64_t> seen;
  {
    Hdf5Storage wf(p, Access::in_place);
    wf.edit("/c", idx, [&](std::span<const std::uint64_t>, std::span<std::uint64_t> w) { seen.assign(w.begin(), w.end()); });
    wf.edit("/c", idx, [&](std::span<const std::uint64_t>, std::span<std::uint64_t> w) {
      for (std::size_t k = 0; k < w.size(); ++k) {
        CHECK(w[k] == seen[k]);
        w[k] ^= std::uint64_t{1} << (k * 7);
      }
    });
    wf.edit("/c", {999, 4999, 2}, [&](std::span<const std::uint64_t> i, std::span<std::uint64_t> w) {
      REQUIRE(i.size() == 3);  // ascending: 2, 999, 4999
      CHECK(w[1] == (seen[2] ^ (std::uint64_t{1} << 14)));
      CHECK(w[2] == (seen[3] ^ (std::uint64_t{1} << 21)));
    });
    wf.close();
  }
  CHECK(file_bytes(p) != bytes0);
  {
    Hdf5Storage wf(p, Access::in_place);
    wf.edit("/c", idx, [&](std::span<const std::uint64_t>, std::span<std::uint64_t> w) {
      for (std::size_t k = 0; k < w.size(); ++k) CHECK(w[k] == (seen[k] ^ (std::uint64_t{1} << (k * 7))));
      for (std::size_t k = 0; k < w.size(); ++k) w[k] = seen[k];
    });
    wf.edit("/c", idx, [&](std::span<const std::uint64_t>, std::span<std::uint64_t> w) {
      for (std::size_t k = 0; k < w.size(); ++k) CHECK(w[k] == seen[k]);
    });
    wf.close();
  }
  CHECK(file_bytes(p) == bytes0);
}

TEST_CASE("plan and apply through one Hdf5Storage: same records and bytes as by path", "[inject][unit]") {
  test::TempDir dir("inject-onefile");
  const auto a = (dir / "a.h5").string(), b = (dir / "b.h5").string();
  {
    auto f = ckpt::h5::create_file(a);
    ckpt::write_tensor(f, "/model/w", filled(DType::f32, {64, 33}, 5), {});
    ckpt::write_tensor(f, "/model/b", filled(DType::f64, {33}, 6), {});
  }
  ckpt::fs::copy_file(a, b);
  const auto io = GENERATE(WordIo::mapped, WordIo::syscalls);
  WordIoScope scope(io);
  std::vector<Target> targets;
  {
    auto f = ckpt::h5::open_file(a, ckpt::h5::Mode::read);
    targets = select(ckpt::list_datasets(f), {});
  }
  PlanOptions p;
  p.seed = 9;
  p.flips = 40;
  p.model = FaultModel::parse("adjacent:2");
  const auto sites = sample_sites(targets, p);
  const auto by_path = plan(b, targets, sites, p);
  const auto ino = inode_of(a);
  std::vector<FlipRecord> recs;
  ApplyStats st;
  {
    Hdf5Storage wf(a, Access::in_place);
    wf.set_sync(false);
    CHECK(select(ckpt::list_datasets(wf.h5()), {}).size() == targets.size());
    recs = plan(wf, targets, sites, p);
    REQUIRE(recs.size() == by_path.size());
    for (std::size_t i = 0; i < recs.size(); ++i) CHECK(record_line(recs[i], i) == record_line(by_path[i], i));
    CHECK(file_bytes(a) == file_bytes(b));  // planning wrote nothing
    st = apply(wf, recs, Direction::forward);
  }
  const auto st_b = apply(b, by_path, Direction::forward, false, true, true);
  CHECK(st.changed == st_b.changed);
  CHECK(inode_of(a) == ino);
  CHECK(file_bytes(a) == file_bytes(b));
  check_only_logged_bits_differ(b, a, {});  // same contents
  {
    Hdf5Storage rd(a, Access::read);
    CHECK_THROWS_AS(apply(rd, recs, Direction::revert), UsageError);
  }
  Hdf5Storage wf(a, Access::in_place);
  apply(wf, recs, Direction::revert);
  apply(b, by_path, Direction::revert);
  CHECK(file_bytes(a) == file_bytes(b));
}
