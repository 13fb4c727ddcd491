#include "hdf5_values.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string_view>

#include "resil/ckpt/h5.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/core/error.hpp"
#include "resil/inject/names.hpp"

namespace resil::inject {

namespace h5 = ckpt::h5;

namespace {

constexpr std::size_t kPreview = 256;                       // values shown in full up to this many characters
constexpr std::uint64_t kMaxRead = std::uint64_t{64} << 20;  // bytes of one read (an attribute, a slab)
constexpr std::uint64_t kSlabElements = std::uint64_t{1} << 16;
constexpr std::size_t kMaxAttributes = 100000;  // a walk's entries: memory stays bounded (about 300 bytes each)

// Text of a value: kept whole while short, else its XXH64 and its start.
class Sink {
public:
  void put(std::string_view s) {
    hash_.update(std::as_bytes(std::span<const char>(s.data(), s.size())));
    total_ += s.size();
    if (preview_.size() <= kPreview) preview_.append(s.substr(0, kPreview + 1 - preview_.size()));
  }
  std::string text(const std::string& head) const {
    if (total_ <= kPreview) return head + " " + preview_;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash_.digest()));
    return head + " XXH64 " + hex + " of " + std::to_string(total_) + " characters: " + preview_.substr(0, 64) + "...";
  }

private:
  ckpt::Xxh64 hash_;
  std::string preview_;
  std::uint64_t total_ = 0;
};

std::string quoted(const char* p, std::size_t n) { return quote_bytes(std::string_view(p, n)); }

enum class Kind { vstring, fstring, sint, uint, real, ldouble, raw, objref, none };

// Whether a compound or array holds a variable-length string (its bytes would be a pointer).
bool has_vstring(hid_t t) {
  switch (H5Tget_class(t)) {
    case H5T_STRING: return H5Tis_variable_str(t) > 0;
    case H5T_ARRAY: {
      h5::Datatype base(H5Tget_super(t));
      return !base.valid() || has_vstring(base);
    }
    case H5T_COMPOUND: {
      const int n = H5Tget_nmembers(t);
      for (int i = 0; i < n; ++i) {
        h5::Datatype m(H5Tget_member_type(t, static_cast<unsigned>(i)));
        if (!m.valid() || has_vstring(m)) return true;
      }
      return false;
    }
    default: return false;
  }
}

Kind kind_of(hid_t t) {
  const H5T_class_t c = H5Tget_class(t);
  if (c == H5T_STRING) return H5Tis_variable_str(t) > 0 ? Kind::vstring : Kind::fstring;
  if (c == H5T_REFERENCE && H5Tequal(t, H5T_STD_REF_OBJ) > 0) return Kind::objref;  // rendered as the object's path
  // Other references name file addresses; variable-length sequences are pointers in memory.
  if (H5Tdetect_class(t, H5T_REFERENCE) != 0 || H5Tdetect_class(t, H5T_VLEN) != 0 || has_vstring(t)) return Kind::none;
  const std::size_t size = H5Tget_size(t);
  if (c == H5T_INTEGER && size <= 8) return H5Tget_sign(t) == H5T_SGN_NONE ? Kind::uint : Kind::sint;
  if (c == H5T_FLOAT) return size <= 8 ? Kind::real : Kind::ldouble;
  // Wider integers, compounds, arrays, enums, bitfields, opaque, time: their bytes, after their full type.
  if (c == H5T_INTEGER || c == H5T_COMPOUND || c == H5T_ARRAY || c == H5T_ENUM || c == H5T_BITFIELD || c == H5T_OPAQUE || c == H5T_TIME)
    return Kind::raw;
  return Kind::none;
}

