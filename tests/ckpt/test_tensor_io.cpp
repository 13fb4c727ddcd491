#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>

#include "resil/ckpt/h5.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/ckpt/io.hpp"
#include "resil/core/rng.hpp"
#include "resil_test/tmpdir.hpp"

using namespace resil::ckpt;
using resil::test::TempDir;

namespace {
// A tensor filled with pseudo-random bytes; for float dtypes every word is a finite value.
Tensor random_tensor(DType t, Shape shape, std::uint64_t seed) {
  Tensor x(t, std::move(shape));
  resil::Rng rng(seed, 1);
  auto b = x.bytes();
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::byte>(rng() & 0xff);
  if (dtype_is_float(t)) {
    const std::size_t w = dtype_size(t);
    for (std::size_t i = 0; i < x.numel(); ++i) {
      std::uint64_t word = 0;
      std::memcpy(&word, b.data() + i * w, w);
      word = double_to_word(t, rng.normal());
      std::memcpy(b.data() + i * w, &word, w);
    }
  }
  return x;
}
}  // namespace

TEST_CASE("every dtype and rank round-trips bit-exactly with a checksum", "[ckpt][unit]") {
  const DType t = GENERATE(from_range(std::begin(all_dtypes), std::end(all_dtypes)));
  const Shape shape = GENERATE(Shape{}, Shape{7}, Shape{3, 5}, Shape{2, 3, 1, 4, 2}, Shape{1, 2, 1, 2, 1, 3}, Shape{0, 4});
  const bool chunked = GENERATE(false, true);
  CAPTURE(dtype_name(t), shape_string(shape), chunked);
  if (chunked && (shape.empty() || shape_numel(shape) == 0)) return;  // HDF5 needs a non-empty extent to chunk
  TempDir dir;
  const auto path = (dir / "t.h5").string();
  const Tensor x = random_tensor(t, shape, 42);
  {
    h5::File f = h5::create_file(path);
    WriteOptions opt;
    if (chunked) {
      opt.chunks = Shape(shape.size(), 2);
      opt.gzip_level = 4;
      opt.shuffle = true;
    }
    write_tensor(f, "/model/a/b.weight", x, opt);
  }
  {
    h5::File f = h5::open_file(path, h5::Mode::read);
    const Tensor y = read_tensor(f, "/model/a/b.weight", path);
    CHECK(y.dtype() == t);
    CHECK(y.shape() == shape);
    CHECK(y == x);
    const DatasetInfo info = describe_dataset(f, "/model/a/b.weight");
    REQUIRE(info.checksum.has_value());
    CHECK(*info.checksum == xxh64(x.bytes()));
    CHECK(info.layout == (chunked ? Layout::chunked : Layout::contiguous));
    CHECK(info.logical_bytes == x.nbytes());
    if (chunked) CHECK(info.filters == std::vector<std::string>{"shuffle", "deflate(4)"});
  }
  const VerifyReport r = verify(path);
  CHECK(r.ok());
  CHECK(r.checked == 1);
  CHECK(h5::open_object_count() == 0);
}

TEST_CASE("verify names each dataset whose bytes changed", "[ckpt][unit]") {
  TempDir dir;
  const auto path = (dir / "v.h5").string();
  std::vector<float> a(100), b(50);
  std::iota(a.begin(), a.end(), 0.f);
  std::iota(b.begin(), b.end(), 1.f);
  {
    h5::File f = h5::create_file(path);
    write_tensor(f, "/model/a", Tensor::from<float>({10, 10}, std::span<const float>(a)));
    write_tensor(f, "/model/b", Tensor::from<float>({50}, std::span<const float>(b)), {.chunks = {8}, .gzip_level = 1});
  }
  REQUIRE(verify(path).ok());
  {  // flip one bit of element 37 of /model/b behind libckpt's back
    h5::File f = h5::open_file(path, h5::Mode::read_write);
    h5::Dataset d(H5Dopen2(f, "/model/b", H5P_DEFAULT));
    float v = 0;
    hsize_t start = 37, count = 1;
    h5::Dataspace fs(H5Dget_space(d));
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, nullptr, &count, nullptr);
    h5::Dataspace ms(H5Screate_simple(1, &count, nullptr));
    REQUIRE(H5Dread(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, &v) >= 0);
    std::uint32_t w;
    std::memcpy(&w, &v, 4);
    w ^= 1u << 30;
    std::memcpy(&v, &w, 4);
    REQUIRE(H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, &v) >= 0);
  }
  const VerifyReport r = verify(path);
  REQUIRE(r.mismatched.size() == 1);
  CHECK(r.mismatched[0].dataset == "/model/b");
  CHECK(r.checked == 2);
  {
    h5::File f = h5::open_file(path, h5::Mode::read_write);
    update_checksum(f, "/model/b");
  }
  CHECK(verify(path).ok());
  CHECK(h5::open_object_count() == 0);
}

