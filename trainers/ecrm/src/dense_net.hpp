// The data-parallel half of DLRM, replicated on every rank: bottom MLP over the dense features, the
// pairwise dot interaction with the embedding vectors, top MLP, BCE with logits. The embedding rows
// a batch needs arrive from their owners (sharded tables, shard_store.hpp) as small local tables; their
// gradients leave the same way. Built from trainers' layers and Backend kernels, so the arithmetic
// is exactly the DLRM of resil::train (trainers/src/dlrm.cpp), only the tables live elsewhere.
#pragma once

#include <cstdint>
#include <vector>

#include "resil/ecrm/batches.hpp"
#include "resil/train/model.hpp"

namespace resil::ecrm {

struct BatchResult {
  double loss_sum = 0.0;
  std::int64_t correct = 0;
};

class DenseNet {
public:
  DenseNet(train::Backend& be, int num_dense, int tables, int dim, const std::vector<int>& bottom, const std::vector<int>& top);
  void init(std::uint64_t seed);
  /// Bottom and top MLP parameters, in a fixed order.
  std::vector<train::ParamRef> params();
  /// Forward + backward on the local batch. `emb[t]` holds the batch's distinct rows of table t
  /// (uniq_t x dim), `idx[t][i]` the position in it of sample i's row. Parameter gradients are
  /// overwritten (not accumulated) and scaled by `grad_scale`; emb_grad[t] receives uniq_t x dim.
  BatchResult forward_backward(const LocalBatch& b, const std::vector<std::vector<float>>& emb,
                               const std::vector<std::vector<std::int32_t>>& idx, float grad_scale,
                               std::vector<std::vector<float>>& emb_grad);

private:
  train::Backend& be_;
  int num_dense_, tables_, dim_;
  train::Sequential bottom_, top_;
  std::vector<train::Tensor> emb_, emb_grad_;
  train::Tensor dense_, feats_, dfeats_, inter_, dlogits_, targets_, dz_;
  std::vector<std::int32_t> offsets_;
};

}  // namespace resil::ecrm
