// Every CUDA kernel against the CPU backend on random inputs. Tolerances: ops whose summation order
// the CUDA kernels reproduce (elementwise, bias grads, col2im, pooling, embedding bags, token and
// position embeddings, LayerNorm, optimizer updates without transcendental functions) must match
// bit for bit; cuBLAS GEMMs within 1e-5 relative to the sum of |products|; exp/log/tanh based ops
// (losses, softmax, GELU, Adam's sqrt) within 1e-5 relative; a whole GPT step within 1e-4.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "resil/core/rng.hpp"
#include "resil/train/backend.hpp"
#include "resil/train/cuda.hpp"
#include "resil/train/gpt.hpp"

using namespace resil::train;

namespace {

std::vector<float> randn(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  resil::Rng r(seed, 77);
  std::vector<float> v(n);
  for (auto& x : v) x = scale * static_cast<float>(r.normal());
  return v;
}

// A buffer mirrored on both backends.
struct Pair {
  Backend& cpu;
  Backend& gpu;
  std::size_t n;
  float* c;
  float* g;
  Pair(Backend& a, Backend& b, const std::vector<float>& host) : cpu(a), gpu(b), n(host.size()), c(a.alloc(n)), g(b.alloc(n)) {
    a.upload(c, host.data(), n);
    b.upload(g, host.data(), n);
  }
  Pair(Backend& a, Backend& b, std::size_t count) : Pair(a, b, std::vector<float>(count, 0.0f)) {}
  ~Pair() {
    cpu.release(c);
    gpu.release(g);
  }
  std::vector<float> on_cpu() const {
    std::vector<float> v(n);
    cpu.download(v.data(), c, n);
    return v;
  }
  std::vector<float> on_gpu() const {
    std::vector<float> v(n);
    gpu.download(v.data(), g, n);
    return v;
  }
  void require_identical() const {
    const auto a = on_cpu(), b = on_gpu();
    REQUIRE(std::memcmp(a.data(), b.data(), n * sizeof(float)) == 0);
  }
  void require_close(double rel) const {
    const auto a = on_cpu(), b = on_gpu();
    for (std::size_t i = 0; i < n; ++i) {
      CAPTURE(i, a[i], b[i]);
      REQUIRE(std::fabs(a[i] - b[i]) <= rel * (1.0 + std::fabs(a[i])));
    }
  }
};

struct Backends {
  std::unique_ptr<Backend> cpu = make_cpu_backend(1);
  std::unique_ptr<Backend> gpu = make_cuda_backend(0);
};

}  // namespace

TEST_CASE("gemm matches the CPU in all transpose combinations", "[gpu]") {
  Backends be;
  const bool ta = GENERATE(false, true), tb = GENERATE(false, true);
  const int m = 37, n = 29, k = 53;
  Pair a(*be.cpu, *be.gpu, randn(static_cast<std::size_t>(m) * k, 1));
  Pair b(*be.cpu, *be.gpu, randn(static_cast<std::size_t>(k) * n, 2));
  Pair c(*be.cpu, *be.gpu, randn(static_cast<std::size_t>(m) * n, 3));
  const int lda = ta ? m : k, ldb = tb ? k : n;
  be.cpu->gemm(ta, tb, m, n, k, 0.5f, a.c, lda, b.c, ldb, 0.25f, c.c, n);
  be.gpu->gemm(ta, tb, m, n, k, 0.5f, a.g, lda, b.g, ldb, 0.25f, c.g, n);
  c.require_close(1e-5 * k);
}

