#include "resil/ckpt/io.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "resil/ckpt/hash.hpp"

namespace resil::ckpt {

namespace {

std::string where(const std::string& file, const std::string& path) {
  return (file.empty() ? std::string() : file + ": ") + "dataset " + path;
}

// IEEE half as h5py defines it (there is no predefined HDF5 1.10 type for it).
h5::Datatype make_f16_type() {
  h5::Datatype t(H5Tcopy(H5T_IEEE_F32LE));
  H5Tset_fields(t, 15, 10, 5, 0, 10);
  H5Tset_size(t, 2);
  H5Tset_ebias(t, 15);
  return t;
}

Shape dataspace_shape(hid_t space) {
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0) h5::throw_error("query dataspace", ExitCode::corrupt_input);
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  return Shape(dims.begin(), dims.end());
}

std::string type_description(hid_t type) {
  switch (H5Tget_class(type)) {
    case H5T_COMPOUND: return "compound";
    case H5T_STRING: return "string";
    case H5T_VLEN: return "vlen";
    case H5T_ENUM: return "enum";
    case H5T_ARRAY: return "array";
    case H5T_OPAQUE: return "opaque";
    case H5T_REFERENCE: return "reference";
    case H5T_BITFIELD: return "bitfield";
    case H5T_TIME: return "time";
    case H5T_FLOAT: return "float" + std::to_string(H5Tget_size(type) * 8);
    case H5T_INTEGER: return (H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int") + std::to_string(H5Tget_size(type) * 8);
    default: return "unknown";
  }
}

// Whether a type holds variable-length data anywhere (vlen, variable strings, inside compounds and arrays).
bool has_variable_length(hid_t type) {
  switch (H5Tget_class(type)) {
    case H5T_VLEN: return true;
    case H5T_STRING: return H5Tis_variable_str(type) > 0;
    case H5T_ARRAY: {
      h5::Datatype base(H5Tget_super(type));
      return base.valid() && has_variable_length(base);
    }
    case H5T_COMPOUND: {
      const int n = H5Tget_nmembers(type);
      for (int i = 0; i < n; ++i) {
        h5::Datatype m(H5Tget_member_type(type, static_cast<unsigned>(i)));
        if (m.valid() && has_variable_length(m)) return true;
      }
      return false;
    }
    default: return false;
  }
}

bool has_bf16_marker(hid_t obj) {
  return h5::has_attr(obj, dtype_attr) && h5::read_attr_str(obj, dtype_attr) == "bf16";
}

}  // namespace

std::optional<DType> dtype_from_h5(hid_t type, bool bf16_marker) {
  const std::size_t size = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_FLOAT: {
      // Only IEEE-layout floats: the bit-field names (sign/exponent/mantissa) must mean what they say.
      std::size_t spos, epos, esize, mpos, msize;
      if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0) return std::nullopt;
      if (size == 8 && esize == 11 && msize == 52) return DType::f64;
      if (size == 4 && esize == 8 && msize == 23) return DType::f32;
      if (size == 2 && esize == 5 && msize == 10) return DType::f16;
      if (size == 2 && esize == 8 && msize == 7) return DType::bf16;
      return std::nullopt;
    }
    case H5T_INTEGER: {
      const bool sign = H5Tget_sign(type) != H5T_SGN_NONE;
      switch (size) {
        case 8: return sign ? DType::i64 : DType::u64;
        case 4: return sign ? DType::i32 : DType::u32;
        case 2: return sign ? DType::i16 : (bf16_marker ? DType::bf16 : DType::u16);
        case 1: return sign ? DType::i8 : DType::u8;
        default: return std::nullopt;
      }
    }
    default: return std::nullopt;
  }
}