// The type as text, members, enum names and opaque tags included: two types that read differently
// never render alike.
std::string type_text(hid_t t, int depth = 0) {
  const std::size_t size = H5Tget_size(t);
  const std::string bytes = std::to_string(size);
  if (depth > 8) return "type" + bytes;
  const std::string order = H5Tget_order(t) == H5T_ORDER_BE ? "be" : "";
  switch (H5Tget_class(t)) {
    case H5T_STRING: return H5Tis_variable_str(t) > 0 ? "vstring" : "string" + bytes;
    case H5T_INTEGER: return (H5Tget_sign(t) == H5T_SGN_NONE ? "uint" : "int") + std::to_string(size * 8) + order;
    case H5T_FLOAT: return "float" + std::to_string(size * 8) + order;
    case H5T_BITFIELD: return "bitfield" + bytes + order;
    case H5T_TIME: return "time" + bytes;
    case H5T_REFERENCE: return H5Tequal(t, H5T_STD_REF_OBJ) > 0 ? "reference" : "region-reference";
    case H5T_VLEN: {
      h5::Datatype base(H5Tget_super(t));
      return "vlen<" + (base.valid() ? type_text(base, depth + 1) : std::string("?")) + ">";
    }
    case H5T_OPAQUE: {
      char* tag = H5Tget_tag(t);
      std::string s = "opaque" + bytes + (tag ? quoted(tag, std::strlen(tag)) : std::string());
      if (tag) H5free_memory(tag);
      return s;
    }
    case H5T_ARRAY: {
      const int rank = H5Tget_array_ndims(t);
      std::vector<hsize_t> dims(static_cast<std::size_t>(rank > 0 ? rank : 0));
      if (rank > 0) H5Tget_array_dims2(t, dims.data());
      h5::Datatype base(H5Tget_super(t));
      std::string s = "array[";
      for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
      return s + "]<" + (base.valid() ? type_text(base, depth + 1) : std::string("?")) + ">";
    }
    case H5T_ENUM: {
      h5::Datatype base(H5Tget_super(t));
      std::string s = "enum" + bytes + "{";
      const int n = H5Tget_nmembers(t);
      std::vector<unsigned char> v(std::max<std::size_t>(size, 1));
      for (int i = 0; i < n; ++i) {
        char* name = H5Tget_member_name(t, static_cast<unsigned>(i));
        std::fill(v.begin(), v.end(), 0);
        H5Tget_member_value(t, static_cast<unsigned>(i), v.data());
        std::string hex;
        for (std::size_t b = 0; b < size; ++b) {
          char h[3];
          std::snprintf(h, sizeof h, "%02x", v[b]);
          hex += h;
        }
        s += (i ? "," : "") + (name ? quoted(name, std::strlen(name)) : std::string("?")) + "=0x" + hex;
        if (name) H5free_memory(name);
      }
      return s + "}";
    }
    case H5T_COMPOUND: {
      std::string s = "compound" + bytes + "{";
      const int n = H5Tget_nmembers(t);
      for (int i = 0; i < n; ++i) {
        char* name = H5Tget_member_name(t, static_cast<unsigned>(i));
        h5::Datatype m(H5Tget_member_type(t, static_cast<unsigned>(i)));
        s += (i ? "," : "") + (name ? quoted(name, std::strlen(name)) : std::string("?")) + "@" +
             std::to_string(H5Tget_member_offset(t, static_cast<unsigned>(i))) + ":" + (m.valid() ? type_text(m, depth + 1) : std::string("?"));
        if (name) H5free_memory(name);
      }
      return s + "}";
    }
    default: return "type" + std::to_string(static_cast<int>(H5Tget_class(t))) + "-" + bytes;
  }
}

std::string shape_text(hid_t space) {
  switch (H5Sget_simple_extent_type(space)) {
    case H5S_NULL: return "(no dataspace)";
    case H5S_SCALAR: return "";
    default: break;
  }
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank > 0 ? rank : 0));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

h5::Datatype memory_type(Kind k, hid_t ftype) {
  switch (k) {
    case Kind::vstring: {
      h5::Datatype t(H5Tcopy(H5T_C_S1));
      if (t.valid() && (H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5Tget_cset(ftype)) < 0)) return h5::Datatype();
      return t;
    }
    case Kind::fstring: return h5::Datatype(H5Tcopy(ftype));
    case Kind::sint: return h5::Datatype(H5Tcopy(H5T_NATIVE_LLONG));
    case Kind::uint: return h5::Datatype(H5Tcopy(H5T_NATIVE_ULLONG));
    case Kind::real: return h5::Datatype(H5Tcopy(H5T_NATIVE_DOUBLE));
    case Kind::ldouble: return h5::Datatype(H5Tcopy(H5T_NATIVE_LDOUBLE));
    case Kind::raw: return h5::Datatype(H5Tcopy(ftype));  // the stored bytes, as stored
    case Kind::objref: return h5::Datatype(H5Tcopy(H5T_STD_REF_OBJ));
    case Kind::none: break;
  }
  return h5::Datatype();
}

