// DLRM (Naumov et al. 2019): bottom MLP over dense features, one EmbeddingBag(sum) table per
// categorical feature, pairwise dot interaction, top MLP, BCE with logits.
//
// For ec-train (erasure-coded embedding shards) the tables and their optimizer state are plain
// row-major fp32 arrays (host memory with the CPU backend) addressable by row, and a step reports
// which rows it updated (touched_rows), so parity can be updated from exactly those rows.
#pragma once

#include <cstdint>
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

class Dlrm final : public Model {
public:
  Dlrm(Backend& be, DlrmConfig cfg = {});
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
  std::size_t num_tables() const noexcept { return tables_.size(); }
  /// Parameter name of table t: "emb<t>.weight".
  std::string table_name(std::size_t t) const;
  /// Row-addressable table t (num_rows x embedding_dim, row-major).
  std::span<float> table(std::size_t t);
  std::span<float> row(std::size_t t, std::int64_t r);

private:
  const Tensor& forward(const Batch& b);
  Backend& be_;
  DlrmConfig cfg_;
  Sequential bottom_, top_;
  std::vector<Tensor> tables_, table_grads_;
  std::vector<std::vector<std::int32_t>> touched_;
  Tensor dense_, feats_, dfeats_, inter_, dlogits_, targets_;
  std::vector<std::int32_t> idx_, offsets_;
};

}  // namespace resil::train
