#include "resil/ecrm/row_exchange.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <string>

#include "resil/core/error.hpp"
#include "resil/ecrm/config.hpp"
#include "clock.hpp"

namespace resil::ecrm {

std::size_t RowExchange::pos_of(const RowId& id) const {
  return static_cast<std::size_t>(std::lower_bound(owned_.begin(), owned_.end(), id) - owned_.begin());
}

void RowExchange::request(const LocalBatch& b, const std::vector<ByteVec>* extra) {
  const int N = net_.size(), T = store_.layout().tables();
  const auto& lay = store_.layout();
  const auto sN = static_cast<std::size_t>(N), sT = static_cast<std::size_t>(T);
  recovering_ = rec_.any_lost();
  // The batch's distinct rows per table, and each sample's position among them.
  uniq_.assign(sT, {});
  idx_.assign(sT, {});
  for (int t = 0; t < T; ++t) {
    auto& u = uniq_[static_cast<std::size_t>(t)];
    for (int i = 0; i < b.n; ++i) u.push_back(b.rows[static_cast<std::size_t>(i * T + t)]);
    std::sort(u.begin(), u.end());
    u.erase(std::unique(u.begin(), u.end()), u.end());
    for (int i = 0; i < b.n; ++i)
      idx_[static_cast<std::size_t>(t)].push_back(static_cast<std::int32_t>(
          std::lower_bound(u.begin(), u.end(), b.rows[static_cast<std::size_t>(i * T + t)]) - u.begin()));
  }
  std::vector<ByteVec> req(sN), deg(sN);
  order_.assign(sN, {});
  order_lost_.assign(sN, {});
  my_lost_.clear();
  for (int t = 0; t < T; ++t)
    for (std::size_t u = 0; u < uniq_[static_cast<std::size_t>(t)].size(); ++u) {
      const RowId id{static_cast<std::uint32_t>(t), static_cast<std::uint32_t>(uniq_[static_cast<std::size_t>(t)][u])};
      const auto p = lay.locate(t, id.row);
      Writer(req[static_cast<std::size_t>(p.rank)]).put(id);
      order_[static_cast<std::size_t>(p.rank)].emplace_back(t, static_cast<int>(u));
      const bool is_lost = recovering_ && rec_.lost(p.rank, p.stripe);
      order_lost_[static_cast<std::size_t>(p.rank)].push_back(is_lost);
      if (is_lost) {
        for (int j : rec_.plan_of(p.stripe).sources()) Writer(deg[static_cast<std::size_t>(lay.rank_of(p.stripe, j))]).put(id);
        my_lost_.push_back({t, static_cast<int>(u), p});
      }
    }
  // One message per rank, three framed parts: requests, degraded requests, `extra`.
  asked_raw_ = net_.exchange_parts({&req, &deg, extra});
  asked_.assign(sN, {});
  deg_asked_.assign(sN, {});
  extra_in_.assign(sN, {});
  owned_.clear();
  serve_.clear();
  for (int r = 0; r < N; ++r) {
    Reader rd(asked_raw_.from(r), "row request");
    for (auto* list : {&asked_[static_cast<std::size_t>(r)], &deg_asked_[static_cast<std::size_t>(r)]}) {
      const auto part = rd.part();
      if (part.size() % sizeof(RowId) != 0) throw EcError("malformed row request from rank " + std::to_string(r));
      list->resize(part.size() / sizeof(RowId));
      if (!part.empty()) std::memcpy(list->data(), part.data(), part.size());
    }
    extra_in_[static_cast<std::size_t>(r)] = rd.part();
    if (!rd.done()) throw EcError("row request from rank " + std::to_string(r) + " is longer than expected");
    owned_.insert(owned_.end(), asked_[static_cast<std::size_t>(r)].begin(), asked_[static_cast<std::size_t>(r)].end());
    serve_.insert(serve_.end(), deg_asked_[static_cast<std::size_t>(r)].begin(), deg_asked_[static_cast<std::size_t>(r)].end());
  }
  for (auto* v : {&owned_, &serve_}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
}

double RowExchange::serve(const std::vector<Recovery::RebuildJob>& jobs, const std::function<void()>& while_waiting) {
  const int N = net_.size(), me = net_.rank();
  const auto& lay = store_.layout();
  const auto rb = store_.row_bytes();
  const auto sd = static_cast<std::size_t>(store_.dim());
  // The owned rows' current bytes from the store; rows of lost fragments come decoded with the replies.
  old_.resize(owned_.size() * rb);
  lost_pos_.clear();
  place_.resize(owned_.size());
  for (std::size_t i = 0; i < owned_.size(); ++i) place_[i] = lay.locate(static_cast<int>(owned_[i].table), owned_[i].row);
  for (std::size_t i = 0; i < owned_.size(); ++i) {
    if (i + prefetch_ahead < owned_.size()) prefetch_row(store_.row(owned_[i + prefetch_ahead], place_[i + prefetch_ahead]));
    if (rec_.lost(me, place_[i].stripe)) {
      lost_pos_.push_back(i);
    } else {
      const auto src = store_.row(owned_[i], place_[i]);
      std::memcpy(old_.data() + i * rb, src.data(), rb);
    }
  }
  std::vector<std::vector<ec::RowPlace>> serve_at(static_cast<std::size_t>(N));  // serve_ by owner
  if (recovering_)
    for (const auto& id : serve_) {
      const auto p = lay.locate(static_cast<int>(id.table), id.row);
      serve_at[static_cast<std::size_t>(p.rank)].push_back(p);
    }
  const double r0 = now_s();
  std::vector<ByteVec> rep(static_cast<std::size_t>(N));
  for (int r = 0; r < N; ++r) {
    Writer w(rep[static_cast<std::size_t>(r)]);
    for (const auto& id : asked_[static_cast<std::size_t>(r)]) {
      const auto i = pos_of(id);
      if (!rec_.lost(me, place_[i].stripe)) w.put_bytes(old_.data() + i * rb, sd * sizeof(float));
    }
    if (!recovering_) continue;
    for (const auto& id : deg_asked_[static_cast<std::size_t>(r)]) {
      const auto p = lay.locate(static_cast<int>(id.table), id.row);
      rec_.put_member_bytes(p.stripe, lay.fragment_on(p.stripe, me), p.offset, sd * sizeof(float), w);
    }
    for (const auto& p : serve_at[static_cast<std::size_t>(r)]) rec_.put_member_bytes(p.stripe, lay.fragment_on(p.stripe, me), p.offset, rb, w);
    rec_.put_rebuild_sources(jobs, r, w);
  }
  const double building = recovering_ ? now_s() - r0 : 0.0;
  got_ = net_.exchange(rep, while_waiting);
  return building;
}

void RowExchange::decode(const std::vector<Recovery::RebuildJob>& jobs, std::uint64_t committed_step) {
  const int N = net_.size(), T = store_.layout().tables();
  const auto rb = store_.row_bytes();
  const auto sd = static_cast<std::size_t>(store_.dim());
  emb_.resize(static_cast<std::size_t>(T));
  for (int t = 0; t < T; ++t) emb_[static_cast<std::size_t>(t)].resize(uniq_[static_cast<std::size_t>(t)].size() * sd);
  from_.clear();
  for (int r = 0; r < N; ++r) {
    from_.emplace_back(got_.from(r), "row reply");
    for (std::size_t q = 0; q < order_[static_cast<std::size_t>(r)].size(); ++q) {
      if (order_lost_[static_cast<std::size_t>(r)][q]) continue;
      const auto [t, u] = order_[static_cast<std::size_t>(r)][q];
      std::memcpy(emb_[static_cast<std::size_t>(t)].data() + static_cast<std::size_t>(u) * sd, from_.back().take(sd * sizeof(float)), sd * sizeof(float));
    }
  }
  if (recovering_) {
    // The same decode as the owner's below, of the weights only: bit-identical values.
    for (const auto& g : my_lost_) {
      auto* dst = reinterpret_cast<std::byte*>(emb_[static_cast<std::size_t>(g.table)].data() + static_cast<std::size_t>(g.pos) * sd);
      rec_.decode_member(g.at.stripe, rec_.plan_of(g.at.stripe), g.at.fragment, from_, sd * sizeof(float), ec::Bytes(dst, sd * sizeof(float)));
    }
    // Whole rows (weights and accumulators) of this rank's lost rows, for the update.
    for (std::size_t i : lost_pos_)
      rec_.decode_member(place_[i].stripe, rec_.plan_of(place_[i].stripe), place_[i].fragment, from_, rb, ec::Bytes(old_.data() + i * rb, rb));
    rec_.finish_rebuild(jobs, from_, committed_step);
  }
  for (int r = 0; r < N; ++r)
    if (!from_[static_cast<std::size_t>(r)].done()) throw EcError("row reply from rank " + std::to_string(r) + " is longer than expected");
}

std::vector<float> RowExchange::gradients(const std::vector<std::vector<float>>& grad) {
  const int N = net_.size();
  const auto sd = static_cast<std::size_t>(store_.dim());
  assert(sd <= static_cast<std::size_t>(max_dim));  // g below holds one row
  std::vector<ByteVec> gout(static_cast<std::size_t>(N));
  for (int r = 0; r < N; ++r)
    for (const auto& [t, u] : order_[static_cast<std::size_t>(r)])
      Writer(gout[static_cast<std::size_t>(r)]).put_bytes(reinterpret_cast<const std::byte*>(grad[static_cast<std::size_t>(t)].data() + static_cast<std::size_t>(u) * sd), sd * sizeof(float));
  const auto gin = net_.exchange(gout);
  std::vector<float> gsum(owned_.size() * sd, 0.0f);
  for (int r = 0; r < N; ++r) {
    Reader rd(gin.from(r), "row gradient");
    for (const auto& id : asked_[static_cast<std::size_t>(r)]) {
      // A row's gradient arrives unaligned in the byte stream: copy it out before adding. The
      // buffer is large enough because --dim is range-checked to 1..max_dim (ec-train's CLI::Range).
      float g[max_dim];
      std::memcpy(g, rd.take(sd * sizeof(float)), sd * sizeof(float));
      float* dst = gsum.data() + pos_of(id) * sd;
      for (std::size_t i = 0; i < sd; ++i) dst[i] += g[i];
    }
  }
  return gsum;
}

}  // namespace resil::ecrm
