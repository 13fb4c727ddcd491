// Collectives and point-to-point messages between ranks (MPI; a single-process stand-in when the
// build has no MPI). Only trainers/ and apps/ include MPI.
//
// Determinism: allreduce_sum reduces in rank order (gather to rank 0, sum rank 0 + 1 + ... in
// that order, broadcast), so a data-parallel run's result depends only on the world size, not on
// the MPI library's choice of reduction algorithm or message arrival order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace resil::train {

/// Owns MPI_Init / MPI_Finalize (no-op without MPI, or when MPI was initialised by someone else).
class MpiSession {
public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

class Comm {
public:
  /// MPI_COMM_WORLD when MPI is initialised; otherwise a world of one.
  static Comm world();
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  /// Rank among the processes on this node (MPI_Comm_split_type SHARED): picks the GPU.
  /// Collective: every rank calls it at the same point.
  int local_rank() const;

  void allreduce_sum(std::vector<float>& buf) const;
  void allreduce_sum(std::vector<double>& buf) const;
  /// Maximum over ranks (used to agree on failures).
  int allreduce_max(int v) const;
  void bcast(std::vector<double>& buf, int root) const;
  void send(const float* p, std::size_t n, int dest, int tag) const;
  void recv(float* p, std::size_t n, int src, int tag) const;
  void barrier() const;
  /// Terminate every rank (an error only this rank saw): MPI_Abort with `code`.
  [[noreturn]] void abort(int code) const;

private:
  Comm(int rank, int size) : rank_(rank), size_(size) {}
  int rank_ = 0, size_ = 1;
};

}  // namespace resil::train
