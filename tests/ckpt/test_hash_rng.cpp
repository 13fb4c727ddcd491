#include <catch2/catch.hpp>

#include <fstream>

#include "resil/ckpt/hash.hpp"
#include "resil/core/rng.hpp"
#include "resil_test/tmpdir.hpp"

using namespace resil;

TEST_CASE("hashes match published test vectors", "[ckpt][unit]") {
  CHECK(ckpt::hex_u64(ckpt::xxh64({})) == "ef46db3751d8e999");  // XXH64("") with seed 0
  const std::string abc = "abc";
  CHECK(ckpt::sha256_hex(std::as_bytes(std::span(abc))) ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  test::TempDir dir;
  std::ofstream(dir / "f") << "abc";
  CHECK(ckpt::sha256_file(dir / "f") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  ckpt::Xxh64 h;
  h.update(std::as_bytes(std::span(abc)).first(1));
  h.update(std::as_bytes(std::span(abc)).subspan(1));
  CHECK(h.digest() == ckpt::xxh64(std::as_bytes(std::span(abc))));
}

TEST_CASE("Philox4x32-10 matches the Random123 known-answer vectors", "[core][unit]") {
  // Known-answer tests from Random123's kat_vectors: philox4x32 10 rounds.
  auto r = philox4x32({0, 0, 0, 0}, {0, 0});
  CHECK(r == std::array<std::uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  r = philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff});
  CHECK(r == std::array<std::uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  r = philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0});
  CHECK(r == std::array<std::uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("counter-based streams are pure functions of (seed, stream, index)", "[core][unit]") {
  Rng a(7, 3), b(7, 3), c(7, 4), d(8, 3);
  std::vector<std::uint64_t> xa, xb;
  for (int i = 0; i < 100; ++i) {
    xa.push_back(a());
    xb.push_back(b());
  }
  CHECK(xa == xb);
  CHECK(Rng::at(7, 3, 50) == xa[50]);
  CHECK(c() != xa[0]);
  CHECK(d() != xa[0]);
  Rng e(7, 3, 50);
  CHECK(e() == xa[50]);
  Rng u(1, 1);
  for (int i = 0; i < 10000; ++i) {
    const auto v = u.below(10);
    REQUIRE(v < 10);
    const double f = u.uniform();
    REQUIRE((f >= 0.0 && f < 1.0));
  }
  CHECK(derive_seed(5, 1) != derive_seed(5, 2));
  CHECK(derive_seed(5, 1) == derive_seed(5, 1));
}

namespace {
// Bytes (i * 31 + 7) mod 256, i = 0..n-1: the files the known answers below were computed from.
std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 31 + 7) & 0xff);
  return s;
}
void write(const std::filesystem::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }
void put(const std::filesystem::path& p, std::uint64_t off, const std::string& bytes) {
  std::fstream f(p, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(static_cast<std::streamoff>(off));
  f << bytes;
}
}  // namespace