// Object address -> its first path in name order (the walk's), for object references: one
// dereference per reference, not a search of the file for its name.
using Paths = std::map<haddr_t, std::string>;

template <class T>
T load(const std::byte* e) {
  T v{};
  std::memcpy(&v, e, sizeof v);
  return v;
}

// `n` elements of memory type `mt` at `buf`, appended to `s` after `done` earlier ones.
void render(Kind k, hid_t file, const Paths& paths, hid_t ftype, hid_t mt, const std::byte* buf, std::uint64_t n, std::uint64_t done,
            Sink& s) {
  const std::size_t size = H5Tget_size(mt);
  const H5T_str_t pad = k == Kind::fstring ? H5Tget_strpad(ftype) : H5T_STR_NULLPAD;
  char num[64];
  std::string hex;
  for (std::uint64_t i = 0; i < n; ++i) {
    if (done + i) s.put(", ");
    const std::byte* e = buf + i * size;
    switch (k) {
      case Kind::vstring: {
        const char* p = nullptr;
        std::memcpy(&p, e, sizeof p);
        s.put(quoted(p ? p : "", p ? std::strlen(p) : 0));  // a never-written string (NULL) reads as "", as in h5py
        break;
      }
      case Kind::fstring: {
        const char* p = reinterpret_cast<const char*>(e);
        std::size_t len = size;
        if (pad == H5T_STR_NULLTERM) len = strnlen(p, size);
        else
          while (len > 0 && p[len - 1] == (pad == H5T_STR_SPACEPAD ? ' ' : '\0')) --len;
        s.put(quoted(p, len));
        break;
      }
      case Kind::sint: s.put(std::to_string(load<long long>(e))); break;
      case Kind::uint: s.put(std::to_string(load<unsigned long long>(e))); break;
      case Kind::real: {
        const double v = load<double>(e);
        if (std::isnan(v))  // the payload, as the tensor comparison counts it
          std::snprintf(num, sizeof num, "nan(0x%016llx)", static_cast<unsigned long long>(std::bit_cast<std::uint64_t>(v)));
        else
          std::snprintf(num, sizeof num, "%.17g", v);
        s.put(num);
        break;
      }
      case Kind::ldouble:
        std::snprintf(num, sizeof num, "%.21Lg", load<long double>(e));
        s.put(num);
        break;
      case Kind::raw: {
        static constexpr char digits[] = "0123456789abcdef";
        hex.assign("0x");
        for (std::size_t b = 0; b < size; ++b) {
          const auto c = static_cast<unsigned>(e[b]);
          hex += digits[c >> 4];
          hex += digits[c & 15];
        }
        s.put(hex);
        break;
      }
      case Kind::objref: {
        hobj_ref_t ref{};
        std::memcpy(&ref, e, sizeof ref);
        const hid_t o = ref ? H5Rdereference2(file, H5P_DEFAULT, H5R_OBJECT, &ref) : -1;
        H5O_info_t info{};
        if (o < 0 || H5Oget_info2(o, &info, H5O_INFO_BASIC) < 0) {
          s.put("ref(none)");
        } else {
          const auto it = paths.find(info.addr);
          s.put(it == paths.end() ? std::string("ref(an object without a path)") : "ref" + quoted(it->second.data(), it->second.size()));
        }
        if (o >= 0) H5Oclose(o);
        break;
      }
      case Kind::none: break;
    }
  }
}

OtherContent not_compared(OtherContent c, const std::string& head, const std::string& why) {
  c.value = (head.empty() ? "(" : head + " (") + why + ": not compared)";
  c.compared = false;
  return c;
}

// A value's head (type and shape) and the kind and memory type it is read in; nullopt when nothing
// is read, with c holding the verdict (a null dataspace: the head; a type not rendered: not compared).
std::optional<std::pair<Kind, h5::Datatype>> prepare(OtherContent& c, hid_t ftype, hid_t space, std::string& head) {
  head = type_text(ftype) + shape_text(space);
  const Kind k = kind_of(ftype);
  if (k == Kind::none) {
    c = not_compared(std::move(c), head, "region references or variable-length sequences");
    return std::nullopt;
  }
  c.value = head;
  if (H5Sget_simple_extent_type(space) == H5S_NULL) return std::nullopt;
  h5::Datatype mt = memory_type(k, ftype);
  if (!mt.valid()) {
    c = not_compared(std::move(c), head, "no memory type");
    return std::nullopt;
  }
  return std::make_pair(k, std::move(mt));
}

