// Direct chunk editing of gzip datasets (deflate_chunks.hpp) against the HDF5 filter path: same
// planned records, same dataset contents after inject and revert, pipeline and level unchanged,
// thread counts 1 and 4 identical, token-level patching and the full re-deflate identical, h5py
// reads every value; fallbacks (fletcher32, other orders, unallocated chunks, a stream the patcher
// declines) and damaged chunks.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>

#include "resil/ckpt/fs.hpp"
#include "resil/ckpt/io.hpp"
#include "resil/inject/deflate_chunks.hpp"
#include "resil/inject/apply.hpp"
#include "resil/inject/plan.hpp"
#include "resil/inject/sampling.hpp"
#include "resil/inject/hdf5_storage.hpp"
#include "resil_test/tensors.hpp"
#include "resil_test/tmpdir.hpp"

using namespace resil;
using namespace resil::inject;
namespace h5 = ckpt::h5;

namespace {

const std::string check_py = std::string("/usr/bin/python3 ") + RESIL_INJECT_TEST_DIR + "/deflate_chunks_check.py";

// Sets the process-wide codec options for a scope.
struct CodecScope {
  ChunkCodecOptions saved = chunk_codec_options();
  explicit CodecScope(ChunkCodecOptions o) { set_chunk_codec_options(o); }
  ~CodecScope() { set_chunk_codec_options(saved); }
};

// Raw stored bytes (file type as memory type) of every dataset.
std::map<std::string, std::vector<unsigned char>> contents(const std::string& path) {
  std::map<std::string, std::vector<unsigned char>> out;
  auto f = h5::open_file(path, h5::Mode::read);
  for (const auto& info : ckpt::list_datasets(f)) {
    auto d = h5::open_dataset(f, info.path, path);
    h5::Datatype t(H5Dget_type(d));
    h5::Dataspace s(H5Dget_space(d));
    auto& buf = out[info.path];
    buf.resize(static_cast<std::size_t>(H5Sget_simple_extent_npoints(s)) * H5Tget_size(t));
    REQUIRE(H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) >= 0);
  }
  return out;
}

using Filters = std::vector<std::tuple<H5Z_filter_t, std::vector<unsigned>>>;

Filters filters_of(const std::string& path, const std::string& dataset) {
  auto f = h5::open_file(path, h5::Mode::read);
  auto d = h5::open_dataset(f, dataset, path);
  h5::PropList dcpl(H5Dget_create_plist(d));
  Filters out;
  for (int i = 0; i < H5Pget_nfilters(dcpl); ++i) {
    unsigned flags = 0, cd[16] = {}, config = 0;
    std::size_t n = 16;
    char name[64];
    const auto id = H5Pget_filter2(dcpl, static_cast<unsigned>(i), &flags, &n, cd, sizeof name, name, &config);
    out.emplace_back(id, std::vector<unsigned>(cd, cd + n));
  }
  return out;
}

// Integers in [0, 1000).
ckpt::Tensor filled(ckpt::DType t, ckpt::Shape shape, std::uint64_t seed) { return test::filled(t, std::move(shape), seed, 1000); }

// A dataset through the C API with an explicit filter list (fletcher32, orders HDF5 allows).
void write_filtered(hid_t file, const std::string& name, std::vector<hsize_t> shape, std::vector<hsize_t> chunk,
                    const std::vector<H5Z_filter_t>& filters, unsigned level, std::size_t rows_written = ~std::size_t{0}) {
  h5::PropList dcpl(H5Pcreate(H5P_DATASET_CREATE));
  REQUIRE(H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data()) >= 0);
  for (auto f : filters) {
    if (f == H5Z_FILTER_DEFLATE) REQUIRE(H5Pset_deflate(dcpl, level) >= 0);
    if (f == H5Z_FILTER_SHUFFLE) REQUIRE(H5Pset_shuffle(dcpl) >= 0);
    if (f == H5Z_FILTER_FLETCHER32) REQUIRE(H5Pset_fletcher32(dcpl) >= 0);
  }
  h5::Dataspace space(H5Screate_simple(static_cast<int>(shape.size()), shape.data(), nullptr));
  h5::PropList lcpl(H5Pcreate(H5P_LINK_CREATE));
  REQUIRE(H5Pset_create_intermediate_group(lcpl, 1) >= 0);
  h5::Dataset d(H5Dcreate2(file, name.c_str(), H5T_IEEE_F32LE, space, lcpl, dcpl, H5P_DEFAULT));
  REQUIRE(d.valid());
  std::uint64_t n = 1;
  for (auto s : shape) n *= s;
  std::vector<float> v(n);
  Rng rng(n, 3);
  for (auto& x : v) x = static_cast<float>(rng.normal());
  auto count = shape;
  count[0] = std::min<hsize_t>(shape[0], rows_written);  // the rest stays unallocated (fill value)
  std::vector<hsize_t> start(shape.size(), 0);
  h5::Dataspace mem(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr));
  REQUIRE(H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) >= 0);
  REQUIRE(H5Dwrite(d, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, v.data()) >= 0);
}

