// Internal to resil::inject: split a loop over n items between this thread and one more.
#pragma once

#include <cstddef>
#include <future>

namespace resil::inject::detail {

/// fn(0, n) on this thread when n < from; else fn(0, n / 2) here and fn(n / 2, n) on a second
/// thread (per-word system calls and page faults, record formatting: work two cores do side by
/// side). Both halves have finished when it returns; an exception from either is rethrown here.
template <class Fn>
void on_two_threads(std::size_t n, std::size_t from, Fn&& fn) {
  if (n < from) {
    fn(std::size_t{0}, n);
    return;
  }
  auto job = std::async(std::launch::async, [&] { fn(n / 2, n); });
  try {
    fn(std::size_t{0}, n / 2);
  } catch (...) {
    job.wait();
    throw;
  }
  job.get();
}

}  // namespace resil::inject::detail
