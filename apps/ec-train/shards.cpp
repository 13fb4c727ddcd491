#include "shards.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include "resil/core/error.hpp"
#include "resil/core/rng.hpp"

namespace resil::ectrain {

namespace {
constexpr std::byte wiped{0xEE};  // what a replacement's memory holds before it is rebuilt

std::vector<ec::TableShape> shapes(int tables, std::uint32_t rows, std::size_t row_bytes) {
  return std::vector<ec::TableShape>(static_cast<std::size_t>(tables), ec::TableShape{rows, row_bytes});
}
}  // namespace

Shards::Shards(const Mpi& mpi, int k, int m, int tables, std::uint32_t rows, int dim, std::uint32_t rows_per_fragment)
    : mpi_(mpi), k_(k), m_(m), dim_(dim), row_bytes_(static_cast<std::size_t>(dim) * 2 * sizeof(float)),
      lay_(k, m, mpi.size(), shapes(tables, rows, row_bytes_), rows_per_fragment), codec_(k, m) {
  const int me = mpi_.rank();
  for (int t = 0; t < tables; ++t) {
    data_.emplace_back(lay_.data_slots(me, t) * lay_.fragment_bytes(t), std::byte{0});
    parity_.emplace_back(lay_.parity_slots(me, t) * lay_.fragment_bytes(t), std::byte{0});
    ledgers_.emplace_back(lay_.parity_slots(me, t) * static_cast<std::uint64_t>(k));
  }
  lost_.assign(static_cast<std::size_t>(mpi_.size()), std::vector<std::uint8_t>(lay_.stripes(), 0));
  pending_.assign(static_cast<std::size_t>(mpi_.size()), 0);
  cursor_.assign(static_cast<std::size_t>(mpi_.size()), 0);
  plan_cache_.assign(lay_.stripes(), nullptr);
}

std::span<std::byte> Shards::row(RowId r) {
  const auto p = lay_.locate(static_cast<int>(r.table), r.row);
  if (p.rank != mpi_.rank()) throw EcError("row " + std::to_string(r.row) + " of table " + std::to_string(r.table) + " is not on rank " + std::to_string(mpi_.rank()));
  return std::span<std::byte>(data_[r.table]).subspan(p.slot * lay_.fragment_bytes(static_cast<int>(r.table)) + p.offset, row_bytes_);
}

std::span<std::byte> Shards::member(std::uint64_t stripe, int j) {
  const int t = lay_.table_of(stripe);
  const auto p = lay_.place(stripe, j);
  if (p.rank != mpi_.rank()) throw EcError("member " + std::to_string(j) + " of stripe " + std::to_string(stripe) + " is not on rank " + std::to_string(mpi_.rank()));
  auto& store = j < k_ ? data_[static_cast<std::size_t>(t)] : parity_[static_cast<std::size_t>(t)];
  const auto fb = lay_.fragment_bytes(t);
  return std::span<std::byte>(store).subspan(p.slot * fb, fb);
}

void Shards::init_rows(std::uint64_t seed) {
  const float bound = std::sqrt(1.0f / static_cast<float>(lay_.table(0).rows));
  for (int t = 0; t < lay_.tables(); ++t) {
    std::fill(data_[static_cast<std::size_t>(t)].begin(), data_[static_cast<std::size_t>(t)].end(), std::byte{0});
    const std::uint64_t key = derive_seed(seed, 0xE3B0000ull + static_cast<std::uint64_t>(t));
    for (std::uint64_t r = 0; r < lay_.table(t).rows; ++r) {
      if (lay_.locate(t, r).rank != mpi_.rank()) continue;
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

Inbox Shards::fetch(const std::vector<std::vector<FetchReq>>& reqs) {
  const int n = mpi_.size();
  std::vector<ByteVec> out(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    Writer w(out[static_cast<std::size_t>(r)]);
    for (const auto& q : reqs[static_cast<std::size_t>(r)]) w.put(q);
  }
  const auto in = mpi_.exchange(out);
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
  return mpi_.exchange(replies);
}

void Shards::for_each_parity_stripe(const std::function<void(std::uint64_t, int, const std::vector<ec::ConstBytes>&)>& fn) {
  const int me = mpi_.rank(), n = mpi_.size();
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

void Shards::encode_all() {
  for_each_parity_stripe([&](std::uint64_t s, int j, const std::vector<ec::ConstBytes>& src) {
    codec_.encode_row(j - k_, src, member(s, j));
  });
  for (auto& l : ledgers_) l.clear();
  clear_lost();
}

std::uint64_t Shards::verify_parity() {
  int bad = 0;
  std::vector<std::byte> fresh;
  for_each_parity_stripe([&](std::uint64_t s, int j, const std::vector<ec::ConstBytes>& src) {
    fresh.assign(src.front().size(), std::byte{0});
    codec_.encode_row(j - k_, src, fresh);
    const auto stored = member(s, j);
    if (!std::equal(fresh.begin(), fresh.end(), stored.begin())) ++bad;
  });
  std::vector<double> total{static_cast<double>(bad)};
  mpi_.allreduce_sum_ordered(total);
  return static_cast<std::uint64_t>(total[0]);
}

void Shards::fail(int rank) {
  std::fill(plan_cache_.begin(), plan_cache_.end(), nullptr);
  auto& l = lost_[static_cast<std::size_t>(rank)];
  std::uint64_t count = 0;
  for (std::uint64_t s = 0; s < lay_.stripes(); ++s) {
    l[s] = lay_.fragment_on(s, rank) >= 0 ? 1 : 0;
    count += l[s];
  }
  pending_[static_cast<std::size_t>(rank)] = count;
  cursor_[static_cast<std::size_t>(rank)] = 0;
  if (rank == mpi_.rank()) {
    for (auto& d : data_) std::fill(d.begin(), d.end(), wiped);
    for (auto& p : parity_) std::fill(p.begin(), p.end(), wiped);
    for (auto& led : ledgers_) led.clear();
  }
}

void Shards::clear_lost() {
  std::fill(plan_cache_.begin(), plan_cache_.end(), nullptr);
  for (auto& l : lost_) std::fill(l.begin(), l.end(), 0);
  std::fill(pending_.begin(), pending_.end(), 0);
  std::fill(cursor_.begin(), cursor_.end(), 0);
}

bool Shards::any_lost() const noexcept {
  return std::any_of(pending_.begin(), pending_.end(), [](std::uint64_t p) { return p > 0; });
}

bool Shards::lost(int rank, std::uint64_t stripe) const { return lost_[static_cast<std::size_t>(rank)][stripe] != 0; }

std::vector<int> Shards::erased(std::uint64_t stripe) const {
  std::vector<int> e;
  for (int j = 0; j < lay_.n(); ++j)
    if (lost(lay_.rank_of(stripe, j), stripe)) e.push_back(j);
  return e;
}

std::optional<std::uint64_t> Shards::over_limit() const {
  if (!any_lost()) return std::nullopt;
  for (std::uint64_t s = 0; s < lay_.stripes(); ++s)
    if (erased(s).size() > static_cast<std::size_t>(m_)) return s;
  return std::nullopt;
}

std::vector<Shards::RebuildJob> Shards::take_rebuild_jobs(std::uint64_t stripes_per_rank) {
  std::vector<RebuildJob> jobs;
  for (int f = 0; f < mpi_.size(); ++f) {
    auto& cur = cursor_[static_cast<std::size_t>(f)];
    std::uint64_t taken = 0;
    while (pending_[static_cast<std::size_t>(f)] > taken && (stripes_per_rank == 0 || taken < stripes_per_rank)) {
      while (!lost(f, cur)) ++cur;
      jobs.push_back({f, cur, erased(cur)});
      ++cur;
      ++taken;
    }
  }
  return jobs;
}

void Shards::put_rebuild_sources(const std::vector<RebuildJob>& jobs, int dest, Writer& w) {
  const int me = mpi_.rank();
  for (const auto& job : jobs) {
    if (job.rank != dest) continue;
    for (int j : codec_.plan(job.erased).sources())
      if (lay_.rank_of(job.stripe, j) == me) {
        const auto src = member(job.stripe, j);
        w.put_bytes(src.data(), src.size());
      }
  }
}

const ec::DecodePlan& Shards::plan_of(std::uint64_t stripe) {
  // Erasures change only at failures and rebuilds (which reset the entry): one lookup per stripe
  // and erasure pattern instead of one per degraded read.
  auto& p = plan_cache_[stripe];
  if (!p) p = &codec_.plan(erased(stripe));
  return *p;
}

void Shards::put_member_bytes(std::uint64_t stripe, int j, std::size_t offset, std::size_t len, Writer& w) {
  if (lost(mpi_.rank(), stripe)) throw EcError("rank " + std::to_string(mpi_.rank()) + " asked to serve its lost member of stripe " + std::to_string(stripe));
  const auto src = member(stripe, j).subspan(offset, len);
  w.put_bytes(src.data(), src.size());
}

void Shards::decode_member(std::uint64_t stripe, const ec::DecodePlan& plan, int target, std::vector<Reader>& from, std::size_t len,
                           ec::Bytes dst) {
  src_.clear();
  for (int j : plan.sources()) src_.emplace_back(from[static_cast<std::size_t>(lay_.rank_of(stripe, j))].take(len), len);
  if (scratch_.size() < plan.targets().size() * len) scratch_.resize(plan.targets().size() * len);
  out_.clear();
  bool found = false;
  for (std::size_t q = 0; q < plan.targets().size(); ++q) {
    const bool is_target = plan.targets()[q] == target;
    found = found || is_target;
    out_.push_back(is_target ? dst : ec::Bytes(scratch_.data() + q * len, len));
  }
  if (!found) throw EcError("decoding stripe " + std::to_string(stripe) + " for member " + std::to_string(target) + ", which is not lost");
  codec_.decode(plan, src_, out_);
}

void Shards::finish_rebuild(const std::vector<RebuildJob>& jobs, std::vector<Reader>& from, std::uint64_t committed_step) {
  const int me = mpi_.rank();
  for (const auto& job : jobs) {
    if (job.rank != me) continue;
    const int t = lay_.table_of(job.stripe);
    const int mine = lay_.fragment_on(job.stripe, me);
    decode_member(job.stripe, codec_.plan(job.erased), mine, from, lay_.fragment_bytes(t), member(job.stripe, mine));
    if (mine >= k_) {
      // Decoded from data as of `committed_step`: every delta up to it is inside; later ones must still come.
      const auto slot = lay_.place(job.stripe, mine).slot;
      for (int i = 0; i < k_; ++i)
        ledgers_[static_cast<std::size_t>(t)].mark(slot * static_cast<std::uint64_t>(k_) + static_cast<std::uint64_t>(i), committed_step);
    }
  }
  for (const auto& job : jobs) {
    lost_[static_cast<std::size_t>(job.rank)][job.stripe] = 0;
    plan_cache_[job.stripe] = nullptr;
    --pending_[static_cast<std::size_t>(job.rank)];
  }
}

void Shards::rebuild(std::uint64_t stripes_per_rank, std::uint64_t committed_step) {
  const int n = mpi_.size();
  const auto jobs = take_rebuild_jobs(stripes_per_rank);
  std::vector<ByteVec> out(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    Writer w(out[static_cast<std::size_t>(r)]);
    put_rebuild_sources(jobs, r, w);
  }
  const auto in = mpi_.exchange(out);
  std::vector<Reader> from;
  for (int r = 0; r < n; ++r) from.emplace_back(in.from(r), "rebuild sources");
  finish_rebuild(jobs, from, committed_step);
}

void Shards::apply_deltas(std::uint64_t step, std::span<const ByteView> in) {
  const int me = mpi_.rank();
  for (const auto& buf : in) {
    Reader rd(buf, "parity delta");
    while (!rd.done()) {
      const auto stripe = rd.get<std::uint64_t>();
      const auto fragment = rd.get<std::uint32_t>();
      const auto nrows = rd.get<std::uint32_t>();
      if (stripe >= lay_.stripes() || fragment >= static_cast<std::uint32_t>(k_)) throw EcError("parity delta for stripe " + std::to_string(stripe));
      const int t = lay_.table_of(stripe);
      const int j = lay_.fragment_on(stripe, me);
      if (j < k_) throw EcError("rank " + std::to_string(me) + " got a parity delta for stripe " + std::to_string(stripe) + " it holds no parity of");
      const bool drop = lost(me, stripe);
      const ec::DeltaTag tag{step, lay_.place(stripe, j).slot * static_cast<std::uint64_t>(k_) + fragment};
      // One tag per (step, fragment): a duplicate here would be a protocol bug, so it throws.
      if (!drop) ledgers_[static_cast<std::size_t>(t)].require(tag);
      const auto par = drop ? std::span<std::byte>{} : member(stripe, j);
      for (std::uint32_t q = 0; q < nrows; ++q) {
        const auto off = rd.get<std::uint32_t>();
        const std::byte* d = rd.take(row_bytes_);
        if (!drop) codec_.update_row(j - k_, static_cast<int>(fragment), off, ec::ConstBytes(d, row_bytes_), par);
      }
    }
  }
}

void Shards::hash_into(ckpt::Xxh64& h) {
  ByteVec mine;
  for (auto& d : data_) mine.insert(mine.end(), d.begin(), d.end());
  const auto all = mpi_.gather(mine, 0);
  if (mpi_.rank() != 0) return;
  std::vector<std::size_t> base(static_cast<std::size_t>(mpi_.size()) * static_cast<std::size_t>(lay_.tables()));
  for (int r = 0; r < mpi_.size(); ++r) {
    std::size_t off = 0;
    for (int t = 0; t < lay_.tables(); ++t) {
      base[static_cast<std::size_t>(r) * static_cast<std::size_t>(lay_.tables()) + static_cast<std::size_t>(t)] = off;
      off += lay_.data_slots(r, t) * lay_.fragment_bytes(t);
    }
  }
  for (int t = 0; t < lay_.tables(); ++t)
    for (std::uint64_t row = 0; row < lay_.table(t).rows; ++row) {
      const auto p = lay_.locate(t, row);
      const std::size_t at = base[static_cast<std::size_t>(p.rank) * static_cast<std::size_t>(lay_.tables()) + static_cast<std::size_t>(t)] +
                             p.slot * lay_.fragment_bytes(t) + p.offset;
      h.update(std::span<const std::byte>(all[static_cast<std::size_t>(p.rank)].data() + at, row_bytes_));
    }
}

}  // namespace resil::ectrain
