// The pickle subset reader and the torch state walk on pickles built here opcode by opcode:
// the shapes torch.save writes (typed v2, untyped v3, parameters), then refusals: names outside
// the allow-list, opcodes outside the subset, cycles, exponential sharing, lying tensors.
#include <catch2/catch.hpp>

#include <string>

#include "resil/core/error.hpp"
#include "resil/inject/formats/pickle.hpp"
#include "resil/inject/formats/torch.hpp"

namespace f = resil::inject::formats;

namespace {

// Opcode spellings (pickletools): appended one by one so no hex escape swallows a following byte.
struct P {
  std::string s = std::string("\x80\x02");
  P& op(char c) { s += c; return *this; }
  P& str(const std::string& v) {
    s += 'X';
    for (int i = 0; i < 4; ++i) s += static_cast<char>((v.size() >> (8 * i)) & 0xFF);
    s += v;
    return *this;
  }
  P& k(unsigned v) { s += 'K'; s += static_cast<char>(v); return *this; }
  P& global(const std::string& m, const std::string& n) { s += 'c' + m + '\n' + n + '\n'; return *this; }
  P& put(unsigned i) { s += 'q'; s += static_cast<char>(i); return *this; }
  P& get(unsigned i) { s += 'h'; s += static_cast<char>(i); return *this; }
  // _rebuild_tensor_v2((storage pid), offset, size, stride, False, OrderedDict()) with 2-d size/stride
  P& tensor(const std::string& cls, const std::string& key, unsigned numel, unsigned offset, unsigned rows, unsigned cols) {
    global("torch._utils", "_rebuild_tensor_v2").op('(').op('(').str("storage").global("torch", cls).str(key).str("cpu").k(numel).op('t').op('Q');
    k(offset).k(rows).k(cols).op('\x86').k(cols).k(1).op('\x86').op('\x89').global("collections", "OrderedDict").op(')').op('R').op('t').op('R');
    return *this;
  }
  f::Bytes bytes() const { return f::bytes_of(s.data(), s.size()); }
};

std::string error_of(const P& p) {
  try {
    (void)f::torch_state(f::parse_pickle(p.bytes()));
  } catch (const resil::CorruptInputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("pickle: a state_dict of typed-storage tensors, shared storages, scalars", "[formats][unit]") {
  P p;
  p.op('}').op('(').str("model").global("collections", "OrderedDict").op(')').op('R').op('(');
  p.str("fc.weight").tensor("FloatStorage", "0", 6, 0, 2, 3).str("tied").tensor("FloatStorage", "0", 6, 3, 1, 3);
  p.str("bn.num_batches_tracked").tensor("LongStorage", "1", 1, 0, 1, 1).op('u');
  p.str("epoch").op('\x8a').op('\x02').op('\x10').op('\x27');  // LONG1 10000
  p.str("lr").op('G') .s += std::string("\x3f\x50\x62\x4d\xd2\xf1\xa9\xfc", 8);
  p.op('u').op('.');
  const auto st = f::torch_state(f::parse_pickle(p.bytes()));
  REQUIRE(st.tensors.size() == 3);
  CHECK(st.tensors[0].name == "model/fc.weight");
  CHECK(st.tensors[0].role == f::Role::model);
  CHECK(st.tensors[0].dtype == f::DType::f32);
  CHECK(st.tensors[0].shape == std::vector<std::int64_t>{2, 3});
  CHECK(st.tensors[1].storage_key == "0");
  CHECK(st.tensors[1].storage_offset == 3);
  CHECK(st.tensors[2].counter);
  CHECK(st.tensors[2].dtype == f::DType::i64);
  CHECK(st.storages.size() == 2);
  REQUIRE(st.scalars.size() == 2);
  CHECK(st.scalars[0].name == "epoch");
  CHECK(st.scalars[0].integer == 10000);
  CHECK(st.scalars[1].real == Approx(0.001));
}

TEST_CASE("pickle: untyped storage with a dtype (_rebuild_tensor_v3) and parameters", "[formats][unit]") {
  P p;
  p.op('}').op('(').str("w8");
  p.global("torch._utils", "_rebuild_tensor_v3").op('(').op('(').str("storage").global("torch", "UntypedStorage").str("7").str("cpu").k(12).op('t').op('Q');
  p.k(2).k(10).op('\x85').k(1).op('\x85').op('\x89').op('}').global("torch", "float8_e4m3fn").op('t').op('R');
  p.str("p").global("torch._utils", "_rebuild_parameter").op('(').tensor("HalfStorage", "3", 4, 0, 2, 2).op('\x88').op('}').op('t').op('R');
  p.op('u').op('.');
  const auto st = f::torch_state(f::parse_pickle(p.bytes()));
  REQUIRE(st.tensors.size() == 2);
  CHECK(st.tensors[0].dtype == f::DType::f8_e4m3);
  CHECK(st.tensors[0].storage_offset == 2);
  CHECK(st.storages[0].dtype == f::DType::u8);
  CHECK(st.tensors[1].dtype == f::DType::f16);
  CHECK(st.tensors[1].requires_grad);
}

TEST_CASE("pickle: refusals name what was found and where", "[formats][unit]") {
  CHECK_THAT(error_of(P().global("posix", "system").str("touch x").op('\x85').op('R').op('.')),
             Catch::Contains("GLOBAL 'posix.system' is not in the allowed subset") && Catch::Contains("at offset 2"));
  CHECK_THAT(error_of(P().global("torch.storage", "_load_from_bytes")), Catch::Contains("torch.storage._load_from_bytes"));
  CHECK_THAT(error_of(P().op('N').op('0').op('.')), Catch::Contains("opcode 0x30 ('0') outside the supported subset at offset 3"));
  CHECK_THAT(error_of(P().op('\x8f')), Catch::Contains("opcode 0x8f"));
  CHECK_THAT(error_of(P().global("torch", "FloatStorage").op(')').op('R').op('.')), Catch::Contains("not a function"));
  CHECK_THAT(error_of(P().op('N').op('}').op('b').op('.')), Catch::Contains("BUILD of something that is not an OrderedDict"));
  CHECK_THAT(error_of(P().get(3)), Catch::Contains("memo key 3 was never stored"));
  CHECK_THAT(error_of(P().op('N').op('N').op('.')), Catch::Contains("STOP with 2 values"));
  CHECK_THAT(error_of(P().op('N').op('.').op('N')), Catch::Contains("1 bytes after STOP"));
  CHECK_THAT(error_of(P().op('(').op('a')), Catch::Contains("stack underflow"));
  CHECK_THAT(error_of(P().op('N').op('}').op('(').op('N').op('u').op('.')), Catch::Contains("odd number"));
  CHECK_THAT(error_of(P().op('}').str("w").tensor("FloatStorage", "0", 5, 0, 2, 3).op('s').op('.')),
             Catch::Contains("'w': reaches element 5 of storage '0' of 5"));
  CHECK_THAT(error_of(P().op('}').str("a").tensor("FloatStorage", "0", 6, 0, 2, 3).op('s').str("b").tensor("HalfStorage", "0", 6, 0, 2, 3).op('s').op('.')),
             Catch::Contains("storage '0' seen with two types or sizes"));
  SECTION("a list that contains itself") {
    P p;
    p.op(']').put(0).get(0).op('a').op('.');
    CHECK_THAT(error_of(p), Catch::Contains("nesting deeper than 64"));
  }
  SECTION("exponential sharing") {
    P p;
    p.op(']').put(0).op(']').put(1).op('a');
    for (unsigned i = 1; i < 40; ++i) p.op('(').get(i).get(i).op('l').put(i + 1).op('a');  // outer.append([Li, Li])
    p.op('.');
    CHECK_THAT(error_of(p), Catch::Contains("more than 1048576 values"));
  }
}

TEST_CASE("pickle: every truncation of a valid pickle is refused", "[formats][unit]") {
  P p;
  p.op('}').str("w").tensor("FloatStorage", "0", 6, 0, 2, 3).op('s').op('.');
  REQUIRE(error_of(p).empty());
  for (std::size_t n = 0; n < p.s.size(); ++n)
    CHECK_THROWS_AS(f::parse_pickle(f::bytes_of(p.s.data(), n)), resil::CorruptInputError);
}
