// NumPy .npy (NEP 1 / numpy.lib.format, versions 1.0, 2.0, 3.0) and .npz (a zip of .npy members,
// stored by np.savez, deflated by np.savez_compressed). The header's dict literal is read by a
// small parser of exactly the Python literals np.save writes ('descr', 'fortran_order', 'shape');
// structured, object and unsupported dtypes are refused.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "resil/inject/formats/bytes.hpp"
#include "resil/inject/formats/dtype.hpp"
#include "resil/inject/formats/zip.hpp"

namespace resil::inject::formats {

struct NpyHeader {
  unsigned major = 1, minor = 0;
  DType dtype = DType::f32;         // descr <f8 <f4 <f2 <i8 <i4 <i2 |i1 |u1 |b1 (and '>' forms)
  bool big_endian = false;          // '>' descr: words are stored most significant byte first
  bool fortran_order = false;
  std::vector<std::uint64_t> shape; // empty: a 0-d array of one element
  std::uint64_t data_offset = 0;    // from the start of the .npy bytes (magic + header)
  std::uint64_t data_size = 0;      // product(shape) x itemsize
};

/// Parse the header at the start of `npy` (only the header bytes are needed; the header is
/// limited to 1 MiB). `base` is the .npy's offset in its file, for messages.
NpyHeader parse_npy_header(Bytes npy, std::uint64_t base = 0);

/// Parse a whole .npy file: the header, and the data must end exactly at the end of the file.
NpyHeader parse_npy(Bytes file);

struct NpzMember {
  std::string name;     // the array's name: the entry name without ".npy"
  std::size_t entry = 0;  // index into Npz::zip.entries
  NpyHeader header;     // for a deflated member, read from its inflated first bytes
  /// Stored members: the data's offset in the file (entry data offset + header data_offset).
  /// Deflated members: 0 (their data exists only inflated).
  std::uint64_t file_offset = 0;
};

struct Npz {
  ZipDirectory zip;
  std::vector<NpzMember> members;  // in central directory order
};

/// Parse a .npz file: every entry must be a .npy (by name and content), stored or deflated, and
/// its size must match its header.
Npz parse_npz(Bytes file);

}  // namespace resil::inject::formats
