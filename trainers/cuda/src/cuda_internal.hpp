// Internal to trainers/cuda: what the NCCL communicator needs to know about a CUDA backend.
#pragma once

#include <cuda_runtime.h>

#include "resil/train/backend.hpp"

namespace resil::train::cuda {

struct BackendStream {
  cudaStream_t stream = nullptr;
  int device = 0;
};

/// The stream every kernel of this CUDA backend runs on, and its device. Collectives enqueued on
/// that stream are ordered with the backend's kernels without extra synchronisation.
/// UsageError for any other backend.
BackendStream stream_of(Backend& be);

}  // namespace resil::train::cuda