OtherContent attribute_value(hid_t file, const Paths& paths, hid_t attr, OtherContent c) {
  h5::Datatype ftype(H5Aget_type(attr));
  h5::Dataspace space(H5Aget_space(attr));
  if (!ftype.valid() || !space.valid()) return not_compared(std::move(c), "", "its type or dataspace cannot be read");
  std::string head;
  auto typed = prepare(c, ftype, space, head);
  if (!typed) return c;
  const Kind k = typed->first;
  const h5::Datatype& mt = typed->second;
  const hssize_t np = H5Sget_simple_extent_npoints(space);
  const std::uint64_t n = np > 0 ? static_cast<std::uint64_t>(np) : 0, size = H5Tget_size(mt);
  if (size && n > kMaxRead / size) return not_compared(std::move(c), head, "larger than 64 MiB");
  std::vector<std::byte> buf(std::max<std::uint64_t>(1, n * size));
  if (H5Aread(attr, mt, buf.data()) < 0) return not_compared(std::move(c), head, "cannot be read");
  Sink s;
  render(k, file, paths, ftype, mt, buf.data(), n, 0, s);
  if (k == Kind::vstring) H5Dvlen_reclaim(mt, space, H5P_DEFAULT, buf.data());
  c.value = s.text(head);
  return c;
}

OtherContent attribute_item(const std::string& object, const std::string& name) {
  OtherContent c;
  c.name = object + "@" + name;
  c.key = std::string("\0attr\0", 6) + object + std::string(1, '\0') + name;
  c.object = object;
  c.attribute = name;
  return c;
}

struct Walk {
  hid_t file;
  Paths paths;
  std::vector<OtherContent> out;
  std::string object;  // the object whose attributes are being visited
  bool full = false;
};

herr_t on_attribute(hid_t loc, const char* name, const H5A_info_t*, void* data) {
  auto& w = *static_cast<Walk*>(data);
  if (w.out.size() >= kMaxAttributes) {
    w.full = true;
    return 1;
  }
  OtherContent c = attribute_item(w.object, name);
  h5::Attribute a(H5Aopen(loc, name, H5P_DEFAULT));
  w.out.push_back(a.valid() ? attribute_value(w.file, w.paths, a, std::move(c)) : not_compared(std::move(c), "", "cannot be opened"));
  return 0;
}

std::string object_path(const char* name) { return std::strcmp(name, ".") == 0 ? "/" : "/" + std::string(name); }

herr_t on_object(hid_t loc, const char* name, const H5O_info_t* info, void* data) {
  auto& w = *static_cast<Walk*>(data);
  if (info->num_attrs == 0) return 0;
  w.object = object_path(name);
  const hid_t o = H5Oopen(loc, name, H5P_DEFAULT);
  if (o < 0) {
    w.out.push_back(not_compared(attribute_item(w.object, ""), "", "the object's attributes cannot be listed"));
    return 0;
  }
  hsize_t idx = 0;
  const herr_t rc = H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_INC, &idx, on_attribute, &w);
  H5Oclose(o);
  if (rc < 0) w.out.push_back(not_compared(attribute_item(w.object, ""), "", "the object's attributes cannot be listed"));
  return w.full ? 1 : 0;
}

herr_t on_address(hid_t, const char* name, const H5O_info_t* info, void* data) {
  static_cast<Paths*>(data)->emplace(info->addr, object_path(name));
  return 0;
}

Paths object_paths(hid_t file, const std::string& path) {
  Paths p;
  if (H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_INC, on_address, &p, H5O_INFO_BASIC) < 0)
    h5::throw_error(path + ": cannot walk the file's objects", ExitCode::corrupt_input);
  return p;
}

}  // namespace