void make_capi_fixture(const std::string& path) {
  auto f = h5::create_file(path);
  using ckpt::DType;
  std::uint64_t seed = 11;
  struct Case {
    DType t;
    ckpt::Shape shape, chunk;
    int level;
    bool shuffle;
  };
  const Case cases[] = {
      {DType::f32, {37, 23}, {8, 5}, 1, true},   {DType::f32, {37, 23}, {8, 5}, 9, false},
      {DType::f64, {29, 31}, {10, 10}, 4, true}, {DType::f64, {64}, {16}, 6, false},
      {DType::f16, {41, 13}, {9, 6}, 2, true},   {DType::f16, {5, 7, 9}, {2, 3, 4}, 7, false},
      {DType::i64, {33, 17}, {7, 7}, 5, true},   {DType::i64, {4, 100}, {3, 30}, 9, false},
  };
  int k = 0;
  for (const auto& c : cases)
    ckpt::write_tensor(f, "/model/" + std::string(ckpt::dtype_name(c.t)) + "_" + std::to_string(k++), filled(c.t, c.shape, seed++),
                       ckpt::WriteOptions{c.chunk, c.level, c.shuffle});
  write_filtered(f, "/model/fletcher32", {30, 30}, {8, 8}, {H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE, H5Z_FILTER_FLETCHER32}, 3);
  write_filtered(f, "/model/deflate_then_shuffle", {30, 30}, {8, 8}, {H5Z_FILTER_DEFLATE, H5Z_FILTER_SHUFFLE}, 3);
  write_filtered(f, "/model/partial", {40, 24}, {10, 8}, {H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE}, 5, 12);
}

std::vector<FlipRecord> plan_flips(const std::string& file, std::uint64_t flips, std::uint64_t seed) {
  std::vector<ckpt::DatasetInfo> infos;
  {
    auto f = h5::open_file(file, h5::Mode::read);
    infos = ckpt::list_datasets(f);
  }
  const auto targets = select(infos, SelectOptions{});
  PlanOptions opt;
  opt.seed = seed;
  opt.flips = flips;
  const auto sites = sample_sites(targets, opt);
  return plan(file, targets, sites, opt);
}

bool same_records(const std::vector<FlipRecord>& a, const std::vector<FlipRecord>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].dataset != b[i].dataset || a[i].index != b[i].index || a[i].old_bits != b[i].old_bits || a[i].new_bits != b[i].new_bits)
      return false;
  return true;
}

