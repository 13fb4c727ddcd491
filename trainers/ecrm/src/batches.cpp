#include "resil/ecrm/batches.hpp"

#include <algorithm>

#include "resil/core/error.hpp"
#include "resil/core/rng.hpp"

namespace resil::ecrm {

BatchSource::BatchSource(const Config& cfg, int world, int rank, std::uint64_t seed)
    : cfg_(cfg), world_(world), rank_(rank), data_seed_(derive_seed(seed, 0xDA7Aull)), sizes_(data::criteo_num_sparse, cfg.rows) {
  if (!cfg.data.empty()) {
    file_ = data::read_criteo_tsv(cfg.data, sizes_);
    if (file_->n == 0) throw CorruptInputError("Criteo file " + cfg.data + " holds no samples");
  }
}

LocalBatch BatchSource::batch(std::int64_t step) const {
  const int base = cfg_.batch / world_, extra = cfg_.batch % world_;
  LocalBatch b;
  b.n = base + (rank_ < extra ? 1 : 0);
  const std::uint64_t first = static_cast<std::uint64_t>(step - 1) * static_cast<std::uint64_t>(cfg_.batch) +
                              static_cast<std::uint64_t>(rank_ * base + std::min(rank_, extra));
  data::ClickSet gen;
  const data::ClickSet* src = nullptr;
  std::vector<std::size_t> at(static_cast<std::size_t>(b.n));
  if (file_) {
    src = &*file_;
    for (int i = 0; i < b.n; ++i) at[static_cast<std::size_t>(i)] = static_cast<std::size_t>((first + static_cast<std::uint64_t>(i)) % file_->n);
  } else {
    gen = data::synthetic_clicks(static_cast<std::size_t>(b.n), data_seed_, sizes_, first);
    src = &gen;
    for (int i = 0; i < b.n; ++i) at[static_cast<std::size_t>(i)] = static_cast<std::size_t>(i);
  }
  const auto T = static_cast<std::size_t>(cfg_.tables);
  for (std::size_t i : at) {
    b.dense.insert(b.dense.end(), src->dense.begin() + static_cast<std::ptrdiff_t>(i * data::criteo_num_dense),
                   src->dense.begin() + static_cast<std::ptrdiff_t>((i + 1) * data::criteo_num_dense));
    b.targets.push_back(src->labels[i]);
    for (std::size_t t = 0; t < T; ++t) b.rows.push_back(src->sparse[i * data::criteo_num_sparse + t]);
  }
  return b;
}

}  // namespace resil::ecrm
