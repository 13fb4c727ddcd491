#include <catch2/catch.hpp>

#include "resil/core/error.hpp"
#include "resil/inject/select_expr.hpp"

using namespace resil;
using namespace resil::inject;
using ckpt::DType;

TEST_CASE("globs match dataset paths segment-wise", "[inject][unit]") {
  CHECK(Glob("/model/*").matches("/model/fc1.weight"));
  CHECK_FALSE(Glob("/model/*").matches("/model/block/fc1.weight"));
  CHECK(Glob("/model/**").matches("/model/block/fc1.weight"));
  CHECK(Glob("*.weight").matches("/model/block/fc1.weight"));
  CHECK_FALSE(Glob("*.weight").matches("/model/block/fc1.bias"));
  CHECK(Glob("**/bn*/num_batches_tracked").matches("/a/b/bn1/num_batches_tracked"));
  CHECK(Glob("/**/x").matches("/x"));
  CHECK(Glob("fc?.weight").matches("/model/fc1.weight"));
  CHECK_FALSE(Glob("fc?.weight").matches("/model/fc12.weight"));
  CHECK(Glob("fc[0-9].*").matches("/m/fc3.bias"));
  CHECK_FALSE(Glob("fc[!0-9].*").matches("/m/fc3.bias"));
  CHECK(Glob("a\\*b").matches("/a*b"));
  CHECK_FALSE(Glob("a\\*b").matches("/axb"));
  CHECK_FALSE(Glob("model").matches("/mymodel"));
  CHECK_THROWS_AS(Glob("fc[0-9"), UsageError);
  CHECK_THROWS_AS(Glob("abc\\"), UsageError);
  CHECK_THROWS_AS(Glob(""), UsageError);
  // Hostile patterns stay polynomial.
  const std::string path(4000, 'a');
  CHECK_FALSE(Glob("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b").matches("/" + path));
}

TEST_CASE("bit specs resolve to stored bits per dtype, bit 0 = LSB", "[inject][unit]") {
  CHECK(BitSpec().mask_for(DType::f32) == 0xffffffffull);
  CHECK(BitSpec::parse("sign").mask_for(DType::f32) == 0x80000000ull);
  CHECK(BitSpec::parse("exponent").mask_for(DType::f32) == 0x7f800000ull);
  CHECK(BitSpec::parse("exponent-msb").mask_for(DType::f32) == 0x40000000ull);
  CHECK(BitSpec::parse("mantissa").mask_for(DType::f32) == 0x007fffffull);
  CHECK(BitSpec::parse("mantissa-high").mask_for(DType::f32) == 0x007ff800ull);  // top 12 of 23
  CHECK(BitSpec::parse("exponent").mask_for(DType::f64) == 0x7ff0000000000000ull);
  CHECK(BitSpec::parse("exponent").mask_for(DType::f16) == 0x7c00ull);
  CHECK(BitSpec::parse("exponent").mask_for(DType::bf16) == 0x7f80ull);
  CHECK(BitSpec::parse("mantissa").mask_for(DType::bf16) == 0x7full);
  CHECK(BitSpec::parse("exponent").mask_for(DType::i32) == 0);
  CHECK(BitSpec::parse("sign").mask_for(DType::i8) == 0x80);
  CHECK(BitSpec::parse("sign").mask_for(DType::u8) == 0);
  CHECK(BitSpec::parse("0-3,7").mask_for(DType::u8) == 0x8f);
  CHECK(BitSpec::parse("0-3, 60-63").mask_for(DType::f32) == 0xf);  // clipped to the width
  CHECK(BitSpec::parse("sign,lsb").mask_for(DType::f64) == 0x8000000000000001ull);
  CHECK_THROWS_AS(BitSpec::parse("64"), UsageError);
  CHECK_THROWS_AS(BitSpec::parse("7-3"), UsageError);
  CHECK_THROWS_AS(BitSpec::parse("expo"), UsageError);
  CHECK_THROWS_AS(BitSpec::parse("1,,2"), UsageError);
  CHECK_THROWS_AS(BitSpec::parse(""), UsageError);
}
