#include "resil/ecrm/recovery.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "node_segments.hpp"
#include "resil/core/error.hpp"

namespace resil::ecrm {

Recovery::Recovery(const Transport& net, ShardStore& store, int m) : net_(net), store_(store), m_(m) {
  const auto stripes = store_.layout().stripes();
  const auto ranks = static_cast<std::uint64_t>(net_.size());
  detail::require_memory(stripes * (ranks + sizeof(void*)),
                         "the failure bookkeeping of " + std::to_string(stripes) + " stripes (a byte per stripe and rank, a pointer per stripe)");
  lost_.assign(static_cast<std::size_t>(net_.size()), std::vector<std::uint8_t>(stripes, 0));
  pending_.assign(static_cast<std::size_t>(net_.size()), 0);
  cursor_.assign(static_cast<std::size_t>(net_.size()), 0);
  plan_cache_.assign(stripes, nullptr);
}

void Recovery::fail(int rank, bool wipe) {
  const auto& lay = store_.layout();
  std::fill(plan_cache_.begin(), plan_cache_.end(), nullptr);
  auto& l = lost_[static_cast<std::size_t>(rank)];
  std::uint64_t count = 0;
  for (std::uint64_t s = 0; s < lay.stripes(); ++s) {
    l[s] = lay.fragment_on(s, rank) >= 0 ? 1 : 0;
    count += l[s];
  }
  pending_[static_cast<std::size_t>(rank)] = count;
  cursor_[static_cast<std::size_t>(rank)] = 0;
  if (rank == net_.rank()) store_.wipe(wipe);
}

void Recovery::clear_lost() {
  std::fill(plan_cache_.begin(), plan_cache_.end(), nullptr);
  for (auto& l : lost_) std::fill(l.begin(), l.end(), 0);
  std::fill(pending_.begin(), pending_.end(), 0);
  std::fill(cursor_.begin(), cursor_.end(), 0);
}

void Recovery::save(Writer& w) const {
  // Only the rows of ranks with lost members: nothing at all while everything is redundant.
  for (std::size_t r = 0; r < lost_.size(); ++r) {
    w.put(pending_[r]);
    w.put(cursor_[r]);
    if (pending_[r] > 0) w.put_bytes(reinterpret_cast<const std::byte*>(lost_[r].data()), lost_[r].size());
  }
}

void Recovery::load(Reader& rd) {
  std::fill(plan_cache_.begin(), plan_cache_.end(), nullptr);
  for (std::size_t r = 0; r < lost_.size(); ++r) {
    pending_[r] = rd.get<std::uint64_t>();
    cursor_[r] = rd.get<std::uint64_t>();
    if (pending_[r] > 0)
      std::memcpy(lost_[r].data(), rd.take(lost_[r].size()), lost_[r].size());
    else
      std::fill(lost_[r].begin(), lost_[r].end(), 0);
  }
}

bool Recovery::any_lost() const noexcept {
  return std::any_of(pending_.begin(), pending_.end(), [](std::uint64_t p) { return p > 0; });
}

std::vector<int> Recovery::erased(std::uint64_t stripe) const {
  const auto& lay = store_.layout();
  std::vector<int> e;
  for (int j = 0; j < lay.n(); ++j)
    if (lost(lay.rank_of(stripe, j), stripe)) e.push_back(j);
  return e;
}

std::optional<std::uint64_t> Recovery::over_limit() const {
  if (!any_lost()) return std::nullopt;
  for (std::uint64_t s = 0; s < store_.layout().stripes(); ++s)
    if (erased(s).size() > static_cast<std::size_t>(m_)) return s;
  return std::nullopt;
}

const ec::DecodePlan& Recovery::plan_of(std::uint64_t stripe) {
  // Erasures change only at failures and rebuilds (which reset the entry): one lookup per stripe
  // and erasure pattern instead of one per degraded read.
  auto& p = plan_cache_[stripe];
  if (!p) p = &store_.codec().plan(erased(stripe));
  return *p;
}

void Recovery::put_member_bytes(std::uint64_t stripe, int j, std::size_t offset, std::size_t len, Writer& w) {
  if (lost(net_.rank(), stripe)) throw EcError("rank " + std::to_string(net_.rank()) + " asked to serve its lost member of stripe " + std::to_string(stripe));
  const auto src = store_.member(stripe, j).subspan(offset, len);
  w.put_bytes(src.data(), src.size());
}

void Recovery::decode_member(std::uint64_t stripe, const ec::DecodePlan& plan, int target, std::vector<Reader>& from, std::size_t len,
                             ec::Bytes dst) {
  const auto& lay = store_.layout();
  src_.clear();
  for (int j : plan.sources()) src_.emplace_back(from[static_cast<std::size_t>(lay.rank_of(stripe, j))].take(len), len);
  if (scratch_.size() < plan.targets().size() * len) scratch_.resize(plan.targets().size() * len);
  out_.clear();
  bool found = false;
  for (std::size_t q = 0; q < plan.targets().size(); ++q) {
    const bool is_target = plan.targets()[q] == target;
    found = found || is_target;
    out_.push_back(is_target ? dst : ec::Bytes(scratch_.data() + q * len, len));
  }
  if (!found) throw EcError("decoding stripe " + std::to_string(stripe) + " for member " + std::to_string(target) + ", which is not lost");
  store_.codec().decode(plan, src_, out_);
}

std::vector<Recovery::RebuildJob> Recovery::take_rebuild_jobs(std::uint64_t stripes_per_rank) {
  std::vector<RebuildJob> jobs;
  for (int f = 0; f < net_.size(); ++f) {
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

void Recovery::put_rebuild_sources(const std::vector<RebuildJob>& jobs, int dest, Writer& w) {
  const int me = net_.rank();
  for (const auto& job : jobs) {
    if (job.rank != dest) continue;
    for (int j : store_.codec().plan(job.erased).sources())
      if (store_.layout().rank_of(job.stripe, j) == me) {
        const auto src = store_.member(job.stripe, j);
        w.put_bytes(src.data(), src.size());
      }
  }
}

void Recovery::finish_rebuild(const std::vector<RebuildJob>& jobs, std::vector<Reader>& from, std::uint64_t committed_step) {
  const int me = net_.rank(), k = store_.k();
  const auto& lay = store_.layout();
  for (const auto& job : jobs) {
    if (job.rank != me) continue;
    const int t = lay.table_of(job.stripe);
    const int mine = lay.fragment_on(job.stripe, me);
    decode_member(job.stripe, store_.codec().plan(job.erased), mine, from, lay.fragment_bytes(t), store_.member(job.stripe, mine));
    store_.seal_member(job.stripe, mine);  // its row checksums, if kept (no undo, as the bytes)
    if (mine >= k) {
      // Decoded from data as of `committed_step`: every delta up to it is inside; later ones must still come.
      // Neither the bytes nor these marks go through the undo record: a rollback past this point
      // makes the member lost again (the lost table is in the committed small state), and a lost
      // member's ledger words are never read (its deltas are dropped) until a rebuild marks them anew.
      const auto slot = lay.place(job.stripe, mine).slot;
      for (int i = 0; i < k; ++i)
        store_.ledger(t).mark(slot * static_cast<std::uint64_t>(k) + static_cast<std::uint64_t>(i), committed_step);
    }
  }
  for (const auto& job : jobs) {
    lost_[static_cast<std::size_t>(job.rank)][job.stripe] = 0;
    plan_cache_[job.stripe] = nullptr;
    --pending_[static_cast<std::size_t>(job.rank)];
  }
}

void Recovery::rebuild(std::uint64_t stripes_per_rank, std::uint64_t committed_step) {
  const int n = net_.size();
  const auto jobs = take_rebuild_jobs(stripes_per_rank);
  std::vector<ByteVec> out(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    Writer w(out[static_cast<std::size_t>(r)]);
    put_rebuild_sources(jobs, r, w);
  }
  const auto in = net_.exchange(out);
  std::vector<Reader> from;
  for (int r = 0; r < n; ++r) from.emplace_back(in.from(r), "rebuild sources");
  finish_rebuild(jobs, from, committed_step);
}

}  // namespace resil::ecrm
