// The zip directory reader on archives built here byte by byte (stored entries, with and without
// data descriptors) and damaged ones; CRC-32 patching against a full recomputation.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "resil/core/error.hpp"
#include "resil/inject/formats/zip.hpp"

namespace f = resil::inject::formats;
using Buf = std::vector<std::byte>;

namespace {

void put(Buf& b, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b.push_back(static_cast<std::byte>(v >> (8 * i)));
}
void put(Buf& b, std::string_view s) {
  for (const char c : s) b.push_back(static_cast<std::byte>(c));
}
f::Bytes bytes(const Buf& b) { return {b.data(), b.size()}; }

struct Member {
  std::string name, data;
  bool descriptor = false;
  std::uint16_t flags = 0, method = 0;
  std::int64_t at = -1;  // >= 0: write no local header, point the directory at this offset
};

std::uint32_t crc_of(const std::string& s) {
  return static_cast<std::uint32_t>(::crc32(0, reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(s.size())));
}

// A local header, the data and the data descriptor of one member.
Buf local(const Member& m) {
  Buf b;
  const std::uint32_t crc = crc_of(m.data);
  const std::uint16_t flags = static_cast<std::uint16_t>(m.flags | (m.descriptor ? 8 : 0));
  put(b, 0x04034b50, 4); put(b, 20, 2); put(b, flags, 2); put(b, m.method, 2); put(b, 0, 4);
  put(b, m.descriptor ? 0 : crc, 4); put(b, m.descriptor ? 0 : m.data.size(), 4); put(b, m.descriptor ? 0 : m.data.size(), 4);
  put(b, m.name.size(), 2); put(b, 0, 2); put(b, m.name); put(b, m.data);
  if (m.descriptor) { put(b, 0x08074b50, 4); put(b, crc, 4); put(b, m.data.size(), 4); put(b, m.data.size(), 4); }
  return b;
}

// A minimal PKZIP writer: local headers, central directory, end record.
Buf make_zip(const std::vector<Member>& members) {
  Buf b, cd;
  for (const auto& m : members) {
    const std::uint64_t at = m.at >= 0 ? static_cast<std::uint64_t>(m.at) : b.size();
    if (m.at < 0) {
      const Buf l = local(m);
      b.insert(b.end(), l.begin(), l.end());
    }
    const std::uint16_t flags = static_cast<std::uint16_t>(m.flags | (m.descriptor ? 8 : 0));
    put(cd, 0x02014b50, 4); put(cd, 20, 2); put(cd, 20, 2); put(cd, flags, 2); put(cd, m.method, 2); put(cd, 0, 4);
    put(cd, crc_of(m.data), 4); put(cd, m.data.size(), 4); put(cd, m.data.size(), 4); put(cd, m.name.size(), 2);
    put(cd, 0, 2); put(cd, 0, 2); put(cd, 0, 2); put(cd, 0, 2); put(cd, 0, 4); put(cd, at, 4); put(cd, m.name);
  }
  const std::uint64_t cd_at = b.size();
  b.insert(b.end(), cd.begin(), cd.end());
  put(b, 0x06054b50, 4); put(b, 0, 2); put(b, 0, 2); put(b, members.size(), 2); put(b, members.size(), 2);
  put(b, cd.size(), 4); put(b, cd_at, 4); put(b, 0, 2);
  return b;
}

std::string error_of(const Buf& b) {
  try {
    f::parse_zip(bytes(b));
  } catch (const resil::CorruptInputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("zip: entries, data offsets and CRC field offsets", "[formats][unit]") {
  const bool descriptor = GENERATE(false, true);
  const Buf z = make_zip({{"a/data.pkl", "hello", descriptor}, {"a/data/0", std::string(40, 'x'), descriptor}});
  const auto dir = f::parse_zip(bytes(z));
  REQUIRE(dir.entries.size() == 2);
  for (const auto& e : dir.entries) {
    CHECK(e.data_descriptor == descriptor);
    CHECK(e.crc32 == f::load_le<std::uint32_t>(z.data() + e.local_crc_offset));
    CHECK(e.crc32 == f::load_le<std::uint32_t>(z.data() + e.central_crc_offset));
    const std::string data(reinterpret_cast<const char*>(z.data() + e.data_offset), e.uncompressed_size);
    CHECK(f::crc32(f::bytes_of(data.data(), data.size())) == e.crc32);
  }
  CHECK(dir.find("a/data/0")->uncompressed_size == 40);
  CHECK(dir.find("nope") == nullptr);
}

TEST_CASE("zip: find is a lookup, not a scan, and keeps the first of equal names", "[formats][unit]") {
  // A torch.save file looks up each of its storages by name: 60,000 lookups of 60,000 entries
  // were 1.8e9 name comparisons by a linear find (seconds of CPU); an index takes milliseconds.
  constexpr std::size_t n = 60000;
  std::vector<Member> members;
  for (std::size_t i = 0; i < n; ++i) members.push_back({"a/data/" + std::to_string(n - 1 - i), "x"});
  const Buf z = make_zip(members);
  const auto dir = f::parse_zip(bytes(z));
  REQUIRE(dir.entries.size() == n);
  CHECK(dir.by_name.size() == n);
  const std::clock_t t0 = std::clock();
  std::size_t found = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const f::ZipEntry* e = dir.find("a/data/" + std::to_string(i));
    found += e != nullptr && e == &dir.entries[n - 1 - i];
  }
  const double cpu = double(std::clock() - t0) / CLOCKS_PER_SEC;
  CHECK(found == n);
  CHECK(dir.find("a/data/") == nullptr);
  CHECK(dir.find("a/data/" + std::to_string(n)) == nullptr);
  CHECK(dir.find("") == nullptr);
  INFO("60,000 lookups took " << cpu << " s of CPU");
  CHECK(cpu < 0.5);
  // Equal names (parse_zip refuses them; a directory built by other code may hold them): the
  // first in directory order, indexed or not.
  f::ZipDirectory d;
  for (const char* name : {"b", "a", "b", "a"}) d.entries.push_back({.name = name});
  for (const bool indexed : {false, true}) {
    if (indexed) d.index_names();
    CHECK(d.find("a") == &d.entries[1]);
    CHECK(d.find("b") == &d.entries[0]);
    CHECK(d.find("c") == nullptr);
  }
  d.entries.push_back({.name = "c"});  // changed after indexing: found all the same
  CHECK(d.find("c") == &d.entries[4]);
  CHECK(d.find("a") == &d.entries[1]);
}

TEST_CASE("zip: every truncation and every single-byte change is refused or parsed, never a crash", "[formats][unit]") {
  const Buf z = make_zip({{"x", "abc", true}, {"y", "defgh", false}});
  for (std::size_t n = 0; n < z.size(); ++n) {
    const Buf cut(z.begin(), z.begin() + static_cast<std::ptrdiff_t>(n));
    CHECK_THROWS_AS(f::parse_zip(bytes(cut)), resil::CorruptInputError);
  }
  for (std::size_t i = 0; i < z.size(); ++i) {
    Buf m = z;
    m[i] ^= std::byte{0x41};
    try {
      f::parse_zip(bytes(m));
    } catch (const resil::CorruptInputError&) {
    }
  }
}

TEST_CASE("zip: refusals name the problem", "[formats][unit]") {
  CHECK_THAT(error_of(make_zip({{"x", "a", false, 1}})), Catch::Contains("entry 'x': encrypted"));
  CHECK_THAT(error_of(make_zip({{"x", "a", false, 0, 12}})), Catch::Contains("compression method 12"));
  CHECK_THAT(error_of(make_zip({{"x", "a"}, {"x", "b"}})), Catch::Contains("duplicate entry name 'x'"));
  SECTION("local header disagrees with the central directory") {
    Buf z = make_zip({{"x", "abc"}});
    z[14] ^= std::byte{1};  // the local CRC
    CHECK_THAT(error_of(z), Catch::Contains("local header CRC/sizes disagree"));
  }
  SECTION("data descriptor disagrees") {
    Buf z = make_zip({{"x", "abc", true}});
    z[30 + 1 + 3 + 4] ^= std::byte{1};  // the descriptor's CRC
    CHECK_THAT(error_of(z), Catch::Contains("data descriptor disagrees"));
  }
  SECTION("overlapping entries") {
    // x's data holds a complete local header for y, and the directory points y there.
    const Member y{"y", "ij"};
    const Buf inner = local(y);
    Member y_inside = y;
    y_inside.at = 30 + 1;
    CHECK_THAT(error_of(make_zip({{"x", std::string(reinterpret_cast<const char*>(inner.data()), inner.size())}, y_inside})),
               Catch::Contains("entries 'x' and 'y' overlap"));
  }
  SECTION("entry count the directory cannot hold") {
    Buf z = make_zip({{"x", "a"}});
    z[z.size() - 22 + 8] = std::byte{0xFF};
    z[z.size() - 22 + 10] = std::byte{0xFF};
    CHECK_THAT(error_of(z), Catch::Contains("claims"));
  }
  CHECK_THAT(error_of(Buf(10)), Catch::Contains("too short"));
  CHECK_THAT(error_of(Buf(100)), Catch::Contains("no end of central directory"));
}

// The offset in "... at offset N", the last word of a refusal.
static std::uint64_t offset_of(const std::string& what) {
  const auto at = what.rfind("at offset ");
  REQUIRE(at != std::string::npos);
  return std::stoull(what.substr(at + 10));
}

TEST_CASE("zip: a refusal's offset is the record at fault, inside the file", "[formats][unit]") {
  auto signature_at = [](const Buf& z, std::uint64_t off) {
    REQUIRE(off + 4 <= z.size());
    return f::load_le<std::uint32_t>(z.data() + off);
  };
  SECTION("a central directory entry: the second of two named alike") {
    const Buf z = make_zip({{"x", "a"}, {"x", "b"}});
    const auto off = offset_of(error_of(z));
    CHECK(off == 2 * 32 + 47);  // two local headers with their data, then the first directory entry
    CHECK(signature_at(z, off) == 0x02014b50);
  }
  SECTION("a central directory entry: encrypted") {
    const Buf z = make_zip({{"x", "a", false, 1}});
    CHECK(offset_of(error_of(z)) == 32);
  }
  SECTION("a local header naming another entry") {
    const Buf z = make_zip({{"x", "a"}, {"y", "b"}, {"z", "c", false, 0, 0, 32}});  // z's entry points at y's header
    const std::string what = error_of(z);
    CHECK_THAT(what, Catch::Contains("entry 'z': local header names 'y'"));
    CHECK(offset_of(what) == 32);
    CHECK(signature_at(z, 32) == 0x04034b50);
  }
  SECTION("the end record of a multi-disk archive") {
    Buf z = make_zip({{"x", "a"}});
    z[z.size() - 22 + 4] = std::byte{1};  // this disk's number
    const std::string what = error_of(z);
    CHECK_THAT(what, Catch::Contains("multi-disk archive"));
    CHECK(offset_of(what) == z.size() - 22);
  }
}

TEST_CASE("zip: crc32_patch equals recomputing the CRC", "[formats][unit]") {
  std::mt19937_64 rng(GENERATE(1u, 2u, 3u, 4u, 5u));
  std::string data(1 + rng() % 5000, '\0');
  for (auto& c : data) c = static_cast<char>(rng());
  const std::uint32_t before = f::crc32(f::bytes_of(data.data(), data.size()));
  const std::size_t n = 1 + rng() % std::min<std::size_t>(8, data.size());
  const std::size_t at = rng() % (data.size() - n + 1);
  std::string changed = data;
  for (std::size_t i = 0; i < n; ++i) changed[at + i] = static_cast<char>(changed[at + i] ^ static_cast<char>(1u << (rng() % 8)));
  const auto patched = f::crc32_patch(before, data.size(), at, f::bytes_of(data.data() + at, n), f::bytes_of(changed.data() + at, n));
  CHECK(patched == f::crc32(f::bytes_of(changed.data(), changed.size())));
  CHECK(patched == static_cast<std::uint32_t>(::crc32(0, reinterpret_cast<const Bytef*>(changed.data()), static_cast<uInt>(changed.size()))));
  f::ZipEntry e;
  e.local_crc_offset = 14;
  e.central_crc_offset = 99;
  const auto p = f::crc_patches(e, 0x04030201u);
  CHECK(p[0].offset == 14);
  CHECK(p[1].offset == 99);
  CHECK(p[1].bytes == std::array<std::byte, 4>{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}});
  CHECK_THROWS(f::crc32_patch(before, 4, 3, f::bytes_of(data.data(), 2), f::bytes_of(data.data(), 2)));
}
