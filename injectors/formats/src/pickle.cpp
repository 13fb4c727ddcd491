// The non-executing pickle reader. Opcode meanings: CPython's Lib/pickletools.py documentation.
#include "resil/inject/formats/pickle.hpp"

#include <array>
#include <bit>
#include <string_view>
#include <unordered_map>

namespace resil::inject::formats {
namespace {

constexpr std::string_view kFormat = "pickle";

// The callables a REDUCE applies (to build the value tree, never to run anything): the rest is an
// opaque object. OrderedDict() is a dict, torch.Size(t) its tuple, a torch._utils rebuild function
// a `call` node the torch walker reads as a tensor.
bool tensor_rebuild(std::string_view fn) {
  return fn == "torch._utils._rebuild_tensor_v2" || fn == "torch._utils._rebuild_tensor_v3" || fn == "torch._utils._rebuild_parameter" ||
         fn == "torch._utils._rebuild_parameter_with_state";
}

// "NAME (0xHH 'c')" for messages.
std::string opcode_name(std::uint8_t op) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string s(pickle_opcode_name(op));
  s += s.empty() ? "0x" : " (0x";
  s += hex[op >> 4];
  s += hex[op & 15];
  if (op >= 0x20 && op < 0x7F) s += std::string(" '") + static_cast<char>(op) + "'";
  if (!pickle_opcode_name(op).empty()) s += ")";
  return s;
}

class Machine {
public:
  Machine(Bytes data, std::uint64_t base) : r_(data, kFormat, base) {}

  Pickle run(std::size_t* used = nullptr) {
    for (;;) {
      op_at_ = r_.offset();
      const std::uint8_t op = r_.u8("opcode");
      if (op == '.') break;
      step(op);
    }
    if (stack_.size() != 1 || !marks_.empty()) fail("STOP with " + std::to_string(stack_.size()) + " values on the stack");
    if (used) *used = r_.pos();
    else if (!r_.done()) r_.fail(std::to_string(r_.left()) + " bytes after STOP");
    p_.root = stack_.back();
    return std::move(p_);
  }

private:
  [[noreturn]] void fail(const std::string& what) const { r_.fail_at(what, op_at_ - (r_.offset() - r_.pos())); }

