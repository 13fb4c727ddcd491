// The pickle subset reader. Opcode meanings: CPython's Lib/pickletools.py documentation.
#include "resil/inject/formats/pickle.hpp"

#include <array>
#include <bit>
#include <string_view>
#include <unordered_map>

namespace resil::inject::formats {
namespace {

constexpr std::string_view kFormat = "pickle";

// The names GLOBAL may resolve: what torch.save writes for state_dicts and optimizer states.
// Everything else (os.system, builtins.eval, torch.storage._load_from_bytes...) is refused.
bool allowed_global(std::string_view module, std::string_view name) {
  static constexpr std::array<std::string_view, 18> torch_names = {
      "FloatStorage", "DoubleStorage", "HalfStorage", "BFloat16Storage", "LongStorage", "IntStorage",
      "ShortStorage", "CharStorage", "ByteStorage", "BoolStorage", "UntypedStorage", "Size",
      "float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"};
  static constexpr std::array<std::string_view, 6> torch_ints = {"int64", "int32", "int16", "int8", "uint8", "bool"};
  static constexpr std::array<std::string_view, 4> utils = {"_rebuild_tensor_v2", "_rebuild_tensor_v3",
                                                            "_rebuild_parameter", "_rebuild_parameter_with_state"};
  auto in = [&](const auto& list) {
    for (const auto n : list)
      if (n == name) return true;
    return false;
  };
  if (module == "collections") return name == "OrderedDict";
  if (module == "torch") return in(torch_names) || in(torch_ints);
  if (module == "torch._utils") return in(utils);
  return false;
}

std::string opcode_name(std::uint8_t op) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string s = "0x";
  s += hex[op >> 4];
  s += hex[op & 15];
  if (op >= 0x20 && op < 0x7F) s += std::string(" ('") + static_cast<char>(op) + "')";
  return s;
}

class Machine {
public:
  Machine(Bytes data, std::uint64_t base) : r_(data, kFormat, base) {}

  Pickle run() {
    for (;;) {
      op_at_ = r_.offset();
      const std::uint8_t op = r_.u8("opcode");
      if (op == '.') break;
      step(op);
    }
    if (stack_.size() != 1 || !marks_.empty()) fail("STOP with " + std::to_string(stack_.size()) + " values on the stack");
    if (!r_.done()) r_.fail(std::to_string(r_.left()) + " bytes after STOP");
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
  void set_items(std::size_t dict, const std::vector<std::size_t>& kv) {
    if (node(dict).kind != PickleKind::dict) fail("SETITEM(S) on something that is not a dict");
    if (kv.size() % 2) fail("SETITEMS with an odd number of values");
    for (const std::size_t v : kv) node(dict).items.push_back(v);
  }
  void append(std::size_t list, const std::vector<std::size_t>& vs) {
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
    if (!allowed_global(module, name)) fail("GLOBAL '" + printable(module) + "." + printable(name) + "' is not in the allowed subset (nothing is executed)");
    PickleNode n{PickleKind::global, 0, 0.0, module + "." + name, {}, 0};
    push(std::move(n));
  }
  void reduce() {
    const std::size_t args = pop(), callable = pop();
    if (node(callable).kind != PickleKind::global) fail("REDUCE of something that is not an allowed GLOBAL");
    if (node(args).kind != PickleKind::tuple) fail("REDUCE arguments are not a tuple");
    const std::string fn = node(callable).text;  // a copy: pushing a node may move the nodes
    if (fn == "collections.OrderedDict") {
      if (!node(args).items.empty()) fail("OrderedDict built from arguments");
      node(push_kind(PickleKind::dict)).text = fn;
    } else if (fn == "torch.Size") {
      if (node(args).items.size() != 1 || node(node(args).items[0]).kind != PickleKind::tuple) fail("torch.Size arguments are not one tuple");
      stack_.push_back(node(args).items[0]);  // a Size is its tuple (shared, not copied: no quadratic growth)
    } else if (fn.starts_with("torch._utils.")) {
      const std::size_t c = push_kind(PickleKind::call);
      node(c).items = {callable, args};
    } else {
      fail("REDUCE of '" + printable(fn) + "', which is not a function");
    }
  }
  void build() {
    pop();  // the state: OrderedDict's instance attributes (state_dict's `_metadata`), not data
    if (node(top()).kind != PickleKind::dict) fail("BUILD of something that is not an OrderedDict");
  }
  std::int64_t long1() {
    const std::uint8_t n = r_.u8("LONG1 length");
    const Bytes b = r_.take(n, "LONG1 value");
    if (n > 8) fail("LONG1 integer of " + std::to_string(n) + " bytes does not fit 64 bits");
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(b[i]) << (8 * i);
    if (n > 0 && n < 8 && (static_cast<std::uint8_t>(b[n - 1]) & 0x80)) v |= ~std::uint64_t{0} << (8 * n);  // sign-extend
    return static_cast<std::int64_t>(v);
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
      case 0x8a: push_int(long1()); return;
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
      case 'R': case 0x81: reduce(); return;  // NEWOBJ: cls(*args), the same for the allow-list
      case 'b': build(); return;
      case 'Q': {
        const std::size_t pid = pop();
        node(push_kind(PickleKind::persistent_id)).items = {pid};
        return;
      }
      default: fail("opcode " + opcode_name(op) + " outside the supported subset");
    }
  }

  Reader r_;
  std::uint64_t op_at_ = 0;
  Pickle p_;
  std::vector<std::size_t> stack_, marks_;
  std::unordered_map<std::uint64_t, std::size_t> memo_;
};

}  // namespace

Pickle parse_pickle(Bytes data, std::uint64_t base) { return Machine(data, base).run(); }

}  // namespace resil::inject::formats