std::vector<OtherContent> hdf5_attributes(hid_t file, const std::string& path) {
  h5::SilenceErrors quiet;
  Walk w{file, object_paths(file, path), {}, {}, false};
  if (H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_INC, on_object, &w, H5O_INFO_NUM_ATTRS) < 0)
    h5::throw_error(path + ": cannot walk the file's objects for their attributes", ExitCode::corrupt_input);
  if (w.full) {
    OtherContent c;
    c.name = "@";
    c.key = std::string("\0attr-limit", 11);
    c.value = "more than " + std::to_string(kMaxAttributes) + " attributes: the rest not compared";
    c.compared = false;
    w.out.push_back(std::move(c));
  }
  return std::move(w.out);
}

OtherContent hdf5_dataset_values(hid_t file, const std::string& name, const std::string& path) {
  h5::SilenceErrors quiet;
  OtherContent c;
  c.name = name;
  c.key = values_key(name);
  h5::Dataset d(H5Dopen2(file, name.c_str(), H5P_DEFAULT));
  if (!d.valid()) h5::throw_error(path + ": dataset " + name + " cannot be opened", ExitCode::corrupt_input);
  h5::Datatype ftype(H5Dget_type(d));
  h5::Dataspace space(H5Dget_space(d));
  if (!ftype.valid() || !space.valid()) h5::throw_error(path + ": dataset " + name + ": type or dataspace cannot be read", ExitCode::corrupt_input);
  std::string head;
  auto typed = prepare(c, ftype, space, head);
  if (!typed) return c;
  const Kind k = typed->first;
  const h5::Datatype& mt = typed->second;
  const std::uint64_t size = H5Tget_size(mt);
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank > 0 ? rank : 0));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  // Slabs of whole rows (the first dimension); a scalar is one row of one element. A slab of
  // variable-length strings is halved while their bytes exceed 64 MiB.
  std::uint64_t rows = dims.empty() ? 1 : dims[0], row = 1;
  for (std::size_t i = 1; i < dims.size(); ++i) row *= dims[i];
  if (row == 0) rows = 0;
  if (row && size && row > kMaxRead / size) return not_compared(std::move(c), head, "rows larger than 64 MiB");
  std::uint64_t step = std::max<std::uint64_t>(1, kSlabElements / std::max<std::uint64_t>(row, 1));
  std::vector<std::byte> buf;
  Sink s;
  for (std::uint64_t r = 0; r < rows;) {
    std::uint64_t k_rows = std::min(step, rows - r);
    h5::Dataspace fsel(H5Scopy(space));
    auto select = [&] {
      if (dims.empty()) return;
      std::vector<hsize_t> start(dims.size(), 0), count(dims);
      start[0] = r;
      count[0] = k_rows;
      if (H5Sselect_hyperslab(fsel, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0)
        h5::throw_error(path + ": dataset " + name + ": cannot select rows", ExitCode::corrupt_input);
    };
    select();
    if (k == Kind::vstring) {
      for (;;) {
        hsize_t need = 0;
        if (H5Dvlen_get_buf_size(d, mt, fsel, &need) < 0)
          h5::throw_error(path + ": dataset " + name + ": its values cannot be read", ExitCode::corrupt_input);
        if (need <= kMaxRead) break;
        if (k_rows == 1) return not_compared(std::move(c), head, "a row of strings larger than 64 MiB");
        k_rows = (k_rows + 1) / 2;
        step = k_rows;
        select();
      }
    }
    const std::uint64_t n = k_rows * row;
    buf.assign(std::max<std::uint64_t>(1, n * size), std::byte{0});
    const hsize_t cnt = n;
    h5::Dataspace msel(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &cnt, nullptr));
    if (H5Dread(d, mt, msel, fsel, H5P_DEFAULT, buf.data()) < 0)
      h5::throw_error(path + ": dataset " + name + ": its values cannot be read", ExitCode::corrupt_input);
    render(k, file, {}, ftype, mt, buf.data(), n, r * row, s);
    if (k == Kind::vstring) H5Dvlen_reclaim(mt, msel, H5P_DEFAULT, buf.data());
    r += k_rows;
  }
  c.value = s.text(head);
  return c;
}

