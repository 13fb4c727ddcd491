// IDX files (the MNIST container format, plain or gzip-compressed) and MNIST-format directories.
// Fashion-MNIST from Debian's dataset-fashion-mnist is the default image dataset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace resil::data {

inline constexpr const char* default_fashion_mnist_dir = "/usr/share/datasets/fashion-mnist";

/// One IDX file of unsigned bytes (type code 0x08): its dimensions and its payload.
struct IdxArray {
  std::vector<std::uint32_t> dims;
  std::vector<std::uint8_t> data;
  std::size_t count() const noexcept { return dims.empty() ? 0 : dims[0]; }
};

/// Read an IDX file of u8 elements, transparently gunzipping `.gz` files. Malformed input (bad
/// magic, unsupported element type, truncated payload, trailing bytes, broken gzip stream) raises
/// CorruptInputError naming the file and the byte offset (of the decompressed stream); a missing
/// or unreadable file raises IoError.
IdxArray read_idx(const std::filesystem::path& p);

/// The header and the first `max_items` items (along the first dimension; all of them when 0 or
/// more than stored): dims[0] is then the number read, and `declared_items` (when given) receives
/// the count the header declares. Only those bytes are decompressed, so the rest of the file is
/// neither read nor checked for trailing bytes.
IdxArray read_idx_prefix(const std::filesystem::path& p, std::size_t max_items, std::uint32_t* declared_items);

/// Write a u8 IDX file (gzip when the name ends in .gz). Used by tests and tools.
void write_idx(const std::filesystem::path& p, const IdxArray& a);

enum class Split { train, test };

/// Images as the file's bytes, row-major N x (rows*cols), with integer labels. A model reads pixel k
/// as value(k), the byte / 255 in float: converted when a batch is gathered, so a data set costs
/// one byte per pixel in memory (60,000 Fashion-MNIST images: 47 MB, not 188 MB per rank).
struct ImageSet {
  std::size_t n = 0, rows = 0, cols = 0, num_classes = 10;
  std::vector<std::uint8_t> pixels;
  std::vector<std::int32_t> labels;
  std::size_t dim() const noexcept { return rows * cols; }
  float value(std::size_t k) const noexcept { return static_cast<float>(pixels[k]) / 255.0f; }
};

/// Load `train-*` or `t10k-*` images and labels from an MNIST-format directory (each file plain
/// or .gz). `limit` > 0 keeps the first `limit` samples. Image/label count mismatch or a label
/// >= 10 raises CorruptInputError.
/// Only the first `limit` samples are decompressed (see read_idx_prefix), unless the split is kept
/// decoded in this process (keep_mnist_decoded).
ImageSet load_mnist(const std::filesystem::path& dir, Split split, std::size_t limit = 0);

/// Decode both splits of `dir` once and keep the bytes in this process: later load_mnist calls on
/// the same files (same path, inode, size and modification time) copy from memory instead of
/// reading the files. For `ckpt-train serve`, whose forked trials inherit the decoded data.
void keep_mnist_decoded(const std::filesystem::path& dir);
/// The same for one split only (images and labels): a worker whose trials only evaluate keeps the
/// test split and never decodes the 60,000 training images.
void keep_mnist_decoded(const std::filesystem::path& dir, Split split);

}  // namespace resil::data
