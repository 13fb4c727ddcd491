#include <algorithm>

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
}  // namespace

ImageSet load_mnist(const std::filesystem::path& dir, Split split, std::size_t limit) {
  const std::string prefix = split == Split::train ? "train" : "t10k";
  const auto img_path = find_file(dir, prefix + "-images-idx3-ubyte");
  const auto lbl_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  const IdxArray img = read_idx(img_path);
  const IdxArray lbl = read_idx(lbl_path);
  if (img.dims.size() != 3) throw CorruptInputError(img_path.string() + ": expected a 3-D image array (N, rows, cols)");
  if (lbl.dims.size() != 1) throw CorruptInputError(lbl_path.string() + ": expected a 1-D label array");
  if (img.dims[0] != lbl.dims[0])
    throw CorruptInputError(img_path.string() + ": " + std::to_string(img.dims[0]) + " images but " + lbl_path.string() + " has " +
                            std::to_string(lbl.dims[0]) + " labels");
  ImageSet s;
  s.n = limit > 0 ? std::min<std::size_t>(limit, img.dims[0]) : img.dims[0];
  s.rows = img.dims[1];
  s.cols = img.dims[2];
  s.pixels.resize(s.n * s.dim());
  for (std::size_t i = 0; i < s.pixels.size(); ++i) s.pixels[i] = static_cast<float>(img.data[i]) / 255.0f;
  s.labels.resize(s.n);
  for (std::size_t i = 0; i < s.n; ++i) {
    if (lbl.data[i] >= s.num_classes)
      throw CorruptInputError(lbl_path.string() + ": label " + std::to_string(lbl.data[i]) + " of sample " + std::to_string(i) +
                              " (byte " + std::to_string(8 + i) + ") is not in 0..9");
    s.labels[i] = lbl.data[i];
  }
  return s;
}

}  // namespace resil::data
