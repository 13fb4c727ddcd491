// ZipStorage: CRC-32s of edited zip members kept right (see zip_storage.hpp).
#include "zip_storage.hpp"

namespace resil::inject {

void ZipStorage::changed(const Item& it, std::uint64_t offset, std::span<const std::byte> old_bytes,
                         std::span<const std::byte> new_bytes) {
  const auto& e = zip_.entries.at(it.part);
  changes_[it.part].push_back({offset - e.data_offset, {old_bytes.begin(), old_bytes.end()}, {new_bytes.begin(), new_bytes.end()}});
}

void ZipStorage::finish() {
  // In file order of the words edited: each change shifts the CRC by the CRC of its XOR difference
  // (CRC-32 is affine), so the order of the patches does not matter.
  for (auto& [entry, list] : changes_) {
    auto& e = zip_.entries[entry];
    std::uint32_t crc = e.crc32;
    for (const auto& c : list) crc = formats::crc32_patch(crc, e.uncompressed_size, c.offset, c.old_bytes, c.new_bytes);
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
