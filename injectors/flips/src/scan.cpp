#include "resil/inject/scan.hpp"

#include <algorithm>
#include <cmath>

#include "resil/ckpt/hash.hpp"
#include "resil/ckpt/io.hpp"
#include "resil/inject/counts.hpp"
#include "resil/inject/flip_log.hpp"
#include "resil/inject/names.hpp"
#include "resil/inject/storage.hpp"
#include "resil/inject/word_io.hpp"

namespace resil::inject {

bool ScanReport::suspect() const noexcept {
  return std::any_of(datasets.begin(), datasets.end(), [](const DatasetScan& d) { return d.suspect(); });
}

nlohmann::json ScanReport::to_json() const {
  nlohmann::json ds = nlohmann::json::array();
  for (const auto& d : datasets) {
    nlohmann::json j = {{"dtype", d.dtype}, {"numel", count_json(d.numel)}, {"checksum", d.checksum},
                        {"nan", count_json(d.nan)}, {"inf", count_json(d.inf)}, {"exponent_outliers", count_json(d.outliers)},
                        {"median_exponent", d.median_exponent ? nlohmann::json(*d.median_exponent) : nlohmann::json(nullptr)},
                        {"threshold_exponent", d.threshold_exponent ? nlohmann::json(*d.threshold_exponent) : nlohmann::json(nullptr)},
                        {"max_abs", d.max_abs ? value_json(*d.max_abs) : nlohmann::json(nullptr)},
                        {"max_abs_index", d.max_abs ? count_json(d.max_abs_index) : nlohmann::json(nullptr)}, {"suspect", d.suspect()}};
    put_name(j, "dataset", d.path);
    ds.push_back(std::move(j));
  }
  nlohmann::json j = {{"verdict", suspect() ? "suspect" : "clean"}, {"datasets", ds}};
  put_names(j, "skipped", skipped);  // "PATH (why)", escaped and flagged as names are when one is not UTF-8
  return j;
}

ScanReport scan(const std::string& file, Format format) {
  const auto f = open_storage(file, Access::read, format);
  ScanReport rep;
  for (const auto& t : f->tensors()) {
    const auto& info = t.info;
    if (!info.dtype || info.layout == ckpt::Layout::virtual_) {
      rep.skipped.push_back(info.path + " (" + info.type_desc + ")");
      continue;
    }
    DatasetScan s;
    s.path = info.path;
    s.dtype = info.type_desc;
    s.numel = info.numel();
    const auto dt = *info.dtype;
    const auto fl = ckpt::float_layout(dt);
    const unsigned size = f->width_of(info.path) / 8;
    std::vector<std::uint64_t> hist(fl ? (std::size_t{1} << fl->exponent_bits) : 0);
    // Binades of the finite values: 1 .. end-1. The all-ones exponent holds NaN and Inf, except in
    // fp8 E4M3 (OCP "fn"), where it holds finite values up to 448 and only S.1111.111 is NaN (no Inf),
    // and the FNUZ fp8, whose only NaN is 0x80 (exponent 0).
    const bool top_finite = dt == ckpt::DType::f8_e4m3 || dt == ckpt::DType::f8_e4m3fnuz || dt == ckpt::DType::f8_e5m2fnuz;
    const std::size_t finite_end = hist.size() - (top_finite ? 0 : 1);
    ckpt::Xxh64 h;
    // One stored word at flat index `at`, standing for `count` equal words (unallocated chunks:
    // their fill value). Ties keep the smallest index, as a walk in flat order would.
    auto take = [&](std::uint64_t w, std::uint64_t at, std::uint64_t count) {
      const double v = ckpt::word_to_double(dt, w);
      if (!std::isnan(v) && (!s.max_abs || std::fabs(v) > *s.max_abs || (std::fabs(v) == *s.max_abs && at < s.max_abs_index))) {
        s.max_abs = std::fabs(v);
        s.max_abs_index = at;
      }
      if (!fl) return;
      const std::uint64_t e = (w >> fl->mantissa_bits) & ((std::uint64_t{1} << fl->exponent_bits) - 1);
      if (std::isnan(v)) s.nan += count;  // the value decides, by each format's own rules (word_to_double)
      else if (std::isinf(v)) s.inf += count;
      else if (v != 0.0) hist[e] += count;  // subnormals in field 0, zeros left out
    };
    const std::string where = file + ": dataset " + display_name(info.path);
    try {
      const auto stored = f->stored_layout(info.path);
      if (!stored.sparse) {
        std::uint64_t pos = 0;
        f->for_each_slab(info.path, std::size_t{32} << 20, [&](std::span<const std::byte> bytes) {
          h.update(bytes);
          const std::size_t n = bytes.size() / size;
          for (std::size_t i = 0; i < n; ++i, ++pos) take(load_word(bytes.data() + i * size, size, info.big_endian), pos, 1);
        });
      } else {
        // Allocated chunks one by one, then every other element at once: they all hold the fill
        // value. The checksum would need every logical byte: it is not verified.
        std::vector<std::byte> buf;
        for (const auto& r : stored.regions) {
          f->read_box(info.path, r.start, r.count, buf);
          const std::size_t n = buf.size() / size;
          std::vector<hsize_t> nd(r.start);
          for (std::size_t i = 0; i < n; ++i) {
            std::uint64_t flat = 0;
            for (std::size_t k = 0; k < nd.size(); ++k) flat = flat * info.shape[k] + nd[k];
            take(load_word(buf.data() + i * size, size, info.big_endian), flat, 1);
            for (std::size_t k = nd.size(); k-- > 0;) {  // next index of the region, C order
              if (++nd[k] < r.start[k] + r.count[k]) break;
              nd[k] = r.start[k];
            }
          }
        }
        if (stored.covered < s.numel) take(load_word(stored.fill.data(), size, info.big_endian), stored.first_fill, s.numel - stored.covered);
      }
      if (info.checksum) s.checksum = stored.sparse ? "unverified" : h.digest() == *info.checksum ? "ok" : "mismatch";
    } catch (const Hdf5Error& e) {
      throw CorruptInputError(where + ": cannot read (damaged?): " + e.what());
    }
    if (fl) {
      // Exponent distribution of the non-zero finite values, subnormals in field 0: a tensor of
      // subnormals (tiny f16 optimizer state) has its reference there, and an exponent-MSB flip of
      // one of them lands far above it.
      std::uint64_t total = 0;
      for (std::size_t e = 0; e < finite_end; ++e) total += hist[e];
      // The FNUZ fp8 are biased one more than IEEE would (8 and 16: their top exponent is finite).
      const bool fnuz = dt == ckpt::DType::f8_e4m3fnuz || dt == ckpt::DType::f8_e5m2fnuz;
      const int bias = (1 << (fl->exponent_bits - 1)) - (fnuz ? 0 : 1);
      if (total > 0) {
        auto quantile = [&](double q) {
          const auto target = static_cast<std::uint64_t>(q * static_cast<double>(total - 1));
          std::uint64_t acc = 0;
          for (std::size_t e = 0; e < finite_end; ++e) {
            acc += hist[e];
            if (acc > target) return static_cast<int>(e);
          }
          return static_cast<int>(finite_end - 1);
        };
        const int med = quantile(0.5);
        const int thr = quantile(outlier_reference_quantile) + outlier_margin(fl->exponent_bits);
        for (std::size_t e = static_cast<std::size_t>(thr + 1); e < finite_end; ++e) s.outliers += hist[e];
        s.median_exponent = med - bias;
        s.threshold_exponent = thr - bias;
      }
    }
    rep.datasets.push_back(std::move(s));
  }
  return rep;
}

}  // namespace resil::inject
