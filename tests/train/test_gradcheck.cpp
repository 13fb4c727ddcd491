// Finite-difference gradient checks for every layer, the losses and the DLRM interaction.
// Loss L = sum(y * r) for a fixed random r, so dL/dy = r; central differences in float with
// h = 1e-2 on smooth inputs, compared with a relative tolerance.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>

#include "resil/core/rng.hpp"
#include "resil/train/dlrm.hpp"
#include "resil/train/layers.hpp"
#include "resil_test/gradcheck.hpp"

using namespace resil::train;

namespace {
std::vector<float> randv(std::size_t n, std::uint64_t stream, float scale = 1.0f) { return resil::test::randv(1234, n, stream, scale); }
using resil::test::dot;

/// Central differences against the analytic gradient, relative to max(1, |numeric| + |analytic|) within 2e-2.
void check_grad(std::vector<float>& v, const std::vector<float>& g, const std::function<double()>& f, const std::string& what,
                std::size_t max_checks = 40) {
  resil::test::check_grad(v, g, f, what, {1.0, 2e-2, max_checks});
}

void gradcheck_layer(Backend& be, Layer& layer, const Dims& in_dims, bool kinked = false) {
  layer.init(7);
  Tensor x(be, in_dims);
  auto xh = randv(x.numel(), 1);
  x.from_host(xh);
  const Dims out = layer.out_dims(in_dims);
  const auto r = randv(numel_of(out), 2);
  auto loss = [&]() {
    x.from_host(xh);
    return dot(layer.forward(x).to_host(), r);
  };
  loss();
  Tensor dy(be, out);
  dy.from_host(r);
  for (auto& p : layer.params()) p.grad->zero();
  const auto dx = layer.backward(dy, true).to_host();
  if (!kinked) check_grad(xh, dx, loss, layer.name() + " dx");
  for (auto& p : layer.params()) {
    auto ph = p.value->to_host();
    const auto gh = p.grad->to_host();
    check_grad(ph, gh, [&]() {
      p.value->from_host(ph);
      return loss();
    }, p.name);
    p.value->from_host(ph);
  }
}
}  // namespace

TEST_CASE("gradient checks: Linear, Conv2d, MaxPool2d, ReLU, Flatten", "[train][unit]") {
  auto be = make_cpu_backend(1);
  SECTION("linear") {
    Linear l(*be, "fc", 7, 5);
    gradcheck_layer(*be, l, {3, 7});
  }
  SECTION("conv2d with padding and stride") {
    const int stride = GENERATE(1, 2);
    Conv2d c(*be, "conv", 2, 3, 3, stride, 1);
    gradcheck_layer(*be, c, {2, 2, 6, 5});
  }
  SECTION("maxpool") {
    MaxPool2d p(*be, "pool", 2);
    gradcheck_layer(*be, p, {2, 3, 4, 6});
  }
  SECTION("relu (away from the kink)") {
    ReLU r(*be, "relu");
    gradcheck_layer(*be, r, {4, 9});
  }
  SECTION("flatten") {
    Flatten f(*be, "flat");
    gradcheck_layer(*be, f, {2, 3, 2, 2});
  }
}

TEST_CASE("gradient checks: softmax cross-entropy and BCE with logits", "[train][unit]") {
  auto be = make_cpu_backend(1);
  const int n = 4, c = 5;
  auto z = randv(n * c, 3);
  const std::vector<std::int32_t> labels = {0, 4, 2, 2};
  std::vector<float> dz(z.size());
  std::int64_t correct = 0;
  be->softmax_xent(z.data(), labels.data(), n, c, 1.0f, dz.data(), &correct);
  check_grad(z, dz, [&]() { return be->softmax_xent(z.data(), labels.data(), n, c, 0.0f, nullptr, nullptr); }, "xent");
  auto x = randv(6, 4, 2.0f);
  const std::vector<float> t = {0, 1, 1, 0, 1, 0};
  std::vector<float> dx(6);
  be->bce_logits(x.data(), t.data(), 6, 1.0f, dx.data());
  check_grad(x, dx, [&]() { return be->bce_logits(x.data(), t.data(), 6, 0.0f, nullptr); }, "bce");
  // Known value: BCE(0, 1) = log 2.
  const float zero = 0.0f, one = 1.0f;
  CHECK(be->bce_logits(&zero, &one, 1, 0.0f, nullptr) == Approx(std::log(2.0)));
}

TEST_CASE("gradient checks: dot interaction and EmbeddingBag", "[train][unit]") {
  auto be = make_cpu_backend(1);
  const int n = 2, f = 4, d = 3, w = d + f * (f - 1) / 2;
  auto v = randv(n * f * d, 5);
  const auto r = randv(n * w, 6);
  std::vector<float> out(n * w), dv(v.size());
  auto loss = [&]() {
    be->dot_interaction_forward(v.data(), out.data(), n, f, d);
    return dot(out, r);
  };
  be->dot_interaction_backward(v.data(), r.data(), dv.data(), n, f, d);
  check_grad(v, dv, loss, "interaction");

  auto table = randv(5 * d, 7);
  const std::vector<std::int32_t> idx = {1, 3, 3, 0}, off = {0, 2, 4};
  std::vector<float> eo(2 * d), grad(table.size(), 0.0f);
  const auto re = randv(2 * d, 8);
  be->embedding_bag_backward(re.data(), d, idx.data(), off.data(), 2, d, grad.data());
  check_grad(table, grad, [&]() {
    be->embedding_bag_forward(table.data(), d, idx.data(), off.data(), 2, eo.data(), d);
    return dot(eo, re);
  }, "embedding_bag");
  CHECK(grad[2 * d] == 0.0f);  // row 2 untouched
}

TEST_CASE("DLRM end to end gradient on a tiny configuration", "[train][unit]") {
  auto be = make_cpu_backend(1);
  DlrmConfig cfg;
  cfg.num_dense = 3;
  cfg.table_sizes = {4, 6};
  cfg.embedding_dim = 2;
  cfg.bottom = {4};
  cfg.top = {3};
  Dlrm m(*be, cfg);
  m.init(3);
  const int n = 3;
  auto x = randv(n * 3, 9);
  const std::vector<std::int32_t> sp = {0, 5, 3, 1, 0, 5};
  const std::vector<float> t = {1, 0, 1};
  const Batch b{n, x.data(), nullptr, t.data(), sp.data()};
  m.zero_grad();
  m.forward_backward(b, 1.0f);
  const auto touched = m.touched_rows();
  REQUIRE(touched.size() == 2);
  CHECK(touched[0].second == std::vector<std::int32_t>{0, 3});
  CHECK(touched[1].second == std::vector<std::int32_t>{1, 5});
  for (auto& p : m.params()) {
    auto ph = p.value->to_host();
    const auto gh = p.grad->to_host();
    check_grad(ph, gh, [&]() {
      p.value->from_host(ph);
      return m.evaluate(b).loss_sum;
    }, p.name);
    p.value->from_host(ph);
  }
  CHECK(m.row(1, 5).size() == 2);
}