h5::Datatype h5_native_type(DType t) {
  switch (t) {
    case DType::f64: return h5::Datatype(H5Tcopy(H5T_NATIVE_DOUBLE));
    case DType::f32: return h5::Datatype(H5Tcopy(H5T_NATIVE_FLOAT));
    case DType::f16: return make_f16_type();
    case DType::bf16: return h5::Datatype(H5Tcopy(H5T_NATIVE_UINT16));
    case DType::i64: return h5::Datatype(H5Tcopy(H5T_NATIVE_INT64));
    case DType::i32: return h5::Datatype(H5Tcopy(H5T_NATIVE_INT32));
    case DType::i16: return h5::Datatype(H5Tcopy(H5T_NATIVE_INT16));
    case DType::i8: return h5::Datatype(H5Tcopy(H5T_NATIVE_INT8));
    case DType::u64: return h5::Datatype(H5Tcopy(H5T_NATIVE_UINT64));
    case DType::u32: return h5::Datatype(H5Tcopy(H5T_NATIVE_UINT32));
    case DType::u16: return h5::Datatype(H5Tcopy(H5T_NATIVE_UINT16));
    case DType::u8: return h5::Datatype(H5Tcopy(H5T_NATIVE_UINT8));
    // No HDF5 counterpart: the stored byte, as bf16 is stored as uint16.
    case DType::f8_e4m3: case DType::f8_e5m2: case DType::f8_e8m0: case DType::f8_e4m3fnuz: case DType::f8_e5m2fnuz: case DType::boolean:
      return h5::Datatype(H5Tcopy(H5T_NATIVE_UINT8));
  }
  throw UsageError("unknown dtype");
}

void write_tensor(hid_t file, const std::string& path, const Tensor& t, const WriteOptions& opt) {
  write_tensor_data(file, path, t, opt);
  set_checksum(file, path, xxh64(t.bytes()));
}

void set_checksum(hid_t file, const std::string& path, std::uint64_t checksum) {
  h5::Dataset d = h5::open_dataset(file, path, "");
  h5::write_attr_u64(d, checksum_attr, checksum);
}

