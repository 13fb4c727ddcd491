// RAII for POSIX file descriptors and memory mappings: one owner each, moved never copied, released
// in the destructor (which never throws), so no path (an exception included) leaks a descriptor or a
// mapping.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <utility>

namespace resil {

/// An owned file descriptor; -1 when empty. `release()` hands it over without closing.
class Fd {
public:
  Fd() noexcept = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  int release() noexcept { return std::exchange(fd_, -1); }
  /// Close the owned descriptor (its close() result is ignored: use close() to see it) and own `fd`.
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  /// Close now and report close()'s result (0, or -1 with errno set): for writes whose errors matter.
  int close() noexcept {
    const int r = fd_ >= 0 ? ::close(fd_) : 0;
    fd_ = -1;
    return r;
  }

private:
  int fd_ = -1;
};

/// An owned memory mapping (`mmap` result and length); empty when `data() == nullptr`.
class Mapping {
public:
  Mapping() noexcept = default;
  /// Map `length` bytes of `fd` at `offset`; empty (check `bool`) when mmap fails, errno set.
  static Mapping map(int fd, std::size_t length, int prot, int flags, off_t offset = 0) noexcept {
    void* p = length ? ::mmap(nullptr, length, prot, flags, fd, offset) : MAP_FAILED;
    return p == MAP_FAILED ? Mapping{} : Mapping{p, length};
  }
  Mapping(Mapping&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  Mapping& operator=(Mapping&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { reset(); }

  std::byte* data() const noexcept { return static_cast<std::byte*>(p_); }
  std::size_t size() const noexcept { return n_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  void reset() noexcept {
    if (p_) ::munmap(p_, n_);
    p_ = nullptr;
    n_ = 0;
  }

private:
  Mapping(void* p, std::size_t n) noexcept : p_(p), n_(n) {}
  void* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace resil
