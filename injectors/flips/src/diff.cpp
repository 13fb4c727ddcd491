#include "resil/inject/diff.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <limits>
#include <map>
#include <set>

#include "resil/ckpt/io.hpp"
#include "resil/inject/counts.hpp"
#include "resil/inject/flip_log.hpp"
#include "resil/inject/names.hpp"
#include "resil/inject/storage.hpp"
#include "resil/inject/word_io.hpp"

namespace resil::inject {

bool DiffReport::identical() const noexcept {
  // Never while a tensor differs, was not compared, or is in one file only, nor while other content differs.
  return others.empty() && std::all_of(datasets.begin(), datasets.end(), [](const DatasetDiff& d) { return d.status == "same"; });
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
    // null, not 0 -- "differing": 0 would read as "equal" to a script. Compared as stored bytes:
    // no bits, errors or NaN/Inf (and no count for packed sub-byte elements); as text (variable-
    // length values): a verdict only.
    j["compared"] = d.compared.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.compared);
    if (d.status != "same" && d.status != "differ")
      for (const char* k : {"differing", "bit_histogram", "max_abs_error", "max_rel_error", "nan_a", "nan_b", "inf_a", "inf_b"}) j[k] = nullptr;
    else if (d.compared == "bytes" || d.compared == "text") {
      for (const char* k : {"bit_histogram", "max_abs_error", "max_rel_error", "nan_a", "nan_b", "inf_a", "inf_b"}) j[k] = nullptr;
      if (!d.differing_known) j["differing"] = nullptr;
    }
    put_name(j, "dataset", d.path);
    out.push_back(std::move(j));
  }
  nlohmann::json other = nlohmann::json::array();
  for (const auto& o : others) {
    nlohmann::json j = {{"status", o.status}};
    put_name(j, "name", o.name);
    if (!o.attribute.empty() || !o.object.empty()) {  // an HDF5 attribute: its name alone can be ambiguous ("/a@b@c")
      put_name(j, "object", o.object);
      put_name(j, "attribute", o.attribute);
    }
    if (!o.a.empty()) put_name(j, "a", o.a);
    if (!o.b.empty()) put_name(j, "b", o.b);
    other.push_back(std::move(j));
  }
  return {{"identical", identical()}, {"datasets", out}, {"other", other}};
}

