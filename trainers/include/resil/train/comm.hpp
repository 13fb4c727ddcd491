// Collectives and point-to-point messages between ranks (MPI; a single-process stand-in when the
// build has no MPI). Only trainers/ and apps/ include MPI.
//
// Determinism: allreduce_sum reduces in rank order (gather to rank 0, sum rank 0 + 1 + ... in
// that order, broadcast), so a data-parallel run's result depends only on the world size, not on
// the MPI library's choice of reduction algorithm or message arrival order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace resil::train {

class Backend;

/// Owns MPI_Init / MPI_Finalize (no-op without MPI, when MPI was initialised by someone else, or
/// when no MPI launcher started the process: see comm.cpp; RESIL_MPI=1 forces the init).
class MpiSession {
public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

/// Comm::set_poll_us's non-positive settings (0 spins).
inline constexpr int poll_yield = -1;
inline constexpr int poll_auto = -2;
/// Sleep backoff_first_us after the first poll that finds the request pending, twice as long after
/// each further one, at most backoff_cap_us.
inline constexpr int poll_backoff = -3;
inline constexpr long backoff_first_us = 20, backoff_cap_us = 160;
/// "auto", "yield", "spin" or "sleep N us": the wait a report or summary records.
std::string poll_name(int us);

class Comm {
public:
  /// MPI_COMM_WORLD when MPI is initialised; otherwise a world of one.
  static Comm world();
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  /// Rank among the processes on this node (MPI_Comm_split_type SHARED): picks the GPU.
  /// Collective: every rank calls it at the same point.
  int local_rank() const;
  /// Number of processes on this node (same split as local_rank). Collective.
  int local_size() const;

  /// How every wait polls MPI_Test (mpi_check.hpp): `us` > 0 sleeps that many microseconds
  /// between polls, 0 spins, poll_yield gives the core to any other runnable process between polls,
  /// poll_backoff sleeps longer the longer the wait, poll_auto (collective: every rank calls it)
  /// picks poll_yield when every process on this node can have a CPU of its own (cpu_per_process)
  /// and `crowded` when not: ec-train's exchanges want the 20 µs sleep (a step is a chain of short
  /// waits), ckpt-train's compute-bound steps poll_backoff. Default: 20 µs.
  void set_poll_us(int us, int crowded = 20);
  int poll_us() const noexcept { return poll_us_; }
  /// Whether the processes on this node are no more than the CPUs they may run on (the union of
  /// their affinity masks). Collective.
  bool cpu_per_process() const;

  void allreduce_sum(std::vector<float>& buf) const;
  void allreduce_sum(std::vector<double>& buf) const;
  /// Maximum over ranks (how ranks agree on failures).
  int allreduce_max(int v) const;
  /// Element-wise maximum over ranks.
  void allreduce_max(std::vector<int>& buf) const;
  void bcast(std::vector<double>& buf, int root) const;
  /// Broadcast a 64-bit value exactly (seeds; a double holds only 53 bits).
  void bcast(std::uint64_t& v, int root) const;
  /// Broadcast raw bytes (e.g. an ncclUniqueId) from `root`.
  void bcast_bytes(void* p, std::size_t n, int root) const;
  /// Every rank's bytes to `root`, by rank (the other ranks get an empty result). Vectors, not
  /// spans: nvcc compiles this header as C++17.
  std::vector<std::vector<std::byte>> gather(const std::vector<std::byte>& mine, int root) const;

  /// What an all-to-all delivered to this rank: rank r's bytes are data[offsets[r], offsets[r + 1]).
  struct Received {
    std::vector<std::byte> data;
    std::vector<std::size_t> offsets;  // size() + 1 entries
  };
  /// Personalised all-to-all of bytes (MPI_Alltoall of the counts, then MPI_Alltoallv):
  /// `send_counts[r]` bytes go to rank r. `pack` fills the send buffer (rank 0's bytes first, then
  /// rank 1's, ...) while the counts travel; `while_waiting`, when given, runs once after the data
  /// exchange is posted and before it is waited on (work the exchange does not depend on).
  Received alltoallv(const std::vector<std::size_t>& send_counts, const std::function<void(std::byte*)>& pack,
                     const std::function<void()>& while_waiting = {}) const;
  void send(const float* p, std::size_t n, int dest, int tag) const;
  void recv(float* p, std::size_t n, int src, int tag) const;
  void barrier() const;
  /// Terminate every rank (an error only this rank saw): MPI_Abort with `code`.
  [[noreturn]] void abort(int code) const;

private:
  Comm(int rank, int size) : rank_(rank), size_(size) {}
  int rank_ = 0, size_ = 1, poll_us_ = 20;
};

// ---------------------------------------------------------------- device collectives (NCCL)
// With --reduce nccl on the CUDA backend, dp gradients are summed and mp activations/gradients
// moved in device memory, stream-ordered with the backend's kernels, instead of through host
// memory and MPI. trainers/ stays free of CUDA: a program linked with NCCL registers the factory.

/// n floats in backend memory (never dereferenced on the host). Plain struct: this header is also
/// compiled as C++17 by nvcc, which has no std::span.
struct DeviceSpan {
  float* data = nullptr;
  std::size_t size = 0;
};

/// Collectives on backend (device) memory. Every rank calls them in the same order.
class DeviceComm {
public:
  virtual ~DeviceComm() = default;
  /// E.g. "nccl 2.28.9 (NCCL_ALGO=Ring, NCCL_PROTO=Simple)".
  virtual std::string name() const = 0;
  /// In-place sum over ranks of every buffer (one NCCL group). The order in which a ring adds the
  /// ranks' values is fixed for a given world size, NCCL version and configuration, so repeated
  /// runs are bit-identical; it is not the host path's rank order for more than two ranks.
  virtual void allreduce_sum(const std::vector<DeviceSpan>& bufs) = 0;
  virtual void send(const float* p, std::size_t n, int dest) = 0;
  virtual void recv(float* p, std::size_t n, int src) = 0;
};

/// The NCCL entry points (trainers/cuda), as plain function pointers.
struct NcclProvider {
  /// A communicator over every rank of `comm` on the backend's device and stream (collective).
  std::unique_ptr<DeviceComm> (*make)(Backend& be, const Comm& comm) = nullptr;
  int (*device_count)() noexcept = nullptr;
};
void register_nccl_provider(const NcclProvider& p);
bool nccl_built() noexcept;

/// --reduce auto|host|nccl for a run on `device` ("cpu" | "cuda", already resolved):
/// auto -> nccl on cuda when NCCL is built and every rank of a node has its own GPU, else host.
/// nccl on cpu, without NCCL, or with ranks sharing a GPU (NCCL >= 2.5 refuses two ranks on one
/// device) is a UsageError. Collective when comm.size() > 1 (ranks agree on the answer).
std::string resolve_reduce(const std::string& requested, const std::string& device, const Comm& comm);

/// The NCCL communicator for a run that resolved to --reduce nccl (UsageError when not built).
std::unique_ptr<DeviceComm> make_device_comm(Backend& be, const Comm& comm);

}  // namespace resil::train
