#include "dense_net.hpp"

#include <string>

#include "resil/core/error.hpp"

namespace resil::ecrm {

namespace {
int inter_width(int tables, int dim) {
  const int f = 1 + tables;
  return dim + f * (f - 1) / 2;
}
}  // namespace

DenseNet::DenseNet(train::Backend& be, int num_dense, int tables, int dim, const std::vector<int>& bottom,
                   const std::vector<int>& top)
    : be_(be), num_dense_(num_dense), tables_(tables), dim_(dim), bottom_(be, train::Dims{num_dense}),
      top_(be, train::Dims{inter_width(tables, dim)}) {
  int in = num_dense, i = 1;
  for (int h : bottom) {
    bottom_.add(std::make_unique<train::Linear>(be, "bot_fc" + std::to_string(i), in, h));
    bottom_.add(std::make_unique<train::ReLU>(be, "bot_relu" + std::to_string(i++)));
    in = h;
  }
  bottom_.add(std::make_unique<train::Linear>(be, "bot_fc" + std::to_string(i), in, dim));
  bottom_.add(std::make_unique<train::ReLU>(be, "bot_relu" + std::to_string(i)));
  in = inter_width(tables, dim);
  i = 1;
  for (int h : top) {
    top_.add(std::make_unique<train::Linear>(be, "top_fc" + std::to_string(i), in, h));
    top_.add(std::make_unique<train::ReLU>(be, "top_relu" + std::to_string(i++)));
    in = h;
  }
  top_.add(std::make_unique<train::Linear>(be, "top_fc" + std::to_string(i), in, 1));
  emb_.resize(static_cast<std::size_t>(tables));
  emb_grad_.resize(static_cast<std::size_t>(tables));
}

void DenseNet::init(std::uint64_t seed) {
  for (std::size_t l = 0; l < bottom_.size(); ++l) bottom_.layer(l).init(seed);
  for (std::size_t l = 0; l < top_.size(); ++l) top_.layer(l).init(seed);
}

std::vector<train::ParamRef> DenseNet::params() {
  auto out = bottom_.params();
  for (auto& p : top_.params()) out.push_back(p);
  return out;
}

BatchResult DenseNet::forward_backward(const LocalBatch& b, const std::vector<std::vector<float>>& emb,
                                       const std::vector<std::vector<std::int32_t>>& idx, float grad_scale,
                                       std::vector<std::vector<float>>& emb_grad) {
  const int n = b.n, f = 1 + tables_, d = dim_;
  const auto sd = static_cast<std::size_t>(d);
  for (auto& p : params()) p.grad->zero();
  BatchResult res;
  emb_grad.resize(static_cast<std::size_t>(tables_));
  if (n == 0) {
    for (int t = 0; t < tables_; ++t) emb_grad[static_cast<std::size_t>(t)].assign(emb[static_cast<std::size_t>(t)].size(), 0.0f);
    return res;
  }
  dense_.ensure(be_, {n, num_dense_});
  be_.upload(dense_.data(), b.dense.data(), dense_.numel());
  const train::Tensor& z = bottom_.forward(dense_, 0, bottom_.size());
  feats_.ensure(be_, {n, f, d});
  for (int i = 0; i < n; ++i)
    be_.copy(feats_.data() + static_cast<std::size_t>(i) * f * sd, z.data() + static_cast<std::size_t>(i) * sd, sd);
  offsets_.resize(static_cast<std::size_t>(n) + 1);
  for (int i = 0; i <= n; ++i) offsets_[static_cast<std::size_t>(i)] = i;
  for (int t = 0; t < tables_; ++t) {
    const auto ts = static_cast<std::size_t>(t);
    const int uniq = static_cast<int>(emb[ts].size() / sd);
    emb_[ts].ensure(be_, {uniq, d});
    be_.upload(emb_[ts].data(), emb[ts].data(), emb[ts].size());
    be_.embedding_bag_forward(emb_[ts].data(), d, idx[ts].data(), offsets_.data(), n, feats_.data() + (1 + ts) * sd, f * d);
  }
  inter_.ensure(be_, {n, inter_width(tables_, d)});
  be_.dot_interaction_forward(feats_.data(), inter_.data(), n, f, d);
  const train::Tensor& logits = top_.forward(inter_, 0, top_.size());
  targets_.ensure(be_, {n});
  be_.upload(targets_.data(), b.targets.data(), static_cast<std::size_t>(n));
  dlogits_.ensure(be_, logits.dims());
  res.loss_sum = be_.bce_logits(logits.data(), targets_.data(), n, grad_scale, dlogits_.data());
  const auto h = logits.to_host();
  for (int i = 0; i < n; ++i) res.correct += (h[static_cast<std::size_t>(i)] > 0.0f) == (b.targets[static_cast<std::size_t>(i)] > 0.5f);
  const train::Tensor& dinter = top_.backward(dlogits_, 0, top_.size(), true);
  dfeats_.ensure(be_, {n, f, d});
  be_.dot_interaction_backward(feats_.data(), dinter.data(), dfeats_.data(), n, f, d);
  dz_.ensure(be_, {n, d});
  for (int i = 0; i < n; ++i)
    be_.copy(dz_.data() + static_cast<std::size_t>(i) * sd, dfeats_.data() + static_cast<std::size_t>(i) * f * sd, sd);
  bottom_.backward(dz_, 0, bottom_.size(), false);
  for (int t = 0; t < tables_; ++t) {
    const auto ts = static_cast<std::size_t>(t);
    emb_grad_[ts].ensure(be_, emb_[ts].dims());
    emb_grad_[ts].zero();
    be_.embedding_bag_backward(dfeats_.data() + (1 + ts) * sd, f * d, idx[ts].data(), offsets_.data(), n, d, emb_grad_[ts].data());
    emb_grad[ts] = emb_grad_[ts].to_host();
  }
  return res;
}

}  // namespace resil::ecrm
