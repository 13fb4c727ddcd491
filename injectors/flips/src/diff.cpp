#include "resil/inject/diff.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <map>

#include "resil/ckpt/io.hpp"
#include "resil/inject/counts.hpp"
#include "resil/inject/flip_log.hpp"
#include "resil/inject/names.hpp"
#include "resil/inject/storage.hpp"
#include "resil/inject/word_io.hpp"

namespace resil::inject {

bool DiffReport::identical() const noexcept {
  return std::all_of(datasets.begin(), datasets.end(), [](const DatasetDiff& d) { return d.status == "same" || d.status == "unsupported"; });
}

nlohmann::json DiffReport::to_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& d : datasets) {
    nlohmann::json hist = nlohmann::json::object();
    for (unsigned b = 0; b < 64; ++b)
      if (d.bit_histogram[b]) hist[std::to_string(b)] = count_json(d.bit_histogram[b]);
    nlohmann::json j = {{"status", d.status}, {"dtype", d.dtype}, {"numel", count_json(d.numel)},
                        {"differing", count_json(d.differing)}, {"bit_histogram", hist}, {"max_abs_error", value_json(d.max_abs_error)},
                        {"max_rel_error", value_json(d.max_rel_error)}, {"nan_a", count_json(d.nan_a)}, {"nan_b", count_json(d.nan_b)},
                        {"inf_a", count_json(d.inf_a)}, {"inf_b", count_json(d.inf_b)}};
    // Not compared element by element (shape or dtype mismatch, only in one file, unsupported):
    // null, not 0 -- "differing": 0 would read as "equal" to a script.
    if (d.status != "same" && d.status != "differ")
      for (const char* k : {"differing", "bit_histogram", "max_abs_error", "max_rel_error", "nan_a", "nan_b", "inf_a", "inf_b"}) j[k] = nullptr;
    put_name(j, "dataset", d.path);
    out.push_back(std::move(j));
  }
  return {{"identical", identical()}, {"datasets", out}};
}

namespace {

// Rows [r0, r0+n) along dimension 0 of a tensor as stored bytes (all of a scalar).
void read_rows(Storage& f, const std::string& path, const ckpt::Shape& shape, std::uint64_t r0, std::uint64_t n, std::vector<std::byte>& buf) {
  std::vector<hsize_t> start(shape.size(), 0), count(shape.begin(), shape.end());
  if (!shape.empty()) {
    start[0] = r0;
    count[0] = n;
  }
  f.read_box(path, start, count, buf);
}

}  // namespace