TEST_CASE("elementwise, bias and optimizer kernels are bit-identical to the CPU", "[gpu]") {
  Backends be;
  const int rows = 33, cols = 17;
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  Pair x(*be.cpu, *be.gpu, randn(n, 4)), y(*be.cpu, *be.gpu, n), dx(*be.cpu, *be.gpu, n), dy(*be.cpu, *be.gpu, randn(n, 5));
  Pair bias(*be.cpu, *be.gpu, randn(static_cast<std::size_t>(cols), 6)), db(*be.cpu, *be.gpu, randn(static_cast<std::size_t>(cols), 7));
  Pair acc(*be.cpu, *be.gpu, n);  // Adagrad's sum of squares starts at zero (dx, a momentum, can be negative)
  for (Backend* b : {be.cpu.get(), be.gpu.get()}) {
    const bool g = b == be.gpu.get();
    auto P = [&](Pair& p) { return g ? p.g : p.c; };
    b->relu_forward(P(x), P(y), n);
    b->relu_backward(P(y), P(dy), P(dx), n);
    b->add_bias(P(y), P(bias), rows, cols);
    b->accumulate_bias_grad(P(dy), P(db), rows, cols);
    b->axpy(n, -0.3f, P(dy), P(x));
    b->sgd_update(P(x), P(dy), P(dx), n, 0.1f, 0.9f, 1e-4f);
    b->adagrad_update(P(y), P(dy), P(acc), n, 0.05f, 1e-8f, 0.0f);
  }
  x.require_identical();
  y.require_close(1e-6);  // adagrad uses sqrt: correctly rounded on both, but keep a margin
  dx.require_identical();
  acc.require_identical();
  db.require_identical();
  CHECK(be.gpu->all_finite(x.g, n));
  const float inf = INFINITY;
  be.gpu->upload(x.g + 5, &inf, 1);
  CHECK_FALSE(be.gpu->all_finite(x.g, n));
}

TEST_CASE("adam matches the CPU", "[gpu]") {
  Backends be;
  const std::size_t n = 1000;
  Pair w(*be.cpu, *be.gpu, randn(n, 8)), g(*be.cpu, *be.gpu, randn(n, 9)), m(*be.cpu, *be.gpu, n), v(*be.cpu, *be.gpu, n);
  for (std::int64_t step = 1; step <= 5; ++step) {
    be.cpu->adam_update(w.c, g.c, m.c, v.c, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, step);
    be.gpu->adam_update(w.g, g.g, m.g, v.g, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, step);
  }
  m.require_identical();
  v.require_identical();
  w.require_identical();  // the bias corrections by the CPU's binary powering, IEEE division and square root
}

TEST_CASE("im2col, col2im, channel bias and max pooling match the CPU", "[gpu]") {
  Backends be;
  const ConvGeom geo{.c = 3, .h = 11, .w = 9, .kh = 5, .kw = 3, .stride = GENERATE(1, 2), .pad = GENERATE(0, 2)};
  const std::size_t img_n = static_cast<std::size_t>(geo.c) * geo.h * geo.w;
  const std::size_t col_n = static_cast<std::size_t>(geo.c) * geo.kh * geo.kw * geo.oh() * geo.ow();
  Pair img(*be.cpu, *be.gpu, randn(img_n, 10)), col(*be.cpu, *be.gpu, col_n), back(*be.cpu, *be.gpu, randn(img_n, 11));
  be.cpu->im2col(img.c, geo, col.c);
  be.gpu->im2col(img.g, geo, col.g);
  col.require_identical();
  be.cpu->col2im(col.c, geo, back.c);
  be.gpu->col2im(col.g, geo, back.g);
  back.require_identical();

  const int n = 2, c = 3, h = 8, w = 6, k = 2;
  const std::size_t in = static_cast<std::size_t>(n) * c * h * w, out = in / (k * k);
  Pair x(*be.cpu, *be.gpu, randn(in, 12)), y(*be.cpu, *be.gpu, out), dy(*be.cpu, *be.gpu, randn(out, 13)), dx(*be.cpu, *be.gpu, in);
  Pair cb(*be.cpu, *be.gpu, randn(static_cast<std::size_t>(c), 14)), cdb(*be.cpu, *be.gpu, static_cast<std::size_t>(c));
  std::int32_t* am_c = be.cpu->alloc_i32(out);
  std::int32_t* am_g = be.gpu->alloc_i32(out);
  be.cpu->maxpool_forward(x.c, y.c, am_c, n, c, h, w, k);
  be.gpu->maxpool_forward(x.g, y.g, am_g, n, c, h, w, k);
  be.cpu->maxpool_backward(dy.c, am_c, dx.c, in, out);
  be.gpu->maxpool_backward(dy.g, am_g, dx.g, in, out);
  be.cpu->add_channel_bias(x.c, cb.c, n, c, h * w);
  be.gpu->add_channel_bias(x.g, cb.g, n, c, h * w);
  be.cpu->accumulate_channel_bias_grad(x.c, cdb.c, n, c, h * w);
  be.gpu->accumulate_channel_bias_grad(x.g, cdb.g, n, c, h * w);
  y.require_identical();
  dx.require_identical();
  x.require_identical();
  cdb.require_identical();
  be.cpu->release_i32(am_c);
  be.gpu->release_i32(am_g);
}

