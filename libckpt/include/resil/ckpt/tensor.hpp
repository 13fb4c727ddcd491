// An owning host tensor: dtype, shape (any rank, including >= 5-D and 0-D scalars), raw bytes in
// native byte order and C (row-major) order. This is what libckpt reads and writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "resil/core/error.hpp"
#include "resil/ckpt/dtype.hpp"

namespace resil::ckpt {

using Shape = std::vector<std::uint64_t>;

inline std::uint64_t shape_numel(const Shape& s) noexcept {
  std::uint64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}
std::string shape_string(const Shape& s);

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<std::int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<std::int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<std::int16_t>() { return DType::i16; }
template <> constexpr DType dtype_of<std::int8_t>() { return DType::i8; }
template <> constexpr DType dtype_of<std::uint64_t>() { return DType::u64; }
template <> constexpr DType dtype_of<std::uint32_t>() { return DType::u32; }
template <> constexpr DType dtype_of<std::uint16_t>() { return DType::u16; }
template <> constexpr DType dtype_of<std::uint8_t>() { return DType::u8; }

namespace detail {
/// Buffers of at least this many bytes are 2 MiB aligned and advised for transparent huge pages:
/// filling a 1 GiB tensor from disk then takes 512 page faults instead of 262,144.
inline constexpr std::size_t huge_page_bytes = std::size_t{2} << 20;
inline constexpr std::size_t huge_threshold = std::size_t{4} << 20;
void* allocate_large(std::size_t bytes);
void deallocate_large(void* p, std::size_t bytes) noexcept;
}  // namespace detail

/// Allocator that leaves elements default-initialised (no zero fill): reading a large tensor from
/// disk should touch its memory once, not twice. Large buffers are backed by huge pages.
template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U> struct rebind { using other = DefaultInitAllocator<U>; };
  using std::allocator<T>::allocator;
  T* allocate(std::size_t n) {
    if (n * sizeof(T) < detail::huge_threshold) return std::allocator<T>::allocate(n);
    return static_cast<T*>(detail::allocate_large(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) < detail::huge_threshold) std::allocator<T>::deallocate(p, n);
    else detail::deallocate_large(p, n * sizeof(T));
  }
  template <class U, class... Args> void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) == 0) ::new (static_cast<void*>(p)) U;
    else ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

class Tensor {
public:
  Tensor() = default;
  /// Zero-filled tensor.
  Tensor(DType dtype, Shape shape) : Tensor(dtype, std::move(shape), uninitialized) {
    if (!bytes_.empty()) std::memset(bytes_.data(), 0, bytes_.size());
  }
  struct Uninitialized {};
  static constexpr Uninitialized uninitialized{};
  /// Tensor whose bytes are left as allocated (the caller overwrites all of them).
  Tensor(DType dtype, Shape shape, Uninitialized)
      : dtype_(dtype), shape_(std::move(shape)), bytes_(shape_numel(shape_) * dtype_size(dtype_)) {}

  /// Copy typed data in: `Tensor::from<float>({2,3}, values)`.
  template <class T>
  static Tensor from(Shape shape, std::span<const T> values) {
    Tensor t(dtype_of<T>(), std::move(shape), uninitialized);
    if (values.size() != t.numel())
      throw UsageError("Tensor::from: " + std::to_string(values.size()) + " values for shape " + shape_string(t.shape_));
    if (t.nbytes() > 0) std::memcpy(t.bytes_.data(), values.data(), t.nbytes());  // empty spans may hold nullptr
    return t;
  }

  DType dtype() const noexcept { return dtype_; }
  const Shape& shape() const noexcept { return shape_; }
  std::size_t rank() const noexcept { return shape_.size(); }
  std::uint64_t numel() const noexcept { return shape_numel(shape_); }
  std::size_t nbytes() const noexcept { return bytes_.size(); }
  std::span<std::byte> bytes() noexcept { return bytes_; }
  std::span<const std::byte> bytes() const noexcept { return bytes_; }

  /// Typed view; throws UsageError when T does not match the dtype (bf16/f16 have no C++ type: use u16 words()).
  template <class T> std::span<T> as() {
    check<T>();
    return {reinterpret_cast<T*>(bytes_.data()), static_cast<std::size_t>(numel())};
  }
  template <class T> std::span<const T> as() const {
    check<T>();
    return {reinterpret_cast<const T*>(bytes_.data()), static_cast<std::size_t>(numel())};
  }

  bool operator==(const Tensor& o) const noexcept {
    return dtype_ == o.dtype_ && shape_ == o.shape_ && bytes_ == o.bytes_;
  }

private:
  template <class T> void check() const {
    const bool ok = sizeof(T) == dtype_size(dtype_) &&
                    (dtype_ == dtype_of<T>() ||
                     (std::is_same_v<T, std::uint16_t> && (dtype_ == DType::f16 || dtype_ == DType::bf16 || dtype_ == DType::u16)));
    if (!ok) throw UsageError(std::string("tensor of dtype ") + std::string(dtype_name(dtype_)) + " viewed with a different C++ type");
  }

  DType dtype_ = DType::f32;
  Shape shape_;
  std::vector<std::byte, DefaultInitAllocator<std::byte>> bytes_;
};

}  // namespace resil::ckpt
