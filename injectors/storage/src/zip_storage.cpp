// ZipStorage: CRC-32s of edited zip members kept right (see zip_storage.hpp).
#include "zip_storage.hpp"

#include <libdeflate.h>

#include <algorithm>
#include <vector>

namespace resil::inject {

void ZipStorage::changed(const Item& it, std::uint64_t offset, std::span<const std::byte> old_bytes,
                         std::span<const std::byte> new_bytes) {
  const auto& e = zip_.entries.at(it.part);
  changes_[it.part].push_back({offset - e.data_offset, {old_bytes.begin(), old_bytes.end()}, {new_bytes.begin(), new_bytes.end()}});
}

void ZipStorage::edit(const std::string& tensor, std::vector<std::uint64_t> indices, const BlockFn& fn) {
  const Item& it = item(tensor);
  if (recompute_crc() && !it.tensor.staged && !indices.empty() && it.part < zip_.entries.size()) changes_[it.part];
  ExtentStorage::edit(tensor, std::move(indices), fn);
}

void ZipStorage::finish() {
  // In file order of the words edited: each change shifts the CRC by the CRC of its XOR difference
  // (CRC-32 is affine), so the order of the patches does not matter.
  for (auto& [entry, list] : changes_) {
    auto& e = zip_.entries[entry];
    std::uint32_t crc = e.crc32;
    if (recompute_crc() && e.method == formats::ZipMethod::stored) {
      // From the member's bytes as they are now, in slabs: what a killed run left is not trusted.
      std::uint32_t z = 0;
      std::vector<std::byte> buf;
      constexpr std::uint64_t slab = std::uint64_t{8} << 20;
      for (std::uint64_t at = 0; at < e.uncompressed_size; at += slab) {
        buf.resize(static_cast<std::size_t>(std::min(slab, e.uncompressed_size - at)));
        raw_.read(buf.data(), buf.size(), e.data_offset + at, path_ + ": zip member " + e.name);
        z = libdeflate_crc32(z, buf.data(), buf.size());
      }
      crc = z;
    } else {
      for (const auto& c : list) crc = formats::crc32_patch(crc, e.uncompressed_size, c.offset, c.old_bytes, c.new_bytes);
    }
    if (keep_crc() || crc == e.crc32) continue;
    // Each CRC field is one all-or-nothing 4-byte store, like every word.
    for (const auto& p : formats::crc_patches(e, crc)) {
      const std::uint64_t off = p.offset, zero = 0;
      const auto way = raw_.way_for(1, off, off + 4, sync());
      raw_.edit(way, off, std::span(&zero, 1), std::span(&zero, 1), 4, false, true, path_ + ": zip member " + e.name,
                [&](std::span<const std::uint64_t>, std::span<std::uint64_t> w) { w[0] = load_word(p.bytes.data(), 4, false); });
    }
    e.crc32 = crc;
  }
  changes_.clear();
  if (access_ == Access::rewrite) rewrite_staged();
}

}  // namespace resil::inject
