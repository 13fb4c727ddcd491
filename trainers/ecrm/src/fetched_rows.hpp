// train::Dlrm's embedding source in ECRM: the rows of the local batch, fetched from their owners
// by the step's row exchange (distinct rows per table, each sample's position among them), and
// their gradients, which go back to the owners. Not a public interface.
#pragma once

#include <vector>

#include "resil/ecrm/row_exchange.hpp"
#include "resil/train/dlrm.hpp"

namespace resil::ecrm {

class FetchedRows final : public train::EmbeddingSource {
public:
  FetchedRows(train::Backend& be, const RowExchange& rows, int dim) : be_(be), rows_(rows), dim_(dim) {}
  Lookup lookup(std::size_t t, const train::Batch& b) override;
  void backward_done(std::size_t t, const train::Batch& b) override;
  /// Table t's gradients of the last step, uniq_t x dim (as RowExchange::rows()).
  const std::vector<std::vector<float>>& grads() const noexcept { return grad_host_; }

private:
  train::Backend& be_;
  const RowExchange& rows_;
  int dim_;
  std::vector<train::Tensor> emb_, grad_;
  std::vector<std::vector<float>> grad_host_;
};

}  // namespace resil::ecrm
