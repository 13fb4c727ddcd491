// A zip directory reader (PKZIP APPNOTE 6.3: end of central directory, zip64 locator and record,
// central directory, local headers, data descriptors) for the containers torch.save and
// np.savez write, and the CRC-32 functions that keep an edited archive valid. It reads only the directory:
// entry data is never inflated here. Anything it cannot vouch for is refused (CorruptInputError):
// multi-disk archives, encryption, methods other than stored/deflated, local headers that disagree
// with the central directory, entries that overlap each other or the directory, duplicate names.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "resil/inject/formats/bytes.hpp"

namespace resil::inject::formats {

enum class ZipMethod : std::uint16_t { stored = 0, deflated = 8 };

struct ZipEntry {
  std::string name;
  ZipMethod method = ZipMethod::stored;
  std::uint32_t crc32 = 0;              // as the central directory states it
  std::uint64_t compressed_size = 0;    // bytes at data_offset (== uncompressed_size when stored)
  std::uint64_t uncompressed_size = 0;
  std::uint64_t header_offset = 0;      // the local file header
  std::uint64_t data_offset = 0;        // first data byte, after the local header's name and extra field
  /// Where the CRC-32 is stored: in the local header, or in the data descriptor after the data when
  /// the writer used one (torch.save does; its local header then holds 0), and in the central
  /// directory entry. Both must be patched after an edit for the archive to stay valid.
  std::uint64_t local_crc_offset = 0;
  std::uint64_t central_crc_offset = 0;
  bool data_descriptor = false;
  std::uint64_t end_offset = 0;         // one past the entry's last byte (its data descriptor included)
};

struct ZipDirectory {
  std::vector<ZipEntry> entries;  // in central directory order
  std::uint64_t central_offset = 0;
  std::uint64_t central_size = 0;
  bool zip64 = false;             // a zip64 end-of-central-directory record was used
  /// The entry named `name` (the first in directory order, were a name there twice; parse_zip
  /// refuses that), or nullptr. O(log n) through `by_name` when it indexes `entries` (parse_zip
  /// builds it once); a linear search for a directory built or changed by other code.
  const ZipEntry* find(std::string_view name) const noexcept;
  /// Indices into `entries` sorted by name, equal names in directory order (stable); index_names()
  /// builds it. A torch.save file looks up every storage by name: one lookup each, not one scan.
  std::vector<std::size_t> by_name;
  void index_names();
};

/// Parse the directory of the zip archive `file` (the whole file's bytes).
ZipDirectory parse_zip(Bytes file);

/// CRC-32 (ISO-HDLC, zip's) of `data`, continuing from `crc` (0 to start).
std::uint32_t crc32(Bytes data, std::uint32_t crc = 0) noexcept;

/// The CRC-32 of an entry of `length` bytes whose CRC was `old_crc` after the bytes at `offset`
/// (relative to the entry's data) changed from `old_bytes` to `new_bytes` (same size), in
/// O(size + log length) instead of re-reading the entry: CRC-32 is affine, so the change is the
/// CRC of the XOR difference shifted past the bytes that follow it.
std::uint32_t crc32_patch(std::uint32_t old_crc, std::uint64_t length, std::uint64_t offset, Bytes old_bytes,
                          Bytes new_bytes);

/// One 4-byte write: `bytes` go at file offset `offset`.
struct CrcPatch {
  std::uint64_t offset;
  std::array<std::byte, 4> bytes;
};
/// The writes that store `crc` for `entry` (local header or data descriptor, and central directory).
std::array<CrcPatch, 2> crc_patches(const ZipEntry& entry, std::uint32_t crc) noexcept;

}  // namespace resil::inject::formats