TEST_CASE("ordered column and channel sums over many rows are bit-identical to the CPU", "[gpu]") {
  Backends be;
  const int rows = 300, cols = 70, n = 5, c = 7, plane = 50;
  Pair dy(*be.cpu, *be.gpu, randn(static_cast<std::size_t>(rows) * cols, 60)), db(*be.cpu, *be.gpu, randn(cols, 61));
  Pair cdy(*be.cpu, *be.gpu, randn(static_cast<std::size_t>(n) * c * plane, 62)), cdb(*be.cpu, *be.gpu, randn(c, 63));
  for (Backend* b : {be.cpu.get(), be.gpu.get()}) {
    const bool g = b == be.gpu.get();
    auto P = [&](Pair& p) { return g ? p.g : p.c; };
    b->accumulate_bias_grad(P(dy), P(db), rows, cols);
    b->accumulate_channel_bias_grad(P(cdy), P(cdb), n, c, plane);
  }
  db.require_identical();
  cdb.require_identical();
}

TEST_CASE("row gather, scatter and fill by a list of rows are identical to the CPU", "[gpu]") {
  Backends be;
  const std::size_t len = 5, nrows = 40;
  const std::vector<std::int32_t> rows = {0, 3, 4, 17, 39}, other = {1, 2, 39};
  Pair table(*be.cpu, *be.gpu, randn(nrows * len, 80)), packed(*be.cpu, *be.gpu, rows.size() * len), into(*be.cpu, *be.gpu, randn(nrows * len, 81));
  for (Backend* b : {be.cpu.get(), be.gpu.get()}) {
    const bool g = b == be.gpu.get();
    auto P = [&](Pair& p) { return g ? p.g : p.c; };
    b->gather_rows(P(table), len, rows.data(), rows.size(), P(packed));
    b->scatter_rows(P(packed), len, rows.data(), rows.size(), P(into));
    b->fill_rows(P(table), len, other.data(), other.size(), -2.5f);  // another list, then part of the first: each staged anew
    b->fill_rows(P(table), len, rows.data(), 2, 0.5f);
  }
  packed.require_identical();
  into.require_identical();
  table.require_identical();
}

TEST_CASE("a convolution over a batch matches the CPU's image-by-image loop", "[gpu]") {
  Backends be;
  const ConvGeom geo{.c = 3, .h = 11, .w = 9, .kh = 3, .kw = 3, .stride = GENERATE(1, 2), .pad = 1};
  const int n = 5, c_out = 4, kk = geo.c * geo.kh * geo.kw, plane = geo.oh() * geo.ow();
  const std::size_t in = static_cast<std::size_t>(n) * geo.c * geo.h * geo.w, col_n = static_cast<std::size_t>(n) * kk * plane,
                    out = static_cast<std::size_t>(n) * c_out * plane, wn = static_cast<std::size_t>(c_out) * kk;
  Pair x(*be.cpu, *be.gpu, randn(in, 70)), w(*be.cpu, *be.gpu, randn(wn, 71)), cols(*be.cpu, *be.gpu, col_n), y(*be.cpu, *be.gpu, out);
  Pair dy(*be.cpu, *be.gpu, randn(out, 72)), dw(*be.cpu, *be.gpu, randn(wn, 73)), dx(*be.cpu, *be.gpu, in),
      dcol(*be.cpu, *be.gpu, static_cast<std::size_t>(kk) * plane);
  for (Backend* b : {be.cpu.get(), be.gpu.get()}) {
    const bool g = b == be.gpu.get();
    auto P = [&](Pair& p) { return g ? p.g : p.c; };
    b->conv_forward(P(x), geo, n, P(w), c_out, P(cols), P(y));
    b->conv_backward(P(dy), geo, n, P(w), c_out, P(cols), P(dw), P(dx), P(dcol));
  }
  cols.require_identical();
  y.require_close(1e-5 * kk);
  dw.require_close(1e-5 * n * plane);
  dx.require_close(1e-5 * c_out * 9);
}

