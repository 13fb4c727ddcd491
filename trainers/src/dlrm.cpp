#include "resil/train/dlrm.hpp"

#include <algorithm>
#include <cmath>

#include "resil/core/error.hpp"

namespace resil::train {

namespace {
int num_feats(const DlrmConfig& c) { return 1 + static_cast<int>(c.table_sizes.size()); }
int inter_width(const DlrmConfig& c) {
  const int f = num_feats(c);
  return c.embedding_dim + f * (f - 1) / 2;
}
std::string table_param(std::size_t t) { return "emb" + std::to_string(t) + ".weight"; }
}  // namespace

/// The default source: one local table per categorical feature, a parameter of the model; the
/// rows a step touched are kept for the row-sparse optimizer update (and its data-parallel union).
class LocalTables final : public EmbeddingSource {
public:
  LocalTables(Backend& be, const DlrmConfig& cfg) : be_(be), cfg_(cfg) {
    for (auto rows : cfg_.table_sizes) {
      if (rows == 0) throw UsageError("DLRM embedding table with 0 rows");
      tables_.emplace_back(be, Dims{static_cast<int>(rows), cfg_.embedding_dim});
      grads_.emplace_back(be, Dims{static_cast<int>(rows), cfg_.embedding_dim});
    }
    touched_.resize(tables_.size());
  }

  Lookup lookup(std::size_t t, const Batch& b) override {
    const int n = b.n, T = static_cast<int>(tables_.size());
    // Table-major index lists, one bag of size 1 per sample and table.
    idx_.resize(static_cast<std::size_t>(T) * static_cast<std::size_t>(n));
    std::int32_t* idx = idx_.data() + t * static_cast<std::size_t>(n);
    for (int i = 0; i < n; ++i) {
      const std::int32_t r = b.sparse[static_cast<std::size_t>(i) * static_cast<std::size_t>(T) + t];
      if (r < 0 || static_cast<std::uint32_t>(r) >= cfg_.table_sizes[t])
        throw CorruptInputError("categorical index " + std::to_string(r) + " of feature " + std::to_string(t) + " is outside table emb" +
                                std::to_string(t) + " (" + std::to_string(cfg_.table_sizes[t]) + " rows)");
      idx[i] = r;
    }
    return {tables_[t].data(), idx, grads_[t].data()};
  }
  void backward_done(std::size_t t, const Batch& b) override {
    const std::int32_t* idx = idx_.data() + t * static_cast<std::size_t>(b.n);
    auto& tr = touched_[t];
    tr.insert(tr.end(), idx, idx + b.n);
    std::sort(tr.begin(), tr.end());
    tr.erase(std::unique(tr.begin(), tr.end()), tr.end());
  }
  std::vector<ParamRef> params() override {
    std::vector<ParamRef> out;
    for (std::size_t t = 0; t < tables_.size(); ++t) out.push_back({table_param(t), &tables_[t], &grads_[t], cfg_.embedding_dim});
    return out;
  }
  void init(std::uint64_t seed) override {
    for (std::size_t t = 0; t < tables_.size(); ++t)
      init_uniform(tables_[t], std::sqrt(1.0f / static_cast<float>(cfg_.table_sizes[t])), seed, table_param(t));
  }
  void zero_grad() override {
    const auto d = static_cast<std::size_t>(cfg_.embedding_dim);
    for (std::size_t t = 0; t < tables_.size(); ++t) {
      be_.fill_rows(grads_[t].data(), d, touched_[t].data(), touched_[t].size(), 0.0f);
      touched_[t].clear();
    }
  }

