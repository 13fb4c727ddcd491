// .npy header literals built here: every version, the dtypes, byte orders and refusals.
#include <catch2/catch.hpp>

#include <string>

#include "resil/core/error.hpp"
#include "resil/inject/formats/npy.hpp"

namespace f = resil::inject::formats;

namespace {

std::string npy(const std::string& dict, unsigned major = 1, std::size_t data = 0) {
  std::string h = dict;
  const std::size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string s = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  for (std::size_t i = 0; i < prefix - 8; ++i) s += static_cast<char>((h.size() >> (8 * i)) & 0xFF);
  return s + h + std::string(data, '\0');
}
std::string error_of(const std::string& s) {
  try {
    (void)f::parse_npy(f::bytes_of(s.data(), s.size()));
  } catch (const resil::CorruptInputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("npy: headers of every version", "[formats][unit]") {
  const unsigned major = GENERATE(1u, 2u, 3u);
  const std::string s = npy("{'descr': '>i4', 'fortran_order': True, 'shape': (2, 3L), }", major, 24);
  const auto h = f::parse_npy(f::bytes_of(s.data(), s.size()));
  CHECK(h.major == major);
  CHECK(h.dtype == f::DType::i32);
  CHECK(h.big_endian);
  CHECK(h.fortran_order);
  CHECK(h.shape == std::vector<std::uint64_t>{2, 3});
  CHECK(h.data_offset % 64 == 0);
  CHECK(h.data_offset + 24 == s.size());
  CHECK(h.data_size == 24);
  const std::string scalar = npy("{\"shape\": (), \"fortran_order\": False, \"descr\": \"|b1\"}", 1, 1);
  CHECK(f::parse_npy(f::bytes_of(scalar.data(), scalar.size())).data_size == 1);
}

TEST_CASE("npy: refusals", "[formats][unit]") {
  CHECK_THAT(error_of(npy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", 1, 8)), Catch::Contains("unsupported dtype '<c8'"));
  CHECK_THAT(error_of(npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", 1, 4)), Catch::Contains("structured dtype"));
  CHECK_THAT(error_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 1, 4)), Catch::Contains("4 data bytes for a shape and dtype of 8"));
  CHECK_THAT(error_of(npy("{'descr': '<f4', 'shape': (2,), }", 1, 8)), Catch::Contains("lacks"));
  CHECK_THAT(error_of(npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 1, 8)), Catch::Contains("repeated key 'descr'"));
  CHECK_THAT(error_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 1, 8)), Catch::Contains("not a non-negative integer"));
  CHECK_THAT(error_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }")), Catch::Contains("overflows"));
  CHECK_THAT(error_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }")), Catch::Contains("shape overflows"));
  CHECK_THAT(error_of(npy("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }", 1, 4)), Catch::Contains("fortran_order"));
  CHECK_THAT(error_of(npy("{}", 4)), Catch::Contains("unsupported version 4"));
  CHECK_THAT(error_of("\x93NUMPZ\x01\x00"), Catch::Contains("bad magic"));
  std::string big = std::string("\x93NUMPY\x02\x00", 8) + std::string("\x00\x00\x20\x00", 4);
  CHECK_THAT(error_of(big), Catch::Contains("exceeds the 1 MiB limit"));
  const std::string ok = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 1, 4);
  for (std::size_t n = 0; n < ok.size(); ++n) CHECK_THROWS_AS(f::parse_npy(f::bytes_of(ok.data(), n)), resil::CorruptInputError);
}
