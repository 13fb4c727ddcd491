// torch.save archives: the state walk over the pickle tree and the archive-level checks. What
// torch.save writes: torch/serialization.py (_save: persistent ids ('storage', storage type, key,
// location, numel)) and torch/_tensor.py (__reduce_ex__: _rebuild_tensor_v2 with a typed storage,
// _rebuild_tensor_v3 with an untyped one plus a dtype for the newer dtypes). A dtype without a
// typed storage class (uint16/32/64, the float8 and float4 dtypes) is saved with the storage type
// torch.storage.UntypedStorage, whose numel is its size in bytes, and rebuilt by
// _rebuild_tensor_v3(storage, offset, size, stride, requires_grad, hooks, dtype[, metadata]), the
// dtype a GLOBAL torch.<dtype>; offset, size and stride count elements of that dtype.
#include "resil/inject/formats/torch.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace resil::inject::formats {
namespace {

constexpr std::string_view kFormat = "torch";
constexpr int kMaxDepth = 64;
constexpr std::size_t kMaxVisits = std::size_t{1} << 20;
// Names are built from keys the pickle may memoise once and reuse at every level (a 5 KB file
// made names of gigabytes): their total is bounded by the pickle's size.
constexpr std::size_t kNameBytesBase = std::size_t{64} << 20, kNameBytesPerNode = 256;
constexpr std::size_t kMaxShownName = 200;  // longer names are cut in messages
constexpr std::size_t kMaxTupleKey = 256;    // a longer tuple key is named by its offset

// repr(x) of a Python float: the shortest digits that read back to x, in fixed notation with at least
// one digit after the point for decimal exponents -4..15, else d[.ddd]e+XX (CPython's float_repr_style
// "short": format 'r').
std::string python_float(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char sci[64];
  const auto r = std::to_chars(sci, sci + sizeof sci, x, std::chars_format::scientific);
  const std::string_view t(sci, static_cast<std::size_t>(r.ptr - sci));  // [-]d[.ddd]e[+-]XX
  const std::size_t e = t.find('e');
  const bool neg = t.front() == '-';
  std::string digits;
  for (char c : t.substr(neg, e - neg))
    if (c != '.') digits += c;
  const int exp = std::atoi(std::string(t.substr(e + 1)).c_str());
  std::string out = neg ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char b[16];
    std::snprintf(b, sizeof b, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return out + b;
  }
  if (exp < 0) return out + "0." + std::string(static_cast<std::size_t>(-exp - 1), '0') + digits;
  const auto point = static_cast<std::size_t>(exp) + 1;
  if (digits.size() <= point) return out + digits + std::string(point - digits.size(), '0') + ".0";
  return out + digits.substr(0, point) + "." + digits.substr(point);
}

// repr(s) of a Python str from its UTF-8 bytes: in single quotes, or double ones when it holds a single
// quote and no double one; backslash, the quote, \t \n \r escaped, other ASCII controls and the Latin-1
// controls, no-break space and soft hyphen (U+0080..U+00A0, U+00AD) as \xHH. Other code points are kept
// as they are (Python escapes a few more it deems unprintable; names are escaped again when printed).
std::string python_str(std::string_view s) {
  const char q = s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos ? '"' : '\'';
  std::string out(1, q);
  auto hex = [&out](unsigned v) {
    char b[8];
    std::snprintf(b, sizeof b, "\\x%02x", v);
    out += b;
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\\' || c == static_cast<unsigned char>(q)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      hex(c);
    } else if (c == 0xc2 && i + 1 < s.size()) {  // U+0080..U+00BF
      const auto d = static_cast<unsigned char>(s[i + 1]);
      if ((d >= 0x80 && d <= 0xa0) || d == 0xad) {
        hex(d);
        ++i;
      } else {
        out += static_cast<char>(c);
      }
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + q;
}

struct Named {
  std::string_view name;
  DType dtype;
};
constexpr std::string_view kUntypedStorage = "torch.storage.UntypedStorage";
constexpr Named kStorageClasses[] = {
    {"torch.DoubleStorage", DType::f64}, {"torch.FloatStorage", DType::f32}, {"torch.HalfStorage", DType::f16},
    {"torch.BFloat16Storage", DType::bf16}, {"torch.LongStorage", DType::i64}, {"torch.IntStorage", DType::i32},
    {"torch.ShortStorage", DType::i16}, {"torch.CharStorage", DType::i8}, {"torch.ByteStorage", DType::u8},
    {"torch.BoolStorage", DType::boolean}, {kUntypedStorage, DType::u8}};
constexpr Named kDtypes[] = {
    {"torch.float64", DType::f64}, {"torch.float32", DType::f32}, {"torch.float16", DType::f16},
    {"torch.bfloat16", DType::bf16}, {"torch.float8_e4m3fn", DType::f8_e4m3}, {"torch.float8_e5m2", DType::f8_e5m2},
    {"torch.int64", DType::i64}, {"torch.int32", DType::i32}, {"torch.int16", DType::i16},
    {"torch.int8", DType::i8}, {"torch.uint8", DType::u8}, {"torch.bool", DType::boolean},
    {"torch.float8_e8m0fnu", DType::f8_e8m0}, {"torch.uint16", DType::u16}, {"torch.uint32", DType::u32}, {"torch.uint64", DType::u64},
    {"torch.float8_e4m3fnuz", DType::f8_e4m3fnuz}, {"torch.float8_e5m2fnuz", DType::f8_e5m2fnuz}, {"torch.float4_e2m1fn_x2", DType::f4_x2}};

template <std::size_t N>
std::optional<DType> lookup(const Named (&table)[N], std::string_view name) {
  for (const auto& e : table)
    if (e.name == name) return e.dtype;
  return std::nullopt;
}

// Top-level keys naming a model's or an optimizer's state in the layouts people save: plain
// PyTorch scripts, Lightning (state_dict, optimizer_states), timm (state_dict_ema), fairseq
// (last_optimizer_state), DeepSpeed (module), EMA copies of a model.
bool is_model_key(std::string_view k) {
  for (const std::string_view m : {"model", "model_state_dict", "state_dict", "model_state", "module", "net", "network", "ema",
                                   "model_ema", "ema_state_dict", "state_dict_ema", "ema_model"})
    if (k == m) return true;
  return false;
}
bool is_optimizer_key(std::string_view k) {
  for (const std::string_view m : {"optimizer", "optimizer_state_dict", "optimizer_states", "optimizer_state", "optim", "optim_state",
                                   "optimizers", "last_optimizer_state"})
    if (k == m) return true;
  return false;
}

class Walker {
public:
  explicit Walker(const Pickle& p) : p_(p) {}

  TorchState run() {
    const PickleNode& root = node(p_.root);
    Role all = Role::other;
    bool by_key = false;
    if (root.kind == PickleKind::dict) {
      bool tensors_only = true, has_state = false, has_groups = false;
      for (std::size_t i = 0; i + 1 < root.items.size(); i += 2) {
        const PickleNode& k = node(root.items[i]);
        if (k.kind == PickleKind::string && (is_model_key(k.text) || is_optimizer_key(k.text))) by_key = true;
        has_state |= k.kind == PickleKind::string && k.text == "state";
        has_groups |= k.kind == PickleKind::string && k.text == "param_groups";
        tensors_only &= node(root.items[i + 1]).kind == PickleKind::call;
      }
      if (!by_key && has_state && has_groups) all = Role::optimizer;
      else if (!by_key && (root.text == "collections.OrderedDict" || (tensors_only && !root.items.empty()))) all = Role::model;
    }
    if (by_key) {
      for (std::size_t i = 0; i + 1 < root.items.size(); i += 2) {
        path_.push_back(key_text(root.items[i]));
        const Role r = is_model_key(path_.back()) ? Role::model : is_optimizer_key(path_.back()) ? Role::optimizer : Role::other;
        walk(root.items[i + 1], r, 1);
        path_.pop_back();
      }
    } else {
      walk(p_.root, all, 0);
    }
    return std::move(out_);
  }

private:
  [[noreturn]] void fail(std::size_t at, const std::string& what) const {
    std::string n = path_.empty() ? std::string() : name();
    if (n.size() > kMaxShownName) n = n.substr(0, kMaxShownName) + "... (" + std::to_string(n.size()) + " bytes)";
    corrupt(kFormat, (n.empty() ? std::string() : "'" + n + "': ") + what, node(at).offset);
  }
  const PickleNode& node(std::size_t i) const { return p_.nodes[i]; }
  std::string name() const {
    std::string s;
    for (const auto& c : path_) s += (s.empty() ? "" : "/") + c;
    return s.empty() ? "tensor" : s;
  }
  // A dict key as a name component, as str(key) prints it: strings as they are, integers in decimal,
  // booleans, None, floats (repr), and tuples of those with their strings quoted (repr); any other key
  // (an opaque object) by where the pickle made it, so the tensors under it keep distinct names.
  std::string key_text(std::size_t k, int depth = 0) const {
    const PickleNode& n = node(k);
    switch (n.kind) {
      case PickleKind::string:
        if (depth == 0) return n.text;
        // in a tuple: longer than a tuple key may be, the tuple is named by its offset (see below)
        return n.text.size() > kMaxTupleKey ? std::string(kMaxTupleKey + 1, '?') : python_str(n.text);
      case PickleKind::integer: return std::to_string(n.integer);
      case PickleKind::boolean: return n.integer ? "True" : "False";
      case PickleKind::none: return "None";
      case PickleKind::real: return python_float(n.real);
      case PickleKind::tuple:
        // Small tuples only: a key built from memoised long strings must not build a long name.
        if (depth < 4 && n.items.size() <= 8) {
          std::string s = "(";
          for (std::size_t j = 0; j < n.items.size() && s.size() <= kMaxTupleKey; ++j) s += (j ? ", " : "") + key_text(n.items[j], depth + 1);
          if (s.size() <= kMaxTupleKey) return s + (n.items.size() == 1 ? ",)" : ")");
        }
        break;
      default: break;
    }
    return "<key at pickle offset " + std::to_string(n.offset) + ">";
  }

  void walk(std::size_t i, Role role, int depth) {
    if (depth > kMaxDepth) fail(i, "nesting deeper than " + std::to_string(kMaxDepth) + " (or a cycle)");
    if (++visits_ > kMaxVisits) fail(i, "more than " + std::to_string(kMaxVisits) + " values (shared containers)");
    const PickleNode& n = node(i);
    switch (n.kind) {
      case PickleKind::dict:
        for (std::size_t j = 0; j + 1 < n.items.size(); j += 2) {
          path_.push_back(key_text(n.items[j]));
          walk(n.items[j + 1], role, depth + 1);
          path_.pop_back();
        }
        return;
      case PickleKind::list:
      case PickleKind::tuple:
      case PickleKind::set:
        for (std::size_t j = 0; j < n.items.size(); ++j) {
          path_.push_back(std::to_string(j));
          walk(n.items[j], role, depth + 1);
          path_.pop_back();
        }
        return;
      case PickleKind::call:
        // Keys are joined by '/' (and integer keys written in decimal), so {'a/b': x, 'a': {'b': y}},
        // {1: x, '1': y} or a key repeated in the pickle give two tensors one name: a name would no
        // longer say which tensor a flip log means. Refused (the same tensor under two names is fine).
        out_.tensors.push_back(tensor(i, role, 0));
        name_bytes_ += out_.tensors.back().name.size();
        if (name_bytes_ > kNameBytesBase + kNameBytesPerNode * p_.nodes.size())
          fail(i, "tensor names of more than " + std::to_string(name_bytes_ >> 20) + " MiB from a pickle of " + std::to_string(p_.nodes.size()) +
                      " values (keys reused through the memo at every level)");
        if (!names_.insert(out_.tensors.back().name).second)
          fail(i, "a second tensor with this name (a name is the dict keys and indices joined by '/': two tensors must not share one)");
        return;
      case PickleKind::object:
        // Never constructed: its arguments and state are walked for tensors (a user's class
        // holding one), their names continuing the path; numbers inside are not listed.
        if (in_object_ == 0) out_.opaque.push_back({name(), role, n.text});
        ++in_object_;
        for (std::size_t j = 1; j < n.items.size(); ++j) walk(n.items[j], role, depth + 1);
        --in_object_;
        return;
      case PickleKind::persistent_id:
        fail(i, "a storage that no tensor rebuild function views (a bare torch storage object, or a tensor built by a function "
                "the reader does not know" + (in_object_ ? std::string(", inside an object") : std::string()) + ")");
      case PickleKind::integer:
      case PickleKind::real:
        if (in_object_) return;
        out_.scalars.push_back({name(), role, n.kind == PickleKind::integer, n.integer, n.real});
        name_bytes_ += out_.scalars.back().name.size();
        if (name_bytes_ > kNameBytesBase + kNameBytesPerNode * p_.nodes.size())
          fail(i, "names of more than " + std::to_string(name_bytes_ >> 20) + " MiB from a pickle of " + std::to_string(p_.nodes.size()) +
                      " values (keys reused through the memo at every level)");
        return;
      default: return;  // strings, bytes, None, booleans, names: no tensor data
    }
  }

  std::int64_t integer(std::size_t i, const char* what) const {
    if (node(i).kind != PickleKind::integer) fail(i, std::string(what) + " is not an integer");
    return node(i).integer;
  }
  bool boolean(std::size_t i, const char* what) const {
    if (node(i).kind != PickleKind::boolean) fail(i, std::string(what) + " is not a bool");
    return node(i).integer != 0;
  }
  std::vector<std::int64_t> ints(std::size_t i, const char* what) const {
    if (node(i).kind != PickleKind::tuple) fail(i, std::string(what) + " is not a tuple");
    std::vector<std::int64_t> v;
    for (const std::size_t e : node(i).items) {
      v.push_back(integer(e, what));
      if (v.back() < 0) fail(e, std::string("negative ") + what);
    }
    return v;
  }

  TorchTensor tensor(std::size_t i, Role role, int depth) {
    const PickleNode& call = node(i);
    const std::string& fn = node(call.items[0]).text;
    const auto& args = node(call.items[1]).items;
    if (fn == "torch._utils._rebuild_parameter" || fn == "torch._utils._rebuild_parameter_with_state") {
      if (args.size() < 2 || node(args[0]).kind != PickleKind::call || depth > 0) fail(i, "malformed " + fn + " arguments");
      TorchTensor t = tensor(args[0], role, depth + 1);
      t.requires_grad = boolean(args[1], "requires_grad");
      return t;
    }
    const bool v3 = fn == "torch._utils._rebuild_tensor_v3";
    if (fn != "torch._utils._rebuild_tensor_v2" && !v3) fail(i, "call of " + fn + " where a tensor was expected");
    if (args.size() < (v3 ? 7u : 5u)) fail(i, fn + " with " + std::to_string(args.size()) + " arguments");
    TorchTensor t;
    t.name = name();
    t.role = role;
    const TorchStorage& s = storage(args[0]);
    t.storage_key = s.key;
    t.dtype = s.dtype;
    if (v3) {
      const PickleNode& d = node(args[6]);
      const auto dt = d.kind == PickleKind::global ? lookup(kDtypes, d.text) : std::nullopt;
      if (!dt) fail(args[6], "_rebuild_tensor_v3 dtype is not a supported torch dtype");
      if (s.dtype != DType::u8 || s.numel % dtype_size(*dt)) fail(args[0], "_rebuild_tensor_v3 storage is not untyped bytes of the dtype");
      t.dtype = *dt;
    } else if (node(node(node(args[0]).items[0]).items[1]).text == kUntypedStorage) {
      fail(args[0], "_rebuild_tensor_v2 with an untyped storage");
    }
    t.storage_offset = static_cast<std::uint64_t>(integer(args[1], "storage offset"));
    if (node(args[1]).integer < 0) fail(args[1], "negative storage offset");
    t.shape = ints(args[2], "size");
    t.stride = ints(args[3], "stride");
    if (t.shape.size() != t.stride.size()) fail(args[3], "size and stride of different lengths");
    t.requires_grad = boolean(args[4], "requires_grad");
    check_extent(t, s, i);
    const std::string_view last = path_.empty() ? std::string_view() : std::string_view(path_.back());
    t.counter = last == "num_batches_tracked" || last.ends_with(".num_batches_tracked") || (role == Role::optimizer && last == "step") ||
                (!dtype_is_float(t.dtype) && t.shape.empty());
    return t;
  }

  // The highest element a tensor reaches must lie inside its storage (overflow-checked).
  void check_extent(const TorchTensor& t, const TorchStorage& s, std::size_t at) const {
    std::uint64_t last = t.storage_offset;
    for (std::size_t d = 0; d < t.shape.size(); ++d) {
      if (t.shape[d] == 0) return;  // no elements
      std::uint64_t span = 0;
      if (__builtin_mul_overflow(static_cast<std::uint64_t>(t.shape[d] - 1), static_cast<std::uint64_t>(t.stride[d]), &span) ||
          __builtin_add_overflow(last, span, &last))
        fail(at, "size/stride overflow");
    }
    // v2: the storage has the tensor's dtype; v3: it is untyped bytes.
    const std::uint64_t elements = s.dtype == t.dtype ? s.numel : s.numel / dtype_size(t.dtype);
    if (last >= elements)
      fail(at, "reaches element " + std::to_string(last) + " of storage '" + s.key + "' of " + std::to_string(elements));
  }

  const TorchStorage& storage(std::size_t i) {
    const PickleNode& n = node(i);
    if (n.kind != PickleKind::persistent_id) fail(i, "tensor storage is not a persistent id");
    const PickleNode& pid = node(n.items[0]);
    // ('storage', type, key, location, numel); legacy torch.save adds view metadata, None since torch 0.4.
    const bool legacy = pid.kind == PickleKind::tuple && pid.items.size() == 6;
    if (legacy && node(pid.items[5]).kind != PickleKind::none) fail(i, "legacy persistent id with view metadata (torch before 0.4)");
    if (pid.kind != PickleKind::tuple || (pid.items.size() != 5 && !legacy) || node(pid.items[0]).kind != PickleKind::string ||
        node(pid.items[0]).text != "storage" || node(pid.items[1]).kind != PickleKind::global ||
        node(pid.items[2]).kind != PickleKind::string || node(pid.items[3]).kind != PickleKind::string)
      fail(i, "persistent id is not ('storage', type, key, location, numel)");
    const auto dt = lookup(kStorageClasses, node(pid.items[1]).text);
    if (!dt) fail(i, "storage type " + node(pid.items[1]).text + " is not a storage class");
    const std::string& key = node(pid.items[2]).text;
    if (key.empty() || key.find('/') != std::string::npos || key.find('\0') != std::string::npos) fail(i, "bad storage key");
    const std::int64_t numel = integer(pid.items[4], "storage size");
    if (numel < 0) fail(i, "negative storage size");
    const auto it = index_.find(key);
    if (it != index_.end()) {
      const TorchStorage& s = out_.storages[it->second];
      if (s.dtype != *dt || s.numel != static_cast<std::uint64_t>(numel)) fail(i, "storage '" + key + "' seen with two types or sizes");
      return s;
    }
    index_.emplace(key, out_.storages.size());
    out_.storages.push_back({key, *dt, static_cast<std::uint64_t>(numel), node(pid.items[3]).text});
    return out_.storages.back();
  }

  const Pickle& p_;
  TorchState out_;
  std::vector<std::string> path_;
  std::unordered_map<std::string, std::size_t> index_;
  std::unordered_set<std::string> names_;
  std::size_t visits_ = 0, name_bytes_ = 0;
  int in_object_ = 0;
};

}  // namespace

const TorchStorage* TorchState::storage(const std::string& key) const noexcept {
  for (const auto& s : storages)
    if (s.key == key) return &s;
  return nullptr;
}

std::optional<DType> torch_dtype(std::string_view global_name) noexcept { return lookup(kDtypes, global_name); }

TorchState torch_state(const Pickle& pickle) {
  if (pickle.root >= pickle.nodes.size()) throw CorruptInputError("torch: empty pickle");
  return Walker(pickle).run();
}

namespace {

// torch/serialization.py's MAGIC_NUMBER 0x1950a86a20f9469cfc6c as LONG1's little-endian bytes.
constexpr unsigned char kLegacyMagic[] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

TorchArchive parse_legacy(Bytes file) {
  TorchArchive a;
  a.legacy = true;
  std::size_t at = 0;
  auto next = [&](const char* what) {
    if (at >= file.size()) corrupt(kFormat, std::string("legacy torch.save file ends before its ") + what, at);
    std::size_t used = 0;
    Pickle p = parse_pickle_prefix(file.subspan(at), at, &used);
    const std::size_t start = at;
    at += used;
    return std::pair{std::move(p), start};
  };
  const auto [magic, magic_at] = next("magic number");
  const PickleNode& m = magic[magic.root];
  if (m.kind != PickleKind::big_integer || m.text != std::string_view(reinterpret_cast<const char*>(kLegacyMagic), sizeof kLegacyMagic))
    corrupt(kFormat, "a bare pickle that does not start with torch's magic number: not a torch.save file", magic_at);
  const auto [version, version_at] = next("protocol version");
  if (version[version.root].kind != PickleKind::integer || version[version.root].integer != 1001)
    corrupt(kFormat, "legacy torch.save protocol version is not 1001", version_at);
  const auto [info, info_at] = next("system info");
  const PickleNode& d = info[info.root];
  bool little = false;
  for (std::size_t j = 0; d.kind == PickleKind::dict && j + 1 < d.items.size(); j += 2)
    if (info[d.items[j]].kind == PickleKind::string && info[d.items[j]].text == "little_endian")
      little = info[d.items[j + 1]].kind == PickleKind::boolean && info[d.items[j + 1]].integer == 1;
  if (!little) corrupt(kFormat, "legacy torch.save file written on a big-endian machine (little_endian is not True)", info_at);
  const auto [obj, obj_at] = next("object");
  a.state = torch_state(obj);
  a.pickle = {obj_at, at - obj_at};
  const auto [keys, keys_at] = next("storage keys");
  const PickleNode& kl = keys[keys.root];
  if (kl.kind != PickleKind::list) corrupt(kFormat, "legacy storage key list is not a list", keys_at);
  std::unordered_map<std::string, std::size_t> index;
  for (std::size_t s = 0; s < a.state.storages.size(); ++s) index.emplace(a.state.storages[s].key, s);
  a.storage_data.resize(a.state.storages.size());
  std::vector<bool> seen(a.state.storages.size());
  for (const std::size_t k : kl.items) {
    const PickleNode& key = keys[k];
    if (key.kind != PickleKind::string) corrupt(kFormat, "legacy storage key is not a string", key.offset);
    const auto it = index.find(key.text);
    if (it == index.end()) corrupt(kFormat, "storage '" + printable(key.text) + "' is listed but no tensor uses it", key.offset);
    if (seen[it->second]) corrupt(kFormat, "storage '" + printable(key.text) + "' listed twice", key.offset);
    seen[it->second] = true;
    const TorchStorage& s = a.state.storages[it->second];
    Reader r(file.subspan(at), kFormat, at);
    const auto numel = r.le<std::uint64_t>("storage element count");
    if (numel != s.numel)
      corrupt(kFormat, "storage '" + printable(s.key) + "' holds " + std::to_string(numel) + " elements, its persistent id says " + std::to_string(s.numel), at);
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(s.numel, dtype_size(s.dtype), &bytes) || !in_bounds(at + 8, bytes, file.size()))
      corrupt(kFormat, "storage '" + printable(s.key) + "' of " + std::to_string(s.numel) + " x " + std::to_string(dtype_size(s.dtype)) +
                           " bytes runs past the end of the file", at);
    a.storage_data[it->second] = {at + 8, bytes};
    at += 8 + static_cast<std::size_t>(bytes);
  }
  for (std::size_t s = 0; s < seen.size(); ++s)
    if (!seen[s]) corrupt(kFormat, "storage '" + printable(a.state.storages[s].key) + "' is not in the storage key list", keys_at);
  if (at != file.size()) corrupt(kFormat, std::to_string(file.size() - at) + " bytes after the last storage", at);
  return a;
}

}  // namespace