TEST_CASE("losses match the CPU", "[gpu]") {
  Backends be;
  const int n = 64, classes = 10;
  Pair logits(*be.cpu, *be.gpu, randn(static_cast<std::size_t>(n) * classes, 15, 3.0f));
  Pair dl(*be.cpu, *be.gpu, static_cast<std::size_t>(n) * classes);
  std::vector<std::int32_t> labels(n);
  for (int i = 0; i < n; ++i) labels[static_cast<std::size_t>(i)] = (i * 7) % classes;
  std::int32_t* lc = be.cpu->alloc_i32(labels.size());
  std::int32_t* lg = be.gpu->alloc_i32(labels.size());
  be.cpu->upload_i32(lc, labels.data(), labels.size());
  be.gpu->upload_i32(lg, labels.data(), labels.size());
  std::int64_t okc = 0, okg = 0;
  const double lossc = be.cpu->softmax_xent(logits.c, lc, n, classes, 1.0f / n, dl.c, &okc);
  const double lossg = be.gpu->softmax_xent(logits.g, lg, n, classes, 1.0f / n, dl.g, &okg);
  CHECK(okc == okg);
  CHECK(lossg == Approx(lossc).epsilon(1e-5));
  dl.require_close(1e-5);
  be.cpu->release_i32(lc);
  be.gpu->release_i32(lg);

  std::vector<float> t(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<std::size_t>(i)] = static_cast<float>(i % 2);
  Pair x(*be.cpu, *be.gpu, randn(static_cast<std::size_t>(n), 16, 2.0f)), tg(*be.cpu, *be.gpu, t), dx(*be.cpu, *be.gpu, static_cast<std::size_t>(n));
  const double bc = be.cpu->bce_logits(x.c, tg.c, n, 1.0f / n, dx.c);
  const double bg = be.gpu->bce_logits(x.g, tg.g, n, 1.0f / n, dx.g);
  CHECK(bg == Approx(bc).epsilon(1e-5));
  dx.require_close(1e-5);
}

TEST_CASE("DLRM dot interaction and embedding bags match the CPU", "[gpu]") {
  Backends be;
  const int n = 16, f = 5, d = 8, width = d + f * (f - 1) / 2;
  Pair v(*be.cpu, *be.gpu, randn(static_cast<std::size_t>(n) * f * d, 17)), out(*be.cpu, *be.gpu, static_cast<std::size_t>(n) * width);
  Pair dout(*be.cpu, *be.gpu, randn(static_cast<std::size_t>(n) * width, 18)), dv(*be.cpu, *be.gpu, static_cast<std::size_t>(n) * f * d);
  be.cpu->dot_interaction_forward(v.c, out.c, n, f, d);
  be.gpu->dot_interaction_forward(v.g, out.g, n, f, d);
  be.cpu->dot_interaction_backward(v.c, dout.c, dv.c, n, f, d);
  be.gpu->dot_interaction_backward(v.g, dout.g, dv.g, n, f, d);
  out.require_close(1e-6);
  dv.require_close(1e-5);

  const int rows = 50;
  Pair table(*be.cpu, *be.gpu, randn(static_cast<std::size_t>(rows) * d, 19)), bags(*be.cpu, *be.gpu, static_cast<std::size_t>(n) * d);
  Pair grad(*be.cpu, *be.gpu, static_cast<std::size_t>(rows) * d);
  std::vector<std::int32_t> offsets{0}, indices;
  resil::Rng r(20, 1);
  for (int b = 0; b < n; ++b) {
    const int len = static_cast<int>(r.below(4));
    for (int i = 0; i < len; ++i) indices.push_back(static_cast<std::int32_t>(r.below(rows)));
    offsets.push_back(static_cast<std::int32_t>(indices.size()));
  }
  indices.push_back(0);  // keep data() valid even if every bag is empty
  be.cpu->embedding_bag_forward(table.c, d, indices.data(), offsets.data(), n, bags.c, d);
  be.gpu->embedding_bag_forward(table.g, d, indices.data(), offsets.data(), n, bags.g, d);
  bags.require_identical();
  be.cpu->embedding_bag_backward(bags.c, d, indices.data(), offsets.data(), n, d, grad.c);
  be.gpu->embedding_bag_backward(bags.g, d, indices.data(), offsets.data(), n, d, grad.g);
  grad.require_identical();
}

