// load_mnist reads only what it needs (the first `limit` samples), and keep_mnist_decoded keeps a
// split decoded in the process (ckpt-train serve) while the file stays the same file.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "resil/core/error.hpp"
#include "resil/data/idx.hpp"
#include "resil_test/tmpdir.hpp"

namespace fs = std::filesystem;
using namespace resil::data;

namespace {
void write_set(const fs::path& d, const char* prefix, std::vector<std::uint8_t> labels) {
  const auto n = static_cast<std::uint32_t>(labels.size());
  IdxArray img{{n, 1, 2}, {}};
  for (std::uint32_t i = 0; i < n * 2; ++i) img.data.push_back(static_cast<std::uint8_t>(i));
  write_idx(d / (std::string(prefix) + "-images-idx3-ubyte"), img);
  write_idx(d / (std::string(prefix) + "-labels-idx1-ubyte"), IdxArray{{n}, std::move(labels)});
}
}  // namespace

TEST_CASE("load_mnist with a limit decompresses only the samples it keeps", "[data][unit]") {
  const resil::test::TempDir tmp{"mnist_prefix"};
  const fs::path d = tmp.path();
  write_set(d, "t10k", {1, 2, 3, 4});
  // Cut the label file after its second label: a full read fails, a read of 2 samples does not.
  fs::resize_file(d / "t10k-labels-idx1-ubyte", 8 + 2);
  CHECK_THROWS_AS(load_mnist(d, Split::test), resil::CorruptInputError);
  const ImageSet s = load_mnist(d, Split::test, 2);
  CHECK(s.n == 2);
  CHECK(s.labels == std::vector<std::int32_t>{1, 2});
  // The declared counts are still compared: 4 images against 3 labels is refused, limit or not.
  write_set(d, "train", {0, 0, 0, 0});
  write_idx(d / "train-labels-idx1-ubyte", IdxArray{{3}, {0, 0, 0}});
  CHECK_THROWS_AS(load_mnist(d, Split::train, 1), resil::CorruptInputError);
  std::uint32_t declared = 0;
  const IdxArray a = read_idx_prefix(d / "train-images-idx3-ubyte", 3, &declared);
  CHECK(declared == 4);
  CHECK(a.dims == std::vector<std::uint32_t>{3, 1, 2});
  CHECK(a.data.size() == 6);
}

TEST_CASE("keep_mnist_decoded serves loads from memory while the files are unchanged", "[data][unit]") {
  const resil::test::TempDir tmp{"mnist_kept"};
  const fs::path d = tmp.path();
  write_set(d, "train", {5, 6, 7});
  write_set(d, "t10k", {1, 2, 3});
  keep_mnist_decoded(d);
  const fs::path lbl = d / "t10k-labels-idx1-ubyte";
  struct stat before {};
  REQUIRE(::stat(lbl.c_str(), &before) == 0);
  {  // the same bytes count, rewritten in place, with the old modification time: still the kept copy
    std::fstream f(lbl, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    f.put(9);
  }
  const timespec times[2] = {before.st_atim, before.st_mtim};
  REQUIRE(::utimensat(AT_FDCWD, lbl.c_str(), times, 0) == 0);
  CHECK(load_mnist(d, Split::test).labels == std::vector<std::int32_t>{1, 2, 3});
  CHECK(load_mnist(d, Split::test, 2).labels == std::vector<std::int32_t>{1, 2});
  CHECK(load_mnist(d, Split::train, 1).labels == std::vector<std::int32_t>{5});
  // Another modification time: another file as far as the copy knows, read again.
  const timespec later[2] = {before.st_atim, {before.st_mtim.tv_sec + 10, 0}};
  REQUIRE(::utimensat(AT_FDCWD, lbl.c_str(), later, 0) == 0);
  CHECK(load_mnist(d, Split::test).labels == std::vector<std::int32_t>{9, 2, 3});
}