TEST_CASE("list_datasets walks nested groups in name order", "[ckpt][unit]") {
  TempDir dir;
  const auto path = (dir / "l.h5").string();
  {
    h5::File f = h5::create_file(path);
    const std::vector<float> one{1.f};
    for (const char* p : {"/z", "/model/b", "/model/a", "/optimizer/a/exp_avg", "/deep/er/st/ill"})
      write_tensor(f, p, Tensor::from<float>({1}, std::span<const float>(one)));
  }
  h5::File f = h5::open_file(path, h5::Mode::read);
  std::vector<std::string> names;
  for (const auto& i : list_datasets(f)) names.push_back(i.path);
  CHECK(names == std::vector<std::string>{"/deep/er/st/ill", "/model/a", "/model/b", "/optimizer/a/exp_avg", "/z"});
}

TEST_CASE("bf16 is stored as uint16 with a marker and f16 as an IEEE half", "[ckpt][unit]") {
  TempDir dir;
  const auto path = (dir / "h.h5").string();
  Tensor bf(DType::bf16, {3}), hf(DType::f16, {3});
  const double vals[] = {1.0, -2.5, 65504.0};
  for (int i = 0; i < 3; ++i) {
    bf.as<std::uint16_t>()[i] = static_cast<std::uint16_t>(double_to_word(DType::bf16, vals[i]));
    hf.as<std::uint16_t>()[i] = static_cast<std::uint16_t>(double_to_word(DType::f16, vals[i]));
  }
  CHECK(hf.as<std::uint16_t>()[0] == 0x3c00);
  CHECK(hf.as<std::uint16_t>()[2] == 0x7bff);
  CHECK(bf.as<std::uint16_t>()[0] == 0x3f80);
  {
    h5::File f = h5::create_file(path);
    write_tensor(f, "/bf", bf);
    write_tensor(f, "/hf", hf);
  }
  h5::File f = h5::open_file(path, h5::Mode::read);
  CHECK(describe_dataset(f, "/bf").dtype == DType::bf16);
  CHECK(describe_dataset(f, "/hf").dtype == DType::f16);
  const Tensor b2 = read_tensor(f, "/bf"), h2 = read_tensor(f, "/hf");
  CHECK(b2 == bf);
  CHECK(h2 == hf);
  for (int i = 0; i < 3; ++i) {
    CHECK(word_to_double(DType::bf16, b2.as<std::uint16_t>()[i]) == Approx(vals[i]).epsilon(0.01));
    CHECK(word_to_double(DType::f16, h2.as<std::uint16_t>()[i]) == vals[i]);
  }
}

TEST_CASE("half and bfloat16 conversions round to nearest even", "[ckpt][unit]") {
  CHECK(double_to_word(DType::f16, 0.0) == 0);
  CHECK(double_to_word(DType::f16, -0.0) == 0x8000);
  CHECK(double_to_word(DType::f16, 1e6) == 0x7c00);
  CHECK(double_to_word(DType::f16, std::ldexp(1.0, -24)) == 1);  // smallest subnormal
  CHECK(double_to_word(DType::f16, 1.0 + std::ldexp(1.0, -11)) == 0x3c00);  // tie -> even
  CHECK(double_to_word(DType::f16, 1.0 + 3 * std::ldexp(1.0, -11)) == 0x3c02);  // tie -> even (up)
  for (std::uint32_t w = 0; w < 0x10000; ++w) {
    const double v = word_to_double(DType::f16, w);
    if (std::isnan(v)) continue;
    REQUIRE(double_to_word(DType::f16, v) == w);  // every half value survives a round trip
  }
  CHECK(double_to_word(DType::bf16, 1.0) == 0x3f80);
  CHECK(word_to_double(DType::bf16, 0x4049) == Approx(3.140625));
  CHECK(double_to_word(DType::i8, 300.0) == 0x7f);
  CHECK(double_to_word(DType::i8, -300.0) == 0x80);
  CHECK(word_to_double(DType::i16, 0xffff) == -1.0);
}
