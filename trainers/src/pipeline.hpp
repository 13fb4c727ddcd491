// GPipe-style pipeline stage (internal to trainers/): a contiguous range of a Sequential on this
// rank, micro-batches flowing forward rank r -> r+1 and gradients backward r+1 -> r by MPI
// send/recv. Activations are re-materialised: a stage keeps only each micro-batch's input and
// recomputes its forward pass just before that micro-batch's backward (GPipe, Huang et al. 2019),
// so layers need no per-micro-batch caches.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "resil/train/comm.hpp"
#include "resil/train/model.hpp"

namespace resil::train {

/// Contiguous [first, end) layer ranges, one per stage, balancing parameters + activations.
std::vector<std::pair<std::size_t, std::size_t>> partition_layers(Sequential& net, int stages);

class PipelineStage {
public:
  /// `dcomm` (optional, --reduce nccl): activations and gradients move device to device by NCCL.
  PipelineStage(Sequential& net, std::size_t first, std::size_t end, const Comm& comm, int micro_batches,
                DeviceComm* dcomm = nullptr);
  /// One training step on the global batch (every rank passes the same batch); gradients of this
  /// stage's parameters accumulate scaled by `grad_scale`. The returned stats (loss, correct) are
  /// the whole batch's, broadcast from the last stage to every rank.
  StepStats train_step(const Batch& global, float grad_scale);
  /// Forward only, in one micro-batch; stats broadcast from the last stage.
  StepStats eval_step(const Batch& global);

private:
  void upload_input(const Batch& b, int offset, int n, Tensor& x);
  StepStats broadcast(StepStats s) const;
  // Activations and gradients cross ranks through host memory (backend memory may be a GPU's),
  // or directly between GPUs with NCCL when dcomm_ is set.
  void send(const Tensor& t, int dest, int tag);
  void recv(Tensor& t, int src, int tag);
  Sequential& net_;
  std::size_t first_, end_;
  const Comm& comm_;
  int micro_;
  DeviceComm* dcomm_;
  std::vector<Tensor> inputs_, dlogits_;
  Tensor dy_, x_;
  IntBuffer labels_;
  std::vector<float> host_;
};

class Gpt;

/// Contiguous [first, end) block ranges of a gpt, one per stage, as even as the blocks allow
/// (UsageError for more stages than blocks).
std::vector<std::pair<std::size_t, std::size_t>> partition_blocks(int layers, int stages);

/// The gpt as a GPipe pipeline: stage r runs blocks [first, end); the first stage also the
/// embeddings, the last ln_f, the LM head and the loss, with its own copy of wte (the head is tied
/// to the embedding): after the micro-batches the last stage's wte gradient is sent to the first,
/// added to the embedding's, and the sum sent back, so both copies take the same steps. Stage
/// inputs are kept per micro-batch and the forward pass recomputed before each backward, as the
/// layer-chain pipeline does.
class GptPipelineStage {
public:
  GptPipelineStage(Gpt& model, std::size_t first, std::size_t end, const Comm& comm, int micro_batches, DeviceComm* dcomm = nullptr);
  StepStats train_step(const Batch& global, float grad_scale);
  StepStats eval_step(const Batch& global);
  /// This stage's parameters (wte on the first and the last stage).
  std::vector<ParamRef> params();
  /// Whether this stage holds a copy of a parameter that another stage counts (wte on a last stage
  /// that is not the first): the gradient norm counts each parameter once.
  bool is_copy(const std::string& param) const;

private:
  Batch micro(const Batch& g, int m, int mb) const;
  void send(const Tensor& t, int dest, int tag);
  void recv(Tensor& t, int src, int tag);
  StepStats broadcast(StepStats s) const;
  Gpt& gpt_;
  int first_, end_;
  const Comm& comm_;
  int micro_;
  DeviceComm* dcomm_;
  std::vector<Tensor> inputs_;
  Tensor dy_, x_, wte_grad_;
  std::vector<float> host_;
};

}  // namespace resil::train