namespace {

// The bytes one comparison step holds per file: a slab, whatever the tensor's shape.
constexpr std::uint64_t slab_bytes = std::uint64_t{32} << 20;

// One tensor of a file as diff compares it: a storage tensor itself, or (torch) one tensor that
// views a storage tensor's bytes at its offset, shape and strides, as torch.load gives it.
struct Item {
  std::string tensor;  // the storage-layer tensor whose bytes are read
  ckpt::DatasetInfo info;
  std::optional<View> view;
  unsigned bits = 0;  // stored bits per element; 0 when unknown
};

std::map<std::string, Item> items_of(Storage& f) {
  std::map<std::string, Item> out;
  for (auto& t : f.tensors()) {
    if (t.views.empty()) {
      Item it;
      it.tensor = t.info.path;
      const std::uint64_t n = t.info.numel();
      if (t.info.dtype) it.bits = static_cast<unsigned>(ckpt::dtype_size(*t.info.dtype) * 8);
      else if (n && t.info.logical_bytes != UINT64_MAX && t.info.logical_bytes <= UINT64_MAX / 8)
        it.bits = static_cast<unsigned>(t.info.logical_bytes * 8 / n);
      it.info = std::move(t.info);
      out.emplace(it.info.path, std::move(it));
      continue;
    }
    for (auto& v : t.views) {
      Item it;
      it.tensor = t.info.path;
      it.info.path = v.name;
      it.info.dtype = v.dtype;
      it.info.type_desc = v.type_desc;
      it.info.big_endian = v.big_endian;
      it.info.shape = v.shape;
      it.bits = v.bits;
      it.view = std::move(v);
      out.emplace(it.info.path, std::move(it));
    }
  }
  return out;
}

// Whether a view's elements are its storage's [offset, offset + numel) in C order.
bool contiguous(const View& v) {
  std::int64_t expect = 1;
  for (std::size_t d = v.shape.size(); d-- > 0;) {
    if (v.shape[d] != 1 && v.stride[d] != expect) return false;
    expect *= static_cast<std::int64_t>(v.shape[d]);
  }
  return true;
}

// The stored bytes of units [u0, u0 + n) of an item in C order (a unit: an element, or a byte of
// a packed sub-byte type), each `unit` bytes.
void read_units(Storage& f, const Item& it, std::uint64_t unit, std::uint64_t u0, std::uint64_t n, std::vector<std::byte>& buf) {
  if (!it.view) {
    if (f.read_bytes(it.tensor, u0 * unit, n * unit, buf)) return;
    // Adapters that read boxes only (HDF5, DCP): the few boxes that hold the flat range.
    buf.clear();
    std::vector<std::byte> part;
    for (const auto& b : ckpt::flat_boxes(it.info.shape, u0, n)) {
      f.read_box(it.tensor, b.start, b.count, part);
      buf.insert(buf.end(), part.begin(), part.end());
    }
    return;
  }
  const View& v = *it.view;
  if (contiguous(v)) {
    if (!f.read_bytes(it.tensor, (v.offset + u0) * unit, n * unit, buf)) throw Error(f.path() + ": views are read as bytes");
    return;
  }
  // A strided view: the storage index of each element, read in windows of the storage.
  const std::size_t rank = v.shape.size();
  std::vector<std::uint64_t> nd(rank), idx(n);
  std::uint64_t rest = u0;
  for (std::size_t d = rank; d-- > 0;) {
    nd[d] = rest % v.shape[d];
    rest /= v.shape[d];
  }
  std::uint64_t lo = UINT64_MAX, hi = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    std::int64_t at = static_cast<std::int64_t>(v.offset);
    for (std::size_t d = 0; d < rank; ++d) at += static_cast<std::int64_t>(nd[d]) * v.stride[d];
    if (at < 0) throw CorruptInputError(f.path() + ": tensor " + display_name(it.info.path) + " views before its storage");
    idx[i] = static_cast<std::uint64_t>(at);
    lo = std::min(lo, idx[i]);
    hi = std::max(hi, idx[i]);
    for (std::size_t d = rank; d-- > 0;) {
      if (++nd[d] < v.shape[d]) break;
      nd[d] = 0;
    }
  }
  buf.resize(n * unit);
  if (n == 0) return;
  std::vector<std::byte> win;
  const std::uint64_t span = slab_bytes / unit;
  if (hi - lo < span) {
    if (!f.read_bytes(it.tensor, lo * unit, (hi - lo + 1) * unit, win)) throw Error(f.path() + ": views are read as bytes");
    for (std::uint64_t i = 0; i < n; ++i) std::memcpy(buf.data() + i * unit, win.data() + (idx[i] - lo) * unit, unit);
    return;
  }
  // Runs of the sorted indices, each read once: a new read where the next index is past the slab
  // or more than a page of unused bytes away (a transposed view's range touches a short run in every
  // row of its storage: reading whole windows between them read the storage once per range).
  // (storage index, element) sorted by value, not through an index table: a 2M-element range sorts
  // 3x faster.
  std::vector<std::pair<std::uint64_t, std::uint32_t>> at(n);
  for (std::uint32_t i = 0; i < n; ++i) at[i] = {idx[i], i};
  std::vector<std::uint64_t>().swap(idx);
  std::sort(at.begin(), at.end());
  const std::uint64_t gap = std::max<std::uint64_t>(1, 4096 / unit);
  for (std::size_t k = 0; k < at.size();) {
    const std::uint64_t first = at[k].first;
    std::size_t e = k + 1;
    while (e < at.size() && at[e].first - first < span && at[e].first - at[e - 1].first <= gap) ++e;
    const std::uint64_t last = at[e - 1].first;
    if (!f.read_bytes(it.tensor, first * unit, (last - first + 1) * unit, win)) throw Error(f.path() + ": views are read as bytes");
    for (; k < e; ++k) std::memcpy(buf.data() + at[k].second * unit, win.data() + (at[k].first - first) * unit, unit);
  }
}

