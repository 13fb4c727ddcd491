#include "resil/ckpt/hash.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <openssl/evp.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "resil/core/error.hpp"

namespace resil::ckpt {

std::uint64_t xxh64(std::span<const std::byte> bytes, std::uint64_t seed) noexcept {
  return XXH64(bytes.data(), bytes.size(), seed);
}

Xxh64::Xxh64(std::uint64_t seed) : state_(XXH64_createState()) {
  if (!state_) throw std::bad_alloc();
  XXH64_reset(static_cast<XXH64_state_t*>(state_), seed);
}
Xxh64::~Xxh64() { XXH64_freeState(static_cast<XXH64_state_t*>(state_)); }
void Xxh64::update(std::span<const std::byte> b) noexcept { XXH64_update(static_cast<XXH64_state_t*>(state_), b.data(), b.size()); }
std::uint64_t Xxh64::digest() const noexcept { return XXH64_digest(static_cast<XXH64_state_t*>(state_)); }

namespace {
std::string to_hex(const unsigned char* d, unsigned n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (unsigned i = 0; i < n; ++i) {
    s[2 * i] = digits[d[i] >> 4];
    s[2 * i + 1] = digits[d[i] & 15];
  }
  return s;
}
struct Md {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  Md() {
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1) throw Error("OpenSSL SHA-256 init failed");
  }
  ~Md() { EVP_MD_CTX_free(ctx); }
  void update(const void* p, std::size_t n) { EVP_DigestUpdate(ctx, p, n); }
  std::string hex() {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    EVP_DigestFinal_ex(ctx, d, &n);
    return to_hex(d, n);
  }
};
}  // namespace

std::string sha256_hex(std::span<const std::byte> bytes) {
  Md md;
  md.update(bytes.data(), bytes.size());
  return md.hex();
}

namespace {
// Read a whole file in 4 MiB blocks; IoError naming it.
template <class Fn>
void each_block(const std::filesystem::path& p, Fn&& fn) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError(p.string() + ": cannot open: " + std::strerror(errno));
  std::vector<char> buf(std::size_t{4} << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      throw IoError(p.string() + ": read failed: " + std::strerror(errno));
    }
    if (n == 0) break;
    fn(buf.data(), static_cast<std::size_t>(n));
  }
  ::close(fd);
}
}  // namespace

std::string sha256_file(const std::filesystem::path& p) {
  Md md;
  each_block(p, [&](const char* d, std::size_t n) { md.update(d, n); });
  return md.hex();
}

std::string_view file_hash_name(FileHash h) noexcept {
  for (const auto& [name, v] : file_hash_names)
    if (v == h) return name;
  return "none";
}

std::optional<FileHash> parse_file_hash(std::string_view name) noexcept {
  for (const auto& [n, v] : file_hash_names)
    if (n == name) return v;
  return std::nullopt;
}

std::string sample_sha256_file(const std::filesystem::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError(p.string() + ": cannot open: " + std::strerror(errno));
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw IoError(p.string() + ": cannot stat: " + std::strerror(errno));
  const auto size = static_cast<std::uint64_t>(st.st_size);
  // A sampled page that is not cached is read alone, not with the kernel's readahead around it.
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
  Md md;
  const auto le64 = [&](std::uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
    md.update(b, 8);
  };
  static constexpr char tag[] = "resil-sample-sha256/1";
  md.update(tag, sizeof tag);  // with its terminating zero byte
  le64(size);
  std::vector<char> buf(static_cast<std::size_t>(sample_edge));
  const auto take = [&](std::uint64_t off, std::uint64_t len) {
    le64(off);
    le64(len);
    while (len > 0) {
      const ssize_t n = ::pread(fd, buf.data(), static_cast<std::size_t>(std::min<std::uint64_t>(len, buf.size())), static_cast<off_t>(off));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw IoError(p.string() + ": read failed: " + std::strerror(errno));
      if (n == 0) throw IoError(p.string() + ": the file shrank while it was being hashed");
      md.update(buf.data(), static_cast<std::size_t>(n));
      off += static_cast<std::uint64_t>(n);
      len -= static_cast<std::uint64_t>(n);
    }
  };
  if (size <= sample_whole) {
    take(0, size);
  } else {
    take(0, sample_edge);
    // floor(k * span / d) without overflow: span = q d + r, so it is k q + floor(k r / d); each block
    // then starts on a 4 KiB boundary (one page of the page cache).
    const std::uint64_t span = size - 2 * sample_edge - sample_block, d = sample_blocks - 1, q = span / d, r = span % d;
    for (std::uint64_t k = 0; k < sample_blocks; ++k) take((sample_edge + k * q + k * r / d) / sample_block * sample_block, sample_block);
    take(size - sample_edge, sample_edge);
  }
  return md.hex();
}

std::string file_hash(const std::filesystem::path& p, FileHash h) {
  switch (h) {
    case FileHash::none: return "";
    case FileHash::sample_sha256: return sample_sha256_file(p);
    case FileHash::sha256: return sha256_file(p);
  }
  return "";
}

std::uint64_t xxh64_file(const std::filesystem::path& p) {
  Xxh64 h;
  each_block(p, [&](const char* d, std::size_t n) { h.update(std::as_bytes(std::span(d, n))); });
  return h.digest();
}

std::string hex_u64(std::uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

}  // namespace resil::ckpt
