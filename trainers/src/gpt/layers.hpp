// The layers of the GPT (gpt.hpp), one per file, each with its forward and backward side by side.
// Activations are (B*T) x C row-major tensors, rows in (b, t) order. Like every layer, backward
// ACCUMULATES parameter gradients (+=). LayerNorm's backward also accumulates dL/dx into a tensor
// the caller passes: in a pre-LayerNorm block the input of a LayerNorm is the residual stream,
// whose gradient already holds the skip connection's part.
//
// Mixed precision (`bf16`): every activation and activation gradient a layer writes is rounded to
// bfloat16 (kept in float storage), computed in float from bf16 inputs; parameter gradients are
// float accumulations. With bf16 weights (the optimizer keeps the float masters) a GEMM then is a
// bf16 GEMM with fp32 accumulation, bit for bit. Private to the trainer.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "resil/ckpt/checkpoint.hpp"
#include "resil/train/gpt.hpp"
#include "resil/train/layers.hpp"

namespace resil::train::gpt {

/// x rounded to bfloat16 in place when `bf16`.
inline void round_if(Backend& be, Tensor& x, bool bf16) {
  if (bf16) be.round_bf16(x.data(), x.numel());
}

/// Token and position embeddings: out[b, t] = wte[tokens[b, t]] + wpe[t].
class Embedding {
public:
  Embedding(Backend& be, int vocab, int context, int C, bool bf16 = false);
  /// tokens: B x T in backend memory, T <= context.
  const Tensor& forward(const IntBuffer& tokens, int B, int T);
  /// dwte, dwpe += the gradient of the last forward's rows.
  void backward(const Tensor& dout);
  std::vector<ParamRef> params();
  Tensor wte, wpe, dwte, dwpe;

private:
  Backend& be_;
  int V_, C_;
  bool bf16_;
  const IntBuffer* tokens_ = nullptr;
  int B_ = 0, T_ = 0;
  Tensor out_;
};

/// LayerNorm over the last dimension with a weight and a bias.
class LayerNorm {
public:
  LayerNorm(Backend& be, std::string name, int C, bool bf16 = false);
  const Tensor& forward(const Tensor& x);
  /// dx += dL/dx for the last forward's input (dx has its shape).
  void backward(const Tensor& dy, Tensor& dx);
  std::vector<ParamRef> params();
  void init();  // weight 1, bias 0
  Tensor w, b, dw, db;

private:
  Backend& be_;
  std::string name_;
  int C_;
  bool bf16_;
  const Tensor* x_ = nullptr;
  Tensor y_, mean_, rstd_;
};

/// GELU (tanh form), elementwise.
class Gelu {
public:
  explicit Gelu(Backend& be, bool bf16 = false) : be_(be), bf16_(bf16) {}
  const Tensor& forward(const Tensor& x);
  const Tensor& backward(const Tensor& dy);

private:
  Backend& be_;
  bool bf16_;
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
};

/// Causal multi-head self-attention without its projections: (B*T) x 3C rows [q | k | v] ->
/// (B*T) x C, head h reading and writing columns h*hs..(h+1)*hs (hs = C / heads) of each part.
/// Per sample and head: S = Q K^T, P = causal_softmax(S / sqrt(hs)), O = P V, as GEMMs.
class CausalSelfAttention {
public:
  CausalSelfAttention(Backend& be, int heads, int C, bool bf16 = false);
  const Tensor& forward(const Tensor& qkv, int B, int T);
  /// dL/dqkv for the last forward.
  const Tensor& backward(const Tensor& dout);

private:
  Backend& be_;
  int heads_, C_;
  bool bf16_;
  int B_ = 0, T_ = 0;
  const Tensor* qkv_ = nullptr;
  Tensor scores_, probs_, out_, dprobs_, dqkv_;  // scores_ doubles as dS in backward
};

/// One pre-LayerNorm transformer block: x + attn(ln_1(x)), then + mlp(ln_2(.)). Under tensor
/// parallelism (gpt.hpp) this rank's heads and MLP columns.
class Block {
public:
  Block(Backend& be, int index, int heads, int C, bool bf16 = false, const TensorParallel& tp = {});
  const Tensor& forward(const Tensor& x, int B, int T);
  /// dL/dx for the last forward's input, from dL/dy.
  const Tensor& backward(const Tensor& dy);
  std::vector<ParamRef> params();
  /// GPT-2's init (gpt.hpp); `layers` scales the residual projections.
  void init(std::uint64_t seed, int layers);
  /// tp: this rank's slices of the global tensors (empty for one rank).
  std::map<std::string, ckpt::TpSlice> slices() const;

private:
  Backend& be_;
  bool bf16_;
  int C_;
  TensorParallel tp_;
  std::string prefix_;
  LayerNorm ln_1_;
  Linear c_attn_;
  CausalSelfAttention attn_;
  Linear attn_proj_;
  LayerNorm ln_2_;
  Linear c_fc_;
  Gelu gelu_;
  Linear mlp_proj_;
  Tensor mid_, out_, dmid_, dx_;  // mid = x + attention branch; out = mid + MLP branch
};

}  // namespace resil::train::gpt