void write_tensor_data(hid_t file, const std::string& path, const Tensor& t, const WriteOptions& opt) {
  h5::SilenceErrors quiet;
  h5::make_parents(file, path);
  const auto& shape = t.shape();
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  h5::Dataspace space(shape.empty() ? H5Screate(H5S_SCALAR)
                                    : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  h5::PropList dcpl = h5::untimed_create_plist(H5P_DATASET_CREATE);
  if (!opt.chunks.empty()) {
    if (opt.chunks.size() != shape.size())
      throw UsageError(path + ": chunk rank " + std::to_string(opt.chunks.size()) + " != tensor rank " + std::to_string(shape.size()));
    std::vector<hsize_t> c(opt.chunks.size());
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = std::max<hsize_t>(1, std::min<hsize_t>(opt.chunks[i], std::max<hsize_t>(1, dims[i])));
    RESIL_H5_CHECK(H5Pset_chunk(dcpl, static_cast<int>(c.size()), c.data()), "set chunk for " + path);
    if (opt.shuffle) RESIL_H5_CHECK(H5Pset_shuffle(dcpl), "set shuffle for " + path);
    if (opt.gzip_level > 0) RESIL_H5_CHECK(H5Pset_deflate(dcpl, static_cast<unsigned>(opt.gzip_level)), "set deflate for " + path);
  } else if (opt.gzip_level > 0 || opt.shuffle) {
    throw UsageError(path + ": compression filters need a chunked layout");
  }
  // File type: little-endian IEEE / integers of the same width (no conversion on x86-64).
  h5::Datatype ftype = h5_native_type(t.dtype());
  h5::Dataset d(RESIL_H5_CHECK(H5Dcreate2(file, path.c_str(), ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
                               "create dataset " + path));
  if (t.nbytes() > 0) RESIL_H5_CHECK(H5Dwrite(d, ftype, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.bytes().data()), "write dataset " + path);
  if (t.dtype() == DType::bf16) h5::write_attr_str(d, dtype_attr, "bf16");
}

Tensor read_tensor(hid_t file, const std::string& path, const std::string& fname) {
  h5::Dataset d = h5::open_dataset(file, path, fname);
  h5::SilenceErrors quiet;
  h5::Datatype ftype(H5Dget_type(d));
  const auto dt = dtype_from_h5(ftype, has_bf16_marker(d));
  if (!dt) throw CorruptInputError(where(fname, path) + ": unsupported element type " + type_description(ftype));
  h5::Dataspace space(H5Dget_space(d));
  if (H5Sget_simple_extent_type(space) == H5S_NULL) throw CorruptInputError(where(fname, path) + ": has a null dataspace");
  Tensor t(*dt, dataspace_shape(space), Tensor::uninitialized);
  h5::Datatype mtype = h5_native_type(*dt);
  if (t.nbytes() > 0 && H5Dread(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.bytes().data()) < 0)
    h5::throw_error(where(fname, path) + ": read failed", ExitCode::corrupt_input);
  return t;
}

Tensor read_tensor_as(hid_t file, const std::string& path, DType dtype, const Shape& shape, const std::string& fname) {
  Tensor t = read_tensor(file, path, fname);
  if (t.dtype() != dtype || t.shape() != shape)
    throw MismatchError(where(fname, path) + ": expected " + std::string(dtype_name(dtype)) + shape_string(shape) + ", found " +
                        std::string(dtype_name(t.dtype())) + shape_string(t.shape()));
  return t;
}

std::uint64_t DatasetInfo::numel() const noexcept {
  if (null_space) return 0;
  std::uint64_t n = 1;
  for (const auto d : shape) {
    if (d == 0) return 0;
    if (n > UINT64_MAX / d) n = UINT64_MAX;  // saturate, but a later 0 still makes it 0
    else n *= d;
  }
  return n;
}

DatasetInfo describe_dataset(hid_t file, const std::string& path) {
  h5::Dataset d = h5::open_dataset(file, path, "", false);  // metadata only: external raw files may be absent
  h5::SilenceErrors quiet;
  DatasetInfo info;
  info.path = path;
  h5::Datatype ftype(H5Dget_type(d));
  info.dtype = dtype_from_h5(ftype, has_bf16_marker(d));
  info.type_desc = info.dtype ? std::string(dtype_name(*info.dtype)) : type_description(ftype);
  if (!info.dtype) {
    info.variable_length = has_variable_length(ftype);
    std::size_t n = 0;
    if (H5Tencode(ftype, nullptr, &n) >= 0 && n > 0) {
      info.type_code.resize(n);
      if (H5Tencode(ftype, info.type_code.data(), &n) < 0) info.type_code.clear();
    }
  }
  info.big_endian = (H5Tget_class(ftype) == H5T_INTEGER || H5Tget_class(ftype) == H5T_FLOAT) && H5Tget_order(ftype) == H5T_ORDER_BE;
  h5::Dataspace space(H5Dget_space(d));
  // A null dataspace (h5py.Empty) reports rank 0 like a scalar, but holds no element.
  info.null_space = H5Sget_simple_extent_type(space) == H5S_NULL;
  info.shape = dataspace_shape(space);
  const std::uint64_t size = H5Tget_size(ftype), numel = info.numel();
  info.logical_bytes = size != 0 && numel > UINT64_MAX / size ? UINT64_MAX : numel * size;  // saturated
  if (numel > max_elements) {
    // HDF5 accepts such extents (even beyond 2^64) on never-written chunked datasets; element
    // indices and point selections do not reach that far.
    info.dtype.reset();
    info.type_desc += ", more than 2^63-1 elements";
  }
  info.stored_bytes = H5Dget_storage_size(d);
  h5::PropList dcpl(H5Dget_create_plist(d));
  switch (H5Pget_layout(dcpl)) {
    case H5D_CHUNKED: {
      info.layout = Layout::chunked;
      std::vector<hsize_t> c(info.shape.size());
      H5Pget_chunk(dcpl, static_cast<int>(c.size()), c.data());
      info.chunks.assign(c.begin(), c.end());
      break;
    }
    case H5D_COMPACT: info.layout = Layout::compact; break;
    case H5D_VIRTUAL: info.layout = Layout::virtual_; break;
    default: info.layout = Layout::contiguous; break;
  }
  const int nf = H5Pget_nfilters(dcpl);
  for (int i = 0; i < nf; ++i) {
    unsigned flags = 0, cd[8] = {};
    std::size_t ncd = 8;
    char name[64] = {};
    const H5Z_filter_t f = H5Pget_filter2(dcpl, static_cast<unsigned>(i), &flags, &ncd, cd, sizeof name, name, nullptr);
    if (f == H5Z_FILTER_DEFLATE) info.filters.push_back("deflate(" + std::to_string(ncd > 0 ? cd[0] : 0) + ")");
    else if (f == H5Z_FILTER_SHUFFLE) info.filters.emplace_back("shuffle");
    else if (f == H5Z_FILTER_FLETCHER32) info.filters.emplace_back("fletcher32");
    else info.filters.push_back(name[0] ? std::string(name) : "filter" + std::to_string(f));
  }
  if (h5::has_attr(d, checksum_attr)) info.checksum = h5::read_attr_u64(d, checksum_attr);
  if (h5::has_attr(d, tp_slice_attr)) {
    // Checked where it is used (a flip log names the global element): a listing of a file whose
    // attribute is not a string still lists it.
    try {
      info.tp_slice = h5::read_attr_str(d, tp_slice_attr);
    } catch (const Error&) {
      info.tp_slice = std::string();
    }
  }
  info.external = external_files(d);
  return info;
}

std::vector<std::string> external_files(hid_t dataset) {
  h5::SilenceErrors quiet;
  h5::PropList dcpl(H5Dget_create_plist(dataset));
  std::vector<std::string> out;
  const int n = dcpl.valid() ? H5Pget_external_count(dcpl) : 0;
  for (int i = 0; i < n; ++i) {
    char name[4096] = {};
    off_t offset = 0;
    hsize_t size = 0;
    if (H5Pget_external(dcpl, static_cast<unsigned>(i), sizeof name - 1, name, &offset, &size) < 0)
      h5::throw_error("read the external file list", ExitCode::corrupt_input);
    out.emplace_back(name);
  }
  return out;
}

namespace {

// Objects by file address, and the hard links to them.
struct Walk {
  std::vector<std::pair<std::string, haddr_t>> datasets;  // first path in name order, address
  bool shared = false;                                     // some object has several hard links
  std::string too_deep;                                    // the first path nested deeper than max_group_depth
};

// Every hard-link path of each dataset in `addrs`, at most max_paths each (first the one H5Ovisit
// gave). H5Ovisit and H5Lvisit enter a group once, under its first path: the datasets inside a
// group linked under two names have paths under both, which only expanding the group's own paths
// finds. paths(object) = { p + "/" + name : (parent, name) a hard link to it, p in paths(parent) },
// paths(root) = {""}; a group that is its own ancestor (a cycle of hard links) adds no path
// through itself.
std::map<haddr_t, std::vector<std::string>> hard_link_paths(hid_t file) {
  struct Link {
    haddr_t parent;
    std::string name;
  };
  struct Links {
    std::map<haddr_t, std::vector<Link>> to;  // object -> links to it
    std::map<std::string, haddr_t> at;        // path (without the leading '/') -> object
    haddr_t root = HADDR_UNDEF;
  } links;
  H5O_info_t root{};
  if (H5Oget_info2(file, &root, H5O_INFO_BASIC) < 0) h5::throw_error("query the root group", ExitCode::corrupt_input);
  links.root = root.addr;
  auto visit = [](hid_t, const char* name, const H5L_info_t* info, void* data) -> herr_t {
    auto& l = *static_cast<Links*>(data);
    if (info->type != H5L_TYPE_HARD) return 0;  // soft and external links are not followed
    const std::string path(name);
    const auto slash = path.rfind('/');
    const std::string parent = slash == std::string::npos ? std::string() : path.substr(0, slash);
    const auto it = parent.empty() ? l.at.end() : l.at.find(parent);  // a group comes before its members
    if (!parent.empty() && it == l.at.end()) return 0;
    const haddr_t p = parent.empty() ? l.root : it->second;
    l.at[path] = info->u.address;
    l.to[info->u.address].push_back({p, slash == std::string::npos ? path : path.substr(slash + 1)});
    return 0;
  };
  if (H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, visit, &links) < 0) h5::throw_error("walk the file's links", ExitCode::corrupt_input);
  std::map<haddr_t, std::vector<std::string>> memo;
  std::set<haddr_t> open;  // groups whose paths are being expanded (cycle guard)
  std::function<const std::vector<std::string>&(haddr_t)> paths = [&](haddr_t obj) -> const std::vector<std::string>& {
    if (const auto it = memo.find(obj); it != memo.end()) return it->second;
    std::vector<std::string> out;
    if (obj == links.root) out.emplace_back();
    open.insert(obj);
    if (const auto it = links.to.find(obj); it != links.to.end())
      for (const auto& l : it->second) {
        if (open.contains(l.parent)) continue;
        for (const auto& p : paths(l.parent)) {
          if (out.size() >= max_paths) break;
          out.push_back(p + "/" + l.name);
        }
      }
    open.erase(obj);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return memo[obj] = std::move(out);
  };
  std::map<haddr_t, std::vector<std::string>> result;
  for (const auto& [obj, to] : links.to) result[obj] = paths(obj);
  return result;
}

}  // namespace

std::vector<DatasetInfo> list_datasets(hid_t file) {
  Walk walk;
  h5::SilenceErrors quiet;
  auto visit = [](hid_t, const char* name, const H5O_info_t* info, void* data) -> herr_t {
    auto& w = *static_cast<Walk*>(data);
    if (info->rc > 1) w.shared = true;
    // Stopped at the first object below max_group_depth groups: the walk's cost grows with the cube
    // of the depth it reaches.
    if (static_cast<std::size_t>(std::count(name, name + std::strlen(name), '/')) >= max_group_depth) {
      w.too_deep = name;
      return 1;
    }
    if (info->type == H5O_TYPE_DATASET) w.datasets.emplace_back(std::string("/") + name, info->addr);
    return 0;
  };
  const herr_t visited = H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_INC, visit, &walk, H5O_INFO_BASIC);
  if (visited > 0) {
    std::string name(4096, '\0');
    const ssize_t n = H5Fget_name(file, name.data(), name.size());
    name.resize(n > 0 ? std::min(static_cast<std::size_t>(n), name.size() - 1) : 0);
    throw CorruptInputError((name.empty() ? std::string() : name + ": ") + "groups nested deeper than " +
                            std::to_string(max_group_depth) + " levels (/" + walk.too_deep.substr(0, 64) +
                            "...): damaged or not a checkpoint");
  }
  if (visited < 0) {
    // The callers hold only the handle: the message names the file itself (the stack is read
    // first: the next HDF5 call clears it).
    const std::string stack = h5::error_stack_text();
    std::string name(4096, '\0');
    const ssize_t n = H5Fget_name(file, name.data(), name.size());
    name.resize(n > 0 ? std::min(static_cast<std::size_t>(n), name.size() - 1) : 0);
    throw Hdf5Error((name.empty() ? std::string() : name + ": ") + "walk the file's groups (damaged HDF5 metadata): " + stack, ExitCode::corrupt_input);
  }
  // Hard links are rare: their paths are only looked for when some object has several.
  std::map<haddr_t, std::vector<std::string>> all;
  if (walk.shared) all = hard_link_paths(file);
  std::vector<DatasetInfo> out;
  out.reserve(walk.datasets.size());
  for (const auto& [p, addr] : walk.datasets) {
    out.push_back(describe_dataset(file, p));
    if (const auto it = all.find(addr); it != all.end())
      for (const auto& q : it->second)
        if (q != p && out.back().aliases.size() + 1 < max_paths) out.back().aliases.push_back(q);
  }
  return out;
}

