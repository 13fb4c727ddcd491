// The CUDA backend's public face. No CUDA header is included here: code that selects a backend
// (`--device cpu|cuda|auto`) includes this and links resil::train_cuda when RESIL_HAVE_CUDA.
#pragma once

#include <memory>
#include <string>

#include "resil/train/backend.hpp"
#include "resil/train/comm.hpp"

namespace resil::train {

/// Number of usable CUDA devices; 0 when there is no GPU or no driver (never throws).
int cuda_device_count() noexcept;

/// A short description of device `d` ("NVIDIA H100 80GB HBM3, cc 9.0, 79 GiB"), or the reason none is usable.
std::string cuda_device_description(int d);

/// The device a rank should use when several ranks share a node: local_rank modulo the device count.
int cuda_device_for_local_rank(int local_rank);

/// CUDA backend on `device`: cuBLAS (FP32, TF32 off) for GEMMs; deterministic kernels (no unordered
/// floating-point atomics) for everything else, so repeated runs are bit-identical.
/// Throws CudaError when the device cannot be used.
std::unique_ptr<Backend> make_cuda_backend(int device);

/// NCCL communicator over every rank of `comm`, on `be`'s device and stream (`be` must be a CUDA
/// backend). Collective. Pins NCCL_ALGO=Ring and NCCL_PROTO=Simple unless the user set them, so
/// repeated runs sum in the same order. Defined only in builds with NCCL (RESIL_HAVE_NCCL); programs
/// hand it to register_nccl_provider.
std::unique_ptr<DeviceComm> make_nccl_comm(Backend& be, const Comm& comm);

}  // namespace resil::train
