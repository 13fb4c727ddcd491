// rewrite_zip: an archive with some members' data replaced (a re-deflated .npz member), every
// other byte kept: local headers, data descriptors and central directory entries get the new CRC,
// sizes and local header offsets, the end records the new directory offset. Only for a staged
// copy (Access::rewrite): the archive is written whole.
#include <algorithm>
#include <cstring>

#include "zip_storage.hpp"

namespace resil::inject {

namespace {

void put(std::vector<std::byte>& b, std::uint64_t at, std::uint64_t v, unsigned n) { store_word(b.data() + at, n, false, v); }
std::uint64_t get(formats::Bytes b, std::uint64_t at, unsigned n) { return load_word(b.data() + at, n, false); }

// The zip64 extra field (id 1) inside [at, at + len) of `b`, or ~0.
std::uint64_t zip64_extra(formats::Bytes b, std::uint64_t at, std::uint64_t len) {
  for (std::uint64_t p = at; p + 4 <= at + len;) {
    const auto id = get(b, p, 2), n = get(b, p + 2, 2);
    if (id == 1) return p + 4;
    p += 4 + n;
  }
  return ~std::uint64_t{0};
}

}  // namespace

std::vector<std::byte> rewrite_zip(formats::Bytes old, const formats::ZipDirectory& dir, const std::map<std::size_t, ZipMember>& repl,
                                   const std::string& where) {
  std::vector<std::size_t> order(dir.entries.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return dir.entries[a].header_offset < dir.entries[b].header_offset; });
  std::vector<std::byte> out;
  out.reserve(old.size());
  std::vector<std::uint64_t> new_header(dir.entries.size());
  std::uint64_t pos = 0;
  auto copy_to = [&](std::uint64_t end) {
    out.insert(out.end(), old.begin() + static_cast<std::ptrdiff_t>(pos), old.begin() + static_cast<std::ptrdiff_t>(end));
    pos = end;
  };
  for (const auto i : order) {
    const auto& e = dir.entries[i];
    copy_to(e.header_offset);  // bytes between members, if any
    new_header[i] = out.size();
    const auto r = repl.find(i);
    if (r == repl.end()) {
      copy_to(e.end_offset);
      continue;
    }
    if (e.data_descriptor) throw UsageError(where + ": member " + e.name + " has a data descriptor: rewriting it is not supported");
    const std::uint64_t at = out.size();
    copy_to(e.data_offset);  // the local header, patched below
    put(out, at + 14, r->second.crc, 4);
    if (get(old, e.header_offset + 18, 4) == 0xFFFFFFFF || get(old, e.header_offset + 22, 4) == 0xFFFFFFFF ||
        r->second.data.size() >= 0xFFFFFFFF || r->second.size >= 0xFFFFFFFF)
      throw UsageError(where + ": member " + e.name + " needs zip64 sizes: rewriting it is not supported");
    put(out, at + 18, r->second.data.size(), 4);
    put(out, at + 22, r->second.size, 4);
    const std::uint64_t name_len = get(old, e.header_offset + 26, 2), extra_len = get(old, e.header_offset + 28, 2);
    const std::uint64_t z = zip64_extra(old, e.header_offset + 30 + name_len, extra_len);
    if (z != ~std::uint64_t{0} && get(old, z - 2, 2) >= 16) {  // np.savez's force_zip64: both sizes here too
      put(out, at + (z - e.header_offset), r->second.size, 8);
      put(out, at + (z - e.header_offset) + 8, r->second.data.size(), 8);
    }
    out.insert(out.end(), r->second.data.begin(), r->second.data.end());
    pos = e.end_offset;
  }
  copy_to(dir.central_offset);
  const std::uint64_t central = out.size();
  // Central directory entries, in directory order: CRC, sizes and the local header offset.
  for (std::size_t i = 0; i < dir.entries.size(); ++i) {
    const std::uint64_t at = out.size();
    const std::uint64_t n = get(old, pos + 28, 2), m = get(old, pos + 30, 2), k = get(old, pos + 32, 2);
    copy_to(pos + 46 + n + m + k);
    if (get(old, at - central + dir.central_offset + 42, 4) == 0xFFFFFFFF && central >= 0xFFFFFFFF)
      throw UsageError(where + ": zip64 offsets: rewriting is not supported");
    if (get(old, at - central + dir.central_offset + 42, 4) == 0xFFFFFFFF || new_header[i] >= 0xFFFFFFFF)
      throw UsageError(where + ": zip64 local header offsets: rewriting is not supported");
    put(out, at + 42, new_header[i], 4);
    if (const auto r = repl.find(i); r != repl.end()) {
      put(out, at + 16, r->second.crc, 4);
      put(out, at + 20, r->second.data.size(), 4);
      put(out, at + 24, r->second.size, 4);
    }
  }
  const std::uint64_t shift = central - dir.central_offset;  // signed in two's complement
  const std::uint64_t tail = pos;
  copy_to(old.size());
  // The end records: zip64 record (central offset at +48), its locator (record offset at +8), then
  // the end of central directory record (central offset at +16).
  for (std::uint64_t p = tail; p + 4 <= old.size(); ++p) {
    const auto sig = get(old, p, 4);
    const std::uint64_t q = p - tail + central + dir.central_size;
    if (sig == 0x06064b50 && p + 56 <= old.size()) put(out, q + 48, get(old, p + 48, 8) + shift, 8);
    else if (sig == 0x07064b50 && p + 20 <= old.size()) put(out, q + 8, get(old, p + 8, 8) + shift, 8);
    else if (sig == 0x06054b50 && p + 22 <= old.size()) {
      if (get(old, p + 16, 4) != 0xFFFFFFFF) put(out, q + 16, get(old, p + 16, 4) + shift, 4);
      break;
    }
  }
  return out;
}

}  // namespace resil::inject
