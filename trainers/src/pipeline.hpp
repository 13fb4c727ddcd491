// GPipe-style pipeline stage (internal to trainers/): a contiguous range of a Sequential on this
// rank, micro-batches flowing forward rank r -> r+1 and gradients backward r+1 -> r by MPI
// send/recv. Activations are re-materialised: a stage keeps only each micro-batch's input and
// recomputes its forward pass just before that micro-batch's backward (GPipe, Huang et al. 2019),
// so layers need no per-micro-batch caches.
#pragma once

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

}  // namespace resil::train
