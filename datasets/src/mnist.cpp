#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <tuple>

#include "resil/core/error.hpp"
#include "resil/data/idx.hpp"

namespace resil::data {

namespace {
std::filesystem::path find_file(const std::filesystem::path& dir, const std::string& stem) {
  for (const auto& cand : {dir / stem, dir / (stem + ".gz")}) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(cand, ec)) return cand;
  }
  throw IoError(dir.string() + ": neither " + stem + " nor " + stem + ".gz exists (expected an MNIST-format directory)");
}

/// What a file was when it was decoded: a kept copy is used only while the file is still that one.
struct FileStamp {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  std::int64_t mtime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};
std::optional<FileStamp> stamp_of(const std::filesystem::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return std::nullopt;
  return FileStamp{st.st_dev, st.st_ino, st.st_size, std::int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec};
}

struct Kept {
  FileStamp stamp;
  IdxArray whole;
};
/// Decoded files kept by keep_mnist_decoded (empty unless a process asked for it).
std::map<std::filesystem::path, Kept>& kept() {
  static std::map<std::filesystem::path, Kept> m;
  return m;
}

/// The first `limit` items of `p` (all when 0) and the count its header declares.
IdxArray read_items(const std::filesystem::path& p, std::size_t limit, std::uint32_t& declared) {
  const auto it = kept().find(p);
  if (it != kept().end() && stamp_of(p) == it->second.stamp) {
    const IdxArray& w = it->second.whole;
    declared = w.dims[0];
    IdxArray a;
    a.dims = w.dims;
    const std::size_t n = limit > 0 ? std::min<std::size_t>(limit, w.dims[0]) : w.dims[0];
    a.dims[0] = static_cast<std::uint32_t>(n);
    const std::size_t per = w.dims[0] ? w.data.size() / w.dims[0] : 0;
    a.data.assign(w.data.begin(), w.data.begin() + static_cast<std::ptrdiff_t>(n * per));
    return a;
  }
  return read_idx_prefix(p, limit, &declared);
}
}  // namespace

ImageSet load_mnist(const std::filesystem::path& dir, Split split, std::size_t limit) {
  const std::string prefix = split == Split::train ? "train" : "t10k";
  const auto img_path = find_file(dir, prefix + "-images-idx3-ubyte");
  const auto lbl_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  std::uint32_t img_count = 0, lbl_count = 0;
  IdxArray img = read_items(img_path, limit, img_count);
  const IdxArray lbl = read_items(lbl_path, limit, lbl_count);
  if (img.dims.size() != 3) throw CorruptInputError(img_path.string() + ": expected a 3-D image array (N, rows, cols)");
  if (lbl.dims.size() != 1) throw CorruptInputError(lbl_path.string() + ": expected a 1-D label array");
  if (img_count != lbl_count)
    throw CorruptInputError(img_path.string() + ": " + std::to_string(img_count) + " images but " + lbl_path.string() + " has " +
                            std::to_string(lbl_count) + " labels");
  ImageSet s;
  s.n = img.dims[0];
  s.rows = img.dims[1];
  s.cols = img.dims[2];
  img.data.resize(s.n * s.dim());
  s.pixels = std::move(img.data);
  s.labels.resize(s.n);
  for (std::size_t i = 0; i < s.n; ++i) {
    if (lbl.data[i] >= s.num_classes)
      throw CorruptInputError(lbl_path.string() + ": label " + std::to_string(lbl.data[i]) + " of sample " + std::to_string(i) +
                              " (byte " + std::to_string(8 + i) + ") is not in 0..9");
    s.labels[i] = lbl.data[i];
  }
  return s;
}

void keep_mnist_decoded(const std::filesystem::path& dir, Split split) {
  const char* prefix = split == Split::train ? "train" : "t10k";
  for (const char* kind : {"-images-idx3-ubyte", "-labels-idx1-ubyte"}) {
    const auto p = find_file(dir, std::string(prefix) + kind);
    const auto st = stamp_of(p);
    if (!st) throw IoError(p.string() + ": cannot stat");
    kept()[p] = Kept{*st, read_idx(p)};
  }
}

void keep_mnist_decoded(const std::filesystem::path& dir) {
  keep_mnist_decoded(dir, Split::train);
  keep_mnist_decoded(dir, Split::test);
}

}  // namespace resil::data