  std::size_t push(PickleNode n) {
    n.offset = op_at_;
    p_.nodes.push_back(std::move(n));
    stack_.push_back(p_.nodes.size() - 1);
    return p_.nodes.size() - 1;
  }
  std::size_t push_kind(PickleKind k) { return push(PickleNode{k, 0, 0.0, {}, {}, 0}); }
  std::size_t pop() {
    if (stack_.size() <= floor()) fail("stack underflow");
    const std::size_t v = stack_.back();
    stack_.pop_back();
    return v;
  }
  std::size_t top() const {
    if (stack_.size() <= floor()) fail("stack underflow");
    return stack_.back();
  }
  // Values above the innermost MARK belong to it: ops other than the MARK consumers must not eat it.
  std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  std::vector<std::size_t> pop_mark() {
    if (marks_.empty()) fail("no MARK on the stack");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    std::vector<std::size_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  PickleNode& node(std::size_t i) { return p_.nodes[i]; }
  std::size_t expect(std::size_t i, PickleKind k, const char* what) {
    if (node(i).kind != k) fail(std::string(what));
    return i;
  }
  void push_string(Bytes b) {
    PickleNode n{PickleKind::string, 0, 0.0, std::string(as_chars(b)), {}, 0};
    push(std::move(n));
  }
  void push_int(std::int64_t v) { node(push_kind(PickleKind::integer)).integer = v; }
  void put(std::uint64_t key) { memo_[key] = top(); }
  void get(std::uint64_t key) {
    const auto it = memo_.find(key);
    if (it == memo_.end()) fail("memo key " + std::to_string(key) + " was never stored");
    stack_.push_back(it->second);
  }
  void make_tuple(std::vector<std::size_t> items) {
    const std::size_t t = push_kind(PickleKind::tuple);
    node(t).items = std::move(items);
  }
  // SETITEM(S) and APPEND(S) on an opaque object: a dict or list subclass (defaultdict, a user's
  // container) pickles its items after the object; they are kept in a dict (list) node of its own.
  std::size_t container_of(std::size_t target, PickleKind kind, std::unordered_map<std::size_t, std::size_t>& made) {
    if (node(target).kind == kind) return target;
    if (node(target).kind != PickleKind::object) return target;
    const auto it = made.find(target);
    if (it != made.end()) return it->second;
    p_.nodes.push_back(PickleNode{kind, 0, 0.0, {}, {}, op_at_});
    const std::size_t c = p_.nodes.size() - 1;
    node(target).items.push_back(c);
    made.emplace(target, c);
    return c;
  }
  void set_items(std::size_t target, const std::vector<std::size_t>& kv) {
    const std::size_t dict = container_of(target, PickleKind::dict, object_dicts_);
    if (node(dict).kind != PickleKind::dict) fail("SETITEM(S) on something that is not a dict");
    if (kv.size() % 2) fail("SETITEMS with an odd number of values");
    for (const std::size_t v : kv) node(dict).items.push_back(v);
  }
  void append(std::size_t target, const std::vector<std::size_t>& vs) {
    const std::size_t list = container_of(target, PickleKind::list, object_lists_);
    if (node(list).kind != PickleKind::list) fail("APPEND(S) on something that is not a list");
    for (const std::size_t v : vs) node(list).items.push_back(v);
  }
  void global() {
    auto line = [&](const char* what) {
      const std::size_t start = r_.pos();
      while (r_.u8(what) != '\n') {
      }
      const std::size_t len = r_.pos() - start - 1;
      r_.seek(start, what);
      return std::string(as_chars(r_.take(len + 1, what).first(len)));
    };
    const std::string module = line("GLOBAL module"), name = line("GLOBAL name");
    push_global(module, name);
  }
  void stack_global() {
    const std::size_t name = pop(), module = pop();
    if (node(name).kind != PickleKind::string || node(module).kind != PickleKind::string) fail("STACK_GLOBAL of something that is not two strings");
    const std::string m = node(module).text, n = node(name).text;  // copies: pushing may move the nodes
    push_global(m, n);
  }
  void push_global(const std::string& module, const std::string& name) {
    PickleNode n{PickleKind::global, 0, 0.0, module + "." + name, {}, 0};
    push(std::move(n));
  }
  // REDUCE and NEWOBJ: callable(*args) / cls.__new__(cls, *args), never called.
  void reduce(const char* op) {
    const std::size_t args = pop(), callable = pop();
    if (node(callable).kind != PickleKind::global) fail(std::string(op) + " of something that is not a GLOBAL");
    if (node(args).kind != PickleKind::tuple) fail(std::string(op) + " arguments are not a tuple");
    const std::string fn = node(callable).text;  // a copy: pushing a node may move the nodes
    if (fn == "collections.OrderedDict" && node(args).items.empty()) {
      node(push_kind(PickleKind::dict)).text = fn;
    } else if (fn == "torch.Size" && node(args).items.size() == 1 && node(node(args).items[0]).kind == PickleKind::tuple) {
      stack_.push_back(node(args).items[0]);  // a Size is its tuple (shared, not copied: no quadratic growth)
    } else if (tensor_rebuild(fn)) {
      const std::size_t c = push_kind(PickleKind::call);
      node(c).items = {callable, args};
    } else {
      object(callable, {args});
    }
  }
  void object(std::size_t callable, std::vector<std::size_t> rest) {
    const std::size_t o = push_kind(PickleKind::object);
    node(o).text = node(callable).text;
    node(o).items.push_back(callable);
    for (const std::size_t r : rest) node(o).items.push_back(r);
  }
  void newobj_ex() {
    const std::size_t kwargs = pop(), args = pop(), cls = pop();
    if (node(cls).kind != PickleKind::global) fail("NEWOBJ_EX of something that is not a GLOBAL");
    if (node(args).kind != PickleKind::tuple || node(kwargs).kind != PickleKind::dict) fail("NEWOBJ_EX arguments are not a tuple and a dict");
    object(cls, {args, kwargs});
  }
  // BUILD: obj.__setstate__(state) or obj.__dict__.update(state). An OrderedDict's state is its
  // instance attributes (a state_dict's `_metadata`), not data: dropped. An opaque object keeps
  // it (its attributes may hold tensors). Anything else (a tensor, a list...) is refused.
  void build() {
    const std::size_t state = pop(), target = top();
    if (node(target).kind == PickleKind::object) {
      node(target).items.push_back(state);
      return;
    }
    if (node(target).kind != PickleKind::dict) fail("BUILD of something that is neither a dict nor an object");
  }
  std::int64_t long_bytes(Bytes b) {
    const std::size_t n = b.size();
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(b[i]) << (8 * i);
    if (n > 0 && n < 8 && (static_cast<std::uint8_t>(b[n - 1]) & 0x80)) v |= ~std::uint64_t{0} << (8 * n);  // sign-extend
    return static_cast<std::int64_t>(v);
  }
  // LONG1/LONG4: up to 8 bytes an integer; wider, an opaque big integer (legacy torch.save's magic number).
  void push_long(Bytes b) {
    if (b.size() <= 8) return push_int(long_bytes(b));
    node(push_kind(PickleKind::big_integer)).text = std::string(as_chars(b));
  }
  void push_bytes(std::uint64_t n, const char* what) {
    r_.take(n, what);
    node(push_kind(PickleKind::bytes)).integer = static_cast<std::int64_t>(n);
  }
  std::uint64_t len64(const char* what) {
    const auto n = r_.le<std::uint64_t>(what);
    if (n > r_.left()) r_.fail(std::string("truncated ") + what + " (" + std::to_string(n) + " bytes claimed, " + std::to_string(r_.left()) + " left)");
    return n;
  }
  void step(std::uint8_t op) {
    switch (op) {
      case 0x80: {  // PROTO
        const auto v = r_.u8("PROTO version");
        if (v > 5) fail("pickle protocol " + std::to_string(v));
        return;
      }
      case 0x95: r_.take(8, "FRAME length"); return;  // FRAME: framing only
      case 0x94: memo_[memo_.size()] = top(); return;  // MEMOIZE
      case '}': push_kind(PickleKind::dict); return;
      case ']': push_kind(PickleKind::list); return;
      case ')': push_kind(PickleKind::tuple); return;
      case '(': marks_.push_back(stack_.size()); return;
      case 'J': push_int(r_.le<std::int32_t>("BININT")); return;
      case 'K': push_int(r_.u8("BININT1")); return;
      case 'M': push_int(r_.le<std::uint16_t>("BININT2")); return;
      case 0x8a: {  // LONG1
        const std::uint8_t n = r_.u8("LONG1 length");
        push_long(r_.take(n, "LONG1 value"));
        return;
      }
      case 0x8b: {  // LONG4
        const auto n = r_.le<std::int32_t>("LONG4 length");
        if (n < 0) fail("negative LONG4 length");
        push_long(r_.take(static_cast<std::uint64_t>(n), "LONG4 value"));
        return;
      }
      case 'G': {  // BINFLOAT: big-endian IEEE double
        const Bytes b = r_.take(8, "BINFLOAT");
        std::uint64_t bits = 0;
        for (const std::byte c : b) bits = (bits << 8) | static_cast<std::uint64_t>(c);
        node(push_kind(PickleKind::real)).real = std::bit_cast<double>(bits);
        return;
      }
      case 'X': push_string(r_.take(r_.le<std::uint32_t>("BINUNICODE length"), "BINUNICODE")); return;
      case 0x8c: push_string(r_.take(r_.u8("SHORT_BINUNICODE length"), "SHORT_BINUNICODE")); return;
      case 'T': {
        const auto n = r_.le<std::int32_t>("BINSTRING length");
        if (n < 0) fail("negative BINSTRING length");
        push_string(r_.take(static_cast<std::uint64_t>(n), "BINSTRING"));
        return;
      }
      case 'U': push_string(r_.take(r_.u8("SHORT_BINSTRING length"), "SHORT_BINSTRING")); return;
      case 'N': push_kind(PickleKind::none); return;
      case 0x88: case 0x89: node(push_kind(PickleKind::boolean)).integer = op == 0x88; return;
      case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
        std::vector<std::size_t> items(op - 0x84u);
        for (std::size_t i = items.size(); i-- > 0;) items[i] = pop();
        make_tuple(std::move(items));
        return;
      }
      case 't': make_tuple(pop_mark()); return;
      case 'l': {
        auto items = pop_mark();
        node(push_kind(PickleKind::list)).items = std::move(items);
        return;
      }
      case 'd': {
        auto items = pop_mark();
        if (items.size() % 2) fail("DICT with an odd number of values");
        node(push_kind(PickleKind::dict)).items = std::move(items);
        return;
      }
      case 'a': {
        const std::size_t v = pop();
        append(top(), {v});
        return;
      }
      case 'e': {
        auto vs = pop_mark();
        append(top(), vs);
        return;
      }
      case 's': {
        const std::size_t v = pop(), k = pop();
        set_items(top(), {k, v});
        return;
      }
      case 'u': {
        auto kv = pop_mark();
        set_items(top(), kv);
        return;
      }
      case 'q': put(r_.u8("BINPUT index")); return;
      case 'r': put(r_.le<std::uint32_t>("LONG_BINPUT index")); return;
      case 'h': get(r_.u8("BINGET index")); return;
      case 'j': get(r_.le<std::uint32_t>("LONG_BINGET index")); return;
      case 'c': global(); return;
      case 0x93: stack_global(); return;
      case 'R': reduce("REDUCE"); return;
      case 0x81: reduce("NEWOBJ"); return;
      case 0x92: newobj_ex(); return;
      case 'b': build(); return;
      case 0x8d: push_string(r_.take(len64("BINUNICODE8 length"), "BINUNICODE8")); return;
      case 'C': push_bytes(r_.u8("SHORT_BINBYTES length"), "SHORT_BINBYTES"); return;
      case 'B': push_bytes(r_.le<std::uint32_t>("BINBYTES length"), "BINBYTES"); return;
      case 0x8e: push_bytes(len64("BINBYTES8 length"), "BINBYTES8"); return;
      case 0x96: push_bytes(len64("BYTEARRAY8 length"), "BYTEARRAY8"); return;
      case 0x8f: push_kind(PickleKind::set); return;  // EMPTY_SET
      case 0x90: {  // ADDITEMS
        auto vs = pop_mark();
        if (node(top()).kind != PickleKind::set) fail("ADDITEMS on something that is not a set");
        for (const std::size_t v : vs) node(top()).items.push_back(v);
        return;
      }
      case 0x91: {  // FROZENSET
        auto items = pop_mark();
        node(push_kind(PickleKind::set)).items = std::move(items);
        return;
      }
      case '0': pop(); return;  // POP
      case '1': pop_mark(); return;  // POP_MARK
      case '2': stack_.push_back(top()); return;  // DUP
      case 'Q': {
        const std::size_t pid = pop();
        node(push_kind(PickleKind::persistent_id)).items = {pid};
        return;
      }
      case 'I': case 'L': case 'F': case 'S': case 'V': case 'P': case 'p': case 'g': case 'i': case 'o':
        fail("opcode " + opcode_name(op) + " is protocol 0/1 text form, which torch.save never writes (protocols 2 to 5 are read)");
      case 0x82: case 0x83: case 0x84:
        fail("opcode " + opcode_name(op) + " refers to copyreg's extension registry, which this reader does not have");
      case 0x97: case 0x98:
        fail("opcode " + opcode_name(op) + " is an out-of-band buffer, which torch.save never writes");
      default: fail("unknown opcode " + opcode_name(op));
    }
  }

