#include "resil/ecrm/scrub.hpp"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "clock.hpp"

namespace resil::ecrm {

bool Scrub::verify(const MemberRow& r) {
  const auto& lay = store_.layout();
  const int t = lay.table_of(r.stripe);
  const auto p = lay.place(r.stripe, static_cast<int>(r.member));
  const auto rb = store_.row_bytes();
  const auto bytes = store_.member(t, static_cast<int>(r.member), p).subspan(std::size_t{r.row} * rb, rb);
  ++stats_.rows_checked;
  return ShardStore::crc(bytes) == store_.checksum(t, static_cast<int>(r.member), p, r.row);
}

void Scrub::check_rows(const std::vector<RowId>& owned) {
  const double t0 = now_s();
  const auto& lay = store_.layout();
  const int me = net_.rank();
  const auto rb = store_.row_bytes();
  for (const auto& id : owned) {
    const auto p = lay.locate(static_cast<int>(id.table), id.row);
    if (rec_.lost(me, p.stripe)) continue;  // garbage until rebuilt; its rebuild seals it
    const MemberRow r{p.stripe, static_cast<std::uint32_t>(p.fragment), static_cast<std::uint32_t>(p.offset / rb)};
    if (!verify(r)) suspects_.push_back(r);
  }
  stats_.check_s += now_s() - t0;
}

void Scrub::check_sources(const std::vector<RowId>& rows, const std::vector<Recovery::RebuildJob>& jobs) {
  const double t0 = now_s();
  const auto& lay = store_.layout();
  const int me = net_.rank();
  const auto rb = store_.row_bytes();
  for (const auto& id : rows) {
    const auto p = lay.locate(static_cast<int>(id.table), id.row);
    const int j = lay.fragment_on(p.stripe, me);
    if (j < 0 || rec_.lost(me, p.stripe)) continue;
    const MemberRow r{p.stripe, static_cast<std::uint32_t>(j), static_cast<std::uint32_t>(p.offset / rb)};
    if (!verify(r)) suspects_.push_back(r);
  }
  for (const auto& job : jobs)
    for (int j : store_.codec().plan(job.erased).sources()) {
      if (lay.rank_of(job.stripe, j) != me || rec_.lost(me, job.stripe)) continue;
      for (std::uint32_t row = 0; row < lay.rows_per_fragment(); ++row) {
        const MemberRow r{job.stripe, static_cast<std::uint32_t>(j), row};
        if (!verify(r)) suspects_.push_back(r);
      }
    }
  stats_.check_s += now_s() - t0;
}

void Scrub::sweep(std::uint64_t stripes) {
  const double t0 = now_s();
  const auto& lay = store_.layout();
  const int me = net_.rank();
  const std::uint64_t total = lay.stripes();
  stripes = std::min(stripes, total);
  for (std::uint64_t i = 0; i < stripes; ++i) {
    const std::uint64_t s = cursor_;
    cursor_ = (cursor_ + 1) % total;
    const int j = lay.fragment_on(s, me);
    if (j < 0 || rec_.lost(me, s)) continue;
    for (std::uint32_t row = 0; row < lay.rows_per_fragment(); ++row) {
      const MemberRow r{s, static_cast<std::uint32_t>(j), row};
      if (!verify(r)) suspects_.push_back(r);
    }
  }
  stats_.check_s += now_s() - t0;
}

std::vector<MemberRow> Scrub::all_gather(const std::vector<MemberRow>& mine) {
  const int N = net_.size();
  ByteVec buf;
  Writer w(buf);
  for (const auto& r : mine) w.put(r);
  const auto in = net_.exchange(std::vector<ByteVec>(static_cast<std::size_t>(N), buf));
  std::vector<MemberRow> all;
  for (int r = 0; r < N; ++r) {
    Reader rd(in.from(r), "scrub suspects");
    while (!rd.done()) all.push_back(rd.get<MemberRow>());
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

std::vector<ScrubRepair> Scrub::repair(std::int64_t step, double t_now) {
  if (!net_.allreduce_max(suspects_.empty() ? 0 : 1)) return {};
  const double t0 = now_s();
  ++stats_.rounds;
  const auto& lay = store_.layout();
  const int me = net_.rank(), k = store_.k(), m = lay.m(), n = lay.n();
  const auto rb = store_.row_bytes();
  // Every rank learns every suspect. Before a codeword is decoded, the holders of its other members
  // verify theirs too (a bad source would decode into a wrong row): repeat until nothing new.
  // In codeword order, (stripe, row, member): the members of one codeword side by side (MemberRow's
  // own order puts one member's rows together, which would split a codeword between a member's rows).
  const auto by_word = [](const MemberRow& a, const MemberRow& b) {
    return std::tie(a.stripe, a.row, a.member) < std::tie(b.stripe, b.row, b.member);
  };
  auto bad = all_gather(suspects_);
  std::sort(bad.begin(), bad.end(), by_word);
  suspects_.clear();
  for (;;) {
    std::vector<MemberRow> more;
    for (std::size_t i = 0; i < bad.size(); ++i) {
      if (i > 0 && bad[i].stripe == bad[i - 1].stripe && bad[i].row == bad[i - 1].row) continue;
      const int j = lay.fragment_on(bad[i].stripe, me);
      if (j < 0 || rec_.lost(me, bad[i].stripe)) continue;
      const MemberRow mine{bad[i].stripe, static_cast<std::uint32_t>(j), bad[i].row};
      if (!std::binary_search(bad.begin(), bad.end(), mine, by_word) && !verify(mine)) more.push_back(mine);
    }
    if (!net_.allreduce_max(more.empty() ? 0 : 1)) break;
    auto extra = all_gather(more);
    bad.insert(bad.end(), extra.begin(), extra.end());
    std::sort(bad.begin(), bad.end(), by_word);
    bad.erase(std::unique(bad.begin(), bad.end()), bad.end());
  }
  // Codewords: (stripe, row) -> erased members (bad ones and lost ones), sources.
  struct Word {
    std::uint64_t stripe;
    std::uint32_t row;
    std::vector<int> bad, erased, sources;
  };
  std::vector<Word> words;
  for (const auto& b : bad) {
    if (words.empty() || words.back().stripe != b.stripe || words.back().row != b.row) words.push_back({b.stripe, b.row, {}, {}, {}});
    words.back().bad.push_back(static_cast<int>(b.member));
  }
  std::string beyond;
  std::size_t n_beyond = 0;
  for (auto& w : words) {
    w.erased = w.bad;
    for (int j : rec_.erased(w.stripe))
      if (std::find(w.erased.begin(), w.erased.end(), j) == w.erased.end()) w.erased.push_back(j);
    std::sort(w.erased.begin(), w.erased.end());
    if (static_cast<int>(w.erased.size()) > m) {
      if (n_beyond++ < 4) {
        std::string who;
        for (int j : w.bad) who += (who.empty() ? "" : ",") + std::to_string(j) + "@rank" + std::to_string(lay.rank_of(w.stripe, j));
        beyond += std::string(beyond.empty() ? "" : "; ") + "stripe " + std::to_string(w.stripe) + " (table " + std::to_string(lay.table_of(w.stripe)) +
                  ") row " + std::to_string(w.row) + ": members " + who + " corrupt" +
                  (w.erased.size() > w.bad.size() ? " and " + std::to_string(w.erased.size() - w.bad.size()) + " lost" : "");
      }
      continue;
    }
    for (int j = 0; j < n && static_cast<int>(w.sources.size()) < k; ++j)
      if (!std::binary_search(w.erased.begin(), w.erased.end(), j)) w.sources.push_back(j);
  }
  if (n_beyond) {
    stats_.repair_s += now_s() - t0;
    throw ScrubLossError("step " + std::to_string(step) + ": scrub found " + std::to_string(n_beyond) + " codeword(s) with more corrupt or lost members than m = " +
                         std::to_string(m) + " can repair: " + beyond + (n_beyond > 4 ? "; ..." : ""));
  }
  // Each source holder sends its row of each codeword to the holder of every bad member.
  std::vector<ByteVec> out(static_cast<std::size_t>(net_.size()));
  for (const auto& w : words) {
    const int j = lay.fragment_on(w.stripe, me);
    if (j < 0 || std::find(w.sources.begin(), w.sources.end(), j) == w.sources.end()) continue;
    const int t = lay.table_of(w.stripe);
    const auto src = store_.member(t, j, lay.place(w.stripe, j)).subspan(std::size_t{w.row} * rb, rb);
    for (int b : w.bad) Writer(out[static_cast<std::size_t>(lay.rank_of(w.stripe, b))]).put_bytes(src.data(), rb);
  }
  const auto in = net_.exchange(out);
  std::vector<Reader> from;
  for (int r = 0; r < net_.size(); ++r) from.emplace_back(in.from(r), "scrub repair sources");
  std::vector<ScrubRepair> done;
  std::vector<int> kinds;  // per repair: 1 its bytes were wrong, 2 only its checksum word (set by its holder)
  std::vector<std::vector<std::byte>> decoded;
  std::vector<ec::ConstBytes> src;
  std::vector<ec::Bytes> dst;
  for (const auto& w : words) {
    const int j = lay.fragment_on(w.stripe, me);
    for (int b : w.bad) {
      done.push_back({step, w.stripe, static_cast<std::uint32_t>(b), w.row, lay.rank_of(w.stripe, b), "", t_now});
      kinds.push_back(0);
    }
    if (j < 0 || std::find(w.bad.begin(), w.bad.end(), j) == w.bad.end()) continue;
    src.clear();
    for (int s : w.sources) src.emplace_back(from[static_cast<std::size_t>(lay.rank_of(w.stripe, s))].take(rb), rb);
    const auto& plan = store_.codec().plan(w.erased, w.sources);
    decoded.assign(plan.targets().size(), std::vector<std::byte>(rb));
    dst.clear();
    for (auto& d : decoded) dst.emplace_back(d);
    store_.codec().decode(plan, src, dst);
    const auto at = static_cast<std::size_t>(std::find(plan.targets().begin(), plan.targets().end(), j) - plan.targets().begin());
    const int t = lay.table_of(w.stripe);
    const auto p = lay.place(w.stripe, j);
    const auto row = store_.member(t, j, p).subspan(std::size_t{w.row} * rb, rb);
    // Written without undo: the decoded row is the row as of the last local commit (the parity
    // holds every delta up to it and nothing of the step in flight), so a rollback to that commit
    // keeps it, and one further back restores the older bytes from the undo record of their update.
    const bool bytes_bad = !std::equal(row.begin(), row.end(), decoded[at].begin());
    if (bytes_bad) std::memcpy(row.data(), decoded[at].data(), rb);
    store_.checksum(t, j, p, w.row) = ShardStore::crc(row);
    if (bytes_bad && after_write_) after_write_();
    kinds[done.size() - w.bad.size() + static_cast<std::size_t>(std::find(w.bad.begin(), w.bad.end(), j) - w.bad.begin())] = bytes_bad ? 1 : 2;
  }
  for (int r = 0; r < net_.size(); ++r)
    if (!from[static_cast<std::size_t>(r)].done()) throw EcError("scrub repair sources from rank " + std::to_string(r) + " are longer than expected");
  if (!kinds.empty()) net_.allreduce_max(kinds);
  for (std::size_t q = 0; q < done.size(); ++q) {
    auto& d = done[q];
    d.kind = kinds[q] == 2 ? "checksum" : static_cast<int>(d.member) < k ? "data" : "parity";
    (kinds[q] == 2 ? stats_.repaired_checksum : static_cast<int>(d.member) < k ? stats_.repaired_data : stats_.repaired_parity) += 1;
  }
  stats_.repair_s += now_s() - t0;
  return done;
}

}  // namespace resil::ecrm