// Inject `flips` into copies of `src` by the HDF5 path and by the direct path (1 and 4 threads):
// identical contents, exactly the logged words changed, pipelines unchanged, revert restores.
void check_against_hdf5_path(const test::TempDir& dir, const std::string& src, std::uint64_t flips) {
  std::vector<FlipRecord> recs;
  {
    CodecScope hdf5({false, 0});
    recs = plan_flips(src, flips, 42);
  }
  const auto before = chunk_codec_stats();
  {
    CodecScope direct({true, 4});
    INFO("plan() reads the same words through the direct path");
    CHECK(same_records(recs, plan_flips(src, flips, 42)));
  }
  CHECK(chunk_codec_stats().read > before.read);

  const auto original = contents(src);
  std::map<std::string, std::map<std::string, std::vector<unsigned char>>> out;
  // t1/t4: token-level patching (every chunk HDF5's zlib wrote is patched, none deflated in full);
  // t4full: the full re-deflate for comparison.
  const std::pair<std::string, ChunkCodecOptions> ways[] = {
      {"hdf5", {false, 0, true}}, {"t1", {true, 1, true}}, {"t4", {true, 4, true}}, {"t4full", {true, 4, false}}};
  for (const auto& [name, opt] : ways) {
    const auto file = (dir / (name + ".h5")).string();
    ckpt::fs::copy_file(src, file);
    CodecScope scope(opt);
    const auto s0 = chunk_codec_stats();
    const auto st = apply(file, recs, Direction::forward);
    CHECK(st.changed > 0);
    const auto s1 = chunk_codec_stats();
    if (opt.direct) {
      CHECK(s1.written > s0.written);
      CHECK(s1.written - s0.written == (s1.patched - s0.patched) + (s1.deflated - s0.deflated));
      CHECK(s1.patched - s0.patched == (opt.patch ? s1.written - s0.written : 0));
    } else {
      CHECK(s1.read == s0.read);
      CHECK(s1.written == s0.written);
    }
    out[name] = contents(file);
  }
  REQUIRE(out["hdf5"].size() == original.size());
  CHECK(out["t1"] == out["hdf5"]);
  CHECK(out["t4"] == out["hdf5"]);
  CHECK(out["t4full"] == out["hdf5"]);

  // Exactly the logged words differ from the original, by the records' XOR.
  std::map<std::pair<std::string, std::uint64_t>, std::uint64_t> expect;
  for (const auto& r : recs) expect[{r.dataset, r.index}] ^= r.mask();
  std::uint64_t changed = 0;
  for (const auto& [ds, bytes] : out["t4"]) {
    const auto& orig = original.at(ds);
    REQUIRE(orig.size() == bytes.size());
    for (std::size_t i = 0; i < bytes.size(); ++i) changed += bytes[i] != orig[i];
  }
  CHECK(changed > 0);
  for (const auto& r : recs) {
    const auto& a = original.at(r.dataset);
    const auto& b = out["t4"].at(r.dataset);
    const unsigned size = r.width / 8;
    std::uint64_t x = 0;  // XOR of the stored bytes, in file order: compare by popcount and position-free
    for (unsigned j = 0; j < size; ++j) x |= std::uint64_t(a[r.index * size + j] ^ b[r.index * size + j]) << (8 * j);
    CHECK(__builtin_popcountll(x) == __builtin_popcountll(expect.at({r.dataset, r.index})));
  }

  for (const auto& [ds, bytes] : original) {
    INFO(ds);
    CHECK(filters_of((dir / "t4.h5").string(), ds) == filters_of(src, ds));
  }
  INFO("h5py: same pipeline and values in the HDF5-path and direct outputs (patched and deflated in full)");
  CHECK(test::run(check_py + " compare " + (dir / "hdf5.h5").string() + " " + (dir / "t4.h5").string() + " >/dev/null") == 0);
  CHECK(test::run(check_py + " compare " + (dir / "hdf5.h5").string() + " " + (dir / "t4full.h5").string() + " >/dev/null") == 0);
  {
    CodecScope direct({true, 4});
    apply((dir / "t4.h5").string(), recs, Direction::revert);
  }
  CHECK(contents((dir / "t4.h5").string()) == original);
  CHECK(test::run(check_py + " compare " + src + " " + (dir / "t4.h5").string() + " >/dev/null") == 0);
}

// The zlib trailer: Adler-32 of `data`, big-endian.
void append_adler32(std::vector<unsigned char>& z, const std::vector<unsigned char>& data) {
  std::uint32_t a = 1, b = 0;
  for (auto c : data) {
    a = (a + c) % 65521;
    b = (b + a) % 65521;
  }
  const std::uint32_t adler = (b << 16) | a;
  for (int s = 24; s >= 0; s -= 8) z.push_back(static_cast<unsigned char>(adler >> s));
}

