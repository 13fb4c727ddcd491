#include "resil/ecrm/shard_store.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include <isa-l/crc.h>

#include "resil/core/error.hpp"
#include "resil/core/rng.hpp"
#include "resil/ecrm/segment.hpp"

namespace resil::ecrm {

namespace {
constexpr std::byte wiped{0xEE};  // what a replacement's memory holds before it is rebuilt

std::vector<ec::TableShape> shapes(int tables, std::uint32_t rows, std::size_t row_bytes) {
  return std::vector<ec::TableShape>(static_cast<std::size_t>(tables), ec::TableShape{rows, row_bytes});
}
}  // namespace

ShardStore::ShardStore(const Transport& net, int k, int m, int tables, std::uint32_t rows, int dim, std::uint32_t rows_per_fragment,
                       bool own_memory, bool checksums)
    : net_(net), k_(k), dim_(dim), row_bytes_(static_cast<std::size_t>(dim) * 2 * sizeof(float)),
      lay_(k, m, net.size(), shapes(tables, rows, row_bytes_), rows_per_fragment), codec_(k, m), checksums_(checksums) {
  const int me = net_.rank();
  for (int t = 0; t < tables; ++t)
    bytes_ += (lay_.data_slots(me, t) + lay_.parity_slots(me, t)) * lay_.fragment_bytes(t) + sources(t) * sizeof(std::uint64_t) + sum_bytes(t);
  if (own_memory) {
    own_.assign(bytes_, std::byte{0});
    use_memory(own_);
  }
}

void ShardStore::use_memory(std::span<std::byte> mem) {
  if (mem.size() != bytes_) throw EcError("shard store of rank " + std::to_string(net_.rank()) + " needs " + std::to_string(bytes_) + " bytes, got " + std::to_string(mem.size()));
  const int me = net_.rank();
  if (reinterpret_cast<std::uintptr_t>(mem.data()) % alignof(std::uint64_t) != 0) throw EcError("shard store memory is not 8-byte aligned");
  data_.clear();
  parity_.clear();
  ledgers_.clear();
  sums_.clear();
  // Per table: [data fragments | parity fragments | ledger words]; fragments are multiples of 8 bytes.
  std::size_t at = 0;
  for (int t = 0; t < lay_.tables(); ++t) {
    const auto d = lay_.data_slots(me, t) * lay_.fragment_bytes(t), p = lay_.parity_slots(me, t) * lay_.fragment_bytes(t);
    data_.push_back(mem.subspan(at, d));
    parity_.push_back(mem.subspan(at + d, p));
    at += d + p;
    ledgers_.emplace_back(std::span(reinterpret_cast<std::uint64_t*>(mem.data() + at), sources(t)));
    at += sources(t) * sizeof(std::uint64_t);
    sums_.emplace_back(reinterpret_cast<std::uint32_t*>(mem.data() + at), checksums_ ? (lay_.data_slots(me, t) + lay_.parity_slots(me, t)) * lay_.rows_per_fragment() : 0);
    at += sum_bytes(t);
  }
  if (mem.data() != own_.data()) std::vector<std::byte>().swap(own_);
}

void ShardStore::before_write(std::span<const std::byte> range) {
  if (undo_) undo_->save(range);
}

std::size_t ShardStore::sum_bytes(int t) const noexcept {
  if (!checksums_) return 0;
  const int me = net_.rank();
  const std::size_t words = (lay_.data_slots(me, t) + lay_.parity_slots(me, t)) * lay_.rows_per_fragment();
  return (words * sizeof(std::uint32_t) + 7) / 8 * 8;  // the next table's fragments start 8-byte aligned
}

std::uint32_t ShardStore::crc(ec::ConstBytes bytes) noexcept {
  return crc32_iscsi(reinterpret_cast<unsigned char*>(const_cast<std::byte*>(bytes.data())), static_cast<int>(bytes.size()), 0xFFFFFFFFu);
}

void ShardStore::follow(std::uint32_t& sum, ec::ConstBytes before, ec::ConstBytes after) {
  before_write(std::as_bytes(std::span(&sum, 1)));
  sum ^= crc(before) ^ crc(after);
}

void ShardStore::seal(std::uint32_t& sum, ec::ConstBytes bytes) {
  before_write(std::as_bytes(std::span(&sum, 1)));
  sum = crc(bytes);
}

void ShardStore::seal_member(std::uint64_t stripe, int j) {
  if (!checksums_) return;
  const int t = lay_.table_of(stripe);
  const auto p = lay_.place(stripe, j);
  const auto m = member(t, j, p);
  for (std::uint32_t r = 0; r < lay_.rows_per_fragment(); ++r) checksum(t, j, p, r) = crc(m.subspan(r * row_bytes_, row_bytes_));
}

void ShardStore::seal_all() {
  if (!checksums_) return;
  const int me = net_.rank();
  for (std::uint64_t s = 0; s < lay_.stripes(); ++s)
    if (const int j = lay_.fragment_on(s, me); j >= 0) seal_member(s, j);
}

std::uint64_t ShardStore::sources(int t) const noexcept {
  return lay_.parity_slots(net_.rank(), t) * static_cast<std::uint64_t>(k_);
}

void ShardStore::require_delta(int t, ec::DeltaTag tag) {
  auto& led = ledgers_[static_cast<std::size_t>(t)];
  before_write(led.entry(tag.source));
  led.require(tag);
}

std::span<std::byte> ShardStore::row(RowId r) {
  const auto p = lay_.locate(static_cast<int>(r.table), r.row);
  if (p.rank != net_.rank()) throw EcError("row " + std::to_string(r.row) + " of table " + std::to_string(r.table) + " is not on rank " + std::to_string(net_.rank()));
  return row(r, p);
}

std::span<std::byte> ShardStore::member(std::uint64_t stripe, int j) {
  const int t = lay_.table_of(stripe);
  const auto p = lay_.place(stripe, j);
  if (p.rank != net_.rank()) throw EcError("member " + std::to_string(j) + " of stripe " + std::to_string(stripe) + " is not on rank " + std::to_string(net_.rank()));
  return member(t, j, p);
}

void ShardStore::init_rows(std::uint64_t seed) {
  const float bound = std::sqrt(1.0f / static_cast<float>(lay_.table(0).rows));
  for (int t = 0; t < lay_.tables(); ++t) {
    std::fill(data_[static_cast<std::size_t>(t)].begin(), data_[static_cast<std::size_t>(t)].end(), std::byte{0});
    const std::uint64_t key = derive_seed(seed, 0xE3B0000ull + static_cast<std::uint64_t>(t));
    for (std::uint64_t r = 0; r < lay_.table(t).rows; ++r) {
      if (lay_.locate(t, r).rank != net_.rank()) continue;
      auto bytes = row({static_cast<std::uint32_t>(t), static_cast<std::uint32_t>(r)});
      std::vector<float> v(2 * static_cast<std::size_t>(dim_), 0.0f);
      for (int i = 0; i < dim_; ++i) {
        const double u = static_cast<double>(Rng::at(key, r, static_cast<std::uint64_t>(i)) >> 11) * 0x1.0p-53;
        v[static_cast<std::size_t>(i)] = static_cast<float>(2.0 * u - 1.0) * bound;
      }
      std::memcpy(bytes.data(), v.data(), row_bytes_);
    }
  }
}

void ShardStore::wipe(bool bytes) {
  if (bytes) {
    for (auto& d : data_) std::fill(d.begin(), d.end(), wiped);
    for (auto& p : parity_) std::fill(p.begin(), p.end(), wiped);
  }
  for (auto& led : ledgers_) led.clear();
}

Inbox ShardStore::fetch(const std::vector<std::vector<FetchReq>>& reqs) {
  const int n = net_.size();
  std::vector<ByteVec> out(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    Writer w(out[static_cast<std::size_t>(r)]);
    for (const auto& q : reqs[static_cast<std::size_t>(r)]) w.put(q);
  }
  const auto in = net_.exchange(out);
  std::vector<ByteVec> replies(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    Reader rd(in.from(r), "fetch request");
    Writer w(replies[static_cast<std::size_t>(r)]);
    while (!rd.done()) {
      const auto q = rd.get<FetchReq>();
      if (q.table >= static_cast<std::uint32_t>(lay_.tables())) throw EcError("fetch request for table " + std::to_string(q.table));
      const auto& store = q.parity ? parity_[q.table] : data_[q.table];
      const auto fb = lay_.fragment_bytes(static_cast<int>(q.table));
      if (q.offset + q.len > fb || (q.slot + 1) * fb > store.size())
        throw EcError("fetch request out of range: table " + std::to_string(q.table) + " slot " + std::to_string(q.slot));
      w.put_bytes(store.data() + q.slot * fb + q.offset, q.len);
    }
  }
  return net_.exchange(replies);
}

void ShardStore::for_each_parity_stripe(const std::function<void(std::uint64_t, int, const std::vector<ec::ConstBytes>&)>& fn) {
  const int me = net_.rank(), n = net_.size();
  std::vector<std::vector<FetchReq>> reqs(static_cast<std::size_t>(n));
  std::vector<std::uint64_t> mine;  // stripes where this rank holds a parity member
  for (std::uint64_t s = 0; s < lay_.stripes(); ++s) {
    if (lay_.fragment_on(s, me) < k_) continue;
    mine.push_back(s);
    const int t = lay_.table_of(s);
    for (int i = 0; i < k_; ++i) {
      const auto p = lay_.place(s, i);
      reqs[static_cast<std::size_t>(p.rank)].push_back({static_cast<std::uint32_t>(t), 0, p.slot, 0, lay_.fragment_bytes(t)});
    }
  }
  const auto in = fetch(reqs);
  std::vector<std::size_t> pos(static_cast<std::size_t>(n), 0);
  std::vector<ec::ConstBytes> src;
  for (auto s : mine) {
    const auto fb = lay_.fragment_bytes(lay_.table_of(s));
    src.clear();
    for (int i = 0; i < k_; ++i) {
      const auto r = static_cast<std::size_t>(lay_.place(s, i).rank);
      src.emplace_back(in.from(static_cast<int>(r)).data() + pos[r], fb);
      pos[r] += fb;
    }
    fn(s, lay_.fragment_on(s, me), src);
  }
}

void ShardStore::encode_all() {
  for_each_parity_stripe([&](std::uint64_t s, int j, const std::vector<ec::ConstBytes>& src) {
    codec_.encode_row(j - k_, src, member(s, j));
  });
  for (auto& l : ledgers_) l.clear();
  seal_all();
}

std::uint64_t ShardStore::verify_parity() {
  int bad = 0;
  std::vector<std::byte> fresh;
  for_each_parity_stripe([&](std::uint64_t s, int j, const std::vector<ec::ConstBytes>& src) {
    fresh.assign(src.front().size(), std::byte{0});
    codec_.encode_row(j - k_, src, fresh);
    const auto stored = member(s, j);
    if (!std::equal(fresh.begin(), fresh.end(), stored.begin())) ++bad;
  });
  std::vector<double> total{static_cast<double>(bad)};
  net_.allreduce_sum_ordered(total);
  return static_cast<std::uint64_t>(total[0]);
}

void ShardStore::hash_into(ckpt::Xxh64& h) {
  // One table at a time: a gather carries at most INT_MAX bytes in all (a 4 GiB state is 512 MiB
  // a table with 8 tables), and rank 0 holds one table, not the whole state.
  for (int t = 0; t < lay_.tables(); ++t) {
    const auto& d = data_[static_cast<std::size_t>(t)];
    const auto all = net_.gather(ByteVec(d.begin(), d.end()), 0);
    if (net_.rank() != 0) continue;
    for (std::uint64_t row = 0; row < lay_.table(t).rows; ++row) {
      const auto p = lay_.locate(t, row);
      const std::size_t at = p.slot * lay_.fragment_bytes(t) + p.offset;
      h.update(std::span<const std::byte>(all[static_cast<std::size_t>(p.rank)].data() + at, row_bytes_));
    }
  }
}

}  // namespace resil::ecrm
