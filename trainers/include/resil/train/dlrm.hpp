// DLRM (Naumov et al. 2019): bottom MLP over dense features, one EmbeddingBag(sum) table per
// categorical feature, pairwise dot interaction, top MLP, BCE with logits.
//
// Where the embedding rows live is pluggable (EmbeddingSource): by default local tables (ckpt-train:
// plain row-major fp32 arrays, parameters of the model, addressable by row, with the rows a step
// updated in touched_rows); resil::ecrm plugs in the batch's rows fetched from the sharded,
// erasure-coded store and sends their gradients back to the rows' owners.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "resil/train/model.hpp"

namespace resil::train {

struct DlrmConfig {
  int num_dense = 13;
  std::vector<std::uint32_t> table_sizes = std::vector<std::uint32_t>(26, 1000);
  int embedding_dim = 16;
  std::vector<int> bottom = {64};  // hidden sizes; the bottom MLP ends in embedding_dim
  std::vector<int> top = {64};     // hidden sizes; the top MLP ends in 1 logit
};

/// The embedding rows of a DLRM. For each table and batch the model asks for the rows (lookup),
/// runs EmbeddingBag over them, and adds the rows' gradients into Lookup::grad (backward_done then
/// says they are final).
class EmbeddingSource {
public:
  struct Lookup {
    const float* rows = nullptr;        // backend memory: the rows, embedding_dim floats each
    const std::int32_t* idx = nullptr;  // host: per sample, its row in `rows`
    float* grad = nullptr;              // backend memory, like `rows`: gradients are added here
  };
  virtual ~EmbeddingSource() = default;
  /// Table t's rows for batch b (b.sparse: n x tables categorical indices).
  virtual Lookup lookup(std::size_t t, const Batch& b) = 0;
  /// Table t's gradients of batch b are complete.
  virtual void backward_done(std::size_t /*t*/, const Batch& /*b*/) {}
  /// Parameters the model owns through the source (local tables), in table order.
  virtual std::vector<ParamRef> params() { return {}; }
  virtual void init(std::uint64_t /*seed*/) {}
  virtual void zero_grad() {}
};

class LocalTables;

class Dlrm final : public Model {
public:
  /// With local tables (one per entry of cfg.table_sizes).
  Dlrm(Backend& be, DlrmConfig cfg = {});
  /// With the embedding rows from `source` (cfg.table_sizes gives the number of tables).
  Dlrm(Backend& be, DlrmConfig cfg, std::unique_ptr<EmbeddingSource> source);
  ~Dlrm() override;
  std::string name() const override { return "dlrm"; }
  std::vector<ParamRef> params() override;
  void init(std::uint64_t seed) override;
  void zero_grad() override;
  StepStats forward_backward(const Batch& b, float grad_scale) override;
  StepStats evaluate(const Batch& b, std::vector<float>* scores = nullptr) override;
  void apply_update(Optimizer& opt) override;
  std::vector<std::pair<std::string, std::vector<std::int32_t>>> touched_rows() const override;
  void set_touched_rows(const std::string& param, std::vector<std::int32_t> rows) override;

  const DlrmConfig& config() const noexcept { return cfg_; }
  EmbeddingSource& embeddings() noexcept { return *source_; }
  // ---- local tables only (UsageError with another source) ----
  std::size_t num_tables() const noexcept { return cfg_.table_sizes.size(); }
  /// Parameter name of table t: "emb<t>.weight".
  std::string table_name(std::size_t t) const;
  /// Row-addressable table t (num_rows x embedding_dim, row-major).
  std::span<float> table(std::size_t t);
  std::span<float> row(std::size_t t, std::int64_t r);

private:
  const Tensor& forward(const Batch& b);
  LocalTables& local() const;
  Backend& be_;
  DlrmConfig cfg_;
  Sequential bottom_, top_;
  std::unique_ptr<EmbeddingSource> source_;
  LocalTables* local_ = nullptr;  // source_ when it is the local tables
  std::vector<EmbeddingSource::Lookup> lookups_;
  Tensor dense_, feats_, dfeats_, inter_, dlogits_, targets_;
  std::vector<std::int32_t> offsets_;
};

}  // namespace resil::train
