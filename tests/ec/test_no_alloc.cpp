// The hot calls must not allocate: count operator new calls around them. The replacement of the
// global allocation functions is why this test is its own executable.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "ec_test_util.hpp"
#include "resil/ec/codec.hpp"
#include "resil/ec/ledger.hpp"

namespace {
std::atomic<long> g_news{0};
}

// Every non-aligned form is replaced, so each allocation and its release go through the same
// pair (malloc/free, which ASan still checks). The aligned forms keep the library's own pair.
namespace {
void* counted_alloc(std::size_t n) noexcept {
  g_news.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
}  // namespace

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  if (void* p = counted_alloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = counted_alloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

using namespace resil;
using namespace resil::ec;

TEST_CASE("encode, update, decode and apply_once do not allocate once a pattern is planned", "[ec][unit]") {
  const Codec codec(6, 3);
  ec::test::Fragments f(9, 4096);
  ec::test::Fragments out(3, 4096);
  Rng rng(83, 0);
  for (int i = 0; i < 6; ++i) ec::test::fill_random(f[i], rng);
  const auto data = f.cspans(0, 6);
  const auto parity = f.spans(6, 3);
  const std::vector<int> erased = {4, 0, 7};
  const auto& plan = codec.plan(erased);  // builds (and allocates) once
  std::vector<ConstBytes> src;
  for (int s : plan.sources()) src.push_back(f[s]);
  const auto dst = out.spans(0, 3);
  DeltaLedger ledger(6);

  const long before = g_news.load();
  codec.encode(data, parity);
  codec.encode_row(1, data, parity[1]);
  codec.update(2, 100, f[0].subspan(0, 256), parity);
  codec.update_row(0, 2, 100, f[0].subspan(0, 256), parity[0]);
  codec.decode(erased, src, dst);
  codec.decode(plan, src, dst);
  const bool applied = apply_once(codec, ledger, {1, 2}, 2, 0, f[0].subspan(0, 64), parity);
  const long after = g_news.load();
  CHECK(applied);
  CHECK(after - before == 0);
  // Control: the counter does see allocations. Explicit calls of the allocation functions: a
  // compiler may leave out the allocations of new-expressions and of std::allocator, not these.
  void* volatile probe = ::operator new(16);
  ::operator delete(probe);
  void* volatile probe_array = ::operator new[](16);
  ::operator delete[](probe_array);
  CHECK(g_news.load() - after == 2);
}
