// ZipStorage: the part of the torch.save and .npz adapters that keeps the zip archive valid. Stored
// members are edited in place (ExtentStorage); finish() then updates the CRC-32 of each touched
// member in its local header (or data descriptor) and in the central directory, from the changed
// bytes alone (formats::crc32_patch: cost proportional to the change, not to the member), unless
// keep_crc() asks to leave the old CRCs (docs/design/storage-layer.md, "Zip CRC-32").
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "extent_storage.hpp"
#include "resil/inject/formats/zip.hpp"

namespace resil::inject {

/// A member's new content for rewrite_zip: its stored bytes, CRC-32 and uncompressed size.
struct ZipMember {
  std::vector<std::byte> data;
  std::uint32_t crc = 0;
  std::uint64_t size = 0;
};
/// The archive `old` (directory `dir`) with the members in `repl` (by entry index) replaced: headers,
/// central directory and end records follow. Members with data descriptors and zip64 sizes or
/// offsets are refused (UsageError naming `where`).
std::vector<std::byte> rewrite_zip(formats::Bytes old, const formats::ZipDirectory& dir, const std::map<std::size_t, ZipMember>& repl,
                                   const std::string& where);

class ZipStorage : public ExtentStorage {
public:
  void finish() override;
  /// With recompute_crc(), every member an edit touches gets its CRC computed, changed or not (a
  /// killed revert may have restored every word yet left the CRC of the flipped bytes).
  void edit(const std::string& tensor, std::vector<std::uint64_t> indices, const BlockFn& fn) override;

protected:
  ZipStorage(const std::string& path, Access access) : ExtentStorage(path, access) {}
  void changed(const Item& it, std::uint64_t offset, std::span<const std::byte> old_bytes, std::span<const std::byte> new_bytes) override;
  /// Re-encode changed staged members (only in a rewrite); the default has none.
  virtual void rewrite_staged() {}

  formats::ZipDirectory zip_;

private:
  struct Change {
    std::uint64_t offset;  // in the member's data
    std::vector<std::byte> old_bytes, new_bytes;
  };
  std::map<std::size_t, std::vector<Change>> changes_;  // by zip entry
};

}  // namespace resil::inject
