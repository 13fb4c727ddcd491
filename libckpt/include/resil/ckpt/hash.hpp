// Hashes: XXH64 for dataset checksums (fast, streamed); SHA-256, of a file's sample (the default) or
// of all of it, for file identity in flip logs (docs/reference/flip-log.md#file-identity).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

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

/// How a flip log identifies a file: not at all, by the SHA-256 of its size and a fixed sample of
/// its bytes (sample_sha256_file), or by the SHA-256 of all of it.
enum class FileHash { none, sample_sha256, sha256 };
/// Their names, as logged (header "hash") and as `inject --hash` takes them.
inline constexpr std::pair<std::string_view, FileHash> file_hash_names[] = {
    {"sample-sha256", FileHash::sample_sha256}, {"sha256", FileHash::sha256}, {"none", FileHash::none}};
std::string_view file_hash_name(FileHash h) noexcept;
std::optional<FileHash> parse_file_hash(std::string_view name) noexcept;

/// The sample of sample_sha256_file: a file of at most `sample_whole` bytes is read whole; a larger
/// one as its first and last `sample_edge` bytes and `sample_blocks` blocks of `sample_block` bytes
/// evenly spaced between them (1.1 MiB, whatever the file's size).
inline constexpr std::uint64_t sample_whole = std::uint64_t{4} << 20, sample_edge = std::uint64_t{64} << 10, sample_block = 4096;
inline constexpr unsigned sample_blocks = 256;
/// SHA-256 (64 lowercase hex digits) of the byte string
///   "resil-sample-sha256/1" 0x00, le64(file size), then for each sampled range in file order:
///   le64(offset), le64(length), the range's bytes.
/// Sampled ranges: [0, size) when size <= sample_whole; otherwise [0, sample_edge), then for
/// k = 0..sample_blocks-1 [o_k, o_k + sample_block) with o_k = sample_edge + floor(k * (size -
/// 2 * sample_edge - sample_block) / (sample_blocks - 1)) rounded down to a multiple of
/// sample_block, then [size - sample_edge, size).
/// It reads 1.1 MiB of a large file, so it tells apart files that differ in size or in a sampled
/// byte, not files that differ only elsewhere. IoError naming the file (also if it shrinks meanwhile).
std::string sample_sha256_file(const std::filesystem::path& p);
/// The file's hash by `h` ("" for FileHash::none).
std::string file_hash(const std::filesystem::path& p, FileHash h);

std::string hex_u64(std::uint64_t v);  // 16 hex digits, zero-padded
}  // namespace resil::ckpt
