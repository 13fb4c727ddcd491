#include "hdf5_values.hpp"

#include <cstdio>
#include <cstring>
#include <string_view>

#include "resil/ckpt/h5.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/core/error.hpp"

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

void put_quoted(Sink& s, const char* p, std::size_t n) {
  std::string q = "\"";
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(p[i]);
    if (c == '"' || c == '\\') {
      q += '\\';
      q += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      q += static_cast<char>(c);
    } else {
      char e[5];
      std::snprintf(e, sizeof e, "\\x%02x", c);
      q += e;
    }
  }
  q += '"';
  s.put(q);
}

enum class Kind { vstring, fstring, sint, uint, real, ldouble, raw, objref, none };

// Whether a compound or array holds a variable-length string (its bytes would be a pointer).
bool has_vstring(hid_t t) {
  switch (H5Tget_class(t)) {
    case H5T_STRING: return H5Tis_variable_str(t) > 0;
    case H5T_ARRAY: {
      h5::Datatype base(H5Tget_super(t));
      return base.valid() && has_vstring(base);
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
  if (c == H5T_INTEGER) return H5Tget_sign(t) == H5T_SGN_NONE ? Kind::uint : Kind::sint;
  if (c == H5T_FLOAT) return H5Tget_size(t) <= 8 ? Kind::real : Kind::ldouble;
  if (c == H5T_COMPOUND || c == H5T_ARRAY || c == H5T_ENUM || c == H5T_BITFIELD || c == H5T_OPAQUE || c == H5T_TIME) return Kind::raw;
  return Kind::none;
}

std::string type_text(hid_t t) {
  const std::size_t size = H5Tget_size(t);
  switch (H5Tget_class(t)) {
    case H5T_STRING: return H5Tis_variable_str(t) > 0 ? "vstring" : "string" + std::to_string(size);
    case H5T_INTEGER: return (H5Tget_sign(t) == H5T_SGN_NONE ? "uint" : "int") + std::to_string(size * 8);
    case H5T_FLOAT: return "float" + std::to_string(size * 8);
    case H5T_COMPOUND: return "compound" + std::to_string(size);
    case H5T_ARRAY: return "array" + std::to_string(size);
    case H5T_ENUM: return "enum" + std::to_string(size);
    case H5T_BITFIELD: return "bitfield" + std::to_string(size);
    case H5T_OPAQUE: return "opaque" + std::to_string(size);
    case H5T_TIME: return "time" + std::to_string(size);
    case H5T_REFERENCE: return "reference";
    case H5T_VLEN: return "vlen";
    default: return "type" + std::to_string(static_cast<int>(H5Tget_class(t)));
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
    case Kind::raw: return h5::Datatype(H5Tget_native_type(ftype, H5T_DIR_ASCEND));
    case Kind::objref: return h5::Datatype(H5Tcopy(H5T_STD_REF_OBJ));
    case Kind::none: break;
  }
  return h5::Datatype();
}

// `n` elements of memory type `mt` at `buf`, appended to `s` after `done` earlier ones; `file`
// resolves object references.
void render(Kind k, hid_t file, hid_t ftype, hid_t mt, const std::byte* buf, std::uint64_t n, std::uint64_t done, Sink& s) {
  const std::size_t size = H5Tget_size(mt);
  const H5T_str_t pad = k == Kind::fstring ? H5Tget_strpad(ftype) : H5T_STR_NULLPAD;
  char num[64];
  for (std::uint64_t i = 0; i < n; ++i) {
    if (done + i) s.put(", ");
    const std::byte* e = buf + i * size;
    switch (k) {
      case Kind::vstring: {
        const char* p = nullptr;
        std::memcpy(&p, e, sizeof p);
        if (p) put_quoted(s, p, std::strlen(p));
        else s.put("null");
        break;
      }
      case Kind::fstring: {
        const char* p = reinterpret_cast<const char*>(e);
        std::size_t len = size;
        if (pad == H5T_STR_NULLTERM) len = strnlen(p, size);
        else
          while (len > 0 && p[len - 1] == (pad == H5T_STR_SPACEPAD ? ' ' : '\0')) --len;
        put_quoted(s, p, len);
        break;
      }
      case Kind::sint: {
        long long v = 0;
        std::memcpy(&v, e, sizeof v);
        std::snprintf(num, sizeof num, "%lld", v);
        s.put(num);
        break;
      }
      case Kind::uint: {
        unsigned long long v = 0;
        std::memcpy(&v, e, sizeof v);
        std::snprintf(num, sizeof num, "%llu", v);
        s.put(num);
        break;
      }
      case Kind::real: {
        double v = 0;
        std::memcpy(&v, e, sizeof v);
        std::snprintf(num, sizeof num, "%.17g", v);
        s.put(num);
        break;
      }
      case Kind::ldouble: {
        long double v = 0;
        std::memcpy(&v, e, sizeof v);
        std::snprintf(num, sizeof num, "%.21Lg", v);
        s.put(num);
        break;
      }
      case Kind::raw: {
        std::string hex = "0x";
        for (std::size_t b = 0; b < size; ++b) {
          std::snprintf(num, sizeof num, "%02x", static_cast<unsigned>(e[b]));
          hex += num;
        }
        s.put(hex);
        break;
      }
      case Kind::objref: {
        hobj_ref_t ref{};
        std::memcpy(&ref, e, sizeof ref);
        char path[1024] = {};
        const ssize_t len = H5Rget_name(file, H5R_OBJECT, &ref, path, sizeof path);
        if (len <= 0) s.put("ref(none)");
        else if (static_cast<std::size_t>(len) >= sizeof path) s.put("ref(a path longer than 1023 bytes)");
        else {
          s.put("ref");
          put_quoted(s, path, static_cast<std::size_t>(len));
        }
        break;
      }
      case Kind::none: break;
    }
  }
}

OtherContent not_compared(std::string name, const std::string& head, const std::string& why) {
  return {std::move(name), head + " (" + why + ": not compared)", false};
}

OtherContent attribute_value(hid_t file, hid_t attr, std::string key) {
  h5::Datatype ftype(H5Aget_type(attr));
  h5::Dataspace space(H5Aget_space(attr));
  if (!ftype.valid() || !space.valid()) return {std::move(key), "(cannot be read: not compared)", false};
  const std::string head = type_text(ftype) + shape_text(space);
  const Kind k = kind_of(ftype);
  if (k == Kind::none) return not_compared(std::move(key), head, "references or variable-length sequences");
  if (H5Sget_simple_extent_type(space) == H5S_NULL) return {std::move(key), head, true};
  const h5::Datatype mt = memory_type(k, ftype);
  if (!mt.valid()) return not_compared(std::move(key), head, "no memory type");
  const hssize_t np = H5Sget_simple_extent_npoints(space);
  const std::uint64_t n = np > 0 ? static_cast<std::uint64_t>(np) : 0, size = H5Tget_size(mt);
  if (size && n > kMaxRead / size) return not_compared(std::move(key), head, "larger than 64 MiB");
  std::vector<std::byte> buf(std::max<std::uint64_t>(1, n * size));
  if (H5Aread(attr, mt, buf.data()) < 0) return not_compared(std::move(key), head, "cannot be read");
  Sink s;
  render(k, file, ftype, mt, buf.data(), n, 0, s);
  if (k == Kind::vstring) H5Dvlen_reclaim(mt, space, H5P_DEFAULT, buf.data());
  return {std::move(key), s.text(head), true};
}

struct Walk {
  hid_t file;
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
  std::string key = w.object + "@" + name;
  h5::Attribute a(H5Aopen(loc, name, H5P_DEFAULT));
  if (!a.valid()) w.out.push_back({std::move(key), "(cannot be opened: not compared)", false});
  else w.out.push_back(attribute_value(w.file, a, std::move(key)));
  return 0;
}

herr_t on_object(hid_t loc, const char* name, const H5O_info_t* info, void* data) {
  auto& w = *static_cast<Walk*>(data);
  if (info->num_attrs == 0) return 0;
  w.object = std::strcmp(name, ".") == 0 ? "/" : "/" + std::string(name);
  const hid_t o = H5Oopen(loc, name, H5P_DEFAULT);
  if (o < 0) {
    w.out.push_back({w.object + "@", "(attributes of an object that cannot be opened: not compared)", false});
    return 0;
  }
  hsize_t idx = 0;
  const herr_t rc = H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_INC, &idx, on_attribute, &w);
  H5Oclose(o);
  if (rc < 0) w.out.push_back({w.object + "@", "(attributes that cannot be listed: not compared)", false});
  return w.full ? 1 : 0;
}

}  // namespace

