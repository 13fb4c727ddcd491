// The pickle reader and the torch state walk on pickles built here opcode by opcode: the shapes
// torch.save writes (typed v2, untyped v3, parameters), objects outside the tensor subset read as
// opaque values (never called) with the tensors beside and inside them found, then refusals:
// opcodes torch.save never writes (named), cycles, exponential sharing, lying tensors.
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
  P& short_str(const std::string& v) { s += '\x8c'; s += static_cast<char>(v.size()); s += v; return *this; }
  P& stack_global(const std::string& m, const std::string& n) { return short_str(m).short_str(n).op('\x93'); }
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
  p.global("torch._utils", "_rebuild_tensor_v3").op('(').op('(').str("storage").global("torch.storage", "UntypedStorage").str("7").str("cpu").k(12).op('t').op('Q');
  p.k(2).k(10).op('\x85').k(1).op('\x85').op('\x89').op('}').global("torch", "float8_e4m3fn").op('t').op('R');
  p.str("p").global("torch._utils", "_rebuild_parameter").op('(').tensor("HalfStorage", "3", 4, 0, 2, 2).op('\x88').op('}').op('t').op('R');
  p.str("scale");
  p.global("torch._utils", "_rebuild_tensor_v3").op('(').op('(').str("storage").global("torch.storage", "UntypedStorage").str("8").str("cpu").k(4).op('t').op('Q');
  p.k(0).k(4).op('\x85').k(1).op('\x85').op('\x89').op('}').global("torch", "float8_e8m0fnu").op('t').op('R');
  p.str("u16");
  p.global("torch._utils", "_rebuild_tensor_v3").op('(').op('(').str("storage").global("torch.storage", "UntypedStorage").str("9").str("cpu").k(4).op('t').op('Q');
  p.k(0).k(2).op('\x85').k(1).op('\x85').op('\x89').op('}').global("torch", "uint16").op('t').op('R');
  p.op('u').op('.');
  const auto st = f::torch_state(f::parse_pickle(p.bytes()));
  REQUIRE(st.tensors.size() == 4);
  CHECK(st.tensors[2].dtype == f::DType::f8_e8m0);
  CHECK(st.tensors[3].dtype == f::DType::u16);
  CHECK(st.tensors[3].counter == false);
  CHECK(st.tensors[0].dtype == f::DType::f8_e4m3);
  CHECK(st.tensors[0].storage_offset == 2);
  CHECK(st.storages[0].dtype == f::DType::u8);
  CHECK(st.tensors[1].dtype == f::DType::f16);
  CHECK(st.tensors[1].requires_grad);
}

TEST_CASE("pickle: _rebuild_tensor_v3 dtypes: FNUZ fp8 and packed float4 read, others refused", "[formats][unit]") {
  // {'t': _rebuild_tensor_v3(untyped storage of 6 bytes, offset 2, (3,), (1,), False, {}, DTYPE)}
  auto file = [](const char* storage_module, const char* dtype) {
    P p;
    p.op('}').op('(').str("t");
    p.global("torch._utils", "_rebuild_tensor_v3").op('(').op('(').str("storage").global(storage_module, "UntypedStorage").str("0").str("cpu").k(6);
    p.op('t').op('Q').k(2).k(3).op('\x85').k(1).op('\x85').op('\x89').op('}').global("torch", dtype).op('t').op('R').op('u').op('.');
    return p;
  };
  for (const auto& [name, dtype] : {std::pair{"float8_e4m3fnuz", f::DType::f8_e4m3fnuz}, std::pair{"float8_e5m2fnuz", f::DType::f8_e5m2fnuz},
                                    std::pair{"float4_e2m1fn_x2", f::DType::f4_x2}}) {
    INFO(name);
    const auto st = f::torch_state(f::parse_pickle(file("torch.storage", name).bytes()));
    REQUIRE(st.tensors.size() == 1);
    CHECK(st.tensors[0].dtype == dtype);
    CHECK(st.tensors[0].storage_offset == 2);
  }
  CHECK(f::dtype_opaque(f::DType::f4_x2));
  CHECK(f::dtype_size(f::DType::f4_x2) == 1);
  CHECK_THAT(error_of(file("torch.storage", "complex64")), Catch::Contains("_rebuild_tensor_v3 dtype is not a supported torch dtype"));
  // PyTorch pickles the class as torch.storage.UntypedStorage (its module); another spelling is no storage class.
  CHECK_THAT(error_of(file("torch", "uint16")), Catch::Contains("storage type torch.UntypedStorage is not a storage class"));
}

