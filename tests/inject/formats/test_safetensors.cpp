// safetensors headers built here: the checks on offsets, sizes and names, and the JSON reader's
// strictness (escapes, duplicates, numbers beyond 64 bits).
#include <catch2/catch.hpp>

#include <string>

#include "resil/core/error.hpp"
#include "resil/inject/formats/safetensors.hpp"

namespace f = resil::inject::formats;

namespace {

std::string file(const std::string& header, std::size_t data_bytes, std::uint64_t lie = 0) {
  std::string s;
  const std::uint64_t n = header.size() + lie;
  for (int i = 0; i < 8; ++i) s += static_cast<char>((n >> (8 * i)) & 0xFF);
  return s + header + std::string(data_bytes, '\x01');
}
std::string error_of(const std::string& s) {
  try {
    (void)f::parse_safetensors(f::bytes_of(s.data(), s.size()));
  } catch (const resil::CorruptInputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("safetensors: tensors, offsets from the file start, metadata", "[formats][unit]") {
  const std::string h = R"({"__metadata__":{"k":"v\u00e9"},"b\"q":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]},)"
                        R"("a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}}  )";
  const std::string s = file(h, 12);
  const auto st = f::parse_safetensors(f::bytes_of(s.data(), s.size()));
  REQUIRE(st.tensors.size() == 2);
  CHECK(st.tensors[0].name == "b\"q");
  CHECK(st.tensors[0].dtype == f::DType::bf16);
  CHECK(st.tensors[0].offset == 8 + h.size() + 8);
  CHECK(st.tensors[1].shape == std::vector<std::uint64_t>{1, 2});
  CHECK(st.metadata.at(0).second == "v\xc3\xa9");
}