// fn(box) for boxes covering `shape` in C order of the box grid, each at most about `max`
// elements and made of whole chunks (`chunks` empty: contiguous C-order runs); a row larger than
// `max` is split along the last dimensions, one chunk larger than `max` along its leading ones.
void for_each_tile(const ckpt::Shape& shape, const ckpt::Shape& chunks, std::uint64_t max, const std::function<void(const ckpt::Box&)>& fn) {
  const std::size_t rank = shape.size();
  if (rank == 0) {
    fn(ckpt::Box{});
    return;
  }
  for (const auto s : shape)
    if (s == 0) return;
  std::vector<std::uint64_t> unit(rank, 1);
  if (chunks.size() == rank)
    for (std::size_t d = 0; d < rank; ++d) unit[d] = std::clamp<std::uint64_t>(chunks[d], 1, shape[d]);
  std::vector<std::uint64_t> b = unit;
  auto numel = [&] {
    std::uint64_t n = 1;
    for (const auto x : b) n = n > UINT64_MAX / x ? UINT64_MAX : n * x;
    return n;
  };
  if (numel() > max) {  // one unit is too large: split it, leading dimensions first
    for (std::size_t d = 0; d < rank && numel() > max; ++d) {
      std::uint64_t other = 1;
      for (std::size_t e = d + 1; e < rank; ++e) other = other > UINT64_MAX / b[e] ? UINT64_MAX : other * b[e];
      b[d] = std::max<std::uint64_t>(1, max / other);
    }
  } else {
    for (std::size_t d = rank; d-- > 0;) {  // grow from the last dimension, by whole units
      const std::uint64_t m = max / (numel() / b[d]) / unit[d];
      if (m <= 1) break;
      b[d] = m > shape[d] / unit[d] ? shape[d] : m * unit[d];
      if (b[d] < shape[d]) break;
    }
  }
  ckpt::Box box;
  box.start.assign(rank, 0);
  box.count.resize(rank);
  while (true) {
    for (std::size_t d = 0; d < rank; ++d) box.count[d] = std::min<std::uint64_t>(b[d], shape[d] - box.start[d]);
    fn(box);
    bool done = true;
    for (std::size_t d = rank; d-- > 0;) {
      box.start[d] += b[d];
      if (box.start[d] < shape[d]) {
        done = false;
        break;
      }
      box.start[d] = 0;
    }
    if (done) return;
  }
}

// |a - b| of two 64-bit integers: below 2^64, so exact in unsigned arithmetic (mod 2^64).
template <class T>
double exact_gap(T a, T b) {
  const auto ua = static_cast<std::uint64_t>(a), ub = static_cast<std::uint64_t>(b);
  return static_cast<double>(a < b ? ub - ua : ua - ub);
}

double rel_error(double va, double err) {
  // Relative to A; a zero reference (+0 or -0): 0 when B is zero too, else infinite.
  if (va == 0) return err == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return err / std::fabs(va);
}

}  // namespace