std::vector<Box> flat_boxes(const Shape& shape, std::uint64_t first, std::uint64_t n) {
  const std::size_t rank = shape.size();
  std::vector<Box> out;
  if (rank == 0) {
    if (n) out.push_back({});
    return out;
  }
  // inner[d]: elements of one step along dimension d (the product of the dimensions after it).
  std::vector<std::uint64_t> inner(rank, 1);
  for (std::size_t d = rank - 1; d-- > 0;) inner[d] = inner[d + 1] * shape[d + 1];
  const std::uint64_t end = first + n;
  while (first < end) {
    // The outermost dimension k whose steps `first` is aligned to and of which one step fits:
    // the box is [idx[k], idx[k] + c) along k, all of every dimension after k, 1 before.
    std::size_t k = rank - 1;
    while (k > 0 && first % inner[k - 1] == 0 && inner[k - 1] <= end - first) --k;
    Box b;
    b.start.resize(rank);
    b.count.assign(rank, 1);
    std::uint64_t rest = first;
    for (std::size_t d = 0; d < rank; ++d) {
      b.start[d] = rest / inner[d];
      rest %= inner[d];
    }
    const std::uint64_t c = std::min<std::uint64_t>(shape[k] - b.start[k], (end - first) / inner[k]);
    b.count[k] = c;
    for (std::size_t d = k + 1; d < rank; ++d) b.count[d] = shape[d];
    first += c * inner[k];
    out.push_back(std::move(b));
  }
  return out;
}

