#include <sys/mman.h>

#include <new>

#include "resil/ckpt/tensor.hpp"

namespace resil::ckpt::detail {

namespace {
std::size_t round_up(std::size_t bytes) { return (bytes + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes; }
}  // namespace

void* allocate_large(std::size_t bytes) {
  const std::size_t n = round_up(bytes);
  void* p = ::operator new(n, std::align_val_t{huge_page_bytes});
  // Advice only: where transparent huge pages are off the buffer is still correct, just faulted in
  // 4 KiB at a time.
  (void)::madvise(p, n, MADV_HUGEPAGE);
  return p;
}

void deallocate_large(void* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{huge_page_bytes}); }

}  // namespace resil::ckpt::detail