TEST_CASE("repeated GPU runs are bit-identical", "[gpu]") {
  auto run = [] {
    auto gpu = make_cuda_backend(0);
    const int m = 128, n = 96, k = 200;
    auto a = randn(static_cast<std::size_t>(m) * k, 21), b = randn(static_cast<std::size_t>(k) * n, 22);
    float* da = gpu->alloc(a.size());
    float* db = gpu->alloc(b.size());
    float* dc = gpu->alloc(static_cast<std::size_t>(m) * n);
    gpu->upload(da, a.data(), a.size());
    gpu->upload(db, b.data(), b.size());
    for (int i = 0; i < 10; ++i) {
      gpu->gemm(false, false, m, n, k, 1.0f, da, k, db, n, 0.5f, dc, n);
      gpu->relu_forward(dc, dc, static_cast<std::size_t>(m) * n);
    }
    std::vector<float> c(static_cast<std::size_t>(m) * n);
    gpu->download(c.data(), dc, c.size());
    gpu->release(da);
    gpu->release(db);
    gpu->release(dc);
    return c;
  };
  const auto first = run(), second = run();
  REQUIRE(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)) == 0);
}

// ---------------------------------------------------------------- the GPT's kernels
TEST_CASE("batched GEMMs match the CPU in all transpose combinations", "[gpu]") {
  Backends be;
  const bool ta = GENERATE(false, true), tb = GENERATE(false, true);
  const int m = 19, n = 23, k = 31, batch = 3;
  const std::ptrdiff_t sa = static_cast<std::ptrdiff_t>(m) * k + 5, sb = static_cast<std::ptrdiff_t>(k) * n + 7, sc = static_cast<std::ptrdiff_t>(m) * n;
  Pair a(*be.cpu, *be.gpu, randn(static_cast<std::size_t>(sa * batch), 31)), b(*be.cpu, *be.gpu, randn(static_cast<std::size_t>(sb * batch), 32));
  Pair c(*be.cpu, *be.gpu, randn(static_cast<std::size_t>(sc * batch), 33));
  const int lda = ta ? m : k, ldb = tb ? k : n;
  be.cpu->gemm_batched(ta, tb, m, n, k, 0.7f, a.c, lda, sa, b.c, ldb, sb, 0.5f, c.c, n, sc, batch);
  be.gpu->gemm_batched(ta, tb, m, n, k, 0.7f, a.g, lda, sa, b.g, ldb, sb, 0.5f, c.g, n, sc, batch);
  c.require_close(1e-5 * k);
}

