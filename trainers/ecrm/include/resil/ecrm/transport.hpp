// The messages of the ECRM protocol and the transport they travel over.
//
// The shard store, the row exchange, the parity deltas and the recovery talk to the other ranks
// only through `Transport`: collectives every rank enters in the same order. The MPI implementation
// (over train::Comm, make_comm_transport) is the only one that ships; the tests drive the same
// protocol code over an in-process transport with several simulated ranks on threads
// (tests/ecrm/inproc_transport.hpp).
//
// Determinism: allreduce_sum_ordered sums in rank order (rank 0 + 1 + ...), so a run's result
// depends only on the world size, never on arrival order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace resil::train {
class Comm;
}

namespace resil::ecrm {

using ByteVec = std::vector<std::byte>;
using ByteView = std::span<const std::byte>;

/// What every rank sent to this one in an exchange, kept in the one receive buffer (no copy per
/// sender): from(r) is rank r's message.
class Inbox {
public:
  Inbox() = default;
  /// `at`: size + 1 offsets into `data`.
  Inbox(ByteVec data, std::vector<std::size_t> at) : data_(std::move(data)), at_(std::move(at)) {}
  ByteView from(int r) const noexcept {
    const auto i = static_cast<std::size_t>(r);
    return {data_.data() + at_[i], at_[i + 1] - at_[i]};
  }
  int size() const noexcept { return static_cast<int>(at_.size()) - 1; }

private:
  ByteVec data_;
  std::vector<std::size_t> at_;
};

class Transport {
public:
  virtual ~Transport() = default;
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;

  /// Personalised all-to-all: `counts[r]` bytes to rank r, written by `pack` into one buffer laid
  /// out rank by rank; `while_waiting`, if given, runs while the data travel (work the exchange
  /// does not depend on). Returns what each rank sent here.
  virtual Inbox alltoallv(const std::vector<std::size_t>& counts, const std::function<void(std::byte*)>& pack,
                          const std::function<void()>& while_waiting) const = 0;
  virtual void allreduce_sum_ordered(std::vector<float>& buf) const = 0;
  virtual void allreduce_sum_ordered(std::vector<double>& buf) const = 0;
  /// Element-wise maximum over ranks.
  virtual void allreduce_max(std::vector<int>& buf) const = 0;
  virtual void bcast(ByteVec& buf, int root) const = 0;  // buf must already have the root's size everywhere
  virtual void bcast(std::uint64_t& v, int root) const = 0;
  /// All ranks' buffers to `root` (others get an empty result).
  virtual std::vector<ByteVec> gather(const ByteVec& mine, int root) const = 0;
  virtual void barrier() const = 0;

  // ---- built on the above ----
  /// out[r] goes to rank r.
  Inbox exchange(const std::vector<ByteVec>& out, const std::function<void()>& while_waiting = {}) const;
  /// Several parts per destination, sent as one message without concatenating them first: rank r
  /// receives, for each part p in order, [u64 size][(*p)[r]] (read them back with Reader::part). A
  /// null part is empty for every rank.
  Inbox exchange_parts(std::initializer_list<const std::vector<ByteVec>*> parts) const;
  int allreduce_max(int v) const;
};

/// The MPI transport: train::Comm's collectives (non-blocking, waited on politely, see
/// Comm::set_poll_us). `comm` must outlive it.
std::unique_ptr<Transport> make_comm_transport(const train::Comm& comm);

/// Append plain values to a byte buffer (the wire format of every ECRM message).
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

/// Read them back; a message shorter than its reader expects is an EcError naming `what`.
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

}  // namespace resil::ecrm
