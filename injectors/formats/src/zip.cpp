// Zip directory reading (PKZIP APPNOTE 6.3 sections 4.3.7-4.3.16) and CRC-32 patching.
#include "resil/inject/formats/zip.hpp"

#include <zlib.h>

#include <algorithm>
#include <limits>
#include <unordered_set>

namespace resil::inject::formats {
namespace {

constexpr std::string_view kFormat = "zip";
constexpr std::uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEocdSig = 0x06054b50;
constexpr std::uint32_t kZip64EocdSig = 0x06064b50, kZip64LocatorSig = 0x07064b50, kDescriptorSig = 0x08074b50;
constexpr std::size_t kEocdSize = 22, kLocatorSize = 20, kCentralSize = 46, kLocalSize = 30;
constexpr std::uint16_t kFlagEncrypted = 0x0001, kFlagDescriptor = 0x0008, kFlagStrongEncryption = 0x0040;

struct Eocd {
  std::uint64_t entries, central_size, central_offset, offset;
  bool zip64;
  std::uint64_t zip64_offset = 0;  // the zip64 record's offset, when zip64
};

// The end-of-central-directory record: the last signature whose comment ends exactly at the end
// of the file (a comment may itself contain the signature bytes, so scan from the end).
Eocd find_eocd(Bytes file) {
  if (file.size() < kEocdSize) corrupt(kFormat, "file of " + std::to_string(file.size()) + " bytes is too short for an archive", 0);
  const std::size_t lowest = file.size() > kEocdSize + 0xFFFF ? file.size() - kEocdSize - 0xFFFF : 0;
  for (std::size_t pos = file.size() - kEocdSize + 1; pos-- > lowest;) {
    const std::byte* p = file.data() + pos;
    if (load_le<std::uint32_t>(p) != kEocdSig || pos + kEocdSize + load_le<std::uint16_t>(p + 20) != file.size()) continue;
    Reader r(file.subspan(pos), kFormat, pos);
    r.take(4, "signature");
    const auto disk = r.le<std::uint16_t>("disk number"), cd_disk = r.le<std::uint16_t>("central directory disk");
    const auto disk_entries = r.le<std::uint16_t>("entry count"), entries = r.le<std::uint16_t>("entry count");
    const auto cd_size = r.le<std::uint32_t>("central directory size"), cd_offset = r.le<std::uint32_t>("central directory offset");
    Eocd e{entries, cd_size, cd_offset, pos, false};
    if (pos >= kLocatorSize && load_le<std::uint32_t>(p - kLocatorSize) == kZip64LocatorSig) {
      Reader l(file.subspan(pos - kLocatorSize, kLocatorSize), kFormat, pos - kLocatorSize);
      l.take(4, "signature");
      const auto z_disk = l.le<std::uint32_t>("zip64 record disk");
      const auto z_off = l.le<std::uint64_t>("zip64 record offset");
      const auto z_disks = l.le<std::uint32_t>("disk count");
      if (z_disk != 0 || z_disks > 1) corrupt(kFormat, "multi-disk archive (zip64 locator names " + std::to_string(z_disks) + " disks)", pos - kLocatorSize);
      if (z_off > pos - kLocatorSize || pos - kLocatorSize - z_off < 56) corrupt(kFormat, "zip64 end of central directory offset " + std::to_string(z_off) + " out of range", pos - kLocatorSize);
      Reader z(file.subspan(static_cast<std::size_t>(z_off), 56), kFormat, z_off);
      if (z.le<std::uint32_t>("signature") != kZip64EocdSig) corrupt(kFormat, "bad zip64 end of central directory signature", z_off);
      z.take(8 + 2 + 2, "record size and versions");
      const auto z_this = z.le<std::uint32_t>("disk number"), z_cd = z.le<std::uint32_t>("central directory disk");
      const auto z_disk_entries = z.le<std::uint64_t>("entry count"), z_entries = z.le<std::uint64_t>("entry count");
      if (z_this != 0 || z_cd != 0 || z_disk_entries != z_entries) corrupt(kFormat, "multi-disk archive", z_off);
      e.entries = z_entries;
      e.central_size = z.le<std::uint64_t>("central directory size");
      e.central_offset = z.le<std::uint64_t>("central directory offset");
      e.zip64 = true;
      e.zip64_offset = z_off;
    } else if (disk != 0 || cd_disk != 0 || disk_entries != entries) {
      corrupt(kFormat, "multi-disk archive", pos);
    } else if (entries == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) {
      corrupt(kFormat, "zip64 end of central directory locator missing", pos);
    }
    return e;
  }
  // Say what is wrong where it can be told: a record whose comment ends before the file does is an
  // archive with bytes appended (torch.load reads past them; a flip's CRC and offsets would not).
  for (std::size_t pos = file.size() - kEocdSize + 1; pos-- > lowest;) {
    const std::byte* p = file.data() + pos;
    if (load_le<std::uint32_t>(p) != kEocdSig) continue;
    const std::uint64_t end = pos + kEocdSize + load_le<std::uint16_t>(p + 20);
    if (end < file.size())
      corrupt(kFormat, std::to_string(file.size() - end) + " bytes after the end of the archive (its end record at offset " + std::to_string(pos) +
                           "): appended data, which ckpt-flip does not read past", end);
    break;
  }
  corrupt(kFormat, "no end of central directory record (not a zip archive, or truncated)", file.size());
}

// Values the 32-bit fields mark 0xFFFFFFFF are in the zip64 extra field (id 1), in the fixed
// order uncompressed size, compressed size, local header offset (APPNOTE 4.5.3).
struct Sizes {
  std::uint64_t uncompressed, compressed, offset;
  bool zip64 = false;
};
void read_zip64_extra(Bytes extra, std::uint64_t extra_offset, Sizes& s, bool has_offset) {
  Reader r(extra, kFormat, extra_offset);
  while (r.left() >= 4) {
    const auto id = r.le<std::uint16_t>("extra field id");
    const auto len = r.le<std::uint16_t>("extra field length");
    Reader f(r.take(len, "extra field"), kFormat, r.offset() - len);
    if (id != 0x0001) continue;
    s.zip64 = true;
    if (s.uncompressed == 0xFFFFFFFF) s.uncompressed = f.le<std::uint64_t>("zip64 uncompressed size");
    if (s.compressed == 0xFFFFFFFF) s.compressed = f.le<std::uint64_t>("zip64 compressed size");
    if (has_offset && s.offset == 0xFFFFFFFF) s.offset = f.le<std::uint64_t>("zip64 local header offset");
    return;
  }
}

// Check the local header against the central entry (at `central_at`) and find the data and the stored CRC.
void read_local(Bytes file, ZipEntry& e, std::uint16_t central_flags, bool zip64, std::uint64_t central_at) {
  const std::string where = "entry '" + printable(e.name) + "'";
  if (!in_bounds(e.header_offset, kLocalSize, file.size()))
    corrupt(kFormat, where + ": local header offset " + std::to_string(e.header_offset) + " beyond the end", central_at);
  Reader r(file.subspan(static_cast<std::size_t>(e.header_offset)), kFormat, e.header_offset);
  if (r.le<std::uint32_t>("signature") != kLocalSig) corrupt(kFormat, where + ": bad local header signature", e.header_offset);
  r.take(2, "version");
  const auto flags = r.le<std::uint16_t>("flags");
  const auto method = r.le<std::uint16_t>("method");
  r.take(4, "time and date");
  const std::uint64_t crc_at = r.offset();
  Sizes s{};
  const auto crc = r.le<std::uint32_t>("crc-32");
  s.compressed = r.le<std::uint32_t>("compressed size");
  s.uncompressed = r.le<std::uint32_t>("uncompressed size");
  const auto name_len = r.le<std::uint16_t>("name length");
  const auto extra_len = r.le<std::uint16_t>("extra field length");
  const Bytes name = r.take(name_len, "entry name");
  const std::uint64_t extra_at = r.offset();
  read_zip64_extra(r.take(extra_len, "extra field"), extra_at, s, false);
  if (as_chars(name) != e.name) corrupt(kFormat, where + ": local header names '" + printable(as_chars(name)) + "'", e.header_offset);
  if (method != static_cast<std::uint16_t>(e.method) || (flags & kFlagDescriptor) != (central_flags & kFlagDescriptor))
    corrupt(kFormat, where + ": local header method/flags disagree with the central directory", e.header_offset);
  e.data_offset = r.offset();
  if (!in_bounds(e.data_offset, e.compressed_size, file.size()))
    corrupt(kFormat, where + ": data (" + std::to_string(e.compressed_size) + " bytes) runs past the end of the file", e.data_offset);
  e.end_offset = e.data_offset + e.compressed_size;
  if (!(flags & kFlagDescriptor)) {
    if (crc != e.crc32 || s.compressed != e.compressed_size || s.uncompressed != e.uncompressed_size)
      corrupt(kFormat, where + ": local header CRC/sizes disagree with the central directory", e.header_offset);
    e.local_crc_offset = crc_at;
    return;
  }
  // Data descriptor (APPNOTE 4.3.9): optional signature, CRC, then sizes (8 bytes each for zip64).
  e.data_descriptor = true;
  Reader d(file.subspan(static_cast<std::size_t>(e.end_offset)), kFormat, e.end_offset);
  if (d.left() >= 4 && load_le<std::uint32_t>(file.data() + e.end_offset) == kDescriptorSig) d.take(4, "signature");
  e.local_crc_offset = d.offset();
  const auto dcrc = d.le<std::uint32_t>("data descriptor");
  const bool wide = zip64 || s.zip64;
  const std::uint64_t dc = wide ? d.le<std::uint64_t>("data descriptor") : d.le<std::uint32_t>("data descriptor");
  const std::uint64_t du = wide ? d.le<std::uint64_t>("data descriptor") : d.le<std::uint32_t>("data descriptor");
  if (dcrc != e.crc32 || dc != e.compressed_size || du != e.uncompressed_size)
    corrupt(kFormat, where + ": data descriptor disagrees with the central directory", e.end_offset);
  e.end_offset = d.offset();
}

}  // namespace

void ZipDirectory::index_names() {
  by_name.resize(entries.size());
  for (std::size_t i = 0; i < by_name.size(); ++i) by_name[i] = i;
  std::stable_sort(by_name.begin(), by_name.end(), [&](std::size_t a, std::size_t b) { return entries[a].name < entries[b].name; });
}

const ZipEntry* ZipDirectory::find(std::string_view name) const noexcept {
  if (by_name.size() != entries.size()) {  // not indexed (or changed since): the first match in directory order
    for (const auto& e : entries)
      if (e.name == name) return &e;
    return nullptr;
  }
  // The first of the equal names in the stable order is the first in directory order, as above.
  const auto it = std::lower_bound(by_name.begin(), by_name.end(), name,
                                   [&](std::size_t i, std::string_view n) { return std::string_view(entries[i].name) < n; });
  return it != by_name.end() && entries[*it].name == name ? &entries[*it] : nullptr;
}

ZipDirectory parse_zip(Bytes file) {
  const Eocd eocd = find_eocd(file);
  ZipDirectory dir;
  dir.central_offset = eocd.central_offset;
  dir.central_size = eocd.central_size;
  dir.zip64 = eocd.zip64;
  if (!in_bounds(eocd.central_offset, eocd.central_size, eocd.offset))
    corrupt(kFormat, "central directory (" + std::to_string(eocd.central_size) + " bytes at " + std::to_string(eocd.central_offset) + ") lies outside the file", eocd.offset);
  // The zip64 record follows the directory (APPNOTE 4.3.6): one pointed to inside an entry's data
  // (a tensor's bytes that hold a copy of it) would make those bytes archive metadata, which an
  // edit of the entry then changes. Entries end before the directory (checked below), so this
  // keeps every end record out of every entry.
  if (eocd.zip64 && eocd.zip64_offset < eocd.central_offset + eocd.central_size)
    corrupt(kFormat, "zip64 end of central directory record at offset " + std::to_string(eocd.zip64_offset) +
                         " lies before the end of the central directory (inside an entry's data or the directory)", eocd.zip64_offset);
  // Each entry takes at least 46 bytes: a count beyond that is a lie (and must not size anything).
  if (eocd.entries > eocd.central_size / kCentralSize)
    corrupt(kFormat, "end of central directory claims " + std::to_string(eocd.entries) + " entries in " + std::to_string(eocd.central_size) + " bytes", eocd.offset);
  Reader r(file.subspan(static_cast<std::size_t>(eocd.central_offset), static_cast<std::size_t>(eocd.central_size)), kFormat, eocd.central_offset);
  std::unordered_set<std::string> names;
  for (std::uint64_t i = 0; i < eocd.entries; ++i) {
    const std::uint64_t at = r.offset();
    if (r.le<std::uint32_t>("central directory entry") != kCentralSig) corrupt(kFormat, "bad central directory entry signature (entry " + std::to_string(i) + ")", at);
    r.take(4, "versions");
    const auto flags = r.le<std::uint16_t>("flags");
    const auto method = r.le<std::uint16_t>("method");
    r.take(4, "time and date");
    ZipEntry e;
    e.central_crc_offset = r.offset();
    e.crc32 = r.le<std::uint32_t>("crc-32");
    Sizes s{};
    s.compressed = r.le<std::uint32_t>("compressed size");
    s.uncompressed = r.le<std::uint32_t>("uncompressed size");
    const auto name_len = r.le<std::uint16_t>("name length");
    const auto extra_len = r.le<std::uint16_t>("extra field length");
    const auto comment_len = r.le<std::uint16_t>("comment length");
    const auto disk = r.le<std::uint16_t>("disk number");
    r.take(2 + 4, "attributes");
    s.offset = r.le<std::uint32_t>("local header offset");
    e.name = std::string(as_chars(r.take(name_len, "entry name")));
    const std::uint64_t extra_at = r.offset();
    read_zip64_extra(r.take(extra_len, "extra field"), extra_at, s, true);
    r.take(comment_len, "entry comment");
    const std::string where = "entry '" + printable(e.name) + "'";
    if (s.uncompressed == 0xFFFFFFFF || s.compressed == 0xFFFFFFFF || s.offset == 0xFFFFFFFF)
      corrupt(kFormat, where + ": sizes unknown (0xFFFFFFFF without a zip64 extra field)", at);
    if (disk != 0 && !(disk == 0xFFFF && s.zip64)) corrupt(kFormat, where + ": on disk " + std::to_string(disk) + " (multi-disk archive)", at);
    if (flags & (kFlagEncrypted | kFlagStrongEncryption)) corrupt(kFormat, where + ": encrypted", at);
    if (method != 0 && method != 8) corrupt(kFormat, where + ": compression method " + std::to_string(method) + " (only stored and deflated)", at);
    if (method == 0 && s.compressed != s.uncompressed) corrupt(kFormat, where + ": stored with compressed size != size", at);
    if (!names.insert(e.name).second) corrupt(kFormat, "duplicate entry name '" + printable(e.name) + "'", at);
    e.method = static_cast<ZipMethod>(method);
    e.compressed_size = s.compressed;
    e.uncompressed_size = s.uncompressed;
    e.header_offset = s.offset;
    read_local(file, e, flags, s.zip64, at);
    if (e.end_offset > eocd.central_offset) corrupt(kFormat, where + ": data runs into the central directory", at);
    dir.entries.push_back(std::move(e));
  }
  if (!r.done()) r.fail("central directory has " + std::to_string(r.left()) + " bytes after its " + std::to_string(eocd.entries) + " entries");
  std::vector<const ZipEntry*> by_offset;
  for (const auto& e : dir.entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->header_offset < b->header_offset; });
  for (std::size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->header_offset < by_offset[i - 1]->end_offset)
      corrupt(kFormat, "entries '" + printable(by_offset[i - 1]->name) + "' and '" + printable(by_offset[i]->name) + "' overlap", by_offset[i]->header_offset);
  dir.index_names();
  return dir;
}