DiffReport diff(const std::string& a, const std::string& b, Format format) {
  const auto fa = open_storage(a, Access::read, format);
  const auto fb = open_storage(b, Access::read, format);
  std::map<std::string, ckpt::DatasetInfo> la, lb;
  for (auto& t : fa->tensors()) la.emplace(t.info.path, std::move(t.info));
  for (auto& t : fb->tensors()) lb.emplace(t.info.path, std::move(t.info));
  DiffReport rep;
  for (const auto& [path, ia] : la) {
    DatasetDiff dd;
    dd.path = path;
    dd.dtype = ia.type_desc;
    dd.numel = ia.numel();
    const auto it = lb.find(path);
    if (it == lb.end()) {
      dd.status = "only-in-a";
      rep.datasets.push_back(dd);
      continue;
    }
    const auto& ib = it->second;
    if (!ia.dtype || !ib.dtype) dd.status = "unsupported";
    else if (*ia.dtype != *ib.dtype || ia.big_endian != ib.big_endian) dd.status = "dtype-mismatch";
    else if (ia.shape != ib.shape || ia.null_space != ib.null_space) dd.status = "shape-mismatch";
    if (dd.status != "same") {
      rep.datasets.push_back(dd);
      continue;
    }
    const auto dt = *ia.dtype;
    const unsigned size = fa->width_of(path) / 8;
    fb->width_of(path);  // opens B's dataset too, as reading it will
    // A pair of stored words standing for `count` equal pairs (both unallocated: fill values).
    auto compare = [&](std::uint64_t xa, std::uint64_t xb, std::uint64_t count) {
      const double va = ckpt::word_to_double(dt, xa), vb = ckpt::word_to_double(dt, xb);
      if (ckpt::dtype_is_float(dt)) {
        dd.nan_a += std::isnan(va) ? count : 0;
        dd.nan_b += std::isnan(vb) ? count : 0;
        dd.inf_a += std::isinf(va) ? count : 0;
        dd.inf_b += std::isinf(vb) ? count : 0;
      }
      if (xa == xb) return;
      dd.differing += count;
      for (std::uint64_t x = xa ^ xb; x; x &= x - 1) dd.bit_histogram[static_cast<unsigned>(std::countr_zero(x))] += count;
      const double err = std::fabs(va - vb);
      if (std::isnan(err) || std::isinf(err)) {
        dd.max_abs_error = std::numeric_limits<double>::infinity();
        dd.max_rel_error = std::numeric_limits<double>::infinity();
      } else {
        dd.max_abs_error = std::max(dd.max_abs_error, err);
        dd.max_rel_error = std::max(dd.max_rel_error, va == 0 ? std::numeric_limits<double>::infinity() : err / std::fabs(va));
      }
    };
    std::vector<std::byte> ba, bb;
    const auto sa = ia.numel() ? fa->stored_layout(path) : StoredLayout{}, sb = ia.numel() ? fb->stored_layout(path) : StoredLayout{};
    if (sa.sparse && sb.sparse) {
      // Both mostly unallocated (reading the extents would cost far more than the files hold):
      // the allocated chunks of A, those of B outside them, then every other element at once.
      std::uint64_t covered = 0;
      auto region = [&](const StoredRegion& r, const StoredLayout* skip) {
        fa->read_box(path, r.start, r.count, ba);
        fb->read_box(path, r.start, r.count, bb);
        std::vector<hsize_t> nd(r.start);
        for (std::size_t i = 0; i < ba.size() / size; ++i) {
          if (skip == nullptr || !skip->in_regions(nd)) {
            compare(load_word(ba.data() + i * size, size, ia.big_endian), load_word(bb.data() + i * size, size, ib.big_endian), 1);
            ++covered;
          }
          for (std::size_t k = nd.size(); k-- > 0;) {  // next index of the region, C order
            if (++nd[k] < r.start[k] + r.count[k]) break;
            nd[k] = r.start[k];
          }
        }
      };
      for (const auto& r : sa.regions) region(r, nullptr);
      for (const auto& r : sb.regions) region(r, &sa);
      if (covered < ia.numel())
        compare(load_word(sa.fill.data(), size, ia.big_endian), load_word(sb.fill.data(), size, ib.big_endian), ia.numel() - covered);
    } else {
      // Bounded slabs along dimension 0: the cost of the larger file's data.
      const std::uint64_t rows = ia.shape.empty() ? 1 : ia.shape[0];
      const std::uint64_t row_elems = rows ? ia.numel() / std::max<std::uint64_t>(rows, 1) : 0;
      std::uint64_t step = std::max<std::uint64_t>(1, (std::uint64_t{32} << 20) / std::max<std::uint64_t>(1, row_elems * size));
      if (!ia.chunks.empty()) step = std::max<std::uint64_t>(ia.chunks[0], step / ia.chunks[0] * ia.chunks[0]);
      for (std::uint64_t r = 0; r < rows && ia.numel() > 0; r += step) {
        const std::uint64_t n = std::min(step, rows - r);
        read_rows(*fa, path, ia.shape, r, n, ba);
        read_rows(*fb, path, ib.shape, r, n, bb);
        const std::size_t cnt = ba.size() / size;
        for (std::size_t i = 0; i < cnt; ++i)
          compare(load_word(ba.data() + i * size, size, ia.big_endian), load_word(bb.data() + i * size, size, ib.big_endian), 1);
      }
    }
    if (dd.differing) dd.status = "differ";
    rep.datasets.push_back(dd);
  }
  for (const auto& [path, ib] : lb)
    if (!la.count(path)) {
      DatasetDiff dd;
      dd.path = path;
      dd.dtype = ib.type_desc;
      dd.numel = ib.numel();
      dd.status = "only-in-b";
      rep.datasets.push_back(dd);
    }
  return rep;
}

}  // namespace resil::inject