// Known answers from tests/apps/ckpt-flip/sample_sha256.py, the definition written again with
// Python's hashlib on the same files: whole files (empty, 1 byte, not a multiple of the block, the
// largest hashed whole) and sampled ones (one byte more, an odd size, a sparse 1 TiB file whose
// offsets need 64-bit arithmetic throughout).
TEST_CASE("sample-sha256 matches the independent Python implementation", "[ckpt][unit]") {
  test::TempDir dir;
  write(dir / "empty", "");
  write(dir / "one", "\x5a");
  write(dir / "b4095", pattern(4095));
  write(dir / "whole4m", pattern(std::size_t{4} << 20));
  write(dir / "sampled", pattern((std::size_t{4} << 20) + 1));
  write(dir / "odd", pattern(5'000'003));
  const std::uint64_t size = (std::uint64_t{1} << 40) + 12345, span = size - 2 * 65536 - 4096;
  {
    std::ofstream(dir / "sparse", std::ios::binary);
    std::filesystem::resize_file(dir / "sparse", size);
  }
  put(dir / "sparse", 0, pattern(1000));
  put(dir / "sparse", (65536 + 200 * (span / 255) + 200 * (span % 255) / 255) / 4096 * 4096 + 100, "resil");  // in block 200
  put(dir / "sparse", size - 3, "end");
  CHECK(ckpt::sample_sha256_file(dir / "empty") == "579a064f2bc2599b8da075fe847f9b9f6edad3385f72145abad7a84d77955c0a");
  CHECK(ckpt::sample_sha256_file(dir / "one") == "9d97516b0dc5f74c71665ab50506662cca4ddba3d1816a30b83a848e969578a2");
  CHECK(ckpt::sample_sha256_file(dir / "b4095") == "53fcfc03df1def6eff3807faaeaadbdbf29d06363b563ebc8da5f16a72bfea84");
  CHECK(ckpt::sample_sha256_file(dir / "whole4m") == "ed63519ef3733c2e8edb6e0e9a0cb30454566445d1e4c8f38691b87883305faa");
  CHECK(ckpt::sample_sha256_file(dir / "sampled") == "9d5857700fe0aab7e9abac5c774ad3e40a42021f26eaa9598e8b7dc5e5cb7003");
  CHECK(ckpt::sample_sha256_file(dir / "odd") == "9563d6fc15afb558654d2313ce1e1d08e6d6e608b76940d11cfd41314b7b53e2");
  CHECK(ckpt::sample_sha256_file(dir / "sparse") == "0401a9254b5fd09a77e4e019ed55ae104e8ca47e0b59d9e52d17bcb6fce39572");
  CHECK(ckpt::file_hash(dir / "odd", ckpt::FileHash::sample_sha256) == ckpt::sample_sha256_file(dir / "odd"));
  CHECK(ckpt::file_hash(dir / "odd", ckpt::FileHash::sha256) == ckpt::sha256_file(dir / "odd"));
  CHECK(ckpt::file_hash(dir / "odd", ckpt::FileHash::none).empty());
}

// What the sample sees and what it does not: a file hashed whole changes with any byte; a larger one
// with its size and each sampled byte, not with a byte between two samples (SHA-256 of all of it
// does).
TEST_CASE("sample-sha256 covers its sample and the size, not the bytes between samples", "[ckpt][unit]") {
  test::TempDir dir;
  const auto small = pattern(3'000'000), large = pattern(5'000'003);
  write(dir / "s", small);
  write(dir / "l", large);
  const auto s0 = ckpt::sample_sha256_file(dir / "s"), l0 = ckpt::sample_sha256_file(dir / "l"), l_full = ckpt::sha256_file(dir / "l");
  put(dir / "s", 1'500'000, "\xff");  // any byte of a file hashed whole
  CHECK(ckpt::sample_sha256_file(dir / "s") != s0);
  const std::uint64_t span = 5'000'003 - 2 * 65536 - 4096;
  const std::uint64_t o7 = (65536 + 7 * span / 255) / 4096 * 4096;  // block 7 of the sample
  const auto flip_at = [&](std::uint64_t off) {
    write(dir / "l", large);
    std::string b(1, static_cast<char>(large[off] ^ 0x10));
    put(dir / "l", off, b);
    return std::pair{ckpt::sample_sha256_file(dir / "l"), ckpt::sha256_file(dir / "l")};
  };
  for (const std::uint64_t off : {std::uint64_t{0}, std::uint64_t{65535}, o7, o7 + 4095, std::uint64_t{5'000'003 - 65536}, std::uint64_t{5'000'002}})
    CHECK(flip_at(off).first != l0);
  const auto between = flip_at(o7 + 4096);  // the first byte after block 7: not sampled
  CHECK(between.first == l0);
  CHECK(between.second != l_full);
  write(dir / "l", large + "x");  // one byte longer
  CHECK(ckpt::sample_sha256_file(dir / "l") != l0);
  CHECK(ckpt::parse_file_hash("sample-sha256") == ckpt::FileHash::sample_sha256);
  CHECK(ckpt::file_hash_name(ckpt::FileHash::sha256) == "sha256");
  CHECK(!ckpt::parse_file_hash("xxh3"));
}