TEST_CASE("token and position embeddings and LayerNorm are bit-identical to the CPU", "[gpu]") {
  Backends be;
  // One warp-sized chunk and one tile of rows; then several chunks with a tail and several tiles.
  const int V = 13, B = GENERATE(3, 4), T = B == 3 ? 7 : 80, C = B == 3 ? 24 : 200, rows = B * T;
  std::vector<std::int32_t> tok(static_cast<std::size_t>(rows));
  resil::Rng r(40, 1);
  for (auto& x : tok) x = static_cast<std::int32_t>(r.below(V));
  std::int32_t* tc = be.cpu->alloc_i32(tok.size());
  std::int32_t* tg = be.gpu->alloc_i32(tok.size());
  be.cpu->upload_i32(tc, tok.data(), tok.size());
  be.gpu->upload_i32(tg, tok.data(), tok.size());
  const std::size_t n = static_cast<std::size_t>(rows) * C;
  Pair wte(*be.cpu, *be.gpu, randn(static_cast<std::size_t>(V) * C, 41)), wpe(*be.cpu, *be.gpu, randn(static_cast<std::size_t>(T) * C, 42));
  Pair x(*be.cpu, *be.gpu, n), dwte(*be.cpu, *be.gpu, static_cast<std::size_t>(V) * C), dwpe(*be.cpu, *be.gpu, static_cast<std::size_t>(T) * C);
  Pair w(*be.cpu, *be.gpu, randn(C, 43)), bias(*be.cpu, *be.gpu, randn(C, 44)), y(*be.cpu, *be.gpu, n), mean(*be.cpu, *be.gpu, rows),
      rstd(*be.cpu, *be.gpu, rows), dy(*be.cpu, *be.gpu, randn(n, 45)), dx(*be.cpu, *be.gpu, randn(n, 46)), dw(*be.cpu, *be.gpu, C),
      db(*be.cpu, *be.gpu, C);
  for (Backend* b : {be.cpu.get(), be.gpu.get()}) {
    const bool g = b == be.gpu.get();
    auto P = [&](Pair& p) { return g ? p.g : p.c; };
    b->embedding_forward(g ? tg : tc, P(wte), P(wpe), P(x), B, T, C);
    b->embedding_backward(P(dy), g ? tg : tc, P(dwte), P(dwpe), B, T, C, V);
    b->layernorm_forward(P(x), P(w), P(bias), P(y), P(mean), P(rstd), rows, C);
    b->layernorm_backward(P(dy), P(x), P(w), P(mean), P(rstd), P(dx), P(dw), P(db), rows, C);
  }
  x.require_identical();
  dwte.require_identical();
  dwpe.require_identical();
  y.require_identical();
  mean.require_identical();
  rstd.require_identical();
  dx.require_identical();
  dw.require_identical();
  db.require_identical();
  be.cpu->release_i32(tc);
  be.gpu->release_i32(tg);
}

namespace {

// Tokens as a (B*T)-long batch for the token-embedding gradient's cases.
struct TokenCase {
  const char* name;
  int V, B, T, C;
  std::vector<std::int32_t> (*tokens)(int V, int rows);
};

std::vector<std::int32_t> tokens_random(int V, int rows) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(rows));
  resil::Rng r(70, static_cast<std::uint64_t>(V));
  for (auto& x : t) x = static_cast<std::int32_t>(r.below(static_cast<std::uint64_t>(V)));
  return t;
}
std::vector<std::int32_t> tokens_all_one(int V, int rows) { return std::vector<std::int32_t>(static_cast<std::size_t>(rows), V - 1); }
// Four ids of a large vocabulary, the first and the last among them: every other row of dwte is unused.
std::vector<std::int32_t> tokens_sparse(int V, int rows) {
  const std::int32_t ids[] = {V - 1, 0, V / 2, 7};
  std::vector<std::int32_t> t(static_cast<std::size_t>(rows));
  resil::Rng r(71, 1);
  for (auto& x : t) x = ids[r.below(4)];
  return t;
}

}  // namespace