TorchArchive parse_torch(Bytes file) {
  if (!file.empty() && file[0] == std::byte{0x80}) return parse_legacy(file);
  TorchArchive a;
  a.zip = parse_zip(file);
  const ZipEntry* pkl = nullptr;
  for (const auto& e : a.zip.entries) {
    const auto slash = e.name.find('/');
    if (slash == std::string::npos || e.name.compare(slash, std::string::npos, "/data.pkl") != 0) continue;
    if (pkl) corrupt(kFormat, "two pickles ('" + pkl->name + "', '" + e.name + "') in one archive", e.header_offset);
    pkl = &e;
  }
  if (!pkl) corrupt(kFormat, "no <archive>/data.pkl entry: not a torch.save archive", 0);
  if (pkl->method != ZipMethod::stored) corrupt(kFormat, "'" + pkl->name + "' is compressed (torch.save stores it)", pkl->header_offset);
  a.prefix = pkl->name.substr(0, pkl->name.size() - std::string_view("data.pkl").size());
  a.pickle = {pkl->data_offset, pkl->compressed_size};
  const Pickle p = parse_pickle(file.subspan(static_cast<std::size_t>(pkl->data_offset), static_cast<std::size_t>(pkl->compressed_size)), pkl->data_offset);
  a.state = torch_state(p);
  for (const auto& s : a.state.storages) {
    const std::string entry = a.prefix + "data/" + s.key;
    const ZipEntry* e = a.zip.find(entry);
    if (!e) corrupt(kFormat, "storage '" + s.key + "' has no entry '" + entry + "'", pkl->data_offset);
    if (e->method != ZipMethod::stored) corrupt(kFormat, "'" + entry + "' is compressed (torch.save stores storages)", e->header_offset);
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(s.numel, dtype_size(s.dtype), &bytes) || bytes != e->uncompressed_size)
      corrupt(kFormat, "'" + entry + "' holds " + std::to_string(e->uncompressed_size) + " bytes, its storage " +
                           std::to_string(s.numel) + " x " + std::to_string(dtype_size(s.dtype)), e->header_offset);
    a.storage_entries.push_back(static_cast<std::size_t>(e - a.zip.entries.data()));
    a.storage_data.push_back({e->data_offset, e->uncompressed_size});
  }
  // Every storage member is one the state views: one it does not (a tensor used as a dict key,
  // whose keys are not walked) would be bytes of the file outside the fault space.
  const std::string data_dir = a.prefix + "data/";
  std::unordered_set<std::size_t> viewed(a.storage_entries.begin(), a.storage_entries.end());
  for (std::size_t k = 0; k < a.zip.entries.size(); ++k) {
    const auto& e = a.zip.entries[k];
    if (e.name.starts_with(data_dir) && !viewed.count(k))
      corrupt(kFormat, "'" + printable(e.name) + "' is a storage no tensor of the saved object views (a tensor used as a dict key?)", e.header_offset);
  }
  // <archive>/byteorder (torch 1.10 on): the machine's byte order, which is the storages' ("big" from
  // s390x or ppc64, byte-swapped by torch.load on a little-endian machine). No record: little.
  if (const ZipEntry* bo = a.zip.find(a.prefix + "byteorder")) {
    if (bo->method != ZipMethod::stored) corrupt(kFormat, "'" + bo->name + "' is compressed (torch.save stores it)", bo->header_offset);
    const auto text = file.subspan(static_cast<std::size_t>(bo->data_offset), static_cast<std::size_t>(bo->compressed_size));
    const std::string order(reinterpret_cast<const char*>(text.data()), text.size());
    if (order == "big") a.big_endian = true;
    else if (order != "little") corrupt(kFormat, "'" + bo->name + "' says '" + printable(order) + "', neither 'little' nor 'big'", bo->data_offset);
  }
  return a;
}

std::vector<StorageViews> storage_views(const TorchState& state) {
  std::unordered_map<std::string_view, std::size_t> index;
  for (std::size_t s = 0; s < state.storages.size(); ++s) index.emplace(state.storages[s].key, s);
  std::vector<StorageViews> out(state.storages.size());
  for (const auto& t : state.tensors)
    if (const auto it = index.find(t.storage_key); it != index.end()) out[it->second].viewers.push_back(&t);
  for (auto& v : out) {
    if (v.viewers.empty()) continue;
    // A set, not a search of the list: a storage may have a million viewers (a list of references
    // to one tensor), which a search per viewer makes quadratic.
    std::unordered_set<std::string> named{"/" + v.viewers.front()->name};
    for (const auto* t : v.viewers)
      if (std::string alias = "/" + t->name; named.insert(alias).second) v.aliases.push_back(std::move(alias));
  }
  return out;
}

}  // namespace resil::inject::formats
