// Data staging: load the train/test split a config names, gather batches of it on the host.
#include "train_data.hpp"

#include <algorithm>
#include <new>

#include "resil/data/sampler.hpp"
#include "resil/train/dlrm.hpp"

namespace resil::train {

namespace {
// Features per Criteo sample (one row of ClickSet::dense / ::sparse).
constexpr std::size_t kDense = data::criteo_num_dense, kSparse = data::criteo_num_sparse;
}  // namespace

namespace {
Data load_data_unchecked(const TrainConfig& c) {
  Data d;
  if (c.model == ModelKind::gpt) {
    d.text = true;
    d.corpus = data::load_text(c.data.empty() ? std::string(data::default_text_dir) : c.data);
    d.seq = c.seq;
    const std::size_t tr = data::text_windows(d.corpus.train.size(), d.seq), te = data::text_windows(d.corpus.valid.size(), d.seq);
    const std::string where = c.data.empty() ? std::string(data::default_text_dir) : c.data;
    if (tr == 0 || te == 0)
      throw CorruptInputError(where + ": " + std::to_string(d.corpus.train.size()) + " training and " + std::to_string(d.corpus.valid.size()) +
                              " validation bytes hold no window of " + std::to_string(d.seq + 1) + " tokens");
    d.train_windows = c.limit ? std::min<std::size_t>(c.limit, tr) : tr;
    d.test_windows = c.test_limit ? std::min<std::size_t>(c.test_limit, te) : te;
  } else if (c.model == ModelKind::dlrm) {
    d.clicks = true;
    const DlrmConfig dc;
    if (c.data.empty()) {
      const std::uint64_t n = c.limit ? std::min(c.limit, c.synthetic_samples) : c.synthetic_samples;
      const std::uint64_t nt = c.test_limit ? c.test_limit : std::max<std::uint64_t>(1, c.synthetic_samples / 4);
      d.train_clk = data::synthetic_clicks(n, c.seed, dc.table_sizes);
      d.test_clk = data::synthetic_clicks(nt, c.seed, dc.table_sizes, c.synthetic_samples);  // disjoint samples
    } else {
      // A TSV file: the last quarter (or test_limit samples) is the test split.
      data::ClickSet all = data::read_criteo_tsv(c.data, dc.table_sizes);
      if (all.n == 0) throw CorruptInputError(c.data + ": no samples (an empty Criteo TSV file)");
      const std::size_t nt = c.test_limit ? std::min<std::size_t>(c.test_limit, all.n / 2) : all.n / 4;
      auto split = [&](std::size_t from, std::size_t n) {
        data::ClickSet s;
        s.table_sizes = all.table_sizes;
        s.n = n;
        s.dense.assign(all.dense.begin() + static_cast<long>(from * kDense), all.dense.begin() + static_cast<long>((from + n) * kDense));
        s.sparse.assign(all.sparse.begin() + static_cast<long>(from * kSparse), all.sparse.begin() + static_cast<long>((from + n) * kSparse));
        s.labels.assign(all.labels.begin() + static_cast<long>(from), all.labels.begin() + static_cast<long>(from + n));
        return s;
      };
      const std::size_t ntr = all.n - nt;
      d.train_clk = split(0, c.limit ? std::min<std::size_t>(c.limit, ntr) : ntr);
      d.test_clk = split(ntr, nt);
    }
  } else {
    const std::string dir = c.data.empty() ? data::default_fashion_mnist_dir : c.data;
    d.train_img = data::load_mnist(dir, data::Split::train, c.limit);
    d.test_img = data::load_mnist(dir, data::Split::test, c.test_limit);
    if (d.train_img.dim() != 784 || d.test_img.dim() != 784)
      throw CorruptInputError(dir + ": images are " + std::to_string(d.train_img.rows) + "x" + std::to_string(d.train_img.cols) +
                              ", the mlp and cnn models need 28x28");
  }
  return d;
}
}  // namespace

Data load_data(const TrainConfig& c) {
  try {
    return load_data_unchecked(c);
  } catch (const std::bad_alloc&) {
    // The data set does not fit this node's memory (or the process limit): one line naming what
    // was being loaded, an I/O error as ec-train's state that the node cannot hold, and the summary
    // is still written ("out of memory", exit 1, named nothing and wrote none).
    const std::string what = c.model == ModelKind::dlrm && c.data.empty()
                                  ? "--synthetic-samples " + std::to_string(c.synthetic_samples) + " (synthetic clicks)"
                                  : !c.data.empty()                ? c.data
                                  : c.model == ModelKind::gpt      ? std::string(data::default_text_dir)
                                                                   : std::string(data::default_fashion_mnist_dir);
    throw IoError(what + ": out of memory loading the data set (the node or the process limit cannot hold it)");
  }
}

Batch Staging::gather(const Data& d, bool test, std::span<const std::uint32_t> idx) {
  const auto n = idx.size();
  if (d.text) {
    const auto& s = test ? d.corpus.valid : d.corpus.train;
    const std::size_t w = static_cast<std::size_t>(d.seq) + 1;
    tokens.resize(n * w);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t start = static_cast<std::size_t>(idx[i]) * static_cast<std::size_t>(d.seq);
      for (std::size_t j = 0; j < w; ++j) tokens[i * w + j] = s[start + j];
    }
    Batch b;
    b.n = static_cast<int>(n);
    b.tokens = tokens.data();
    b.seq = d.seq;
    return b;
  }
  if (d.clicks) {
    const auto& s = test ? d.test_clk : d.train_clk;
    x.resize(n * kDense);
    sparse.resize(n * kSparse);
    targets.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      std::copy_n(s.dense.begin() + static_cast<long>(idx[i] * kDense), kDense, x.begin() + static_cast<long>(i * kDense));
      std::copy_n(s.sparse.begin() + static_cast<long>(idx[i] * kSparse), kSparse, sparse.begin() + static_cast<long>(i * kSparse));
      targets[i] = s.labels[idx[i]];
    }
    return Batch{static_cast<int>(n), x.data(), nullptr, targets.data(), sparse.data()};
  }
  const auto& s = test ? d.test_img : d.train_img;
  const std::size_t dim = s.dim();
  x.resize(n * dim);
  labels.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t from = idx[i] * dim;
    float* dst = x.data() + i * dim;
    for (std::size_t j = 0; j < dim; ++j) dst[j] = s.value(from + j);
    labels[i] = s.labels[idx[i]];
  }
  return Batch{static_cast<int>(n), x.data(), labels.data(), nullptr, nullptr};
}

}  // namespace resil::train
