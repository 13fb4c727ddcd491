// ExtentStorage: tensors as byte extents of the file (see extent_storage.hpp).
#include "extent_storage.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "resil/ckpt/hash.hpp"
#include "resil/inject/names.hpp"

namespace resil::inject {

namespace {

bool inside(std::uint64_t offset, std::uint64_t n, std::uint64_t size) noexcept { return offset <= size && n <= size - offset; }

}  // namespace

std::optional<ckpt::DType> dtype_of(formats::DType t) noexcept {
  using F = formats::DType;
  switch (t) {
    case F::f8_e8m0: return ckpt::DType::f8_e8m0;
    case F::u64: return ckpt::DType::u64;
    case F::u32: return ckpt::DType::u32;
    case F::u16: return ckpt::DType::u16;
    case F::f8_e4m3fnuz: return ckpt::DType::f8_e4m3fnuz;
    case F::f8_e5m2fnuz: return ckpt::DType::f8_e5m2fnuz;
    case F::f4: case F::f6_e2m3: case F::f6_e3m2: case F::c64: case F::f4_x2: return std::nullopt;
    case F::f64: return ckpt::DType::f64;
    case F::f32: return ckpt::DType::f32;
    case F::f16: return ckpt::DType::f16;
    case F::bf16: return ckpt::DType::bf16;
    case F::f8_e4m3: return ckpt::DType::f8_e4m3;
    case F::f8_e5m2: return ckpt::DType::f8_e5m2;
    case F::i64: return ckpt::DType::i64;
    case F::i32: return ckpt::DType::i32;
    case F::i16: return ckpt::DType::i16;
    case F::i8: return ckpt::DType::i8;
    case F::u8: return ckpt::DType::u8;
    case F::boolean: return ckpt::DType::boolean;
  }
  return ckpt::DType::u8;
}

Tensor make_tensor(std::string name, TensorRole role, formats::DType dtype, std::vector<std::uint64_t> shape, bool big_endian) {
  Tensor t;
  t.role = role;
  t.info.path = "/" + std::move(name);
  t.info.dtype = dtype_of(dtype);
  // Opaque dtypes (packed sub-byte floats, complex): listed, never flipped (dtype empty).
  t.info.type_desc = t.info.dtype ? std::string(ckpt::dtype_name(*t.info.dtype)) : std::string(formats::dtype_name(dtype)) + " (opaque)";
  t.info.big_endian = big_endian;
  t.info.shape = ckpt::Shape(shape.begin(), shape.end());
  t.info.layout = ckpt::Layout::contiguous;
  t.info.logical_bytes = t.info.numel() * formats::dtype_bits(dtype) / 8;
  t.info.stored_bytes = t.info.logical_bytes;
  t.storage = t.info.path;
  return t;
}

Mapping map_for_parsing(const std::string& path) {
  const Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (!fd) throw IoError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw IoError(path + ": cannot stat: " + std::strerror(errno));
  if (st.st_size == 0) return {};
  auto m = Mapping::map(fd.get(), static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE);
  if (!m) throw IoError(path + ": cannot map: " + std::strerror(errno));
  return m;
}

ExtentStorage::ExtentStorage(const std::string& path, Access access) : Storage(path, access), raw_(path, access != Access::read) {}

void ExtentStorage::add(Item it) {
  if (!it.tensor.staged && !inside(it.extent.offset, it.extent.length, raw_.file_size()))
    throw CorruptInputError(path_ + ": tensor " + display_name(it.tensor.info.path) + " lies beyond the end of the file");
  // A name is how flip logs, selections and revert find a tensor again: it must mean one tensor.
  // The parsers refuse the ways they know to build one name twice; this holds it for any adapter.
  const std::size_t i = items_.size();
  auto claim = [&](const std::string& name) {
    const auto [at, fresh] = by_name_.emplace(name, i);
    if (!fresh && at->second != i)
      throw CorruptInputError(path_ + ": two tensors are named " + display_name(name) + " (a name must identify one tensor)");
  };
  claim(it.tensor.info.path);
  for (const auto& a : it.tensor.info.aliases) claim(a);
  items_.push_back(std::move(it));
}

const ExtentStorage::Item& ExtentStorage::item(const std::string& tensor) const {
  const auto it = by_name_.find(tensor);
  if (it == by_name_.end()) throw CorruptInputError(path_ + ": tensor " + display_name(tensor) + " does not exist");
  return items_[it->second];
}

std::string ExtentStorage::where(const Item& it) const { return path_ + ": tensor " + display_name(it.tensor.info.path); }

std::vector<Tensor> ExtentStorage::tensors() {
  std::vector<Tensor> out;
  for (const auto& it : items_) out.push_back(it.tensor);
  std::sort(out.begin(), out.end(), [](const Tensor& a, const Tensor& b) { return a.info.path < b.info.path; });
  return out;
}

std::vector<Extent> ExtentStorage::extents(const std::string& tensor) {
  const Item& it = item(tensor);
  if (it.tensor.staged || it.extent.length == 0) return {};
  return {it.extent};
}

unsigned ExtentStorage::width_of(const std::string& tensor) { return item(tensor).size * 8; }

std::vector<std::uint64_t> ExtentStorage::staged_only(const std::string& tensor, std::vector<std::uint64_t> indices) {
  return item(tensor).tensor.staged ? indices : std::vector<std::uint64_t>{};
}

std::vector<std::byte>& ExtentStorage::staged(const Item& it) {
  const std::size_t i = static_cast<std::size_t>(&it - items_.data());
  auto found = staged_.find(i);
  if (found != staged_.end()) return found->second;
  // One unedited tensor decoded at a time: another's bytes go before this one's are decoded (a
  // scan or diff of an .npz of many large deflated members holds one). Edited ones stay for the
  // rewrite.
  for (auto k = staged_.begin(); k != staged_.end();) k = staged_dirty_.count(k->first) ? std::next(k) : staged_.erase(k);
  return staged_.emplace(i, load_staged(it)).first->second;
}

void ExtentStorage::changed(const Item&, std::uint64_t, std::span<const std::byte>, std::span<const std::byte>) {}

void ExtentStorage::edit(const std::string& tensor, std::vector<std::uint64_t> indices, const BlockFn& fn) {
  if (indices.empty()) return;
  const Item& it = item(tensor);
  const std::uint64_t numel = it.tensor.info.numel();
  if (indices.back() >= numel)
    throw MismatchError(where(it) + ": element " + std::to_string(indices.back()) + " is beyond its " + std::to_string(numel) + " elements");
  const unsigned size = it.size;
  std::vector<std::uint64_t> offs(indices.size());
  for (std::size_t k = 0; k < indices.size(); ++k) offs[k] = indices[k] * size;
  if (it.tensor.staged) {
    // Decoded bytes in memory: only a rewrite (a private copy) may change them, re-encoded in finish().
    auto& bytes = staged(it);
    std::vector<std::uint64_t> words(indices.size());
    for (std::size_t k = 0; k < words.size(); ++k) words[k] = load_word(bytes.data() + offs[k], size, it.big_endian);
    const auto before = words;
    fn(indices, words);
    if (access_ == Access::read || words == before) return;
    if (access_ == Access::in_place)
      throw Error(where(it) + ": element " + std::to_string(indices.front()) +
                  " lies in a compressed member, which only a staged copy may change (in-place edit refused)");
    for (std::size_t k = 0; k < words.size(); ++k) store_word(bytes.data() + offs[k], size, it.big_endian, words[k]);
    staged_dirty_[static_cast<std::size_t>(&it - items_.data())] = true;
    return;
  }
  const std::uint64_t addr = it.extent.offset;
  const bool write = access_ != Access::read;
  const auto way = raw_.way_for(indices.size(), addr + offs.front(), addr + offs.back() + size, sync_ && write);
  // The words RawWords stores are exactly those fn changed: report each to the adapter.
  raw_.edit(way, addr, offs, indices, size, it.big_endian, write, where(it),
            [&](std::span<const std::uint64_t> idx, std::span<std::uint64_t> words) {
              const std::vector<std::uint64_t> before(words.begin(), words.end());
              fn(idx, words);
              if (!write) return;
              std::byte ob[8], nb[8];
              for (std::size_t k = 0; k < words.size(); ++k) {
                if (words[k] == before[k]) continue;
                store_word(ob, size, it.big_endian, before[k]);
                store_word(nb, size, it.big_endian, words[k]);
                changed(it, addr + offs[k], std::span<const std::byte>(ob, size), std::span<const std::byte>(nb, size));
              }
            });
}

void ExtentStorage::read_box(const std::string& tensor, const std::vector<hsize_t>& start, const std::vector<hsize_t>& count,
                             std::vector<std::byte>& buf) {
  const Item& it = item(tensor);
  const auto& shape = it.tensor.info.shape;
  const std::size_t rank = shape.size();
  if (start.size() != rank || count.size() != rank) throw UsageError(where(it) + ": box of rank " + std::to_string(start.size()));
  std::uint64_t total = 1;
  for (std::size_t d = 0; d < rank; ++d) {
    if (start[d] > shape[d] || count[d] > shape[d] - start[d]) throw UsageError(where(it) + ": box outside the tensor");
    total *= count[d];
  }
  buf.resize(total * it.size);
  if (total == 0) return;
  // Runs of C order: along dimension j, which with every dimension after it whole is one
  // contiguous run (a box of whole rows is one read, not one per row).
  std::size_t j = rank ? rank - 1 : 0;
  std::uint64_t run = rank ? count[rank - 1] : 1;
  while (j > 0 && start[j] == 0 && count[j] == shape[j]) {
    --j;
    run *= count[j];
  }
  std::vector<hsize_t> nd(start);
  for (std::uint64_t done = 0; done < total; done += run) {
    std::uint64_t flat = 0;
    for (std::size_t d = 0; d < rank; ++d) flat = flat * shape[d] + nd[d];
    std::byte* out = buf.data() + done * it.size;
    const std::uint64_t n = run * it.size;
    if (it.tensor.staged) std::memcpy(out, staged(it).data() + flat * it.size, n);
    else raw_.read(out, n, it.extent.offset + flat * it.size, where(it));
    for (std::size_t d = j; d-- > 0;) {  // next run: the dimensions before j
      if (++nd[d] < start[d] + count[d]) break;
      nd[d] = start[d];
    }
  }
}

bool ExtentStorage::read_bytes(const std::string& tensor, std::uint64_t offset, std::uint64_t length, std::vector<std::byte>& buf) {
  const Item& it = item(tensor);
  const std::uint64_t size = it.tensor.info.logical_bytes;
  if (!inside(offset, length, size))
    throw CorruptInputError(where(it) + ": bytes [" + std::to_string(offset) + ", +" + std::to_string(length) + ") lie beyond its " +
                            std::to_string(size) + " bytes");
  buf.resize(length);
  if (length == 0) return true;
  if (it.tensor.staged) std::memcpy(buf.data(), staged(it).data() + offset, length);
  else raw_.read(buf.data(), length, it.extent.offset + offset, where(it));
  return true;
}

void ExtentStorage::for_each_slab(const std::string& tensor, std::size_t max_bytes,
                                  const std::function<void(std::span<const std::byte>)>& fn) {
  const Item& it = item(tensor);
  const std::uint64_t length = it.tensor.info.logical_bytes;
  const std::uint64_t step = std::max<std::uint64_t>(it.size, max_bytes / it.size * it.size);
  if (it.tensor.staged) {
    const auto& bytes = staged(it);
    for (std::uint64_t at = 0; at < length; at += step)
      fn(std::span<const std::byte>(bytes.data() + at, std::min(step, length - at)));
    return;
  }
  std::vector<std::byte> buf;
  for (std::uint64_t at = 0; at < length; at += step) {
    buf.resize(std::min(step, length - at));
    raw_.read(buf.data(), buf.size(), it.extent.offset + at, where(it));
    fn(buf);
  }
}

std::uint64_t ExtentStorage::checksum(const std::string& tensor) {
  ckpt::Xxh64 h;
  for_each_slab(tensor, std::size_t{32} << 20, [&](std::span<const std::byte> b) { h.update(b); });
  return h.digest();
}

void ExtentStorage::close() { raw_.close(access_ != Access::read && sync_, path_); }

}  // namespace resil::inject