TEST_CASE("the token embedding gradient is bit-identical to the CPU for any mix of tokens", "[gpu]") {
  Backends be;
  // Buckets of one row up to several 128-row tiles of one token; C below, at and above multiples of 32.
  const TokenCase tc = GENERATE(values<TokenCase>({
      {"random, byte vocabulary", 256, 16, 64, 96, tokens_random},
      {"one token everywhere", 13, 4, 80, 200, tokens_all_one},
      {"four ids of a vocabulary of 5000", 5000, 3, 70, 33, tokens_sparse},
      {"a single position", 50, 1, 1, 31, tokens_random},
      {"more ids than positions", 300, 2, 9, 64, tokens_random},
  }));
  CAPTURE(tc.name);
  const int rows = tc.B * tc.T;
  const auto tok = tc.tokens(tc.V, rows);
  std::int32_t* tcpu = be.cpu->alloc_i32(tok.size());
  std::int32_t* tgpu = be.gpu->alloc_i32(tok.size());
  be.cpu->upload_i32(tcpu, tok.data(), tok.size());
  be.gpu->upload_i32(tgpu, tok.data(), tok.size());
  const std::size_t n = static_cast<std::size_t>(rows) * tc.C;
  // The gradients start non-zero: the kernel accumulates into them, and rows of absent ids must keep their bits.
  Pair dwte(*be.cpu, *be.gpu, randn(static_cast<std::size_t>(tc.V) * tc.C, 72));
  Pair dwpe(*be.cpu, *be.gpu, randn(static_cast<std::size_t>(tc.T) * tc.C, 73));
  Pair dy(*be.cpu, *be.gpu, randn(n, 74, 3.0f)), dy2(*be.cpu, *be.gpu, randn(n, 75));
  for (Backend* b : {be.cpu.get(), be.gpu.get()}) {
    const bool g = b == be.gpu.get();
    auto P = [&](Pair& p) { return g ? p.g : p.c; };
    // Twice: a second step reuses the device's buckets.
    b->embedding_backward(P(dy), g ? tgpu : tcpu, P(dwte), P(dwpe), tc.B, tc.T, tc.C, tc.V);
    b->embedding_backward(P(dy2), g ? tgpu : tcpu, P(dwte), P(dwpe), tc.B, tc.T, tc.C, tc.V);
  }
  dwte.require_identical();
  dwpe.require_identical();
  be.cpu->release_i32(tcpu);
  be.gpu->release_i32(tgpu);
}

TEST_CASE("the batched sum of squares has each tensor's per-tensor bits", "[gpu]") {
  Backends be;
  // Empty, below, at and above the block width (256), above one pass of the 256 x 256 grid, and large.
  const std::vector<std::size_t> sizes = {0, 1, 255, 256, 257, 3000, 65536 + 3, 1 << 20};
  std::vector<std::unique_ptr<Pair>> xs;
  for (std::size_t i = 0; i < sizes.size(); ++i) xs.push_back(std::make_unique<Pair>(*be.cpu, *be.gpu, randn(sizes[i], 80 + i, 0.5f)));
  auto check = [&](const std::vector<std::size_t>& which) {
    std::vector<ConstSpan> on_cpu, on_gpu;
    for (const std::size_t i : which) {
      on_cpu.push_back({xs[i]->c, sizes[i]});
      on_gpu.push_back({xs[i]->g, sizes[i]});
    }
    const auto c = be.cpu->sum_squares_many(on_cpu), g = be.gpu->sum_squares_many(on_gpu);
    REQUIRE(c.size() == which.size());
    REQUIRE(g.size() == which.size());
    for (std::size_t k = 0; k < which.size(); ++k) {
      const std::size_t i = which[k];
      CAPTURE(k, sizes[i]);
      const double c1 = be.cpu->sum_squares(xs[i]->c, sizes[i]), g1 = be.gpu->sum_squares(xs[i]->g, sizes[i]);
      CHECK(std::memcmp(&c[k], &c1, sizeof(double)) == 0);  // the CPU's default: sum_squares in turn
      CHECK(std::memcmp(&g[k], &g1, sizeof(double)) == 0);  // the device's batch: the same blocks, the same order
      CHECK(g[k] == Approx(c[k]).epsilon(1e-12));           // the device's block order is not the CPU's index order
    }
  };
  SECTION("every size at once") { check({0, 1, 2, 3, 4, 5, 6, 7}); }
  SECTION("a list of one, then of one empty tensor, then an empty list") {
    check({5});
    check({0});
    check({});
  }
  SECTION("the same list twice, a different list of the same length, then a longer one") {
    check({1, 3, 6});
    check({1, 3, 6});
    check({6, 3, 1});
    check({7, 0, 2, 4, 2, 7, 5, 1, 3, 6});
  }
}

