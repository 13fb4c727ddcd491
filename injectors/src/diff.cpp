#include "resil/inject/diff.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <map>

#include "resil/ckpt/io.hpp"
#include "resil/inject/flip_log.hpp"
#include "resil/inject/words.hpp"

namespace resil::inject {

namespace h5 = ckpt::h5;

bool DiffReport::identical() const noexcept {
  return std::all_of(datasets.begin(), datasets.end(), [](const DatasetDiff& d) { return d.status == "same" || d.status == "unsupported"; });
}

nlohmann::json DiffReport::to_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& d : datasets) {
    nlohmann::json hist = nlohmann::json::object();
    for (unsigned b = 0; b < 64; ++b)
      if (d.bit_histogram[b]) hist[std::to_string(b)] = d.bit_histogram[b];
    out.push_back({{"dataset", d.path}, {"status", d.status}, {"dtype", d.dtype}, {"numel", d.numel},
                   {"differing", d.differing}, {"bit_histogram", hist}, {"max_abs_error", value_json(d.max_abs_error)},
                   {"max_rel_error", value_json(d.max_rel_error)}, {"nan_a", d.nan_a}, {"nan_b", d.nan_b},
                   {"inf_a", d.inf_a}, {"inf_b", d.inf_b}});
  }
  return {{"identical", identical()}, {"datasets", out}};
}

namespace {

// Rows [r0, r0+n) along dimension 0 of a dataset as stored bytes (file type = memory type).
void read_rows(hid_t d, hid_t ftype, const ckpt::Shape& shape, std::uint64_t r0, std::uint64_t n, std::vector<std::byte>& buf,
               const std::string& where) {
  const std::size_t elem = H5Tget_size(ftype);
  h5::Dataspace space(H5Dget_space(d));
  if (shape.empty()) {
    buf.resize(elem);
    if (H5Dread(d, ftype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) < 0) h5::throw_error(where + ": read failed", ExitCode::corrupt_input);
    return;
  }
  std::vector<hsize_t> start(shape.size(), 0), count(shape.begin(), shape.end());
  start[0] = r0;
  count[0] = n;
  std::uint64_t total = 1;
  for (auto c : count) total *= c;
  buf.resize(total * elem);
  h5::Dataspace fsel(H5Scopy(space));
  RESIL_H5_CHECK(H5Sselect_hyperslab(fsel, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr), where + ": select");
  h5::Dataspace msel(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr));
  if (H5Dread(d, ftype, msel, fsel, H5P_DEFAULT, buf.data()) < 0) h5::throw_error(where + ": read failed", ExitCode::corrupt_input);
}

}  // namespace

DiffReport diff(const std::string& a, const std::string& b) {
  h5::File fa = h5::open_file(a, h5::Mode::read);
  h5::File fb = h5::open_file(b, h5::Mode::read);
  std::map<std::string, ckpt::DatasetInfo> la, lb;
  for (auto& d : ckpt::list_datasets(fa)) la.emplace(d.path, std::move(d));
  for (auto& d : ckpt::list_datasets(fb)) lb.emplace(d.path, std::move(d));
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
    else if (ia.shape != ib.shape) dd.status = "shape-mismatch";
    if (dd.status != "same") {
      rep.datasets.push_back(dd);
      continue;
    }
    const auto dt = *ia.dtype;
    h5::Dataset da = h5::open_dataset(fa, path, a), db = h5::open_dataset(fb, path, b);
    h5::SilenceErrors quiet;
    h5::Datatype ta(H5Dget_type(da)), tb(H5Dget_type(db));
    const unsigned size = static_cast<unsigned>(H5Tget_size(ta));
    const std::uint64_t rows = ia.shape.empty() ? 1 : ia.shape[0];
    const std::uint64_t row_elems = rows ? ia.numel() / std::max<std::uint64_t>(rows, 1) : 0;
    std::uint64_t step = std::max<std::uint64_t>(1, (std::uint64_t{32} << 20) / std::max<std::uint64_t>(1, row_elems * size));
    if (!ia.chunks.empty()) step = std::max<std::uint64_t>(ia.chunks[0], step / ia.chunks[0] * ia.chunks[0]);
    std::vector<std::byte> ba, bb;
    for (std::uint64_t r = 0; r < rows && ia.numel() > 0; r += step) {
      const std::uint64_t n = std::min(step, rows - r);
      read_rows(da, ta, ia.shape, r, n, ba, a + ": dataset " + path);
      read_rows(db, tb, ib.shape, r, n, bb, b + ": dataset " + path);
      const std::size_t cnt = ba.size() / size;
      for (std::size_t i = 0; i < cnt; ++i) {
        const std::uint64_t wa = load_word(ba.data() + i * size, size, ia.big_endian);
        const std::uint64_t wb = load_word(bb.data() + i * size, size, ib.big_endian);
        const double va = ckpt::word_to_double(dt, wa), vb = ckpt::word_to_double(dt, wb);
        if (ckpt::dtype_is_float(dt)) {
          dd.nan_a += std::isnan(va);
          dd.nan_b += std::isnan(vb);
          dd.inf_a += std::isinf(va);
          dd.inf_b += std::isinf(vb);
        }
        if (wa == wb) continue;
        ++dd.differing;
        for (std::uint64_t x = wa ^ wb; x; x &= x - 1) ++dd.bit_histogram[static_cast<unsigned>(std::countr_zero(x))];
        const double err = std::fabs(va - vb);
        if (std::isnan(err) || std::isinf(err)) {
          dd.max_abs_error = std::numeric_limits<double>::infinity();
          dd.max_rel_error = std::numeric_limits<double>::infinity();
        } else {
          dd.max_abs_error = std::max(dd.max_abs_error, err);
          dd.max_rel_error = std::max(dd.max_rel_error, va == 0 ? std::numeric_limits<double>::infinity() : err / std::fabs(va));
        }
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