TEST_CASE("safetensors: refusals", "[formats][unit]") {
  const std::string a = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  CHECK_THAT(error_of(file("{" + a + "}", 8, 100)), Catch::Contains("beyond the end of the file"));
  CHECK_THAT(error_of(file("{" + a + "}", 7)), Catch::Contains("outside the 7 data bytes"));
  CHECK_THAT(error_of(file("{" + a + "}", 9)), Catch::Contains("1 bytes after the last tensor"));
  CHECK_THAT(error_of(file("{" + a + "," + a + "}", 8)), Catch::Contains("duplicate key 'a'"));
  CHECK_THAT(error_of(file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)), Catch::Contains("8 bytes for a shape and dtype of 12"));
  CHECK_THAT(error_of(file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})", 8)),
             Catch::Contains("overlaps"));
  CHECK_THAT(error_of(file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12)), Catch::Contains("hole of 4 bytes"));
  CHECK_THAT(error_of(file(R"({"a":{"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,8]}})", 8)),
             Catch::Contains("not a non-negative integer"));
  CHECK_THAT(error_of(file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8)), Catch::Contains("overflows"));
  CHECK_THAT(error_of(file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", 8)), Catch::Contains("unknown key 'x'"));
  CHECK_THAT(error_of(file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", 8)), Catch::Contains("unexpected end of JSON"));
  CHECK_THAT(error_of(file(R"({"a":"\ud800"})", 0)), Catch::Contains("unpaired surrogate"));
  // RFC 8259: JSON text is UTF-8. Bytes that are not (a lone 0xff, an overlong '/', a surrogate,
  // a cut sequence) are refused where they are; valid multi-byte names are kept.
  for (const std::string bad : {"\xff", "\xc0\xaf", "\xed\xa0\x80", "\xe2\x82"})
    CHECK_THAT(error_of(file("{\"w" + bad + "\":" + a.substr(4) + "}", 8)), Catch::Contains("string is not valid UTF-8") && Catch::Contains("at offset 11"));
  const std::string utf8_name = file("{\"w\xc3\xa9\":" + a.substr(4) + "}", 8);
  CHECK(f::parse_safetensors(f::bytes_of(utf8_name.data(), utf8_name.size())).tensors.at(0).name == "w\xc3\xa9");
  CHECK_THAT(error_of(file(std::string(200, '[') , 0)), Catch::Contains("header does not start with '{'"));
  CHECK_THAT(error_of(file("{\"a\":" + std::string(100, '[') + std::string(100, ']') + "}", 0)), Catch::Contains("nested deeper than 64"));
  CHECK_THAT(error_of(std::string("\x01\x02", 2)), Catch::Contains("truncated header length"));
  const std::string ok = file("{" + a + "}", 8);
  for (std::size_t n = 0; n < ok.size(); ++n) CHECK_THROWS_AS(f::parse_safetensors(f::bytes_of(ok.data(), n)), resil::CorruptInputError);
}

TEST_CASE("safetensors: every dtype tag of the format is recognised; packed ones fill whole bytes", "[formats][unit]") {
  struct Tag { const char* name; f::DType dtype; unsigned count, bytes; bool opaque; };
  const Tag tags[] = {{"F64", f::DType::f64, 1, 8, false}, {"F32", f::DType::f32, 1, 4, false}, {"F16", f::DType::f16, 1, 2, false},
                      {"BF16", f::DType::bf16, 1, 2, false}, {"F8_E4M3", f::DType::f8_e4m3, 1, 1, false},
                      {"F8_E5M2", f::DType::f8_e5m2, 1, 1, false}, {"F8_E8M0", f::DType::f8_e8m0, 1, 1, false},
                      {"F8_E4M3FNUZ", f::DType::f8_e4m3fnuz, 1, 1, false}, {"F8_E5M2FNUZ", f::DType::f8_e5m2fnuz, 1, 1, false},
                      {"I64", f::DType::i64, 1, 8, false}, {"I32", f::DType::i32, 1, 4, false}, {"I16", f::DType::i16, 1, 2, false},
                      {"I8", f::DType::i8, 1, 1, false}, {"U64", f::DType::u64, 1, 8, false}, {"U32", f::DType::u32, 1, 4, false},
                      {"U16", f::DType::u16, 1, 2, false}, {"U8", f::DType::u8, 1, 1, false}, {"BOOL", f::DType::boolean, 1, 1, false},
                      {"F4", f::DType::f4, 6, 3, true}, {"F6_E2M3", f::DType::f6_e2m3, 4, 3, true},
                      {"F6_E3M2", f::DType::f6_e3m2, 8, 6, true}, {"C64", f::DType::c64, 2, 16, true}};
  for (const auto& t : tags) {
    INFO(t.name);
    const std::string h = std::string(R"({"a":{"dtype":")") + t.name + R"(","shape":[)" + std::to_string(t.count) + R"(],"data_offsets":[0,)" +
                          std::to_string(t.bytes) + "]}}";
    const std::string s = file(h, t.bytes);
    const auto st = f::parse_safetensors(f::bytes_of(s.data(), s.size()));
    REQUIRE(st.tensors.size() == 1);
    CHECK(st.tensors[0].dtype == t.dtype);
    CHECK(st.tensors[0].size == t.bytes);
    CHECK(f::dtype_opaque(t.dtype) == t.opaque);
    CHECK(f::dtype_name(t.dtype) == t.name);
  }
  CHECK_THAT(error_of(file(R"({"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 2)), Catch::Contains("12 bits of F4 elements do not fill whole bytes"));
  CHECK_THAT(error_of(file(R"({"a":{"dtype":"C128","shape":[1],"data_offsets":[0,16]}})", 16)), Catch::Contains("unsupported dtype 'C128'"));
  // torch's float4_e2m1fn_x2 has a DType of its own (a byte per element) but is no safetensors tag.
  CHECK_THAT(error_of(file(R"({"a":{"dtype":"F4_E2M1FN_X2","shape":[1],"data_offsets":[0,1]}})", 1)), Catch::Contains("unsupported dtype 'F4_E2M1FN_X2'"));
}