// Build a zlib stream of stored blocks (no compression) around `data`.
std::vector<unsigned char> zlib_stored(const std::vector<unsigned char>& data) {
  std::vector<unsigned char> z = {0x78, 0x01};
  std::size_t at = 0;
  do {
    const std::size_t n = std::min<std::size_t>(65535, data.size() - at);
    const bool last = at + n == data.size();
    z.push_back(last ? 1 : 0);
    z.push_back(n & 0xff);
    z.push_back((n >> 8) & 0xff);
    z.push_back(~n & 0xff);
    z.push_back((~n >> 8) & 0xff);
    z.insert(z.end(), data.begin() + static_cast<std::ptrdiff_t>(at), data.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
  } while (at < data.size());
  append_adler32(z, data);
  return z;
}

}  // namespace

TEST_CASE("deflate_pipeline takes exactly deflate and shuffle+deflate", "[inject][unit]") {
  test::TempDir dir("inject-deflate");
  const auto file = (dir / "p.h5").string();
  {
    auto f = h5::create_file(file);
    write_filtered(f, "/deflate", {20, 20}, {8, 8}, {H5Z_FILTER_DEFLATE}, 3);
    write_filtered(f, "/shuffle_deflate", {20, 20}, {8, 8}, {H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE}, 7);
    write_filtered(f, "/deflate_shuffle", {20, 20}, {8, 8}, {H5Z_FILTER_DEFLATE, H5Z_FILTER_SHUFFLE}, 7);
    write_filtered(f, "/fletcher32", {20, 20}, {8, 8}, {H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE, H5Z_FILTER_FLETCHER32}, 7);
    write_filtered(f, "/shuffle", {20, 20}, {8, 8}, {H5Z_FILTER_SHUFFLE}, 0);
    write_filtered(f, "/plain", {20, 20}, {8, 8}, {}, 0);
    ckpt::write_tensor(f, "/contig", filled(ckpt::DType::f32, {4, 4}, 1));
  }
  auto f = h5::open_file(file, h5::Mode::read);
  auto pipe = [&](const std::string& name) { return deflate_pipeline(h5::open_dataset(f, name, file), 4); };
  REQUIRE(pipe("/deflate"));
  CHECK_FALSE(pipe("/deflate")->shuffle);
  CHECK(pipe("/deflate")->level == 3);
  REQUIRE(pipe("/shuffle_deflate"));
  CHECK(pipe("/shuffle_deflate")->shuffle);
  CHECK(pipe("/shuffle_deflate")->level == 7);
  CHECK_FALSE(deflate_pipeline(h5::open_dataset(f, "/shuffle_deflate", file), 8));  // shuffle of another width
  CHECK_FALSE(pipe("/deflate_shuffle"));
  CHECK_FALSE(pipe("/fletcher32"));
  CHECK_FALSE(pipe("/shuffle"));
  CHECK_FALSE(pipe("/plain"));
  CHECK_FALSE(pipe("/contig"));
}

TEST_CASE("direct gzip chunk edits equal the HDF5 filter path (C API file)", "[inject][unit]") {
  test::TempDir dir("inject-deflate");
  const auto src = (dir / "src.h5").string();
  make_capi_fixture(src);
  check_against_hdf5_path(dir, src, 1500);
}

TEST_CASE("direct gzip chunk edits equal the HDF5 filter path (h5py file)", "[inject][unit]") {
  test::TempDir dir("inject-deflate");
  const auto src = (dir / "src.h5").string();
  REQUIRE(test::run(check_py + " make " + src) == 0);
  check_against_hdf5_path(dir, src, 1200);
}