std::uint32_t crc32(Bytes data, std::uint32_t crc) noexcept {
  // zlib takes uInt lengths: feed huge spans in pieces.
  while (!data.empty()) {
    const std::size_t n = std::min<std::size_t>(data.size(), std::numeric_limits<uInt>::max());
    crc = static_cast<std::uint32_t>(::crc32(crc, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(n)));
    data = data.subspan(n);
  }
  return crc;
}

std::uint32_t crc32_patch(std::uint32_t old_crc, std::uint64_t length, std::uint64_t offset, Bytes old_bytes, Bytes new_bytes) {
  if (old_bytes.size() != new_bytes.size() || !in_bounds(offset, old_bytes.size(), length))
    throw Error("crc32_patch: " + std::to_string(old_bytes.size()) + " bytes at " + std::to_string(offset) + " do not fit an entry of " + std::to_string(length));
  // crc(M ^ E) = crc(M) ^ crc(E) ^ crc(0...0) for same-length messages; with E zero outside the
  // changed bytes x, crc(E) ^ crc(zeros) is the linear part of crc(x) shifted by the bytes after it.
  std::vector<std::byte> diff(old_bytes.size()), zeros(old_bytes.size());
  for (std::size_t i = 0; i < diff.size(); ++i) diff[i] = old_bytes[i] ^ new_bytes[i];
  const std::uint32_t linear = crc32(diff) ^ crc32(zeros);
  const std::uint64_t after = length - offset - old_bytes.size();
  // crc32_combine(a, 0, n) multiplies a by x^(8n) mod P: the shift alone.
  return old_crc ^ static_cast<std::uint32_t>(::crc32_combine64(linear, 0, static_cast<z_off64_t>(after)));
}

std::array<CrcPatch, 2> crc_patches(const ZipEntry& entry, std::uint32_t crc) noexcept {
  std::array<std::byte, 4> b{};
  for (std::size_t i = 0; i < 4; ++i) b[i] = static_cast<std::byte>(crc >> (8 * i));
  return {CrcPatch{entry.local_crc_offset, b}, CrcPatch{entry.central_crc_offset, b}};
}

}  // namespace resil::inject::formats
