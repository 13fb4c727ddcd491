// The storage layer: formats from magic bytes only, the byte-extent adapters (word I/O,
// bulk reads, parser errors naming the file), fp8/bool bit fields,
// shared storage counted once in the fault space, and the HDF5 adapter's extents equal the bytes
// HDF5 reads.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <iterator>
#include <fstream>
#include <string>
#include <vector>

#include "resil/ckpt/h5.hpp"
#include "resil/ckpt/io.hpp"
#include "resil/core/error.hpp"
#include "resil/inject/select.hpp"
#include "resil/inject/storage.hpp"
#include "resil_test/tmpdir.hpp"

using namespace resil;
using namespace resil::inject;
using resil::test::TempDir;

namespace {

std::vector<std::byte> bytes_of(std::string_view s) {
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

// detect_format over an in-memory file.
std::optional<Format> detect(const std::vector<std::byte>& file) {
  const std::size_t head = std::min<std::size_t>(file.size(), 512);
  return detect_format(std::span(file.data(), head), file.size(), [&](std::uint64_t at) {
    return at + 8 <= file.size() && std::memcmp(file.data() + at, "\x89HDF\r\n\x1a\n", 8) == 0;
  });
}

std::vector<std::byte> zip_with_first_member(const std::string& name) {
  std::string h = "PK\x03\x04";
  h += std::string(22, '\0');
  h += static_cast<char>(name.size());
  h += '\0';
  h += std::string(2, '\0');
  return bytes_of(h + name + std::string(64, 'x'));
}

}  // namespace

TEST_CASE("storage: formats are detected from magic bytes, never names", "[inject][unit]") {
  std::vector<std::byte> h5 = bytes_of(std::string("\x89HDF\r\n\x1a\n", 8) + std::string(100, '\0'));
  CHECK(detect(h5) == Format::hdf5);
  SECTION("HDF5 after a user block of 512, 1024 or 2048 bytes, whatever the block holds") {
    for (std::size_t ub : {512u, 1024u, 2048u}) {
      std::vector<std::byte> f = bytes_of("PK\x03\x04" + std::string(ub - 4, 'u'));  // the user block looks like a zip
      f.insert(f.end(), h5.begin(), h5.end());
      CHECK(detect(f) == Format::hdf5);
    }
    std::vector<std::byte> f = bytes_of(std::string(700, 'u'));  // not at a power of two: not HDF5
    f.insert(f.end(), h5.begin(), h5.end());
    CHECK_FALSE(detect(f));
  }
  CHECK(detect(bytes_of("\x93NUMPY\x01\x00v\x00{'descr': '<f4'}")) == Format::npy);
  CHECK(detect(zip_with_first_member("archive/data.pkl")) == Format::torch);
  CHECK(detect(zip_with_first_member("fc1.weight.npy")) == Format::npz);
  std::string st = "{\"w\":{}}";
  std::string len(8, '\0');
  len[0] = static_cast<char>(st.size());
  CHECK(detect(bytes_of(len + st + "data")) == Format::safetensors);
  len[0] = static_cast<char>(100);  // a header length beyond the file
  CHECK_FALSE(detect(bytes_of(len + st)));
  CHECK_FALSE(detect(bytes_of("just text, no signature")));
  CHECK_FALSE(detect({}));
}

// A .npy of `n` little-endian f4 values 1, 2, 3...: header padded to npy_data (128) bytes.
constexpr std::size_t npy_data = 128;
std::string npy_bytes(unsigned n) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(n) + ",), }";
  dict += std::string(npy_data - 10 - dict.size() - 1, ' ') + "\n";
  std::string out = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(dict.size()) + '\0' + dict;
  for (unsigned i = 0; i < n; ++i) {
    const float v = static_cast<float>(i + 1);
    out.append(reinterpret_cast<const char*>(&v), 4);
  }
  return out;
}