namespace {

void put_u64(std::string& out, std::uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
void put_text(std::string& out, const std::string& t) {
  put_u64(out, t.size());
  out += t;
}

struct Reader {
  std::string_view in;
  bool ok = true;
  std::uint64_t u64() {
    std::uint64_t v = 0;
    if (in.size() < sizeof v) {
      ok = false;
      return 0;
    }
    std::memcpy(&v, in.data(), sizeof v);
    in.remove_prefix(sizeof v);
    return v;
  }
  std::string text() {
    const std::uint64_t n = u64();
    if (!ok || n > in.size()) {
      ok = false;
      return {};
    }
    std::string t(in.substr(0, n));
    in.remove_prefix(n);
    return t;
  }
};

bool write_all(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t w = ::write(fd, data.data() + done, data.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += static_cast<std::size_t>(w);
  }
  return true;
}

// The process's address space now (bytes), from /proc/self/statm; 0 when unknown.
std::uint64_t address_space() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long pages = 0;
  const int got = std::fscanf(f, "%llu", &pages);
  std::fclose(f);
  return got == 1 ? pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

}  // namespace

std::vector<OtherContent> hdf5_other_values(hid_t file, const std::string& path, const std::vector<std::string>& vlen_datasets) {
  auto work = [&] {
    std::vector<OtherContent> out = hdf5_attributes(file, path);
    for (const auto& d : vlen_datasets) out.push_back(hdf5_dataset_values(file, d, path));
    return out;
  };
  // HDF5 1.10 crashes on some damaged attribute and heap messages, and allocates what a damaged
  // string length says (gigabytes from a 6 KB file); only this walk reads them. It runs in a child
  // process with 1 GiB more address space than the parent has now: a crash or an exhausted limit
  // there is one item not compared, not the end of diff.
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return work();  // no pipe: in process
  std::fflush(nullptr);
  const std::uint64_t limit = address_space();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return work();
  }
  if (pid == 0) {
    ::close(fds[0]);
    if (limit) {
      const rlimit rl{limit + (std::uint64_t{1} << 30), limit + (std::uint64_t{1} << 30)};
      ::setrlimit(RLIMIT_AS, &rl);
    }
    std::string msg;
    try {
      for (const auto& c : work()) {
        msg += 'I';
        put_text(msg, c.name);
        put_text(msg, c.value);
        msg += c.compared ? '1' : '0';
        put_text(msg, c.key);
        put_text(msg, c.object);
        put_text(msg, c.attribute);
      }
      msg += 'Z';
    } catch (const Error& e) {
      msg.assign(1, 'E');
      put_u64(msg, static_cast<std::uint64_t>(e.exit_code()));
      put_text(msg, e.what());
    } catch (const std::bad_alloc&) {
      msg.assign(1, 'M');
    } catch (...) {
      msg.assign(1, 'X');
    }
    ::_exit(write_all(fds[1], msg) ? 0 : 1);
  }
  ::close(fds[1]);
  std::string data;
  char buf[65536];
  for (;;) {
    const ssize_t r = ::read(fds[0], buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    data.append(buf, static_cast<std::size_t>(r));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  OtherContent failed;
  failed.name = "@";
  failed.key = std::string("\0attr-failed", 12);
  failed.compared = false;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || data.empty()) {
    failed.value = WIFSIGNALED(status) ? "HDF5 crashed (signal " + std::to_string(WTERMSIG(status)) +
                                             ") reading the attributes or string values: a damaged file? not compared"
                                       : "the attributes and string values could not be read: not compared";
    return {failed};
  }
  Reader rd{data};
  const char tag = data.front();
  rd.in.remove_prefix(1);
  if (tag == 'E') {
    const auto code = static_cast<ExitCode>(rd.u64());
    throw Hdf5Error(rd.text(), code);
  }
  if (tag == 'Z') return {};
  if (tag == 'M') {
    failed.value = "the attributes or string values need more than 1 GiB (a damaged length?): not compared";
    return {failed};
  }
  std::vector<OtherContent> out;
  for (char t = tag; rd.ok && t == 'I';) {
    OtherContent c;
    c.name = rd.text();
    c.value = rd.text();
    c.compared = !rd.in.empty() && rd.in.front() == '1';
    if (!rd.in.empty()) rd.in.remove_prefix(1);
    c.key = rd.text();
    c.object = rd.text();
    c.attribute = rd.text();
    out.push_back(std::move(c));
    t = rd.in.empty() ? '\0' : rd.in.front();
    if (!rd.in.empty()) rd.in.remove_prefix(1);
    if (t == 'Z') return out;
  }
  failed.value = "the attributes and string values could not be read: not compared";
  return {failed};
}

}  // namespace resil::inject