DiffReport diff(const std::string& a, const std::string& b, Format format) {
  const auto fa = open_storage(a, Access::read, format);
  const auto fb = open_storage(b, Access::read, format);
  const auto la = items_of(*fa), lb = items_of(*fb);
  DiffReport rep;
  // What a reader gets besides tensors, where both files are of one format (links, attributes, a
  // pickled object, metadata); an entry named as a tensor holds its variable-length values.
  std::map<std::string, OtherContent> oa, ob;  // by OtherContent::pairing()
  if (fa->content_format() == fb->content_format()) {
    for (auto& o : fa->other_content()) oa.emplace(o.pairing(), std::move(o));
    for (auto& o : fb->other_content()) ob.emplace(o.pairing(), std::move(o));
  }
  for (const auto& [path, xa] : la) {
    const auto& ia = xa.info;
    DatasetDiff dd;
    dd.path = path;
    dd.dtype = ia.type_desc;
    dd.numel = ia.numel();
    const auto it = lb.find(path);
    if (it == lb.end()) {
      dd.status = "only-in-a";
      rep.datasets.push_back(dd);
      oa.erase(values_key(path));
      continue;
    }
    const auto& xb = it->second;
    const auto& ib = xb.info;
    const bool values = ia.dtype && ib.dtype;
    // A type mismatch is a difference; types neither side interprets must match exactly.
    if (ia.dtype.has_value() != ib.dtype.has_value()) dd.status = "dtype-mismatch";
    else if (values && (*ia.dtype != *ib.dtype || ia.big_endian != ib.big_endian)) dd.status = "dtype-mismatch";
    else if (!values && (ia.type_desc != ib.type_desc || ia.type_code != ib.type_code || xa.bits != xb.bits || ia.big_endian != ib.big_endian))
      dd.status = "dtype-mismatch";
    else if (ia.shape != ib.shape || ia.null_space != ib.null_space) dd.status = "shape-mismatch";
    // Not compared: variable-length elements (their stored bytes are heap addresses), an element
    // width the file does not give, more elements than an index reaches.
    else if (!values && ia.numel() && (ia.variable_length || ib.variable_length || xa.bits == 0 || ia.numel() > ckpt::max_elements))
      dd.status = "unsupported";
    // Variable-length values the format renders as text (HDF5 strings): compared as that text.
    const auto ta = oa.find(values_key(path)), tb = ob.find(values_key(path));
    if (ta != oa.end() && tb != ob.end() && dd.status == "unsupported" && ta->second.compared && tb->second.compared) {
      dd.compared = "text";
      dd.differing_known = false;
      dd.status = ta->second.value == tb->second.value ? "same" : "differ";
    }
    if (ta != oa.end()) oa.erase(ta);  // a tensor's values belong to its own entry, whatever its status
    if (tb != ob.end()) ob.erase(tb);
    if (dd.status != "same" || dd.compared == "text") {
      rep.datasets.push_back(dd);
      continue;
    }
    dd.compared = values ? "values" : "bytes";
    if (ia.numel() == 0 || xa.bits == 0) {  // no element: the same
      rep.datasets.push_back(dd);
      continue;
    }
    // Packed sub-byte elements (F4, F6) are compared a byte at a time.
    const bool packed = xa.bits % 8 != 0;
    const std::uint64_t size = packed ? 1 : xa.bits / 8;
    const std::uint64_t units = packed ? ia.logical_bytes : ia.numel();
    const auto dt = values ? *ia.dtype : ckpt::DType::u8;
    // `count` equal pairs of elements (both unallocated: fill values) at a and b.
    auto compare = [&](const std::byte* pa, const std::byte* pb, std::uint64_t count) {
      if (!values) {
        if (std::memcmp(pa, pb, size) != 0) dd.differing += count;
        return;
      }
      const std::uint64_t xa_ = load_word(pa, static_cast<unsigned>(size), ia.big_endian);
      const std::uint64_t xb_ = load_word(pb, static_cast<unsigned>(size), ib.big_endian);
      const double va = ckpt::word_to_double(dt, xa_), vb = ckpt::word_to_double(dt, xb_);
      if (ckpt::dtype_is_float(dt)) {
        dd.nan_a += std::isnan(va) ? count : 0;
        dd.nan_b += std::isnan(vb) ? count : 0;
        dd.inf_a += std::isinf(va) ? count : 0;
        dd.inf_b += std::isinf(vb) ? count : 0;
      }
      if (xa_ == xb_) return;
      dd.differing += count;
      for (std::uint64_t x = xa_ ^ xb_; x; x &= x - 1) dd.bit_histogram[static_cast<unsigned>(std::countr_zero(x))] += count;
      // 64-bit integers may differ by less than a double's spacing near them: their gap is taken exactly.
      const double err = dt == ckpt::DType::i64   ? exact_gap(static_cast<std::int64_t>(xa_), static_cast<std::int64_t>(xb_))
                         : dt == ckpt::DType::u64 ? exact_gap(xa_, xb_)
                                                  : std::fabs(va - vb);
      if (std::isnan(err) || std::isinf(err)) {
        dd.max_abs_error = std::numeric_limits<double>::infinity();
        dd.max_rel_error = std::numeric_limits<double>::infinity();
      } else {
        dd.max_abs_error = std::max(dd.max_abs_error, err);
        dd.max_rel_error = std::max(dd.max_rel_error, rel_error(va, err));
      }
    };
    auto compare_all = [&](const std::vector<std::byte>& ba, const std::vector<std::byte>& bb) {
      if (ba.size() != bb.size()) throw Error(a + " / " + b + ": tensor " + display_name(path) + ": reads of different lengths");
      for (std::size_t i = 0; i < ba.size() / size; ++i) compare(ba.data() + i * size, bb.data() + i * size, 1);
    };
    std::vector<std::byte> ba, bb;
    const bool plain = !xa.view && !xb.view;
    const auto sa = plain && units ? fa->stored_layout(xa.tensor) : StoredLayout{};
    const auto sb = plain && units ? fb->stored_layout(xb.tensor) : StoredLayout{};
    // Whether each file reads this tensor's elements as boxes (read_box): not packed or opaque
    // elements of a byte-run format, whose element width only read_bytes knows.
    auto boxes_ok = [&](Storage& f, const Item& x) { return values || !f.read_bytes(x.tensor, 0, 0, ba); };
    if (sa.sparse && sb.sparse && !packed) {
      // Both mostly unallocated (reading the extents would cost far more than the files hold):
      // the allocated chunks of A, those of B outside them, then every other element at once.
      std::uint64_t covered = 0;
      auto region = [&](const StoredRegion& r, const StoredLayout* skip) {
        fa->read_box(xa.tensor, r.start, r.count, ba);
        fb->read_box(xb.tensor, r.start, r.count, bb);
        std::vector<hsize_t> nd(r.start);
        for (std::size_t i = 0; i < ba.size() / size; ++i) {
          if (skip == nullptr || !skip->in_regions(nd)) {
            compare(ba.data() + i * size, bb.data() + i * size, 1);
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
      if (covered < ia.numel() && sa.fill.size() >= size && sb.fill.size() >= size) compare(sa.fill.data(), sb.fill.data(), ia.numel() - covered);
    } else if (plain && !packed && boxes_ok(*fa, xa) && boxes_ok(*fb, xb)) {
      // Boxes of about a slab (whole chunks of A where chunked, split inside a row when a row is
      // larger): the cost of the larger file's data, the memory of two slabs.
      for_each_tile(ia.shape, ia.chunks, std::max<std::uint64_t>(1, slab_bytes / size), [&](const ckpt::Box& box) {
        fa->read_box(xa.tensor, box.start, box.count, ba);
        fb->read_box(xb.tensor, box.start, box.count, bb);
        compare_all(ba, bb);
      });
    } else {
      // Flat ranges of about a slab (a strided view: a quarter, for its index table).
      const bool strided = (xa.view && !contiguous(*xa.view)) || (xb.view && !contiguous(*xb.view));
      const std::uint64_t step = std::max<std::uint64_t>(1, slab_bytes / size / (strided ? 4 : 1));
      for (std::uint64_t u = 0; u < units; u += step) {
        const std::uint64_t n = std::min(step, units - u);
        read_units(*fa, xa, size, u, n, ba);
        read_units(*fb, xb, size, u, n, bb);
        compare_all(ba, bb);
      }
    }
    // Packed sub-byte elements: which of the elements in a differing byte differ is the format's
    // packing, so only the verdict is given (differing: null).
    if (dd.differing) dd.status = "differ";
    if (packed) dd.differing_known = false;
    rep.datasets.push_back(dd);
  }
  for (const auto& [path, xb] : lb)
    if (!la.count(path)) {
      DatasetDiff dd;
      dd.path = path;
      dd.dtype = xb.info.type_desc;
      dd.numel = xb.info.numel();
      dd.status = "only-in-b";
      rep.datasets.push_back(dd);
      ob.erase(values_key(path));
    }
  // A value not rendered on either side is never "the same".
  // An item in one file only is "unsupported" (not compared), not "only-in", where the other file's
  // walk could not read it: its HDF5 attribute walk failed, or the attributes of its object could
  // not be listed there.
  struct Unread {
    bool all = false;               // the whole walk (attributes and string values)
    std::set<std::string> objects;  // the attributes of these objects
  };
  auto unread_of = [](const std::map<std::string, OtherContent>& m) {
    Unread u;
    for (const auto& [k, o] : m)
      if (!o.compared && o.attribute.empty()) {
        if (k == std::string_view("\0attr-failed", 12)) u.all = true;
        else if (!o.object.empty()) u.objects.insert(o.object);
      }
    return u;
  };
  const Unread ua = unread_of(oa), ub = unread_of(ob);
  auto unread_in = [](const Unread& u, const OtherContent& v) {
    const bool attr = v.pairing().starts_with(std::string_view("\0attr\0", 6)), values = v.pairing().starts_with(values_key(""));
    return (attr || values) && (u.all || (attr && u.objects.count(v.object)));
  };
  for (const auto& [k, v] : oa) {
    const auto it = ob.find(k);
    if (it == ob.end())
      rep.others.push_back({v.name, v.compared && !unread_in(ub, v) ? "only-in-a" : "unsupported", v.value, {}, v.object, v.attribute});
    else if (!v.compared || !it->second.compared) rep.others.push_back({v.name, "unsupported", v.value, it->second.value, v.object, v.attribute});
    else if (it->second.value != v.value) rep.others.push_back({v.name, "differ", v.value, it->second.value, v.object, v.attribute});
  }
  for (const auto& [k, v] : ob)
    if (!oa.count(k))
      rep.others.push_back({v.name, v.compared && !unread_in(ua, v) ? "only-in-b" : "unsupported", {}, v.value, v.object, v.attribute});
  return rep;
}

}  // namespace resil::inject