TEST_CASE("storage: the byte-extent adapters open by content; parser errors name the file", "[inject][unit]") {
  TempDir dir("resil-storage");
  const auto npy = (dir / "w.h5").string();  // the name says HDF5, the content says npy
  std::ofstream(npy, std::ios::binary) << npy_bytes(6);
  CHECK(detect_format(npy) == Format::npy);
  {
    const auto st = open_storage(npy, Access::in_place);
    CHECK(st->format() == Format::npy);
    const auto ts = st->tensors();
    REQUIRE(ts.size() == 1);
    CHECK(ts[0].info.path == "/array");
    CHECK(ts[0].info.dtype == ckpt::DType::f32);
    REQUIRE(st->extents("/array").size() == 1);
    CHECK(st->extents("/array")[0].offset == npy_data);
    CHECK(st->extents("/array")[0].length == 24);
    // Word I/O: element 2 (3.0f) gets its sign bit; only that word changes.
    st->edit("/array", {2}, [](std::span<const std::uint64_t>, std::span<std::uint64_t> w) { w[0] ^= 0x80000000u; });
    std::vector<std::byte> box;
    st->read_box("/array", {1}, {3}, box);
    REQUIRE(box.size() == 12);
    float v[3];
    std::memcpy(v, box.data(), 12);
    CHECK(v[0] == 2.0f);
    CHECK(v[1] == -3.0f);
    CHECK(v[2] == 4.0f);
    st->finish();
    st->close();
  }
  std::string after;
  {
    std::ifstream in(npy, std::ios::binary);
    after.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::string want = npy_bytes(6);
  want[npy_data + 2 * 4 + 3] = static_cast<char>(want[npy_data + 2 * 4 + 3] ^ 0x80);
  CHECK(after == want);
  // A header claiming more data than the file holds: the parser's message, after the file's name.
  const auto cut = (dir / "cut.npy").string();
  std::ofstream(cut, std::ios::binary) << npy_bytes(6).substr(0, npy_data + 5);
  try {
    open_storage(cut, Access::read);
    FAIL("opened");
  } catch (const CorruptInputError& e) {
    CHECK(std::string(e.what()).rfind(cut + ": npy: ", 0) == 0);
  }
  const auto junk = (dir / "junk.pt").string();
  std::ofstream(junk) << "plain text\n";
  CHECK_THROWS_AS(open_storage(junk, Access::read), CorruptInputError);
  CHECK_THROWS_AS(open_storage((dir / "missing").string(), Access::read), IoError);
  // Forced: the torch adapter for HDF5 bytes is refused too (forcing never falls back).
  const auto h5 = (dir / "a.h5").string();
  {
    auto f = ckpt::h5::create_file(h5);
    ckpt::write_tensor(f, "/model/w", ckpt::Tensor::from<float>({4}, std::vector<float>{1, 2, 3, 4}));
  }
  CHECK_THROWS_AS(open_storage(h5, Access::read, Format::torch), CorruptInputError);
  CHECK(open_storage(h5, Access::read, Format::hdf5)->format() == Format::hdf5);
}

TEST_CASE("storage: fp8 and bool dtypes have their bit fields", "[inject][unit]") {
  CHECK(BitSpec::parse("exponent").mask_for(ckpt::DType::f8_e4m3) == 0x78);
  CHECK(BitSpec::parse("mantissa").mask_for(ckpt::DType::f8_e4m3) == 0x07);
  CHECK(BitSpec::parse("exponent").mask_for(ckpt::DType::f8_e5m2) == 0x7c);
  CHECK(BitSpec::parse("sign").mask_for(ckpt::DType::f8_e5m2) == 0x80);
  CHECK(BitSpec::parse("exponent").mask_for(ckpt::DType::boolean) == 0);
  CHECK(ckpt::word_to_double(ckpt::DType::f8_e4m3, 0x7e) == 448.0);
  CHECK(std::isnan(ckpt::word_to_double(ckpt::DType::f8_e4m3, 0x7f)));
  CHECK(ckpt::word_to_double(ckpt::DType::f8_e5m2, 0x7b) == 57344.0);
  CHECK(std::isinf(ckpt::word_to_double(ckpt::DType::f8_e5m2, 0x7c)));
  CHECK(ckpt::word_to_double(ckpt::DType::f8_e4m3, 0x38) == 1.0);
  CHECK(ckpt::double_to_word(ckpt::DType::f8_e4m3, 1.0) == 0x38);
  CHECK(ckpt::double_to_word(ckpt::DType::f8_e5m2, -2.0) == 0xc0);
  CHECK(ckpt::dtype_from_name("f8_e4m3") == ckpt::DType::f8_e4m3);
  CHECK(ckpt::dtype_from_name("bool") == ckpt::DType::boolean);
  // OCP E8M0 (MX scales): all eight bits are exponent, 2^(e-127), 0xFF NaN; no sign, no mantissa.
  CHECK(BitSpec::parse("exponent").mask_for(ckpt::DType::f8_e8m0) == 0xff);
  CHECK(BitSpec::parse("sign").mask_for(ckpt::DType::f8_e8m0) == 0);
  CHECK(BitSpec::parse("mantissa").mask_for(ckpt::DType::f8_e8m0) == 0);
  CHECK(BitSpec::parse("exponent-msb").mask_for(ckpt::DType::f8_e8m0) == 0x80);
  CHECK(ckpt::word_to_double(ckpt::DType::f8_e8m0, 127) == 1.0);
  CHECK(ckpt::word_to_double(ckpt::DType::f8_e8m0, 0) == std::ldexp(1.0, -127));
  CHECK(ckpt::word_to_double(ckpt::DType::f8_e8m0, 254) == std::ldexp(1.0, 127));
  CHECK(std::isnan(ckpt::word_to_double(ckpt::DType::f8_e8m0, 0xff)));
  CHECK(ckpt::double_to_word(ckpt::DType::f8_e8m0, 0.25) == 125);
  CHECK(ckpt::double_to_word(ckpt::DType::f8_e8m0, 3.0) == 128);   // a tie between 2 and 4: the even code
  CHECK(ckpt::double_to_word(ckpt::DType::f8_e8m0, 2.9) == 128);
  CHECK(ckpt::double_to_word(ckpt::DType::f8_e8m0, 2.5) == 128);   // nearer 2 (distance 0.5) than 4 (1.5)
  CHECK(ckpt::double_to_word(ckpt::DType::f8_e8m0, 6.0) == 130);   // tie between 4 (code 129) and 8 (130)
  CHECK(ckpt::double_to_word(ckpt::DType::f8_e8m0, -1.0) == 0);
  CHECK(ckpt::dtype_from_name("float8_e8m0fnu") == ckpt::DType::f8_e8m0);
  CHECK(!ckpt::dtype_has_sign(ckpt::DType::f8_e8m0));
  CHECK(ckpt::dtype_has_sign(ckpt::DType::f8_e4m3));
}

TEST_CASE("storage: the FNUZ fp8 dtypes decode PyTorch's bytes", "[inject][unit]") {
  // The bytes PyTorch 2.11 wrote for these values (tests/inject/formats/torch_files/.../manifest.json).
  const double values[] = {0.0, 0.25, -0.5, 1.0, -1.5, 2.0, 3.5, -4.0, 7.0, -0.25, 0.75, 6.0};
  const std::uint8_t e4m3fnuz[] = {0x00, 0x30, 0xb8, 0x40, 0xc4, 0x48, 0x4e, 0xd0, 0x56, 0xb0, 0x3c, 0x54};
  const std::uint8_t e5m2fnuz[] = {0x00, 0x38, 0xbc, 0x40, 0xc2, 0x44, 0x47, 0xc8, 0x4b, 0xb8, 0x3e, 0x4a};
  for (std::size_t i = 0; i < 12; ++i) {
    CHECK(ckpt::word_to_double(ckpt::DType::f8_e4m3fnuz, e4m3fnuz[i]) == values[i]);
    CHECK(ckpt::word_to_double(ckpt::DType::f8_e5m2fnuz, e5m2fnuz[i]) == values[i]);
    CHECK(ckpt::double_to_word(ckpt::DType::f8_e4m3fnuz, values[i]) == e4m3fnuz[i]);
    CHECK(ckpt::double_to_word(ckpt::DType::f8_e5m2fnuz, values[i]) == e5m2fnuz[i]);
  }
  for (const auto t : {ckpt::DType::f8_e4m3fnuz, ckpt::DType::f8_e5m2fnuz}) {
    CHECK(std::isnan(ckpt::word_to_double(t, 0x80)));  // the only NaN; no negative zero
    CHECK(ckpt::double_to_word(t, -0.0) == 0);
    CHECK(ckpt::double_to_word(t, -1e-30) == 0);  // rounds to zero: +0, never 0x80
    CHECK(ckpt::double_to_word(t, std::nan("")) == 0x80);
    CHECK(ckpt::double_to_word(t, 1e9) == 0x80);  // no infinity: beyond the largest finite is NaN
    CHECK(ckpt::dtype_has_sign(t));
    CHECK(BitSpec::parse("sign").mask_for(t) == 0x80);
  }
  CHECK(ckpt::word_to_double(ckpt::DType::f8_e4m3fnuz, 0x7f) == 240.0);  // exponent 1111 is finite
  CHECK(ckpt::word_to_double(ckpt::DType::f8_e4m3fnuz, 0x01) == std::ldexp(1.0, -10));
  CHECK(ckpt::word_to_double(ckpt::DType::f8_e5m2fnuz, 0x7f) == 57344.0);
  CHECK(ckpt::word_to_double(ckpt::DType::f8_e5m2fnuz, 0x01) == std::ldexp(1.0, -17));
  CHECK(BitSpec::parse("exponent").mask_for(ckpt::DType::f8_e4m3fnuz) == 0x78);
  CHECK(BitSpec::parse("mantissa").mask_for(ckpt::DType::f8_e5m2fnuz) == 0x03);
  CHECK(ckpt::dtype_from_name("float8_e4m3fnuz") == ckpt::DType::f8_e4m3fnuz);
  CHECK(ckpt::dtype_from_name("f8_e5m2fnuz") == ckpt::DType::f8_e5m2fnuz);
}

TEST_CASE("storage: bytes shared by several tensors count once; roles from the adapter", "[inject][unit]") {
  auto tensor = [](std::string name, TensorRole role, std::string shared_with) {
    Tensor t;
    t.info.path = std::move(name);
    t.info.dtype = ckpt::DType::f32;
    t.info.shape = {10};
    t.info.logical_bytes = t.info.stored_bytes = 40;
    t.role = role;
    t.shared_with = std::move(shared_with);
    return t;
  };
  const std::vector<Tensor> ts = {tensor("/model/embed.weight", TensorRole::model, ""),
                                  tensor("/model/lm_head.weight", TensorRole::model, "/model/embed.weight"),
                                  tensor("/state/exp_avg", TensorRole::optimizer, "")};
  const auto all = select(ts, {});
  REQUIRE(all.size() == 2);
  CHECK(all[0].info.path == "/model/embed.weight");
  CHECK(all[1].info.path == "/state/exp_avg");
  SelectOptions opt;
  opt.role = Role::optimizer;
  const auto opt_only = select(ts, opt);
  REQUIRE(opt_only.size() == 1);  // the role the adapter gave, not a path under /optimizer/
  CHECK(opt_only[0].info.path == "/state/exp_avg");
}

TEST_CASE("storage: the HDF5 adapter's extents hold the dataset's bytes", "[inject][unit]") {
  TempDir dir("resil-storage");
  const auto p = (dir / "c.h5").string();
  const std::vector<float> v = {1.5f, -2.25f, 3.0f, 1e30f, -0.0f, 7.0f};
  {
    auto f = ckpt::h5::create_file(p);
    ckpt::write_tensor(f, "/model/w", ckpt::Tensor::from<float>({2, 3}, v));
    ckpt::write_tensor(f, "/model/g", ckpt::Tensor::from<float>({2, 3}, v), ckpt::WriteOptions{{1, 3}, 4, false});
  }
  const auto st = open_storage(p, Access::read);
  const auto ts = st->tensors();
  REQUIRE(ts.size() == 2);
  CHECK(ts[0].info.path == "/model/g");
  CHECK(ts[0].staged);  // gzip chunks
  CHECK(ts[1].role == TensorRole::model);
  CHECK(st->extents("/model/g").empty());
  const auto ext = st->extents("/model/w");
  REQUIRE(ext.size() == 1);
  REQUIRE(ext[0].length == v.size() * 4);
  std::ifstream in(p, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(ext[0].offset));
  std::vector<float> got(v.size());
  in.read(reinterpret_cast<char*>(got.data()), static_cast<std::streamsize>(ext[0].length));
  CHECK(got == v);
  st->close();
}
