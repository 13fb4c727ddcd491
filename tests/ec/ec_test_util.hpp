// Test support for libec: fragments that start unaligned and end exactly at the end of their
// allocation (so an overrun reads or writes past it, which ASan reports), filled from a seeded
// counter-based stream.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "resil/core/rng.hpp"
#include "resil/ec/codec.hpp"

namespace resil::ec::test {

/// One fragment: `lead` bytes of slack before it (misalignment), none after.
class Buffer {
public:
  Buffer(std::size_t len, std::size_t lead) : mem_(new std::byte[len + lead]), lead_(lead), len_(len) {}
  Bytes span() noexcept { return {mem_.get() + lead_, len_}; }
  ConstBytes span() const noexcept { return {mem_.get() + lead_, len_}; }

private:
  std::unique_ptr<std::byte[]> mem_;
  std::size_t lead_, len_;
};

/// n fragments of `len` bytes with assorted misalignments.
class Fragments {
public:
  Fragments(int n, std::size_t len, std::uint64_t align_seed = 0) {
    for (int i = 0; i < n; ++i) bufs_.emplace_back(len, Rng::at(align_seed, 7, static_cast<std::uint64_t>(i)) % 64);
  }
  Bytes operator[](int i) { return bufs_[static_cast<std::size_t>(i)].span(); }
  ConstBytes operator[](int i) const { return bufs_[static_cast<std::size_t>(i)].span(); }
  int size() const noexcept { return static_cast<int>(bufs_.size()); }
  std::vector<ConstBytes> cspans(int first, int count) const {
    std::vector<ConstBytes> v;
    for (int i = first; i < first + count; ++i) v.push_back((*this)[i]);
    return v;
  }
  std::vector<Bytes> spans(int first, int count) {
    std::vector<Bytes> v;
    for (int i = first; i < first + count; ++i) v.push_back((*this)[i]);
    return v;
  }

private:
  std::vector<Buffer> bufs_;
};

inline void fill_random(Bytes b, Rng& rng) {
  std::uint64_t word = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (i % 8 == 0) word = rng();
    b[i] = static_cast<std::byte>(word >> (8 * (i % 8)));
  }
}

inline bool equal(ConstBytes a, ConstBytes b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

}  // namespace resil::ec::test
