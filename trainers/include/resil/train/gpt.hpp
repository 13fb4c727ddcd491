// A decoder-only transformer as in GPT-2 (Radford et al. 2019), over bytes:
//
//   x = wte[token] + wpe[position]                      token and position embeddings
//   for each of `layers` blocks (pre-LayerNorm):
//     x = x + c_proj(attention(c_attn(ln_1(x))))       causal multi-head self-attention
//     x = x + mlp.c_proj(gelu(mlp.c_fc(ln_2(x))))       MLP of width 4C
//   logits = ln_f(x) wte^T                              LM head tied to the token embedding
//   loss = mean cross-entropy of the next token
//
// Parameters keep nanoGPT's names and PyTorch's layouts (Linear weights are out x in):
// wte.weight (vocab x C), wpe.weight (context x C), h.<l>.ln_1.{weight,bias},
// h.<l>.attn.c_attn.{weight,bias} (3C x C: the rows of q, then k, then v; head h owns rows
// h*C/heads.. of each), h.<l>.attn.c_proj.*, h.<l>.ln_2.*, h.<l>.mlp.c_fc.* (4C x C),
// h.<l>.mlp.c_proj.* (C x 4C), ln_f.*. The tied LM head is wte.weight itself.
// The layers (trainers/src/gpt/, one per file) are private; the step reads top to bottom in gpt.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "resil/ckpt/checkpoint.hpp"
#include "resil/train/model.hpp"

namespace resil::train {

struct GptConfig {
  int vocab = 256;     // byte-level tokens
  int context = 128;   // positions the model has (rows of wpe): the longest sequence it reads
  int layers = 4;
  int heads = 4;
  int width = 128;     // C, the embedding width; heads must divide it
  /// UsageError naming the flag for a configuration no model has (heads not dividing the width,
  /// sizes out of range).
  void validate() const;
  std::int64_t parameters() const;  // trainable parameters (the tied head counted once)
};

/// Tensor parallelism over `size` ranks, Megatron-LM's layout (Shoeybi et al. 2019): in each
/// block, attn.c_attn and mlp.c_fc are column-parallel (rank r holds the q, k and v rows of heads
/// r*heads/size.., and rows r*4C/size.. of c_fc), attn.c_proj and mlp.c_proj row-parallel (the
/// matching input columns; their biases whole). Each rank computes its heads and its quarter of the
/// MLP; the row-parallel outputs are summed over the ranks before their bias (one all-reduce per
/// sub-layer forward) and the column-parallel input gradients likewise (one per sub-layer
/// backward). Embeddings, LayerNorms, the LM head and the loss are computed whole on every rank,
/// on identical inputs, so their parameters and gradients are identical on every rank.
struct TensorParallel {
  int rank = 0, size = 1;
  /// In-place sum of a tensor over the ranks, the same bits on every rank (rank order).
  std::function<void(Tensor&)> sum;
};

class Gpt final : public Model {
public:
  /// bf16: mixed precision. Activations and their gradients are bfloat16 (rounded after every
  /// operation that writes them, computed in float), parameters are used as they are (the optimizer
  /// keeps them bf16 with float masters, Optimizer's master_weights), parameter gradients are
  /// float accumulations.
  /// tp: this rank's part (UsageError when tp.size does not divide the heads).
  Gpt(Backend& be, GptConfig cfg, bool bf16 = false, TensorParallel tp = {});
  ~Gpt() override;
  std::string name() const override { return "gpt"; }
  std::vector<ParamRef> params() override;
  /// GPT-2's initialisation: weights N(0, 0.02^2), the residual projections (attn.c_proj,
  /// mlp.c_proj) N(0, (0.02 / sqrt(2 layers))^2), biases 0, LayerNorm weights 1.
  void init(std::uint64_t seed) override;
  void zero_grad() override;
  /// b.tokens holds b.n windows of b.seq + 1 tokens (b.seq <= context). Loss and gradients are per
  /// predicted token: the gradient is scaled by grad_scale / b.seq, so grad_scale = 1 / global
  /// windows gives the mean over every token of the global batch. StepStats count tokens.
  StepStats forward_backward(const Batch& b, float grad_scale) override;
  StepStats evaluate(const Batch& b, std::vector<float>* scores = nullptr) override;
  void apply_update(Optimizer& opt) override;
  const GptConfig& config() const noexcept { return cfg_; }
  /// Tensor parallelism: the parameters this rank holds a slice of, and which (empty for one rank).
  std::map<std::string, ckpt::TpSlice> slices() const;
  /// The logits (vocab values) of the token that follows `tokens` (1..context tokens).
  std::vector<float> next_logits(std::span<const std::int32_t> tokens);

  // The step in pieces, for a pipeline stage (--parallel mp): forward_backward is
  //   stage(b); x = embed(); x = blocks_forward(x, 0, layers); dx = head(x, scale, &s);
  //   dx = blocks_backward(dx, 0, layers); embed_backward(dx)
  /// The batch's inputs and targets into backend memory (checks sequence length and tokens).
  void stage(const Batch& b);
  /// Token and position embeddings of the staged batch: (B*T) x C.
  const Tensor& embed();
  const Tensor& blocks_forward(const Tensor& x, int first, int end);
  /// Final LayerNorm, the tied LM head and the loss of the staged targets, then their backward:
  /// wte's gradient += the head's part; returns dL/dx. Adds the loss to `s`.
  const Tensor& head(const Tensor& x, float grad_scale, StepStats& s);
  /// The loss of the staged targets only (no gradients).
  StepStats head_evaluate(const Tensor& x);
  const Tensor& blocks_backward(const Tensor& dy, int first, int end);
  /// wte and wpe's gradients += the embedding's part.
  void embed_backward(const Tensor& d);
  /// Parameters of a pipeline stage: the embeddings (`embeddings`), blocks [first, end), ln_f
  /// (`head`), and wte again for the LM head of a last stage that does not hold the embeddings.
  std::vector<ParamRef> stage_params(int first, int end, bool embeddings, bool head);

private:
  struct Net;
  const Tensor& forward_logits();    // forward from the staged inputs to (B*T) x vocab logits
  const Tensor& logits_of(const Tensor& xf);  // the LM head
  GptConfig cfg_;
  bool bf16_;
  TensorParallel tp_;
  std::unique_ptr<Net> net_;
};

}  // namespace resil::train
