#include "resil/ckpt/h5.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <limits>
#include <type_traits>

#include "resil/ckpt/fs.hpp"
#include <string>
#include <vector>

namespace resil::ckpt::h5 {

namespace {
herr_t collect(unsigned n, const H5E_error2_t* e, void* data) {
  auto* out = static_cast<std::string*>(data);
  if (n > 0) *out += "; ";
  *out += e->desc ? e->desc : "?";
  if (e->func_name) *out += std::string(" (") + e->func_name + ")";
  return 0;
}
}  // namespace

std::string error_stack_text() {
  std::string text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect, &text);
  H5Eclear2(H5E_DEFAULT);
  // One error line: the stack's messages may carry newlines and tabs of their own.
  for (char& c : text)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return text.empty() ? std::string("unknown HDF5 error") : text;
}

void throw_error(const std::string& context, ExitCode code) {
  throw Hdf5Error(context + ": " + error_stack_text(), code);
}

SilenceErrors::SilenceErrors() noexcept {
  H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}
SilenceErrors::~SilenceErrors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

namespace {
// HDF5 1.10 keeps internal references (property lists, a datatype, free-list blocks) when loading
// a damaged object header fails (H5Gopen2, H5Ovisit2 on a damaged file), after every handle of
// ours is closed; at exit its library shutdown then prints "infinite loop closing library" and a
// line of package names on stderr, but only while automatic error printing is on. Every failure is
// reported through error_stack_text(), so printing is off for the whole process: one error line.
void quiet_library() {
  static const bool quiet = [] { return H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr) >= 0; }();
  (void)quiet;
}
}  // namespace

File open_file(const std::string& path, Mode mode) {
  quiet_library();
  // Missing, unreadable, or not a regular file (a FIFO would block HDF5's open): I/O errors, exit 3.
  fs::require_input_file(path);
  SilenceErrors quiet;
  const htri_t is_h5 = H5Fis_hdf5(path.c_str());
  if (is_h5 <= 0) {
    const std::string stack = is_h5 < 0 ? error_stack_text() : std::string();
    H5Eclear2(H5E_DEFAULT);
    if (stack.find("lock") != std::string::npos)
      throw IoError(path + ": locked by another process (HDF5 file lock): " + stack);
    throw CorruptInputError(path + ": not an HDF5 file (no HDF5 signature)");
  }
  const hid_t id = H5Fopen(path.c_str(), mode == Mode::read ? H5F_ACC_RDONLY : H5F_ACC_RDWR, H5P_DEFAULT);
  if (id < 0) {
    const std::string stack = error_stack_text();
    // A file another process holds (HDF5's flock) or that we may not write is an I/O error; one
    // HDF5 cannot parse is corrupt input.
    if (stack.find("unable to lock the file") != std::string::npos)
      throw IoError(path + ": locked by another process (HDF5 file lock; HDF5_USE_FILE_LOCKING=FALSE disables it): " + stack);
    if (mode == Mode::read_write && ::access(path.c_str(), W_OK) != 0)
      throw IoError(path + ": cannot open for writing: permission denied");
    throw CorruptInputError(path + ": cannot open as HDF5 (damaged or truncated?): " + stack);
  }
  return File(id);
}

namespace {
File create_with(const std::string& path, unsigned flags) {
  quiet_library();
  SilenceErrors quiet;
  PropList fapl(H5Pcreate(H5P_FILE_ACCESS));
  // Large datasets start on 4 KiB boundaries: full-page writes go straight to the page cache.
  H5Pset_alignment(fapl, 1 << 16, 4096);
  H5Pset_meta_block_size(fapl, 1 << 16);
  const hid_t id = H5Fcreate(path.c_str(), flags, H5P_DEFAULT, fapl);
  if (id < 0) throw IoError(path + ": cannot create: " + error_stack_text());
  return File(id);
}
}  // namespace

File create_file(const std::string& path) { return create_with(path, H5F_ACC_TRUNC); }

File create_new_file(const std::string& path) {
  fs::clear_for_new(path);
  return create_with(path, H5F_ACC_EXCL);
}

