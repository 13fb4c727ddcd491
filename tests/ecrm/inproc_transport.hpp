// An in-process ecrm::Transport for tests: N simulated ranks on N threads of one process, meeting
// at a barrier for every collective. The protocol code under test (shard store, row exchange,
// parity deltas, recovery) is the real one; only the wire is replaced. Collectives keep MPI's
// semantics that the protocol relies on: every rank enters them in the same order, ordered sums
// add rank 0 + 1 + ... in that order.
#pragma once

#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "resil/ecrm/transport.hpp"

namespace resil::ecrm::test {

class InProcHub {
public:
  explicit InProcHub(int n) : n_(n), posted_(static_cast<std::size_t>(n)), counts_(static_cast<std::size_t>(n)) {}
  int size() const noexcept { return n_; }

  /// Every rank arrives before any leaves. Throws when another rank failed (no deadlock).
  void sync() {
    std::unique_lock lock(mu_);
    if (poisoned_) throw std::runtime_error("another simulated rank failed");
    const auto gen = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != gen || poisoned_; });
    if (poisoned_) throw std::runtime_error("another simulated rank failed");
  }
  void poison() {
    std::lock_guard lock(mu_);
    poisoned_ = true;
    cv_.notify_all();
  }
  ByteVec& posted(int r) { return posted_[static_cast<std::size_t>(r)]; }
  std::vector<std::size_t>& counts(int r) { return counts_[static_cast<std::size_t>(r)]; }

private:
  int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  std::uint64_t generation_ = 0;
  bool poisoned_ = false;
  std::vector<ByteVec> posted_;
  std::vector<std::vector<std::size_t>> counts_;
};

class InProcTransport final : public Transport {
public:
  InProcTransport(InProcHub& hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return hub_.size(); }

  Inbox alltoallv(const std::vector<std::size_t>& counts, const std::function<void(std::byte*)>& pack,
                  const std::function<void()>& while_waiting) const override {
    std::size_t total = 0;
    for (auto c : counts) total += c;
    hub_.posted(rank_).assign(total, std::byte{0});
    if (pack) pack(hub_.posted(rank_).data());
    hub_.counts(rank_) = counts;
    hub_.sync();
    ByteVec data;
    std::vector<std::size_t> at{0};
    for (int r = 0; r < size(); ++r) {
      const auto& c = hub_.counts(r);
      std::size_t off = 0;
      for (int q = 0; q < rank_; ++q) off += c[static_cast<std::size_t>(q)];
      const auto* src = hub_.posted(r).data() + off;
      data.insert(data.end(), src, src + c[static_cast<std::size_t>(rank_)]);
      at.push_back(data.size());
    }
    if (while_waiting) while_waiting();
    hub_.sync();
    return Inbox(std::move(data), std::move(at));
  }
  void allreduce_sum_ordered(std::vector<float>& buf) const override { ordered_sum(buf); }
  void allreduce_sum_ordered(std::vector<double>& buf) const override { ordered_sum(buf); }
  void allreduce_max(std::vector<int>& buf) const override {
    const auto all = everyone(as_bytes(buf));
    for (const auto& b : all)
      for (std::size_t i = 0; i < buf.size(); ++i) {
        int v;
        std::memcpy(&v, b.data() + i * sizeof v, sizeof v);
        buf[i] = std::max(buf[i], v);
      }
  }
  void bcast(ByteVec& buf, int root) const override { buf = everyone(buf)[static_cast<std::size_t>(root)]; }
  void bcast(std::uint64_t& v, int root) const override {
    const auto all = everyone(as_bytes(std::vector<std::uint64_t>{v}));
    std::memcpy(&v, all[static_cast<std::size_t>(root)].data(), sizeof v);
  }
  std::vector<ByteVec> gather(const ByteVec& mine, int root) const override {
    auto all = everyone(mine);
    if (rank_ != root) all.clear();
    return all;
  }
  void barrier() const override {
    hub_.sync();
  }

private:
  template <class T> static ByteVec as_bytes(const std::vector<T>& v) {
    ByteVec b(v.size() * sizeof(T));
    if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
    return b;
  }
  // Every rank's buffer, by rank (a gather to all).
  std::vector<ByteVec> everyone(const ByteVec& mine) const {
    hub_.posted(rank_) = mine;
    hub_.sync();
    std::vector<ByteVec> all;
    for (int r = 0; r < size(); ++r) all.push_back(hub_.posted(r));
    hub_.sync();
    return all;
  }
  template <class T> void ordered_sum(std::vector<T>& buf) const {
    const auto all = everyone(as_bytes(buf));
    std::memcpy(buf.data(), all[0].data(), all[0].size());
    for (int r = 1; r < size(); ++r)
      for (std::size_t i = 0; i < buf.size(); ++i) {
        T v;
        std::memcpy(&v, all[static_cast<std::size_t>(r)].data() + i * sizeof(T), sizeof(T));
        buf[i] += v;
      }
  }

  InProcHub& hub_;
  int rank_;
};

/// Run fn(transport) on n simulated ranks (threads); rethrows the first rank's exception.
inline void run_ranks(int n, const std::function<void(const Transport&)>& fn) {
  InProcHub hub(n);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        InProcTransport t(hub, r);
        fn(t);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
        hub.poison();
      }
    });
  for (auto& t : threads) t.join();
  // The rank that failed first, not the ones that stopped because of it.
  for (auto& e : errors)
    if (e) try {
        std::rethrow_exception(e);
      } catch (const std::runtime_error& x) {
        if (std::string(x.what()) != "another simulated rank failed") throw;
      }
}

}  // namespace resil::ecrm::test