void for_each_slab(hid_t dset, hid_t mem_type, std::size_t max_bytes,
                   const std::function<void(std::span<const std::byte>)>& fn) {
  h5::Dataspace space(H5Dget_space(dset));
  if (H5Sget_simple_extent_type(space) == H5S_NULL) return;  // h5py.Empty: rank 0, yet no element
  const Shape shape = dataspace_shape(space);
  const std::size_t elem = H5Tget_size(mem_type);
  const std::uint64_t numel = shape_numel(shape);
  if (numel == 0) return;
  if (shape.empty()) {
    std::vector<std::byte> buf(elem);
    RESIL_H5_CHECK(H5Dread(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), "read scalar");
    fn(buf);
    return;
  }
  // Flat C-order ranges of at most max_bytes, each read as the few boxes that hold it: a row
  // larger than the slab is split (rows of 2^28 elements no longer mean a 1 GiB buffer).
  const std::uint64_t step = std::max<std::uint64_t>(1, max_bytes / std::max<std::size_t>(1, elem));
  std::vector<std::byte> buf(std::min(step, numel) * elem);
  for (std::uint64_t e = 0; e < numel; e += step) {
    const std::uint64_t n = std::min(step, numel - e);
    std::size_t at = 0;
    for (const auto& b : flat_boxes(shape, e, n)) {
      h5::Dataspace fsel(H5Scopy(space));
      RESIL_H5_CHECK(H5Sselect_hyperslab(fsel, H5S_SELECT_SET, b.start.data(), nullptr, b.count.data(), nullptr), "select slab");
      h5::Dataspace msel(H5Screate_simple(static_cast<int>(b.count.size()), b.count.data(), nullptr));
      if (H5Dread(dset, mem_type, msel, fsel, H5P_DEFAULT, buf.data() + at) < 0) h5::throw_error("read slab", ExitCode::corrupt_input);
      at += static_cast<std::size_t>(shape_numel(Shape(b.count.begin(), b.count.end())) * elem);
    }
    fn(std::span<const std::byte>(buf.data(), n * elem));
  }
}

std::uint64_t dataset_checksum(hid_t file, const std::string& path) {
  h5::Dataset d = h5::open_dataset(file, path, "");
  h5::SilenceErrors quiet;
  h5::Datatype ftype(H5Dget_type(d));  // memory type == file type: the stored bytes, unconverted
  Xxh64 h;
  for_each_slab(d, ftype, std::size_t{64} << 20, [&](std::span<const std::byte> s) { h.update(s); });
  return h.digest();
}

VerifyReport verify(const std::string& file_path) {
  h5::File f = h5::open_file(file_path, h5::Mode::read);
  VerifyReport report;
  for (const auto& info : list_datasets(f)) {
    if (!info.checksum) {
      report.unchecked.push_back(info.path);
      continue;
    }
    ++report.checked;
    const std::uint64_t actual = dataset_checksum(f, info.path);
    if (actual != *info.checksum) report.mismatched.push_back({info.path, *info.checksum, actual});
  }
  return report;
}

void update_checksum(hid_t file, const std::string& path) { set_checksum(file, path, dataset_checksum(file, path)); }

std::string shape_string(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(s[i]);
  }
  return out + "]";
}

}  // namespace resil::ckpt
