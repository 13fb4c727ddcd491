// The HDF5 adapter: tensors are the file's datasets; words at known offsets go through RawWords,
// gzip chunks through deflate_chunks, everything else through HDF5 itself.
#include "resil/inject/hdf5_storage.hpp"

#include <algorithm>
#include <utility>

#include "hdf5_layout.hpp"
#include "hdf5_values.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/inject/deflate_chunks.hpp"
#include "resil/inject/names.hpp"

namespace resil::inject {

namespace h5 = ckpt::h5;

// Only a private copy is opened read-write through HDF5: a read-write open writes the superblock
// (status flags on version 2/3, which a kill leaves set), and an in-place edit must never do that.
Hdf5Storage::Hdf5Storage(const std::string& path, Access access)
    : Storage(path, access),
      file_(h5::open_file(path, access == Access::rewrite ? h5::Mode::read_write : h5::Mode::read)),
      raw_(path, access != Access::read) {
  h5::SilenceErrors quiet;
  h5::PropList fcpl(H5Fget_create_plist(file_));
  hsize_t ub = 0;
  if (fcpl.valid() && H5Pget_userblock(fcpl, &ub) >= 0) base_ = ub;
}

Hdf5Storage::~Hdf5Storage() = default;

void Hdf5Storage::close() {
  if (file_.valid()) {
    h5::SilenceErrors quiet;
    if (access_ == Access::rewrite && H5Fflush(file_, H5F_SCOPE_LOCAL) < 0) h5::throw_error(path_ + ": flush failed");
    const hid_t id = file_.release();
    if (H5Fclose(id) < 0) h5::throw_error(path_ + ": close failed");
  }
  raw_.close(access_ != Access::read && sync_, path_);
}

std::vector<Tensor> Hdf5Storage::tensors() {
  std::vector<Tensor> out;
  for (auto& info : ckpt::list_datasets(file_)) {
    Tensor t;
    // Roles of the resil schema; select() also matches a hard link's other paths.
    t.role = schema_role(info.path);
    t.storage = info.path;  // hard links are one object, listed once
    t.staged = !info.filters.empty();
    t.info = std::move(info);
    out.push_back(std::move(t));
  }
  return out;
}

// Soft and external links, which tensors() does not follow (where they lead is what a reader
// gets), every object's attributes, and the values of variable-length datasets (hdf5_values.hpp).
std::vector<OtherContent> Hdf5Storage::other_content() {
  struct Walk {
    hid_t file;
    std::vector<OtherContent> out;
  } walk{file_, {}};
  h5::SilenceErrors quiet;
  auto visit = [](hid_t, const char* name, const H5L_info_t* info, void* data) -> herr_t {
    auto& w = *static_cast<Walk*>(data);
    if (info->type != H5L_TYPE_SOFT && info->type != H5L_TYPE_EXTERNAL) return 0;
    const std::string path = std::string("/") + name;
    std::string value(info->u.val_size, '\0');
    if (H5Lget_val(w.file, path.c_str(), value.data(), value.size(), H5P_DEFAULT) < 0) {
      w.out.push_back({path, "a link whose value cannot be read", false});
      return 0;
    }
    if (info->type == H5L_TYPE_SOFT) {
      w.out.push_back({path, "soft link to " + std::string(value.c_str())});
      return 0;
    }
    const char* file = nullptr;
    const char* obj = nullptr;
    unsigned flags = 0;
    if (H5Lunpack_elink_val(value.data(), value.size(), &flags, &file, &obj) < 0 || !file || !obj)
      w.out.push_back({path, "an external link whose value cannot be read", false});
    else
      w.out.push_back({path, "external link to " + std::string(file) + ":" + obj});
    return 0;
  };
  if (H5Lvisit(file_, H5_INDEX_NAME, H5_ITER_INC, visit, &walk) < 0) h5::throw_error(path_ + ": walk the file's links", ExitCode::corrupt_input);
  std::vector<std::string> vlen;
  for (const auto& info : ckpt::list_datasets(file_))
    if (info.variable_length) vlen.push_back(info.path);
  for (auto& a : hdf5_other_values(file_, path_, vlen)) walk.out.push_back(std::move(a));
  return std::move(walk.out);
}

std::vector<Extent> Hdf5Storage::extents(const std::string& dataset) {
  const h5::Dataset d = h5::open_dataset(file_, dataset, path_);
  h5::SilenceErrors quiet;
  h5::PropList dcpl(H5Dget_create_plist(d));
  if (H5Pget_layout(dcpl) != H5D_CONTIGUOUS || !ckpt::external_files(d).empty()) return {};
  const haddr_t at = H5Dget_offset(d);
  if (at == HADDR_UNDEF) return {};
  return {{at, H5Dget_storage_size(d)}};
}

// External raw data files are not part of the HDF5 file: an -o copy would share them with its
// input and an in-place edit could be neither staged nor undone by a rename (docs/design/ckpt-flip-io.md).
std::string Hdf5Storage::unwritable(const std::string& dataset) {
  const auto d = h5::open_dataset(file_, dataset, path_, false);
  const auto ext = ckpt::external_files(d);
  return ext.empty() ? std::string() : "keeps its elements in external raw file " + ext.front();
}

unsigned Hdf5Storage::width_of(const std::string& dataset) {
  h5::Dataset d = h5::open_dataset(file_, dataset, path_);
  h5::Datatype t(H5Dget_type(d));
  return static_cast<unsigned>(H5Tget_size(t) * 8);
}

StoredLayout Hdf5Storage::stored_layout(const std::string& dataset) {
  const h5::Dataset d = h5::open_dataset(file_, dataset, path_);
  return inject::stored_layout(d, path_ + ": dataset " + display_name(dataset));
}

void Hdf5Storage::read_box(const std::string& dataset, const std::vector<hsize_t>& start, const std::vector<hsize_t>& count,
                        std::vector<std::byte>& buf) {
  const h5::Dataset d = h5::open_dataset(file_, dataset, path_);
  const std::string where = path_ + ": dataset " + display_name(dataset);
  h5::SilenceErrors quiet;
  h5::Datatype ftype(H5Dget_type(d));
  if (start.empty()) {  // a scalar
    buf.resize(H5Tget_size(ftype));
    if (H5Dread(d, ftype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) < 0) h5::throw_error(where + ": read failed", ExitCode::corrupt_input);
    return;
  }
  read_region(d, ftype, StoredRegion{start, count}, buf, where);
}

void Hdf5Storage::for_each_slab(const std::string& dataset, std::size_t max_bytes, const std::function<void(std::span<const std::byte>)>& fn) {
  const h5::Dataset d = h5::open_dataset(file_, dataset, path_);
  h5::SilenceErrors quiet;
  h5::Datatype ftype(H5Dget_type(d));
  ckpt::for_each_slab(d, ftype, max_bytes, fn);
}

std::uint64_t Hdf5Storage::checksum(const std::string& dataset) {
  h5::SilenceErrors quiet;
  return ckpt::dataset_checksum(file_, dataset);
}

std::vector<std::uint64_t> Hdf5Storage::hdf5_only(const std::string& dataset, std::vector<std::uint64_t> indices) {
  const Layout l = layout_of(dataset);
  std::vector<std::uint64_t> out;
  for (const auto& b : blocks_of(l, indices))
    if (b.kind != Block::Kind::raw) out.insert(out.end(), b.idx.begin(), b.idx.end());
  std::sort(out.begin(), out.end());
  return out;
}

void Hdf5Storage::edit(const std::string& dataset, std::vector<std::uint64_t> indices, const BlockFn& fn) {
  if (indices.empty()) return;
  const Layout l = layout_of(dataset);
  auto blocks = blocks_of(l, indices);
  // Chunks of a deflate or shuffle+deflate dataset: raw chunk I/O with libdeflate on a pool
  // (deflate_chunks.hpp). What it leaves (unallocated chunks, a skipped filter) goes on below.
  if (l.filtered && chunk_codec_options().direct &&
      std::all_of(blocks.begin(), blocks.end(), [](const Block& b) { return b.kind == Block::Kind::chunk; }))
    if (const auto pipeline = deflate_pipeline(l.d, l.size)) {
      std::vector<ChunkTask> tasks;
      for (const auto& b : blocks) tasks.push_back({b.start, b.idx});
      const auto mode = access_ == Access::rewrite    ? ChunkWrite::write
                        : access_ == Access::in_place ? ChunkWrite::refuse
                                                      : ChunkWrite::none;
      const auto done = edit_deflate_chunks(l.d, l.where, {l.shape, l.chunk, l.size, l.be}, *pipeline, tasks, mode, fn);
      std::vector<Block> rest;
      for (std::size_t i = 0; i < blocks.size(); ++i)
        if (!done[i]) rest.push_back(std::move(blocks[i]));
      blocks = std::move(rest);
    }
  // One way for all raw blocks of this edit, by their density over the file span they cover.
  std::uint64_t raw_words = 0, first = ~std::uint64_t{0}, end = 0;
  for (const auto& b : blocks)
    if (b.kind == Block::Kind::raw) {
      raw_words += b.idx.size();
      first = std::min(first, b.addr + b.offs.front());
      end = std::max(end, b.addr + b.offs.back() + l.size);
    }
  const auto way = raw_.way_for(raw_words, first, end, sync_ && access_ != Access::read);
  h5::SilenceErrors quiet;
  for (const auto& b : blocks) {
    if (b.kind == Block::Kind::raw) raw_.edit(way, b.addr, b.offs, b.idx, l.size, l.be, access_ != Access::read, l.where, fn);
    else edit_hdf5_block(l, b, fn);
  }
}

// A block only HDF5 can write: a chunk region read as a hyperslab, or a point selection.
void Hdf5Storage::edit_hdf5_block(const Layout& l, const Block& b, const BlockFn& fn) {
  const std::size_t n = b.idx.size();
  std::vector<std::byte> buf;
  std::vector<std::uint64_t> words(n), before;
  h5::Dataspace fsel(H5Scopy(l.space));
  h5::Dataspace msel;
  if (b.kind == Block::Kind::chunk) {
    std::uint64_t region = 1;
    for (auto c : b.count) region *= c;
    buf.resize(region * l.size);
    RESIL_H5_CHECK(H5Sselect_hyperslab(fsel, H5S_SELECT_SET, b.start.data(), nullptr, b.count.data(), nullptr), l.where + ": select chunk");
    msel = h5::Dataspace(H5Screate_simple(l.rank, b.count.data(), nullptr));
    if (H5Dread(l.d, l.ftype, msel, fsel, H5P_DEFAULT, buf.data()) < 0)
      h5::throw_error(l.where + ": cannot read chunk (damaged data or missing filter?)", ExitCode::corrupt_input);
    for (std::size_t k = 0; k < n; ++k) words[k] = load_word(buf.data() + b.offs[k], l.size, l.be);
  } else {
    buf.resize(n * l.size);
    if (l.rank > 0) {
      std::vector<hsize_t> coords(n * l.shape.size());
      for (std::size_t i = 0; i < n; ++i) {
        const auto nd = unravel(b.idx[i], l.shape);
        std::copy(nd.begin(), nd.end(), coords.begin() + static_cast<std::ptrdiff_t>(i * nd.size()));
      }
      RESIL_H5_CHECK(H5Sselect_elements(fsel, H5S_SELECT_SET, n, coords.data()), l.where + ": select elements");
    }
    const hsize_t cnt = n;
    msel = h5::Dataspace(l.rank > 0 ? H5Screate_simple(1, &cnt, nullptr) : H5Screate(H5S_SCALAR));
    if (H5Dread(l.d, l.ftype, msel, fsel, H5P_DEFAULT, buf.data()) < 0)
      h5::throw_error(l.where + ": cannot read elements", ExitCode::corrupt_input);
    for (std::size_t k = 0; k < n; ++k) words[k] = load_word(buf.data() + k * l.size, l.size, l.be);
  }
  before = words;
  fn(b.idx, words);
  if (access_ == Access::read || words == before) return;
  if (access_ == Access::in_place)
    throw Error(l.where + ": element " + std::to_string(b.idx.front()) +
                " lies in a filtered or unallocated block, which only a staged copy may change (in-place edit refused)");
  for (std::size_t k = 0; k < n; ++k)
    store_word(buf.data() + (b.kind == Block::Kind::chunk ? b.offs[k] : k * l.size), l.size, l.be, words[k]);
  if (H5Dwrite(l.d, l.ftype, msel, fsel, H5P_DEFAULT, buf.data()) < 0) h5::throw_error(l.where + ": cannot write " + (b.kind == Block::Kind::chunk ? "chunk" : "elements"));
}

}  // namespace resil::inject