TEST_CASE("GELU, the causal softmax, AdamW and the gradient norm match the CPU", "[gpu]") {
  Backends be;
  const std::size_t n = 3000;
  Pair x(*be.cpu, *be.gpu, randn(n, 50, 3.0f)), y(*be.cpu, *be.gpu, n), dy(*be.cpu, *be.gpu, randn(n, 51)), dx(*be.cpu, *be.gpu, n);
  const int mats = 6, T = 17;
  const std::size_t sn = static_cast<std::size_t>(mats) * T * T;
  Pair s(*be.cpu, *be.gpu, randn(sn, 52, 2.0f)), p(*be.cpu, *be.gpu, sn), dp(*be.cpu, *be.gpu, randn(sn, 53)), ds(*be.cpu, *be.gpu, sn);
  Pair w(*be.cpu, *be.gpu, randn(n, 54)), m(*be.cpu, *be.gpu, n), v(*be.cpu, *be.gpu, n);
  double norm[2] = {0, 0};
  for (Backend* b : {be.cpu.get(), be.gpu.get()}) {
    const bool g = b == be.gpu.get();
    auto P = [&](Pair& q) { return g ? q.g : q.c; };
    b->gelu_forward(P(x), P(y), n);
    b->gelu_backward(P(x), P(dy), P(dx), n);
    b->causal_softmax_forward(P(s), P(p), mats, T, 0.25f);
    b->causal_softmax_backward(P(p), P(dp), P(ds), mats, T, 0.25f);
    for (std::int64_t step = 1; step <= 3; ++step) b->adamw_update(P(w), P(dy), P(m), P(v), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
    norm[g] = b->sum_squares(P(dy), n);
    b->scale(P(dy), n, 0.37f);
  }
  y.require_close(1e-6);
  dx.require_close(1e-6);
  p.require_close(1e-5);
  ds.require_close(1e-5);
  m.require_identical();
  v.require_identical();
  w.require_close(1e-6);
  CHECK(norm[1] == Approx(norm[0]).epsilon(1e-12));
  dy.require_identical();
}

TEST_CASE("a GPT step on the GPU matches the CPU", "[gpu]") {
  Backends be;
  GptConfig cfg;
  cfg.vocab = 64;
  cfg.context = 16;
  cfg.layers = 2;
  cfg.heads = 4;
  cfg.width = 32;
  Gpt cpu(*be.cpu, cfg), gpu(*be.gpu, cfg);
  cpu.init(9);
  gpu.init(9);
  std::vector<std::int32_t> windows(static_cast<std::size_t>(4) * (cfg.context + 1));
  resil::Rng r(60, 1);
  for (auto& t : windows) t = static_cast<std::int32_t>(r.below(static_cast<std::uint64_t>(cfg.vocab)));
  Batch b;
  b.n = 4;
  b.seq = cfg.context;
  b.tokens = windows.data();
  cpu.zero_grad();
  gpu.zero_grad();
  const StepStats sc = cpu.forward_backward(b, 0.25f), sg = gpu.forward_backward(b, 0.25f);
  CHECK(sg.loss_sum == Approx(sc.loss_sum).epsilon(1e-5));
  const auto pc = cpu.params(), pg = gpu.params();
  for (std::size_t i = 0; i < pc.size(); ++i) {
    const auto gc = pc[i].grad->to_host(), gg = pg[i].grad->to_host();
    double scale = 0, err = 0;
    for (std::size_t j = 0; j < gc.size(); ++j) {
      scale = std::max(scale, static_cast<double>(std::fabs(gc[j])));
      err = std::max(err, static_cast<double>(std::fabs(gc[j] - gg[j])));
    }
    CAPTURE(pc[i].name, err, scale);
    CHECK(err <= 1e-4 * scale);
  }
}
