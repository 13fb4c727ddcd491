#include "fetched_rows.hpp"

namespace resil::ecrm {

train::EmbeddingSource::Lookup FetchedRows::lookup(std::size_t t, const train::Batch& /*b*/) {
  const auto& host = rows_.rows().at(t);
  if (emb_.size() <= t) {
    emb_.resize(t + 1);
    grad_.resize(t + 1);
    grad_host_.resize(t + 1);
  }
  const int uniq = static_cast<int>(host.size() / static_cast<std::size_t>(dim_));
  if (uniq == 0) return {nullptr, nullptr, nullptr};  // no samples on this rank this step
  emb_[t].ensure(be_, {uniq, dim_});
  be_.upload(emb_[t].data(), host.data(), host.size());
  grad_[t].ensure(be_, {uniq, dim_});
  grad_[t].zero();
  return {emb_[t].data(), rows_.positions().at(t).data(), grad_[t].data()};
}

void FetchedRows::backward_done(std::size_t t, const train::Batch& b) {
  if (b.n == 0 || rows_.rows().at(t).empty()) {
    grad_host_[t].clear();
    return;
  }
  grad_host_[t] = grad_[t].to_host();
}

}  // namespace resil::ecrm
