// The storage layer's entry: the format of a file from its content, and the adapter that opens it.
#include "resil/inject/storage.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "resil/ckpt/fs.hpp"
#include "resil/core/fd.hpp"
#include "format_storages.hpp"
#include "resil/inject/file_set.hpp"
#include "resil/inject/formats/shard_index.hpp"
#include "resil/inject/hdf5_storage.hpp"

namespace resil::inject {

TensorRole schema_role(std::string_view path) noexcept {
  if (path.starts_with("/model/")) return TensorRole::model;
  // /optimizer/<param>/master: the fp32 master weights of mixed-precision training (bf16 gpt).
  if (path.starts_with("/optimizer/")) return path.ends_with("/master") ? TensorRole::master : TensorRole::optimizer;
  return TensorRole::other;
}

std::string_view format_name(Format f) noexcept {
  for (const auto& [name, value] : format_names)
    if (value == f) return name;
  return "?";
}

namespace {

constexpr std::array<unsigned char, 8> hdf5_magic{0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

bool has_prefix(std::span<const std::byte> head, std::string_view magic) {
  return head.size() >= magic.size() && std::memcmp(head.data(), magic.data(), magic.size()) == 0;
}

std::uint64_t le(std::span<const std::byte> b, std::size_t at, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v |= std::uint64_t(std::to_integer<unsigned>(b[at + i])) << (8 * i);
  return v;
}

}  // namespace

std::optional<Format> detect_format(std::span<const std::byte> head, std::uint64_t file_size,
                                    const std::function<bool(std::uint64_t)>& hdf5_signature_at) {
  // HDF5 first: its signature may follow a user block of 512, 1024, 2048, ... bytes, whose content
  // is anything (even another format's magic).
  for (std::uint64_t at = 0; at + hdf5_magic.size() <= file_size; at = at == 0 ? 512 : at * 2)
    if (hdf5_signature_at(at)) return Format::hdf5;
  if (has_prefix(head, "\x93NUMPY")) return Format::npy;
  if (has_prefix(head, "PK\x03\x04")) {
    // npz (numpy.savez) names every member NAME.npy; torch.save writes ARCHIVE/data.pkl first.
    if (head.size() >= 30) {
      const std::size_t n = le(head, 26, 2);
      if (head.size() >= 30 + n && n >= 4) {
        const std::string_view name(reinterpret_cast<const char*>(head.data()) + 30, n);
        if (name.ends_with(".npy")) return Format::npz;
      }
    }
    return Format::torch;
  }
  // A pickle stream (PROTO 2 to 5): legacy torch.save, whose parser tells a torch file (its magic
  // number first) from another pickle.
  if (head.size() >= 2 && head[0] == std::byte{0x80} && std::to_integer<unsigned>(head[1]) >= 2 && std::to_integer<unsigned>(head[1]) <= 5)
    return Format::torch;
  // safetensors: u64 little-endian header length, then a JSON object that fits in the file.
  if (head.size() >= 9 && file_size >= 9) {
    const std::uint64_t n = le(head, 0, 8);
    if (n >= 2 && n <= file_size - 8 && std::to_integer<char>(head[8]) == '{') return Format::safetensors;
  }
  return std::nullopt;
}

std::optional<Format> detect_format(const std::string& path) {
  if (struct stat st {}; ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    require_input(path);
    return directory_format(path);
  }
  // Missing, unreadable, or not a regular file (a FIFO would block the read): I/O errors, exit 3.
  ckpt::fs::require_input_file(path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError(path + ": cannot open: " + std::strerror(errno));
  Fd guard(fd);
  auto read_at = [&](std::uint64_t off, std::byte* buf, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(fd, buf + got, n - got, static_cast<off_t>(off + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw IoError(path + ": read failed: " + std::strerror(errno));
      if (r == 0) break;
      got += static_cast<std::size_t>(r);
    }
    return got;
  };
  const off_t end = ::lseek(fd, 0, SEEK_END);
  if (end < 0) throw IoError(path + ": cannot seek: " + std::strerror(errno));
  std::array<std::byte, 512> head{};
  const std::size_t n = read_at(0, head.data(), head.size());
  auto hdf5_at = [&](std::uint64_t off) {
    std::array<std::byte, 8> sig{};
    return read_at(off, sig.data(), sig.size()) == sig.size() && std::memcmp(sig.data(), hdf5_magic.data(), sig.size()) == 0;
  };
  const auto head_span = std::span<const std::byte>(head.data(), n);
  const auto found = detect_format(head_span, static_cast<std::uint64_t>(end), hdf5_at);
  // A DCP checkpoint's .metadata (a bare pickle) given for its directory: say so, as --format dcp
  // does, rather than that it is no torch.save file.
  if (const std::filesystem::path p(path); found == Format::torch && n > 0 && head[0] == std::byte{0x80} && p.filename() == ".metadata")
    throw IoError(path + ": a torch.distributed.checkpoint is named by its directory: give " +
                  (p.has_parent_path() ? p.parent_path().string() : std::string(".")) + ", not its .metadata");
  // A JSON object that is no safetensors header: a shard index (its parser says whether it is one).
  if (!found && formats::looks_like_json_object(head_span)) return Format::shards;
  if (found != Format::hdf5 || hdf5_at(0)) return found;
  // HDF5's signature after a user block, and another format's magic at offset 0: a tensor's bytes
  // may hold the signature (a .pt whose data has it at offset 1024), so the format at offset 0
  // wins when its parser takes the whole file; else the bytes before the signature are a user block.
  const auto first = detect_format(head_span, static_cast<std::uint64_t>(end), [](std::uint64_t) { return false; });
  if (!first) return found;
  try {
    open_storage(path, Access::read, *first)->close();
    return first;
  } catch (const CorruptInputError&) {
    return found;
  }
}

Format resolve_format(const std::string& path, Format forced) {
  if (forced != Format::automatic) return forced;
  if (const auto f = detect_format(path)) return *f;
  if (struct stat st {}; ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw IoError(path + ": is a directory without a DCP .metadata, a shard index (*.index.json) or *.safetensors files, not a checkpoint");
  throw CorruptInputError(path + ": unknown file format: not HDF5, torch.save (zip or legacy), safetensors, .npy, .npz or a shard index (no known signature)");
}

std::unique_ptr<Storage> open_storage(const std::string& path, Access access, Format format) {
  const Format f = resolve_format(path, format);
  switch (f) {
    case Format::hdf5: return std::make_unique<Hdf5Storage>(path, access);
    case Format::torch: return open_torch(path, access);
    case Format::safetensors: return open_safetensors(path, access);
    case Format::npy: return open_npy(path, access);
    case Format::npz: return open_npz(path, access);
    case Format::shards: return open_shards(path, access);
    case Format::dcp: return open_dcp(path, access);
    case Format::automatic: break;
  }
  throw UsageError(path + ": no format resolved");
}

namespace {
std::atomic<bool> g_keep_crc{false};
std::atomic<bool> g_recompute_crc{false};
}  // namespace

bool keep_crc() noexcept { return g_keep_crc.load(); }
void set_keep_crc(bool keep) noexcept { g_keep_crc.store(keep); }
bool recompute_crc() noexcept { return g_recompute_crc.load(); }
void set_recompute_crc(bool on) noexcept { g_recompute_crc.store(on); }

std::vector<ckpt::DatasetInfo> infos_of(const std::vector<Tensor>& tensors) {
  std::vector<ckpt::DatasetInfo> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back(t.info);
  return out;
}

}  // namespace resil::inject