std::vector<OtherContent> hdf5_attributes(hid_t file, const std::string& path) {
  h5::SilenceErrors quiet;
  Walk w{file, {}, {}, false};
  if (H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_INC, on_object, &w, H5O_INFO_NUM_ATTRS) < 0)
    throw CorruptInputError(path + ": cannot walk the file's objects for their attributes");
  if (w.full) w.out.push_back({"@", "more than " + std::to_string(kMaxAttributes) + " attributes: the rest not compared", false});
  return std::move(w.out);
}

OtherContent hdf5_dataset_values(hid_t file, const std::string& name, const std::string& path) {
  h5::SilenceErrors quiet;
  h5::Dataset d(H5Dopen2(file, name.c_str(), H5P_DEFAULT));
  if (!d.valid()) throw CorruptInputError(path + ": dataset " + name + " cannot be opened");
  h5::Datatype ftype(H5Dget_type(d));
  h5::Dataspace space(H5Dget_space(d));
  if (!ftype.valid() || !space.valid()) throw CorruptInputError(path + ": dataset " + name + ": type or dataspace cannot be read");
  const std::string head = type_text(ftype) + shape_text(space);
  const Kind k = kind_of(ftype);
  if (k == Kind::none) return not_compared(name, head, "references or variable-length sequences");
  if (H5Sget_simple_extent_type(space) == H5S_NULL) return {name, head, true};
  const h5::Datatype mt = memory_type(k, ftype);
  if (!mt.valid()) return not_compared(name, head, "no memory type");
  const std::uint64_t size = H5Tget_size(mt);
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank > 0 ? rank : 0));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  // Slabs of whole rows (the first dimension); a scalar is one row of one element.
  std::uint64_t rows = dims.empty() ? 1 : dims[0], row = 1;
  for (std::size_t i = 1; i < dims.size(); ++i) row *= dims[i];
  if (row == 0) rows = 0;
  if (row && size && row > kMaxRead / size) return not_compared(name, head, "rows larger than 64 MiB");
  const std::uint64_t step = std::max<std::uint64_t>(1, kSlabElements / std::max<std::uint64_t>(row, 1));
  std::vector<std::byte> buf;
  Sink s;
  for (std::uint64_t r = 0; r < rows; r += step) {
    const std::uint64_t k_rows = std::min(step, rows - r), n = k_rows * row;
    buf.assign(std::max<std::uint64_t>(1, n * size), std::byte{0});
    h5::Dataspace fsel(H5Scopy(space));
    if (!dims.empty()) {
      std::vector<hsize_t> start(dims.size(), 0), count(dims);
      start[0] = r;
      count[0] = k_rows;
      if (H5Sselect_hyperslab(fsel, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0)
        throw CorruptInputError(path + ": dataset " + name + ": cannot select rows");
    }
    const hsize_t cnt = n;
    h5::Dataspace msel(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &cnt, nullptr));
    if (H5Dread(d, mt, msel, fsel, H5P_DEFAULT, buf.data()) < 0)
      throw CorruptInputError(path + ": dataset " + name + ": its values cannot be read");
    render(k, file, ftype, mt, buf.data(), n, r * row, s);
    if (k == Kind::vstring) H5Dvlen_reclaim(mt, msel, H5P_DEFAULT, buf.data());
  }
  return {name, s.text(head), true};
}

}  // namespace resil::inject