TEST_CASE("fallbacks: fletcher32 and unallocated chunks go through HDF5", "[inject][unit]") {
  test::TempDir dir("inject-deflate");
  const auto src = (dir / "src.h5").string();
  {
    auto f = h5::create_file(src);
    write_filtered(f, "/model/fletcher32", {30, 30}, {8, 8}, {H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE, H5Z_FILTER_FLETCHER32}, 3);
  }
  CodecScope direct({true, 2});
  const auto s0 = chunk_codec_stats();
  const auto recs = plan_flips(src, 200, 5);
  const auto file = (dir / "out.h5").string();
  ckpt::fs::copy_file(src, file);
  CHECK(apply(file, recs, Direction::forward).changed > 0);
  const auto s1 = chunk_codec_stats();
  CHECK(s1.read == s0.read);
  CHECK(s1.written == s0.written);
  CHECK(filters_of(file, "/model/fletcher32") == filters_of(src, "/model/fletcher32"));
  apply(file, recs, Direction::revert);
  CHECK(contents(file) == contents(src));

  // A partly written gzip dataset: allocated chunks direct, the others allocated by HDF5.
  const auto part = (dir / "part.h5").string();
  {
    auto f = h5::create_file(part);
    write_filtered(f, "/model/partial", {40, 24}, {10, 8}, {H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE}, 5, 12);
  }
  std::vector<FlipRecord> all;
  for (std::uint64_t i = 0; i < 40 * 24; i += 7) {
    FlipRecord r;
    r.dataset = "/model/partial";
    r.index = i;
    r.nd = {i / 24, i % 24};
    r.dtype = ckpt::DType::f32;
    r.width = 32;
    all.push_back(r);
  }
  const auto orig = contents(part).at("/model/partial");
  for (auto& r : all) {
    std::uint32_t w = 0;
    std::memcpy(&w, orig.data() + r.index * 4, 4);
    r.old_bits = w;
    r.new_bits = w ^ (1u << (r.index % 32));
  }
  const auto s2 = chunk_codec_stats();
  apply(part, all, Direction::forward);
  const auto s3 = chunk_codec_stats();
  CHECK(s3.written - s2.written == 6);  // rows 0..11 touch chunk rows 0 and 1: 2 x 3 allocated chunks
  const auto after = contents(part).at("/model/partial");
  for (const auto& r : all) {
    std::uint32_t w = 0;
    std::memcpy(&w, after.data() + r.index * 4, 4);
    CHECK(w == r.new_bits);
  }
  apply(part, all, Direction::revert);
  CHECK(contents(part).at("/model/partial") == orig);
}

TEST_CASE("damaged gzip chunks: CorruptInputError naming file, dataset and chunk", "[inject][unit]") {
  test::TempDir dir("inject-deflate");
  const auto src = (dir / "bad.h5").string();
  {
    auto f = h5::create_file(src);
    write_filtered(f, "/w", {16, 16}, {8, 8}, {H5Z_FILTER_DEFLATE}, 4);
  }
  const hsize_t at[2] = {8, 0};
  auto damage = [&](const std::vector<unsigned char>& chunk) {
    auto f = h5::open_file(src, h5::Mode::read_write);
    auto d = h5::open_dataset(f, "/w", src);
    REQUIRE(H5Dwrite_chunk(d, H5P_DEFAULT, 0, at, chunk.size(), chunk.data()) >= 0);
  };
  std::string expect;
  SECTION("not a zlib stream") {
    damage(std::vector<unsigned char>(100, 0x5a));
    expect = "not a valid zlib stream";
  }
  SECTION("inflates short") {
    damage(zlib_stored(std::vector<unsigned char>(8 * 8 * 4 - 4, 1)));
    expect = "inflates to 252 bytes, not the chunk's 256";
  }
  SECTION("inflates long") {
    damage(zlib_stored(std::vector<unsigned char>(8 * 8 * 4 + 1, 1)));
    expect = "inflates to more than the chunk's 256 bytes";
  }
  CodecScope direct({true, 2});
  FlipRecord r;
  r.dataset = "/w";
  r.index = 9 * 16 + 3;  // in chunk [8, 0]
  r.nd = {9, 3};
  r.dtype = ckpt::DType::f32;
  r.width = 32;
  r.new_bits = 1;
  const std::vector<FlipRecord> recs{r};
  try {
    apply(src, recs, Direction::forward);
    FAIL("no error");
  } catch (const CorruptInputError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find(src) != std::string::npos);
    CHECK(what.find("dataset /w") != std::string::npos);
    CHECK(what.find("chunk at [8, 0]") != std::string::npos);
    CHECK(what.find(expect) != std::string::npos);
  }
}

