// RAII over HDF5 hid_t handles (HighFive-style): one owning base, move steals, the destructor
// never throws. RESIL_H5_CHECK turns a negative return into an Hdf5Error carrying HDF5's own
// error-stack text plus the file/object context.
#pragma once

#include <cstdint>
#include <hdf5.h>

#include <string>
#include <utility>

#include "resil/core/error.hpp"

namespace resil::ckpt::h5 {

/// The current HDF5 error stack as text (innermost message first), then cleared.
std::string error_stack_text();

[[noreturn]] void throw_error(const std::string& context, ExitCode code = ExitCode::io);

/// Throw Hdf5Error when an HDF5 call returns a negative value (herr_t / hid_t / htri_t).
#define RESIL_H5_CHECK(expr, context)                                                       \
  ([&]() {                                                                                  \
    auto resil_h5_rc_ = (expr);                                                             \
    if (resil_h5_rc_ < 0) ::resil::ckpt::h5::throw_error(context);                          \
    return resil_h5_rc_;                                                                    \
  }())

/// Suppress HDF5's automatic error printing for the guard's lifetime (probing, reporting ourselves).
class SilenceErrors {
public:
  SilenceErrors() noexcept;
  ~SilenceErrors();
  SilenceErrors(const SilenceErrors&) = delete;
  SilenceErrors& operator=(const SilenceErrors&) = delete;

private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

/// Owning handle. `Close` is the matching H5xclose function.
template <herr_t (*Close)(hid_t)>
class Handle {
public:
  Handle() noexcept = default;
  explicit Handle(hid_t id) noexcept : id_(id) {}
  Handle(Handle&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }

  hid_t id() const noexcept { return id_; }
  operator hid_t() const noexcept { return id_; }
  bool valid() const noexcept { return id_ >= 0; }
  hid_t release() noexcept { return std::exchange(id_, H5I_INVALID_HID); }
  void reset() noexcept {
    if (id_ >= 0) {
      SilenceErrors quiet;
      Close(id_);  // errors on close cannot be reported from a destructor; HDF5 logs nothing (silenced)
    }
    id_ = H5I_INVALID_HID;
  }

private:
  hid_t id_ = H5I_INVALID_HID;
};

using File = Handle<H5Fclose>;
using Group = Handle<H5Gclose>;
using Dataset = Handle<H5Dclose>;
using Dataspace = Handle<H5Sclose>;
using Datatype = Handle<H5Tclose>;
using Attribute = Handle<H5Aclose>;
using PropList = Handle<H5Pclose>;

enum class Mode { read, read_write };

/// Open an existing file; a missing file is an IoError, a non-HDF5 or damaged one CorruptInputError.
File open_file(const std::string& path, Mode mode);
/// Create (truncate) a file with resil's defaults (latest-compatible format, aligned large datasets).
File create_file(const std::string& path);
/// A new file only this process made (a temporary): fs::clear_for_new, then created with
/// H5F_ACC_EXCL, which fails on anything put there in between, a symbolic link included.
File create_new_file(const std::string& path);

/// Open a dataset/group; throws with the path named. Relative names of external raw data files
/// resolve next to the HDF5 file ($HDF5_EXTFILE_PREFIX overrides). With `require_data`, those files
/// must be readable regular files (IoError, exit 3, naming them); false for metadata only.
Dataset open_dataset(hid_t loc, const std::string& path, const std::string& file_for_errors, bool require_data = true);
bool exists(hid_t loc, const std::string& path);
/// Create every missing group on the way to `path`'s parent (like `mkdir -p`).
void make_parents(hid_t file, const std::string& path);
/// A group (`H5P_GROUP_CREATE`) or dataset (`H5P_DATASET_CREATE`) creation list without object
/// times: HDF5 stamps each object header with its creation time otherwise, so two runs of the same
/// seed wrote checkpoints that differed in a few bytes (and flip logs' input_sha256 with them).
PropList untimed_create_plist(hid_t cls);

/// Attributes: scalar integer / float / string, read and written by name on any object.
void write_attr_u64(hid_t obj, const char* name, std::uint64_t v);
void write_attr_i64(hid_t obj, const char* name, std::int64_t v);
void write_attr_f64(hid_t obj, const char* name, double v);
void write_attr_str(hid_t obj, const char* name, const std::string& v);
bool has_attr(hid_t obj, const char* name);
/// Integer attributes must hold one integer that fits the type as stored (a negative value read
/// as u64, a float, or an array is CorruptInputError naming the attribute; never clamped).
std::uint64_t read_attr_u64(hid_t obj, const char* name);
std::int64_t read_attr_i64(hid_t obj, const char* name);
double read_attr_f64(hid_t obj, const char* name);
std::string read_attr_str(hid_t obj, const char* name);

/// Number of HDF5 objects (files, groups, datasets, types, attributes) still open in this process.
/// Tests assert it returns to zero: no handle leaks.
ssize_t open_object_count();

}  // namespace resil::ckpt::h5