bool exists(hid_t loc, const std::string& path) {
  SilenceErrors quiet;
  // Check every component: H5Lexists fails (not false) when an intermediate link is missing.
  std::string prefix;
  std::size_t start = path.front() == '/' ? 1 : 0;
  if (path == "/") return true;
  while (start <= path.size()) {
    const auto slash = path.find('/', start);
    prefix = path.substr(0, slash == std::string::npos ? path.size() : slash);
    if (H5Lexists(loc, prefix.c_str(), H5P_DEFAULT) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return false;
    }
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return true;
}

namespace {
// Where HDF5 looks for a relative external raw data file name, given our ${ORIGIN} prefix.
std::string external_path(hid_t loc, const std::string& name) {
  if (!name.empty() && name.front() == '/') return name;
  const ssize_t n = H5Fget_name(loc, nullptr, 0);
  std::string fname(n > 0 ? static_cast<std::size_t>(n) : 0, '\0');
  if (n > 0) H5Fget_name(loc, fname.data(), fname.size() + 1);
  const auto parent = std::filesystem::path(fname).parent_path();
  const std::string origin = parent.empty() ? std::string(".") : parent.string();
  const char* env = std::getenv("HDF5_EXTFILE_PREFIX");
  std::string prefix = env && *env ? env : "${ORIGIN}";
  if (prefix.starts_with("${ORIGIN}")) prefix = origin + prefix.substr(9);
  return (std::filesystem::path(prefix) / name).string();
}
}  // namespace

Dataset open_dataset(hid_t loc, const std::string& path, const std::string& file, bool require_data) {
  const std::string where = (file.empty() ? std::string() : file + ": ") + "dataset " + path;
  if (!exists(loc, path)) throw CorruptInputError(where + " does not exist");
  SilenceErrors quiet;
  // External raw data files (HDF5 external storage) named by a relative path are found next to
  // the HDF5 file, not in the current directory (HDF5's default): `diff a/x.h5 b/y.h5` must not
  // read one `./raw.bin` for both. $HDF5_EXTFILE_PREFIX, when set, still takes precedence.
  PropList dapl(H5Pcreate(H5P_DATASET_ACCESS));
  if (dapl.valid()) H5Pset_efile_prefix(dapl, "${ORIGIN}");
  const hid_t id = H5Dopen2(loc, path.c_str(), dapl.valid() ? dapl.id() : H5P_DEFAULT);
  if (id < 0) throw_error(where + ": cannot open", ExitCode::corrupt_input);
  Dataset d(id);
  if (!require_data) return d;
  // A missing raw data file is a missing file (exit 3), not a damaged HDF5 file.
  PropList dcpl(H5Dget_create_plist(d));
  const int count = dcpl.valid() ? H5Pget_external_count(dcpl) : 0;
  for (int i = 0; i < count; ++i) {
    char name[4096] = {};
    off_t offset = 0;
    hsize_t size = 0;
    if (H5Pget_external(dcpl, static_cast<unsigned>(i), sizeof name - 1, name, &offset, &size) < 0) continue;
    try {
      fs::require_input_file(external_path(loc, name));
    } catch (const IoError& e) {
      throw IoError(where + ": external raw data file " + e.what());
    }
  }
  return d;
}

PropList untimed_create_plist(hid_t cls) {
  PropList p(RESIL_H5_CHECK(H5Pcreate(cls), "create a property list"));
  RESIL_H5_CHECK(H5Pset_obj_track_times(p, false), "turn off object times");
  return p;
}

void make_parents(hid_t file, const std::string& path) {
  const PropList gcpl = untimed_create_plist(H5P_GROUP_CREATE);
  std::size_t pos = 1;
  while ((pos = path.find('/', pos)) != std::string::npos) {
    const std::string g = path.substr(0, pos);
    if (!exists(file, g)) {
      Group grp(RESIL_H5_CHECK(H5Gcreate2(file, g.c_str(), H5P_DEFAULT, gcpl, H5P_DEFAULT), "create group " + g));
    }
    ++pos;
  }
}

namespace {
void write_scalar_attr(hid_t obj, const char* name, hid_t type, const void* v) {
  SilenceErrors quiet;
  if (H5Aexists(obj, name) > 0) RESIL_H5_CHECK(H5Adelete(obj, name), std::string("delete attribute ") + name);
  Dataspace space(H5Screate(H5S_SCALAR));
  Attribute a(RESIL_H5_CHECK(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT), std::string("create attribute ") + name));
  RESIL_H5_CHECK(H5Awrite(a, type, v), std::string("write attribute ") + name);
}
Attribute open_attr(hid_t obj, const char* name) {
  SilenceErrors quiet;
  if (H5Aexists(obj, name) <= 0) throw CorruptInputError(std::string("attribute '") + name + "' is missing");
  return Attribute(RESIL_H5_CHECK(H5Aopen(obj, name, H5P_DEFAULT), std::string("open attribute ") + name));
}
// One value: an attribute of several elements would be read past the end of `T v`.
void require_one_value(const Attribute& a, const char* name) {
  Dataspace sp(H5Aget_space(a));
  if (!sp.valid() || H5Sget_simple_extent_npoints(sp) != 1)
    throw CorruptInputError(std::string("attribute '") + name + "' is not a single value");
}
template <class T> T read_scalar_attr(hid_t obj, const char* name, hid_t mem) {
  Attribute a = open_attr(obj, name);
  require_one_value(a, name);
  T v{};
  SilenceErrors quiet;
  if (H5Aread(a, mem, &v) < 0) throw_error(std::string("read attribute ") + name, ExitCode::corrupt_input);
  return v;
}
// Integers are read in their stored signedness and checked: HDF5's conversion clamps without a
// word (an int64 -64 reads as uint64 0, a uint64 2^64-1 as int64 2^63-1) and truncates a float
// (8.5 reads as 8), so a value no writer stores would pass as another one.
template <class T> T read_integer_attr(hid_t obj, const char* name) {
  Attribute a = open_attr(obj, name);
  require_one_value(a, name);
  SilenceErrors quiet;
  Datatype ft(H5Aget_type(a));
  const std::string what = std::string("attribute '") + name + "'";
  if (H5Tget_class(ft) != H5T_INTEGER) throw CorruptInputError(what + " is not an integer");
  if (H5Tget_sign(ft) == H5T_SGN_2) {
    std::int64_t v = 0;
    if (H5Aread(a, H5T_NATIVE_INT64, &v) < 0) throw_error("read " + what, ExitCode::corrupt_input);
    if (std::is_unsigned_v<T> && v < 0) throw CorruptInputError(what + " = " + std::to_string(v) + " is negative (an unsigned field)");
    return static_cast<T>(v);
  }
  std::uint64_t v = 0;
  if (H5Aread(a, H5T_NATIVE_UINT64, &v) < 0) throw_error("read " + what, ExitCode::corrupt_input);
  if (std::is_signed_v<T> && v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    throw CorruptInputError(what + " = " + std::to_string(v) + " is beyond 2^63-1 (a signed 64-bit field)");
  return static_cast<T>(v);
}
}  // namespace

void write_attr_u64(hid_t o, const char* n, std::uint64_t v) { write_scalar_attr(o, n, H5T_NATIVE_UINT64, &v); }
void write_attr_i64(hid_t o, const char* n, std::int64_t v) { write_scalar_attr(o, n, H5T_NATIVE_INT64, &v); }
void write_attr_f64(hid_t o, const char* n, double v) { write_scalar_attr(o, n, H5T_NATIVE_DOUBLE, &v); }
void write_attr_str(hid_t o, const char* n, const std::string& v) {
  // Variable-length UTF-8, as h5py writes str attributes: h5py users read them back as str.
  Datatype t(H5Tcopy(H5T_C_S1));
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  const char* p = v.c_str();
  write_scalar_attr(o, n, t, &p);
}
bool has_attr(hid_t o, const char* n) {
  SilenceErrors quiet;
  return H5Aexists(o, n) > 0;
}
std::uint64_t read_attr_u64(hid_t o, const char* n) { return read_integer_attr<std::uint64_t>(o, n); }
std::int64_t read_attr_i64(hid_t o, const char* n) { return read_integer_attr<std::int64_t>(o, n); }
double read_attr_f64(hid_t o, const char* n) { return read_scalar_attr<double>(o, n, H5T_NATIVE_DOUBLE); }

std::string read_attr_str(hid_t o, const char* n) {
  Attribute a = open_attr(o, n);
  SilenceErrors quiet;
  Datatype ft(H5Aget_type(a));
  if (H5Tget_class(ft) != H5T_STRING) throw CorruptInputError(std::string("attribute '") + n + "' is not a string");
  if (H5Tis_variable_str(ft) > 0) {
    Datatype mt(H5Tcopy(ft));  // same charset and padding: no conversion path needed
    char* p = nullptr;
    if (H5Aread(a, mt, &p) < 0) throw_error(std::string("read attribute ") + n, ExitCode::corrupt_input);
    std::string s = p ? p : "";
    Dataspace sp(H5Aget_space(a));
    H5Dvlen_reclaim(mt, sp, H5P_DEFAULT, &p);
    return s;
  }
  const std::size_t size = H5Tget_size(ft);
  std::string s(size, '\0');
  Datatype mt(H5Tcopy(ft));
  if (H5Aread(a, mt, s.data()) < 0) throw_error(std::string("read attribute ") + n, ExitCode::corrupt_input);
  s.resize(s.find('\0') == std::string::npos ? s.size() : s.find('\0'));
  return s;
}

ssize_t open_object_count() { return H5Fget_obj_count(static_cast<hid_t>(H5F_OBJ_ALL), H5F_OBJ_ALL); }

}  // namespace resil::ckpt::h5