TEST_CASE("direct gzip chunks in place: reads fine, a change is refused and nothing is written", "[inject][unit]") {
  test::TempDir dir("inject-deflate");
  const auto src = (dir / "w.h5").string();
  {
    auto f = h5::create_file(src);
    write_filtered(f, "/w", {20, 20}, {8, 8}, {H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE}, 4);
  }
  const auto before = contents(src);
  CodecScope direct({true, 2});
  const auto s0 = chunk_codec_stats();
  Hdf5Storage wf(src, Access::in_place);
  std::vector<std::uint64_t> seen;
  wf.edit("/w", {5, 399, 170}, [&](std::span<const std::uint64_t> i, std::span<std::uint64_t> w) {
    for (std::size_t k = 0; k < i.size(); ++k) {
      std::uint32_t x = 0;
      std::memcpy(&x, before.at("/w").data() + i[k] * 4, 4);
      CHECK(w[k] == x);
      seen.push_back(i[k]);
    }
  });
  CHECK(seen == std::vector<std::uint64_t>{5, 170, 399});  // chunk order
  CHECK(chunk_codec_stats().read - s0.read == 3);
  try {
    wf.edit("/w", {170}, [](std::span<const std::uint64_t>, std::span<std::uint64_t> w) { w[0] ^= 1; });
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("element 170 lies in a filtered or unallocated block") != std::string::npos);
  }
  wf.close();
  CHECK(chunk_codec_stats().written == s0.written);
  CHECK(contents(src) == before);
}

TEST_CASE("RESIL_INJECT_THREADS: 1..64, RESIL_INJECT_PATCH: 0|1, anything else is a usage error", "[inject][unit]") {
  test::TempDir dir("inject-deflate");
  const auto src = (dir / "w.h5").string();
  {
    auto f = h5::create_file(src);
    write_filtered(f, "/w", {20, 20}, {8, 8}, {H5Z_FILTER_DEFLATE}, 4);
  }
  CodecScope direct({true, 0});
  auto read_all = [&] {
    Hdf5Storage wf(src, Access::read);
    std::uint64_t n = 0;
    std::vector<std::uint64_t> idx(400);
    for (std::uint64_t i = 0; i < 400; ++i) idx[i] = i;
    wf.edit("/w", idx, [&](std::span<const std::uint64_t> i, std::span<std::uint64_t>) { n += i.size(); });
    return n;
  };
  const char* saved = std::getenv("RESIL_INJECT_THREADS");
  const std::string keep = saved ? saved : "";
  ::setenv("RESIL_INJECT_THREADS", "3", 1);
  CHECK(read_all() == 400);
  ::setenv("RESIL_INJECT_THREADS", "0", 1);
  CHECK_THROWS_AS(read_all(), UsageError);
  ::setenv("RESIL_INJECT_THREADS", "4x", 1);
  CHECK_THROWS_AS(read_all(), UsageError);
  if (saved) ::setenv("RESIL_INJECT_THREADS", keep.c_str(), 1);
  else ::unsetenv("RESIL_INJECT_THREADS");
  // RESIL_INJECT_PATCH: 0 or 1 (unset: 1).
  const char* saved_patch = std::getenv("RESIL_INJECT_PATCH");
  const std::string keep_patch = saved_patch ? saved_patch : "";
  ::setenv("RESIL_INJECT_PATCH", "0", 1);
  CHECK(read_all() == 400);
  ::setenv("RESIL_INJECT_PATCH", "yes", 1);
  CHECK_THROWS_AS(read_all(), UsageError);
  if (saved_patch) ::setenv("RESIL_INJECT_PATCH", keep_patch.c_str(), 1);
  else ::unsetenv("RESIL_INJECT_PATCH");
}

