#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "resil/core/error.hpp"
#include "resil/data/idx.hpp"

namespace fs = std::filesystem;
using namespace resil::data;

namespace {
fs::path tmpdir(const std::string& name) {
  fs::path d = fs::path(RESIL_TEST_TMP) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}
IdxArray images(std::uint32_t n) {
  IdxArray a{{n, 2, 3}, {}};
  for (std::uint32_t i = 0; i < n * 6; ++i) a.data.push_back(static_cast<std::uint8_t>(i * 7));
  return a;
}
void write_bytes(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }
}  // namespace

TEST_CASE("IDX round trip, plain and gzip", "[data][unit]") {
  const auto d = tmpdir("idx_rt");
  const auto name = GENERATE(std::string("a.idx"), std::string("a.idx.gz"));
  const IdxArray a = images(5);
  write_idx(d / name, a);
  const IdxArray b = read_idx(d / name);
  CHECK(b.dims == a.dims);
  CHECK(b.data == a.data);
}

TEST_CASE("MNIST-format directory loads with limit and scaling", "[data][unit]") {
  const auto d = tmpdir("mnist_dir");
  write_idx(d / "train-images-idx3-ubyte.gz", IdxArray{{3, 1, 2}, {0, 255, 51, 102, 0, 0}});
  write_idx(d / "train-labels-idx1-ubyte", IdxArray{{3}, {9, 0, 4}});
  const ImageSet s = load_mnist(d, Split::train, 2);
  REQUIRE(s.n == 2);
  CHECK(s.dim() == 2);
  CHECK(s.pixels == std::vector<std::uint8_t>{0, 255, 51, 102});
  CHECK((s.value(0) == 0.0f && s.value(1) == 1.0f && s.value(2) == 0.2f && s.value(3) == 0.4f));
  CHECK(s.labels == std::vector<std::int32_t>{9, 0});
  CHECK_THROWS_AS(load_mnist(d, Split::test), resil::IoError);
}

TEST_CASE("Fashion-MNIST from Debian's package loads", "[data][unit]") {
  const ImageSet s = load_mnist(default_fashion_mnist_dir, Split::test);
  CHECK(s.n == 10000);
  CHECK(s.rows == 28);
  CHECK(s.cols == 28);
  std::vector<int> counts(10, 0);
  for (auto l : s.labels) ++counts[static_cast<std::size_t>(l)];
  for (int c : counts) CHECK(c == 1000);  // the test split is balanced
}

TEST_CASE("malformed IDX files give CorruptInputError with a byte offset", "[data][unit]") {
  const auto d = tmpdir("idx_bad");
  SECTION("truncated payload") {
    write_idx(d / "t.idx", images(4));
    const auto full = fs::file_size(d / "t.idx");
    fs::resize_file(d / "t.idx", full - 5);
    try {
      read_idx(d / "t.idx");
      FAIL("no error");
    } catch (const resil::CorruptInputError& e) {
      CHECK_THAT(e.what(), Catch::Contains("t.idx") && Catch::Contains("truncated") && Catch::Contains("byte 35"));
    }
  }
  SECTION("bad magic") {
    write_bytes(d / "m.idx", std::string("\x01\x02\x08\x01\x00\x00\x00\x00", 8));
    CHECK_THROWS_WITH(read_idx(d / "m.idx"), Catch::Contains("bad magic"));
  }
  SECTION("unsupported element type") {
    write_bytes(d / "f.idx", std::string("\x00\x00\x0d\x01\x00\x00\x00\x01\x00\x00\x00\x00", 12));
    CHECK_THROWS_AS(read_idx(d / "f.idx"), resil::CorruptInputError);
    // In hexadecimal, as the 0x says (not "0x13").
    CHECK_THROWS_WITH(read_idx(d / "f.idx"), Catch::Contains("element type 0x0D at byte 2"));
  }
  SECTION("a header claiming more than the payload holds") {
    // 2,000,000 images of 28x28 (1.5 GB) in a file of 7.8 KB: refused as truncated after reading
    // what is there (the memory bound is checked end to end: train_hostile_data_header_claims).
    write_bytes(d / "claim.idx", std::string("\x00\x00\x08\x03\x00\x1e\x84\x80\x00\x00\x00\x1c\x00\x00\x00\x1c", 16) +
                                     std::string(7840, '\0'));
    try {
      read_idx(d / "claim.idx");
      FAIL("no error");
    } catch (const resil::CorruptInputError& e) {
      CHECK_THAT(e.what(), Catch::Contains("claim.idx") && Catch::Contains("expected 1568000000 bytes") && Catch::Contains("byte 7856"));
    }
  }
  SECTION("trailing bytes") {
    write_idx(d / "x.idx", IdxArray{{2}, {1, 2}});
    std::ofstream(d / "x.idx", std::ios::binary | std::ios::app) << "zz";
    CHECK_THROWS_WITH(read_idx(d / "x.idx"), Catch::Contains("trailing bytes") && Catch::Contains("byte 10"));
  }
  SECTION("corrupt gzip stream") {
    write_idx(d / "c.idx.gz", images(50));
    std::fstream f(d / "c.idx.gz", std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(20);
    f.write("\xff\xff\xff\xff\xff\xff", 6);
    f.close();
    CHECK_THROWS_AS(read_idx(d / "c.idx.gz"), resil::CorruptInputError);
  }
  SECTION("missing file is an I/O error") { CHECK_THROWS_AS(read_idx(d / "nope.idx"), resil::IoError); }
  SECTION("image/label count mismatch") {
    write_idx(d / "t10k-images-idx3-ubyte", images(3));
    write_idx(d / "t10k-labels-idx1-ubyte", IdxArray{{2}, {1, 2}});
    CHECK_THROWS_WITH(load_mnist(d, Split::test), Catch::Contains("3 images") && Catch::Contains("2 labels"));
  }
  SECTION("label out of range") {
    write_idx(d / "t10k-images-idx3-ubyte", images(2));
    write_idx(d / "t10k-labels-idx1-ubyte", IdxArray{{2}, {1, 12}});
    CHECK_THROWS_WITH(load_mnist(d, Split::test), Catch::Contains("label 12") && Catch::Contains("byte 9"));
  }
}
