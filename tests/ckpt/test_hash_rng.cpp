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