namespace {

// A zlib stream of `data` in one dynamic block declaring 288 litlen codes (HLIT 31): libdeflate
// inflates it, zlib (HDF5's filter) refuses it ("too many length or distance symbols"), and the
// token-level patcher declines it. Litlen lengths: symbols 0..223 8 bits, 224..287 9 bits (a
// complete code); one distance code of length 0; every byte a literal.
std::vector<unsigned char> zlib_hlit288(const std::vector<unsigned char>& data) {
  std::vector<unsigned char> z = {0x78, 0x01};
  std::uint64_t acc = 0;
  unsigned n = 0;
  auto put = [&](std::uint32_t bits, unsigned cnt) {
    acc |= std::uint64_t{bits} << n;
    n += cnt;
    while (n >= 8) {
      z.push_back(static_cast<unsigned char>(acc));
      acc >>= 8;
      n -= 8;
    }
  };
  auto put_code = [&](std::uint32_t code, unsigned len) {  // Huffman codes go MSB first
    for (unsigned i = len; i-- > 0;) put((code >> i) & 1, 1);
  };
  put(1, 1);  // BFINAL
  put(2, 2);  // dynamic
  put(31, 5);  // HLIT: 288
  put(0, 5);   // HDIST: 1
  put(3, 4);   // HCLEN: 7 (order 16 17 18 0 8 7 9)
  // Code-length code: 8 -> '0', 0 -> '10', 9 -> '11'.
  for (unsigned len : {0u, 0u, 0u, 2u, 1u, 0u, 2u}) put(len, 3);
  for (unsigned s = 0; s < 288; ++s) s < 224 ? put_code(0, 1) : put_code(3, 2);
  put_code(2, 2);  // the distance code's length 0
  auto lit = [&](unsigned s) { s < 224 ? put_code(s, 8) : put_code(448 + (s - 224), 9); };
  for (auto c : data) lit(c);
  lit(256);
  if (n) put(0, 8 - n);
  append_adler32(z, data);
  return z;
}

}  // namespace

TEST_CASE("a chunk the patcher declines is deflated in full, and HDF5 then reads it", "[inject][unit]") {
  test::TempDir dir("inject-deflate");
  const auto src = (dir / "odd.h5").string();
  {
    auto f = h5::create_file(src);
    write_filtered(f, "/w", {16, 16}, {8, 8}, {H5Z_FILTER_DEFLATE}, 4);
  }
  const auto before = contents(src).at("/w");
  // Chunk [8, 0] holds rows 8..15, columns 0..7 (C order within the chunk).
  std::vector<unsigned char> chunk(8 * 8 * 4);
  for (std::size_t r = 0; r < 8; ++r) std::memcpy(&chunk[r * 32], &before[((8 + r) * 16) * 4], 32);
  {
    auto f = h5::open_file(src, h5::Mode::read_write);
    auto d = h5::open_dataset(f, "/w", src);
    const hsize_t at[2] = {8, 0};
    const auto z = zlib_hlit288(chunk);
    REQUIRE(H5Dwrite_chunk(d, H5P_DEFAULT, 0, at, z.size(), z.data()) >= 0);
  }
  {
    INFO("HDF5's zlib refuses the chunk");
    auto f = h5::open_file(src, h5::Mode::read);
    auto d = h5::open_dataset(f, "/w", src);
    std::vector<float> all(16 * 16);
    h5::SilenceErrors quiet;
    CHECK(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, all.data()) < 0);
  }
  FlipRecord r;
  r.dataset = "/w";
  r.index = 9 * 16 + 3;  // in chunk [8, 0]
  r.nd = {9, 3};
  r.dtype = ckpt::DType::f32;
  r.width = 32;
  std::uint32_t w = 0;
  std::memcpy(&w, &before[r.index * 4], 4);
  r.old_bits = w;
  r.new_bits = w ^ (1u << 30);
  CodecScope direct({true, 1, true});
  const auto s0 = chunk_codec_stats();
  CHECK(apply(src, std::vector<FlipRecord>{r}, Direction::forward).changed == 1);
  const auto s1 = chunk_codec_stats();
  CHECK(s1.written - s0.written == 1);
  CHECK(s1.deflated - s0.deflated == 1);
  CHECK(s1.patched == s0.patched);
  CodecScope hdf5({false, 0, true});
  auto after = contents(src).at("/w");  // HDF5 reads the rewritten chunk
  std::memcpy(&w, &after[r.index * 4], 4);
  CHECK(w == r.new_bits);
  std::memcpy(&after[r.index * 4], &before[r.index * 4], 4);
  CHECK(after == before);
}
