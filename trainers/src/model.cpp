#include "resil/train/model.hpp"

#include "resil/core/error.hpp"
#include "resil/train/dlrm.hpp"

namespace resil::train {

Dims Sequential::dims_before(std::size_t i) const {
  Dims d = {1};
  d.insert(d.end(), input_.begin(), input_.end());
  for (std::size_t l = 0; l < i; ++l) d = layers_.at(l)->out_dims(d);
  return Dims(d.begin() + 1, d.end());
}

const Tensor& Sequential::forward(const Tensor& x, std::size_t first, std::size_t end) {
  const Tensor* cur = &x;
  for (std::size_t l = first; l < end; ++l) cur = &layers_[l]->forward(*cur);
  return *cur;
}

const Tensor& Sequential::backward(const Tensor& dy, std::size_t first, std::size_t end, bool need_dx) {
  const Tensor* cur = &dy;
  for (std::size_t l = end; l-- > first;) cur = &layers_[l]->backward(*cur, need_dx || l > first);
  return *cur;
}

std::vector<ParamRef> Sequential::params(std::size_t first, std::size_t end) {
  std::vector<ParamRef> out;
  for (std::size_t l = first; l < end; ++l)
    for (auto& p : layers_[l]->params()) out.push_back(p);
  return out;
}

std::unique_ptr<Sequential> make_mlp(Backend& be) {
  auto s = std::make_unique<Sequential>(be, Dims{784});
  s->add(std::make_unique<Linear>(be, "fc1", 784, 256));
  s->add(std::make_unique<ReLU>(be, "relu1"));
  s->add(std::make_unique<Linear>(be, "fc2", 256, 128));
  s->add(std::make_unique<ReLU>(be, "relu2"));
  s->add(std::make_unique<Linear>(be, "fc3", 128, 10));
  return s;
}

std::unique_ptr<Sequential> make_cnn(Backend& be) {
  auto s = std::make_unique<Sequential>(be, Dims{1, 28, 28});
  s->add(std::make_unique<Conv2d>(be, "conv1", 1, 6, 5, 1, 2));
  s->add(std::make_unique<ReLU>(be, "relu1"));
  s->add(std::make_unique<MaxPool2d>(be, "pool1", 2));
  s->add(std::make_unique<Conv2d>(be, "conv2", 6, 16, 5, 1, 0));
  s->add(std::make_unique<ReLU>(be, "relu2"));
  s->add(std::make_unique<MaxPool2d>(be, "pool2", 2));
  s->add(std::make_unique<Flatten>(be, "flatten"));
  s->add(std::make_unique<Linear>(be, "fc1", 400, 120));
  s->add(std::make_unique<ReLU>(be, "relu3"));
  s->add(std::make_unique<Linear>(be, "fc2", 120, 84));
  s->add(std::make_unique<ReLU>(be, "relu4"));
  s->add(std::make_unique<Linear>(be, "fc3", 84, 10));
  return s;
}

std::unique_ptr<Sequential> make_sequential(Backend& be, const std::string& name) {
  if (name == "mlp") return make_mlp(be);
  if (name == "cnn") return make_cnn(be);
  throw UsageError("model '" + name + "' is not a layer chain (expected mlp or cnn)");
}

Classifier::Classifier(Backend& be, std::string name) : be_(be), name_(std::move(name)), net_(make_sequential(be, name_)) {}

void Classifier::init(std::uint64_t seed) {
  for (std::size_t l = 0; l < net_->size(); ++l) net_->layer(l).init(seed);
}

void Classifier::zero_grad() {
  for (auto& p : net_->params()) p.grad->zero();
}

const Tensor& Classifier::upload(const Batch& b) {
  Dims d = {b.n};
  d.insert(d.end(), net_->input().begin(), net_->input().end());
  x_.ensure(be_, d);
  be_.upload(x_.data(), b.x, x_.numel());
  labels_.ensure(be_, static_cast<std::size_t>(b.n));
  be_.upload_i32(labels_.data(), b.labels, static_cast<std::size_t>(b.n));
  return x_;
}

StepStats Classifier::forward_backward(const Batch& b, float grad_scale) {
  const Tensor& logits = net_->forward(upload(b), 0, net_->size());
  dlogits_.ensure(be_, logits.dims());
  StepStats s;
  s.samples = b.n;
  s.loss_sum = be_.softmax_xent(logits.data(), labels_.data(), b.n, logits.dim(1), grad_scale, dlogits_.data(), &s.correct);
  net_->backward(dlogits_, 0, net_->size(), false);
  return s;
}

StepStats Classifier::evaluate(const Batch& b, std::vector<float>* scores) {
  const Tensor& logits = net_->forward(upload(b), 0, net_->size());
  StepStats s;
  s.samples = b.n;
  s.loss_sum = be_.softmax_xent(logits.data(), labels_.data(), b.n, logits.dim(1), 0.0f, nullptr, &s.correct);
  if (scores) {
    const auto h = logits.to_host();
    scores->insert(scores->end(), h.begin(), h.end());
  }
  return s;
}

void Classifier::apply_update(Optimizer& opt) {
  for (const auto& p : net_->params()) opt.update(p);
}

std::unique_ptr<Model> make_model(Backend& be, const std::string& name) {
  if (name == "dlrm") return std::make_unique<Dlrm>(be);
  if (name == "mlp" || name == "cnn") return std::make_unique<Classifier>(be, name);
  throw UsageError("unknown model '" + name + "' (expected mlp, cnn or dlrm)");
}

}  // namespace resil::train
