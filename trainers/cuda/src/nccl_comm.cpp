// NCCL device collectives for --reduce nccl: dp gradients summed with ncclAllReduce, mp activations
// and gradients moved with ncclSend/ncclRecv, all on the CUDA backend's stream (so they are ordered
// with its kernels and need no host synchronisation). One communicator per run over every rank;
// the ncclUniqueId travels from rank 0 over MPI.
//
// Determinism: NCCL chooses an algorithm (Ring, Tree, NVLS, CollNet...) and a protocol (LL, LL128,
// Simple) per call from the message size and the topology, and they add the ranks' values in
// different orders. Pinning NCCL_ALGO=Ring and NCCL_PROTO=Simple (unless the user set them) fixes
// one order for a given world size, GPU topology and NCCL version: repeated runs are bit-identical.
// It is not the host path's rank order (0 + 1 + 2 + ...) for more than two ranks; with two ranks
// both compute x0 + x1 per element (IEEE addition commutes), so the results agree bit for bit.
#include <nccl.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "cuda_check.cuh"
#include "cuda_internal.hpp"
#include "nccl_check.hpp"
#include "resil/train/cuda.hpp"

namespace resil::train {

namespace {

/// Set NCCL's algorithm and protocol unless the user chose them; returns "NCCL_ALGO=..., NCCL_PROTO=...".
/// Must run before NCCL reads its environment (ncclGetUniqueId / ncclCommInitRank).
std::string pin_nccl_env() {
  setenv("NCCL_ALGO", "Ring", 0);
  setenv("NCCL_PROTO", "Simple", 0);
  return std::string("NCCL_ALGO=") + std::getenv("NCCL_ALGO") + ", NCCL_PROTO=" + std::getenv("NCCL_PROTO");
}

class NcclDeviceComm final : public DeviceComm {
public:
  NcclDeviceComm(cuda::NcclComm c, cudaStream_t s, std::string name) : comm_(std::move(c)), stream_(s), name_(std::move(name)) {}
  std::string name() const override { return name_; }

  void allreduce_sum(const std::vector<DeviceSpan>& bufs) override {
    RESIL_NCCL_CHECK(ncclGroupStart());
    for (const auto& b : bufs)
      if (b.size) {
        const ncclResult_t rc = ncclAllReduce(b.data, b.data, b.size, ncclFloat32, ncclSum, comm_.get(), stream_);
        if (rc != ncclSuccess) {
          (void)ncclGroupEnd();  // close the group before reporting; its own status adds nothing
          throw CudaError("ncclAllReduce of " + std::to_string(b.size) + " floats failed: " + cuda::nccl_message(rc));
        }
      }
    RESIL_NCCL_CHECK(ncclGroupEnd());
    check_async();
  }
  void send(const float* p, std::size_t n, int dest) override {
    if (n) RESIL_NCCL_CHECK(ncclSend(p, n, ncclFloat32, dest, comm_.get(), stream_));
    check_async();
  }
  void recv(float* p, std::size_t n, int src) override {
    if (n) RESIL_NCCL_CHECK(ncclRecv(p, n, ncclFloat32, src, comm_.get(), stream_));
    check_async();
  }

private:
  // Errors found by NCCL's proxy threads (a peer vanished, a network failure) surface here.
  void check_async() {
    ncclResult_t async = ncclSuccess;
    RESIL_NCCL_CHECK(ncclCommGetAsyncError(comm_.get(), &async));
    if (async != ncclSuccess && async != ncclInProgress)
      throw CudaError("NCCL communicator failed asynchronously (a peer or link failed): " + cuda::nccl_message(async));
  }
  cuda::NcclComm comm_;
  cudaStream_t stream_;
  std::string name_;
};

}  // namespace

std::unique_ptr<DeviceComm> make_nccl_comm(Backend& be, const Comm& comm) {
  const cuda::BackendStream bs = cuda::stream_of(be);
  const std::string pinned = pin_nccl_env();
  // Rank 0 creates the id; its status travels with it, so no rank waits for an id that never comes.
  struct {
    ncclUniqueId id;
    int rc;
  } msg{};
  if (comm.rank() == 0) msg.rc = static_cast<int>(ncclGetUniqueId(&msg.id));
  comm.bcast_bytes(&msg, sizeof msg, 0);
  if (msg.rc != static_cast<int>(ncclSuccess))
    throw CudaError(std::string("ncclGetUniqueId failed on rank 0: ") + ncclGetErrorString(static_cast<ncclResult_t>(msg.rc)));
  RESIL_CUDA_CHECK(cudaSetDevice(bs.device));
  ncclComm_t raw = nullptr;
  RESIL_NCCL_CHECK(ncclCommInitRank(&raw, comm.size(), msg.id, comm.rank()));
  cuda::NcclComm owned(raw);
  int version = 0;
  RESIL_NCCL_CHECK(ncclGetVersion(&version));
  // NCCL_VERSION_CODE: major*10000 + minor*100 + patch since 2.9.
  const std::string v = std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." + std::to_string(version % 100);
  return std::make_unique<NcclDeviceComm>(std::move(owned), bs.stream, "nccl " + v + " (" + pinned + ")");
}

}  // namespace resil::train
