// The MPI calls ec-train makes, as one small class. Every collective is non-blocking and waited on
// "politely" (MPI_Test, then a short sleep), because ranks routinely oversubscribe the cores (6 ranks
// on 2 cores in the tests): MPICH's own blocking waits spin and starve the rank everyone waits for,
// which made one alltoall 30 ms instead of ~1 ms on the 2-core development machine.
//
// Determinism: allreduce_sum_ordered sums in rank order (gather, add rank 0 + 1 + ..., broadcast),
// so a run's result depends only on the world size, never on arrival order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace resil::ectrain {

using ByteVec = std::vector<std::byte>;
using ByteView = std::span<const std::byte>;

/// What every rank sent to this one in an exchange, kept in the one receive buffer (no copy per
/// sender): from(r) is rank r's message.
class Inbox {
public:
  ByteView from(int r) const noexcept { return {data_.data() + at_[static_cast<std::size_t>(r)], at_[static_cast<std::size_t>(r) + 1] - at_[static_cast<std::size_t>(r)]}; }
  int size() const noexcept { return static_cast<int>(at_.size()) - 1; }

private:
  friend class Mpi;
  ByteVec data_;
  std::vector<std::size_t> at_;  // size + 1 offsets
};

class Mpi {
public:
  /// The world communicator of an initialised MPI. `poll_us`: sleep between polls (0 = spin).
  explicit Mpi(int poll_us = 20);
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }

  /// Personalised all-to-all of byte buffers: out[r] goes to rank r; returns what each rank sent here.
  /// `while_waiting`, if given, runs once after the data exchange is posted and before it is
  /// waited on (work that the exchange does not depend on, overlapped with it).
  Inbox exchange(const std::vector<ByteVec>& out, const std::function<void()>& while_waiting = {}) const;
  /// The same with several parts per destination, sent as one message without concatenating them
  /// first: rank r receives, for each part p in order, [u64 size][(*p)[r]] (read them back with
  /// Reader::part). A null part is empty for every rank.
  Inbox exchange_parts(std::initializer_list<const std::vector<ByteVec>*> parts) const;
  void allreduce_sum_ordered(std::vector<float>& buf) const;
  void allreduce_sum_ordered(std::vector<double>& buf) const;
  /// Element-wise maximum over ranks.
  void allreduce_max(std::vector<int>& buf) const;
  int allreduce_max(int v) const;
  void bcast(ByteVec& buf, int root) const;  // buf must already have the root's size everywhere
  void bcast(std::uint64_t& v, int root) const;
  /// All ranks' buffers to `root` (others get an empty result).
  std::vector<ByteVec> gather(const ByteVec& mine, int root) const;
  void barrier() const;
  [[noreturn]] void abort(int code) const;

private:
  void wait(void* request) const;
  Inbox exchange_impl(std::initializer_list<const std::vector<ByteVec>*> parts, bool framed,
                      const std::function<void()>& while_waiting) const;
  int rank_ = 0, size_ = 1, poll_us_ = 20;
};

/// Append / read plain values to a byte buffer (the wire format of every ec-train message).
class Writer {
public:
  explicit Writer(ByteVec& b) : b_(b) {}
  template <class T> void put(const T& v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    b_.insert(b_.end(), p, p + sizeof(T));
  }
  void put_bytes(const std::byte* p, std::size_t n) { b_.insert(b_.end(), p, p + n); }
  /// n more bytes at the end, to be filled by the caller.
  std::byte* grow(std::size_t n) {
    b_.resize(b_.size() + n);
    return b_.data() + b_.size() - n;
  }

private:
  ByteVec& b_;
};

class Reader {
public:
  Reader(ByteView b, std::string what) : b_(b), what_(std::move(what)) {}
  template <class T> T get() {
    T v;
    copy_out(&v, sizeof(T));
    return v;
  }
  const std::byte* take(std::size_t n);
  /// One framed part of an exchange_parts message: [u64 size][bytes].
  ByteView part() {
    const auto n = get<std::uint64_t>();
    return {take(static_cast<std::size_t>(n)), static_cast<std::size_t>(n)};
  }
  bool done() const noexcept { return pos_ == b_.size(); }

private:
  void copy_out(void* dst, std::size_t n);
  ByteView b_;
  std::size_t pos_ = 0;
  std::string what_;
};

}  // namespace resil::ectrain