TEST_CASE("pickle: objects outside the tensor subset are opaque values, never called", "[formats][unit]") {
  // {'args': argparse.Namespace(lr=0.1, w=<tensor>), 'sys': os.system('touch x'), 'b': b'..', 's': {1},
  //  'w': <tensor>} in protocol 4's spelling: STACK_GLOBAL, NEWOBJ, BUILD, MEMOIZE, SHORT_BINBYTES, EMPTY_SET.
  P p;
  p.s = std::string("\x80\x04");
  p.op('}').op('\x94').op('(');
  p.short_str("args").stack_global("argparse", "Namespace").op('\x94').op(')').op('\x81').op('\x94');
  p.op('}').op('(').short_str("lr").op('G').s += std::string("\x3f\xb9\x99\x99\x99\x99\x99\x9a", 8);
  p.short_str("w").tensor("FloatStorage", "1", 4, 0, 2, 2).op('u').op('b');
  p.short_str("sys").stack_global("posix", "system").short_str("touch x").op('\x85').op('R');
  p.short_str("b").op('C').op('\x02').op('x').op('y');
  p.short_str("s").op('\x8f').op('(').k(1).op('\x90');
  p.short_str("big").op('\x8a').op('\x09').s += std::string(9, '\x7f');
  p.short_str("w").tensor("FloatStorage", "0", 6, 0, 2, 3).op('u').op('.');
  std::string err = error_of(p);
  REQUIRE(err.empty());
  const auto st = f::torch_state(f::parse_pickle(p.bytes()));
  REQUIRE(st.tensors.size() == 2);
  CHECK(st.tensors[0].name == "args/w");  // inside the object's BUILD state
  CHECK(st.tensors[1].name == "w");
  REQUIRE(st.opaque.size() == 2);
  CHECK(st.opaque[0].name == "args");
  CHECK(st.opaque[0].type == "argparse.Namespace");
  CHECK(st.opaque[1].type == "posix.system");
  REQUIRE(st.scalars.size() == 1);  // numbers inside objects (lr) are not listed; the set's element is
  CHECK(st.scalars[0].name == "s/0");
  SECTION("a storage no known rebuild function views is refused: its tensor cannot be read") {
    P q;
    q.op('}').str("t").global("torch._tensor", "_rebuild_from_type_v2").op('(').op('(').str("storage").global("torch", "FloatStorage");
    q.str("0").str("cpu").k(2).op('t').op('Q').op('t').op('R').op('s').op('.');
    CHECK_THAT(error_of(q), Catch::Contains("'t/0': a storage that no tensor rebuild function views") && Catch::Contains("inside an object"));
  }
  SECTION("a dict subclass (defaultdict) keeps its items, tensors included") {
    P q;
    q.op('}').str("d").global("collections", "defaultdict").global("builtins", "list").op('\x85').op('R');
    q.str("w").tensor("FloatStorage", "0", 6, 0, 2, 3).op('s').op('s').op('.');
    const auto d = f::torch_state(f::parse_pickle(q.bytes()));
    REQUIRE(d.tensors.size() == 1);
    CHECK(d.tensors[0].name == "d/w");
  }
  SECTION("keys that are not strings or integers still give distinct names") {
    P q;
    q.op('}').op('(').op('\x88').tensor("FloatStorage", "0", 6, 0, 2, 3).k(1).k(2).op('\x86').tensor("FloatStorage", "1", 6, 0, 2, 3).op('u').op('.');
    const auto d = f::torch_state(f::parse_pickle(q.bytes()));
    REQUIRE(d.tensors.size() == 2);
    CHECK(d.tensors[0].name == "True");
    CHECK(d.tensors[1].name == "(1, 2)");
  }
}

TEST_CASE("pickle: refusals name what was found and where", "[formats][unit]") {
  CHECK_THAT(error_of(P().op('I').op('1').op('\n').op('.')), Catch::Contains("opcode INT (0x49 'I') is protocol 0/1 text form") && Catch::Contains("at offset 2"));
  CHECK_THAT(error_of(P().op('\x82').op('\x01').op('.')), Catch::Contains("opcode EXT1 (0x82) refers to copyreg's extension registry"));
  CHECK_THAT(error_of(P().op('\x97').op('.')), Catch::Contains("opcode NEXT_BUFFER (0x97) is an out-of-band buffer"));
  CHECK_THAT(error_of(P().op('\xff')), Catch::Contains("unknown opcode 0xff at offset 2"));
  CHECK_THAT(error_of(P().k(1).str("x").op('\x93')), Catch::Contains("STACK_GLOBAL of something that is not two strings"));
  CHECK_THAT(error_of(P().op('N').op('}').op('R').op('.')), Catch::Contains("REDUCE of something that is not a GLOBAL"));
  CHECK_THAT(error_of(P().op(']').op('}').op('b').op('.')), Catch::Contains("BUILD of something that is neither a dict nor an object"));
  CHECK_THAT(error_of(P().op('}').op('(').op('\x90')), Catch::Contains("ADDITEMS on something that is not a set"));
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
