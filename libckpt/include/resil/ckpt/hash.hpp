// Hashes: XXH64 for dataset checksums (fast, streamed), SHA-256 for file identity in flip logs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

namespace resil::ckpt {

std::uint64_t xxh64(std::span<const std::byte> bytes, std::uint64_t seed = 0) noexcept;

/// Streaming XXH64.
class Xxh64 {
public:
  explicit Xxh64(std::uint64_t seed = 0);
  ~Xxh64();
  Xxh64(const Xxh64&) = delete;
  Xxh64& operator=(const Xxh64&) = delete;
  void update(std::span<const std::byte> bytes) noexcept;
  std::uint64_t digest() const noexcept;

private:
  void* state_;
};

/// XXH64 of a file's bytes (IoError naming it).
std::uint64_t xxh64_file(const std::filesystem::path& p);
/// SHA-256 of a file's bytes as 64 lowercase hex digits (OpenSSL libcrypto).
std::string sha256_file(const std::filesystem::path& p);
std::string sha256_hex(std::span<const std::byte> bytes);

std::string hex_u64(std::uint64_t v);  // 16 hex digits, zero-padded
}  // namespace resil::ckpt