  Reader r_;
  std::uint64_t op_at_ = 0;
  Pickle p_;
  std::vector<std::size_t> stack_, marks_;
  std::unordered_map<std::uint64_t, std::size_t> memo_;
  std::unordered_map<std::size_t, std::size_t> object_dicts_, object_lists_;
};

}  // namespace

Pickle parse_pickle(Bytes data, std::uint64_t base) { return Machine(data, base).run(); }

Pickle parse_pickle_prefix(Bytes data, std::uint64_t base, std::size_t* used) { return Machine(data, base).run(used); }

std::string_view pickle_opcode_name(std::uint8_t op) noexcept {
  switch (op) {
    case '(': return "MARK";  case '.': return "STOP";  case '0': return "POP";  case '1': return "POP_MARK";
    case '2': return "DUP";  case 'F': return "FLOAT";  case 'I': return "INT";  case 'J': return "BININT";
    case 'K': return "BININT1";  case 'L': return "LONG";  case 'M': return "BININT2";  case 'N': return "NONE";
    case 'P': return "PERSID";  case 'Q': return "BINPERSID";  case 'R': return "REDUCE";  case 'S': return "STRING";
    case 'T': return "BINSTRING";  case 'U': return "SHORT_BINSTRING";  case 'V': return "UNICODE";  case 'X': return "BINUNICODE";
    case 'a': return "APPEND";  case 'b': return "BUILD";  case 'c': return "GLOBAL";  case 'd': return "DICT";
    case '}': return "EMPTY_DICT";  case 'e': return "APPENDS";  case 'g': return "GET";  case 'h': return "BINGET";
    case 'i': return "INST";  case 'j': return "LONG_BINGET";  case 'l': return "LIST";  case ']': return "EMPTY_LIST";
    case 'o': return "OBJ";  case 'p': return "PUT";  case 'q': return "BINPUT";  case 'r': return "LONG_BINPUT";
    case 's': return "SETITEM";  case 't': return "TUPLE";  case ')': return "EMPTY_TUPLE";  case 'u': return "SETITEMS";
    case 'G': return "BINFLOAT";  case 'B': return "BINBYTES";  case 'C': return "SHORT_BINBYTES";
    case 0x80: return "PROTO";  case 0x81: return "NEWOBJ";  case 0x82: return "EXT1";  case 0x83: return "EXT2";
    case 0x84: return "EXT4";  case 0x85: return "TUPLE1";  case 0x86: return "TUPLE2";  case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE";  case 0x89: return "NEWFALSE";  case 0x8a: return "LONG1";  case 0x8b: return "LONG4";
    case 0x8c: return "SHORT_BINUNICODE";  case 0x8d: return "BINUNICODE8";  case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";  case 0x90: return "ADDITEMS";  case 0x91: return "FROZENSET";  case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL";  case 0x94: return "MEMOIZE";  case 0x95: return "FRAME";  case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";  case 0x98: return "READONLY_BUFFER";
    default: return "";
  }
}

}  // namespace resil::inject::formats