  std::vector<Tensor> tables_, grads_;
  std::vector<std::vector<std::int32_t>> touched_;

private:
  Backend& be_;
  DlrmConfig cfg_;
  std::vector<std::int32_t> idx_;
};

Dlrm::Dlrm(Backend& be, DlrmConfig cfg) : Dlrm(be, std::move(cfg), nullptr) {}

Dlrm::Dlrm(Backend& be, DlrmConfig cfg, std::unique_ptr<EmbeddingSource> source)
    : be_(be), cfg_(std::move(cfg)), bottom_(be, Dims{cfg_.num_dense}), top_(be, Dims{inter_width(cfg_)}), source_(std::move(source)) {
  int in = cfg_.num_dense, i = 1;
  for (int h : cfg_.bottom) {
    bottom_.add(std::make_unique<Linear>(be, "bot_fc" + std::to_string(i), in, h));
    bottom_.add(std::make_unique<ReLU>(be, "bot_relu" + std::to_string(i++)));
    in = h;
  }
  bottom_.add(std::make_unique<Linear>(be, "bot_fc" + std::to_string(i), in, cfg_.embedding_dim));
  bottom_.add(std::make_unique<ReLU>(be, "bot_relu" + std::to_string(i)));
  in = inter_width(cfg_);
  i = 1;
  for (int h : cfg_.top) {
    top_.add(std::make_unique<Linear>(be, "top_fc" + std::to_string(i), in, h));
    top_.add(std::make_unique<ReLU>(be, "top_relu" + std::to_string(i++)));
    in = h;
  }
  top_.add(std::make_unique<Linear>(be, "top_fc" + std::to_string(i), in, 1));
  if (!source_) {
    auto local = std::make_unique<LocalTables>(be, cfg_);
    local_ = local.get();
    source_ = std::move(local);
  }
  lookups_.resize(cfg_.table_sizes.size());
}

Dlrm::~Dlrm() = default;

LocalTables& Dlrm::local() const {
  if (!local_) throw UsageError("this DLRM's embedding rows are not local tables");
  return *local_;
}

std::string Dlrm::table_name(std::size_t t) const { return table_param(t); }

std::vector<ParamRef> Dlrm::params() {
  auto out = bottom_.params();
  for (auto& p : source_->params()) out.push_back(p);
  for (auto& p : top_.params()) out.push_back(p);
  return out;
}

void Dlrm::init(std::uint64_t seed) {
  for (std::size_t l = 0; l < bottom_.size(); ++l) bottom_.layer(l).init(seed);
  for (std::size_t l = 0; l < top_.size(); ++l) top_.layer(l).init(seed);
  source_->init(seed);
}

void Dlrm::zero_grad() {
  for (auto& p : bottom_.params()) p.grad->zero();
  for (auto& p : top_.params()) p.grad->zero();
  source_->zero_grad();
}

const Tensor& Dlrm::forward(const Batch& b) {
  const int n = b.n, f = num_feats(cfg_), d = cfg_.embedding_dim;
  const auto T = cfg_.table_sizes.size();
  dense_.ensure(be_, {n, cfg_.num_dense});
  be_.upload(dense_.data(), b.x, dense_.numel());
  const Tensor& z = bottom_.forward(dense_, 0, bottom_.size());
  feats_.ensure(be_, {n, f, d});
  for (int i = 0; i < n; ++i) be_.copy(feats_.data() + static_cast<std::size_t>(i) * f * d, z.data() + static_cast<std::size_t>(i) * d, static_cast<std::size_t>(d));
  offsets_.resize(static_cast<std::size_t>(n) + 1);
  for (int i = 0; i <= n; ++i) offsets_[static_cast<std::size_t>(i)] = i;
  for (std::size_t t = 0; t < T; ++t) lookups_[t] = source_->lookup(t, b);
  for (std::size_t t = 0; t < T; ++t)
    be_.embedding_bag_forward(lookups_[t].rows, d, lookups_[t].idx, offsets_.data(), n, feats_.data() + (1 + t) * static_cast<std::size_t>(d), f * d);
  inter_.ensure(be_, {n, inter_width(cfg_)});
  be_.dot_interaction_forward(feats_.data(), inter_.data(), n, f, d);
  targets_.ensure(be_, {n});
  if (b.targets) be_.upload(targets_.data(), b.targets, static_cast<std::size_t>(n));
  return top_.forward(inter_, 0, top_.size());
}

StepStats Dlrm::forward_backward(const Batch& b, float grad_scale) {
  const int n = b.n, f = num_feats(cfg_), d = cfg_.embedding_dim;
  const auto T = cfg_.table_sizes.size();
  StepStats s;
  if (n == 0) {  // a rank with no samples this step (batch < ranks): no gradients, empty lookups
    for (std::size_t t = 0; t < T; ++t) {
      (void)source_->lookup(t, b);
      source_->backward_done(t, b);
    }
    return s;
  }
  const Tensor& logits = forward(b);
  dlogits_.ensure(be_, logits.dims());
  s.samples = n;
  s.loss_sum = be_.bce_logits(logits.data(), targets_.data(), n, grad_scale, dlogits_.data());
  const auto h = logits.to_host();
  for (int i = 0; i < n; ++i) s.correct += (h[static_cast<std::size_t>(i)] > 0.0f) == (b.targets[i] > 0.5f);
  const Tensor& dinter = top_.backward(dlogits_, 0, top_.size(), true);
  dfeats_.ensure(be_, {n, f, d});
  be_.dot_interaction_backward(feats_.data(), dinter.data(), dfeats_.data(), n, f, d);
  Tensor dz(be_, {n, d});
  for (int i = 0; i < n; ++i) be_.copy(dz.data() + static_cast<std::size_t>(i) * d, dfeats_.data() + static_cast<std::size_t>(i) * f * d, static_cast<std::size_t>(d));
  bottom_.backward(dz, 0, bottom_.size(), false);
  for (std::size_t t = 0; t < T; ++t) {
    be_.embedding_bag_backward(dfeats_.data() + (1 + t) * static_cast<std::size_t>(d), f * d, lookups_[t].idx, offsets_.data(), n, d, lookups_[t].grad);
    source_->backward_done(t, b);
  }
  return s;
}

StepStats Dlrm::evaluate(const Batch& b, std::vector<float>* scores) {
  const Tensor& logits = forward(b);
  StepStats s;
  s.samples = b.n;
  s.loss_sum = be_.bce_logits(logits.data(), targets_.data(), b.n, 0.0f, nullptr);
  const auto h = logits.to_host();
  for (int i = 0; i < b.n; ++i) s.correct += (h[static_cast<std::size_t>(i)] > 0.0f) == (b.targets[i] > 0.5f);
  if (scores) scores->insert(scores->end(), h.begin(), h.end());
  return s;
}

void Dlrm::apply_update(Optimizer& opt) {
  for (const auto& p : params()) {
    if (p.row_len > 0) {
      const std::size_t t = static_cast<std::size_t>(std::stoul(p.name.substr(3)));
      opt.update_rows(p, local().touched_[t]);
    } else {
      opt.update(p);
    }
  }
}

std::vector<std::pair<std::string, std::vector<std::int32_t>>> Dlrm::touched_rows() const {
  std::vector<std::pair<std::string, std::vector<std::int32_t>>> out;
  if (!local_) return out;
  for (std::size_t t = 0; t < local_->touched_.size(); ++t) out.emplace_back(table_param(t), local_->touched_[t]);
  return out;
}

void Dlrm::set_touched_rows(const std::string& param, std::vector<std::int32_t> rows) {
  auto& l = local();
  for (std::size_t t = 0; t < l.touched_.size(); ++t)
    if (table_param(t) == param) {
      l.touched_[t] = std::move(rows);
      return;
    }
  throw UsageError("DLRM has no embedding table " + param);
}

std::span<float> Dlrm::table(std::size_t t) {
  auto& l = local();
  return {l.tables_.at(t).data(), l.tables_.at(t).numel()};
}

std::span<float> Dlrm::row(std::size_t t, std::int64_t r) {
  const auto d = static_cast<std::size_t>(cfg_.embedding_dim);
  if (r < 0 || static_cast<std::uint64_t>(r) >= cfg_.table_sizes.at(t)) throw UsageError("row " + std::to_string(r) + " outside " + table_name(t));
  return table(t).subspan(static_cast<std::size_t>(r) * d, d);
}

}  // namespace resil::train
