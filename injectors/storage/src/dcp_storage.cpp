// A torch.distributed.checkpoint (DCP) directory opened as one Storage. `.metadata` (formats::
// parse_dcp_metadata) says, for each tensor of the state dict, its global shape, dtype and chunks
// (a box of the global tensor each) and where each chunk's bytes are: in the file-system writer's
// byte mode, each chunk is a whole torch.save zip archive of the chunk tensor at (offset, length) of
// a data file `__R_N.distcp` (R: the rank that wrote it). Each data file is one ZipStorage holding the
// stored member of every archive in it (their zip directories merged, offsets shifted), so a flip
// updates that member's CRC-32 like any torch.save file. In the safetensors serialization, a data
// file's chunks are the tensors of one safetensors blob (DcpSafetensorsFile), each an extent. The tensors exposed are the global ones,
// by their state-dict names; a global index maps to (chunk, file, local index), and location()
// says so, with the rank that wrote the chunk and the ranks that load it under the checkpoint's
// own plan: a tensor stored as one chunk holding all of it is a replicated one (every rank loads it);
// a tensor in several chunks is sharded, each chunk loaded by the rank that holds that shard.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "extent_storage.hpp"
#include "format_storages.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/core/error.hpp"
#include "resil/inject/file_set.hpp"
#include "resil/inject/formats/dcp.hpp"
#include "resil/inject/formats/safetensors.hpp"
#include "resil/inject/formats/torch.hpp"
#include "resil/inject/names.hpp"
#include "zip_storage.hpp"

namespace resil::inject {

namespace {

namespace fmt = formats;

std::uint64_t numel_of(const std::vector<std::uint64_t>& dims) {
  std::uint64_t n = 1;
  for (const auto d : dims) n *= d;
  return n;
}

// The rank of "__R_N.distcp" (the file-system writer's name for rank R's file N), or nothing.
std::optional<std::uint64_t> writer_rank(const std::string& file) {
  if (!file.starts_with("__") || !file.ends_with(".distcp")) return std::nullopt;
  const char* b = file.data() + 2;
  const char* e = file.data() + file.size();
  std::uint64_t r = 0;
  const auto [p, ec] = std::from_chars(b, e, r);
  if (ec != std::errc() || p == b || *p != '_') return std::nullopt;
  return r;
}

// "PATH: chunk of TENSOR at offset N", the start of every error about one chunk; a chunk stored through
// storage transforms (compression) is refused with it: a flip must land in the tensor's own bytes.
template <class Spec>
std::string chunk_what(const std::string& path, const Spec& s) {
  const std::string what = path + ": chunk of " + display_name("/" + s.tensor) + " at offset " + std::to_string(s.chunk->offset);
  if (!s.chunk->transforms.empty()) {
    std::string list;
    for (const auto& t : s.chunk->transforms) list += (list.empty() ? "" : ", ") + t;
    throw UsageError(what + ": stored through storage transforms (" + list +
                     "), which ckpt-flip does not undo and redo: a flip must land in the tensor's own bytes");
  }
  return what;
}

// One data file: every chunk in it a tensor (named "/<fqn>#<chunk>"), its bytes the stored member
// of the chunk's torch.save archive.
class DcpFile final : public ZipStorage {
public:
  struct Spec {
    std::string inner;                 // the chunk's name here
    const fmt::DcpChunk* chunk;
    fmt::DType dtype;
    std::string tensor;                // for messages
  };
  DcpFile(const std::string& path, Access access, const std::vector<Spec>& specs) : ZipStorage(path, access) {
    const Mapping m = map_for_parsing(path);
    const auto all = fmt::bytes_of(m.data(), m.size());
    // Each chunk its own archive: two sharing bytes would be one word counted (and flipped) twice,
    // and a log of both could never be undone.
    std::vector<const Spec*> by_offset;
    for (const auto& s : specs) by_offset.push_back(&s);
    std::sort(by_offset.begin(), by_offset.end(), [](const Spec* a, const Spec* b) { return a->chunk->offset < b->chunk->offset; });
    for (std::size_t k = 1; k < by_offset.size(); ++k) {
      const auto& a = *by_offset[k - 1]->chunk;
      if (by_offset[k]->chunk->offset - a.offset < a.length)
        throw CorruptInputError(chunk_what(path, *by_offset[k]) + ": .metadata places it in the bytes of the chunk of " +
                                display_name("/" + by_offset[k - 1]->tensor) + " at offset " + std::to_string(a.offset) + " (" +
                                std::to_string(a.length) + " bytes): chunks must not share bytes");
    }
    for (const auto& s : specs) {
      const auto& c = *s.chunk;
      const std::string what = chunk_what(path, s);
      if (c.offset > all.size() || c.length > all.size() - c.offset)
        throw CorruptInputError(what + ": .metadata places " + std::to_string(c.length) + " bytes beyond the end of the file (" +
                                std::to_string(all.size()) + " bytes)");
      const auto sub = all.subspan(c.offset, c.length);
      if (sub.size() < 4 || std::memcmp(sub.data(), "PK\x03\x04", 4) != 0) throw CorruptInputError(what + ": not a torch.save archive");
      auto a = parse_named(what, [&] { return fmt::parse_torch(sub); });
      if (a.legacy || a.state.tensors.size() != 1 || a.state.storages.size() != 1)
        throw CorruptInputError(what + ": not one torch.save tensor");
      const auto& t = a.state.tensors[0];
      if (t.dtype != s.dtype) throw CorruptInputError(what + ": its dtype is not the one .metadata gives");
      const std::uint64_t n = numel_of(c.sizes);
      std::int64_t expect = 1;
      bool contiguous = t.storage_offset == 0 && t.shape.size() == c.sizes.size();
      for (std::size_t d = t.shape.size(); contiguous && d-- > 0;) {
        contiguous = static_cast<std::uint64_t>(t.shape[d]) == c.sizes[d] && (t.shape[d] == 1 || t.stride[d] == expect);
        expect *= t.shape[d];
      }
      const std::uint64_t size = fmt::dtype_size(t.dtype);
      if (!contiguous || a.storage_data[0].size != n * size)
        throw CorruptInputError(what + ": its tensor is not the chunk's shape, contiguous, over all of its storage");
      // The archive's stored member, its offsets shifted to the data file's.
      auto e = a.zip.entries.at(a.storage_entries[0]);
      for (auto* o : {&e.header_offset, &e.data_offset, &e.local_crc_offset, &e.central_crc_offset, &e.end_offset}) *o += c.offset;
      zip_.entries.push_back(e);
      Item it;
      it.tensor = make_tensor(s.inner, TensorRole::other, t.dtype, c.sizes, false);
      it.extent = {c.offset + a.storage_data[0].offset, n * size};
      it.size = static_cast<unsigned>(size);
      it.part = zip_.entries.size() - 1;
      add(std::move(it));
    }
  }
  Format format() const noexcept override { return Format::dcp; }
};

// Whether a chunk's stored bytes start a safetensors blob (an 8-byte length, then '{'): DCP's
// safetensors serialization, where .metadata's offset is the blob's start, not the chunk's bytes.
bool safetensors_at(fmt::Bytes all, std::uint64_t offset) {
  return offset <= all.size() && all.size() - offset >= 9 && all[offset + 8] == std::byte{'{'} &&
         std::memcmp(all.data() + offset, "PK\x03\x04", 4) != 0;
}

// One data file in the safetensors serialization: after the byte values, one safetensors blob of
// the rank's chunks, each under its fqn, with `__metadata__` DCP_SHARDING_INFO (a JSON string
// {fqn: {"saved_offsets": [...]}}) giving each one's offsets in the global tensor; every chunk's
// _StorageInfo is (file, the blob's start, the chunk's byte count). Each blob tensor must be a chunk
// .metadata places in this file, with its offsets, sizes, dtype and byte count; the header is never
// written.
class DcpSafetensorsFile final : public ExtentStorage {
public:
  DcpSafetensorsFile(const std::string& path, Access access, const std::vector<DcpFile::Spec>& specs) : ExtentStorage(path, access) {
    const Mapping m = map_for_parsing(path);
    const auto all = fmt::bytes_of(m.data(), m.size());
    const std::uint64_t start = specs.front().chunk->offset;
    const std::string blob = path + ": safetensors blob at offset " + std::to_string(start);
    std::map<std::string, const DcpFile::Spec*> by_fqn;
    for (const auto& s : specs) {
      const auto& c = *s.chunk;
      const std::string what = chunk_what(path, s);
      if (c.offset != start)
        throw CorruptInputError(what + ": .metadata places it outside the file's safetensors blob (which starts at offset " +
                                std::to_string(start) + ")");
      if (!by_fqn.emplace(s.tensor, &s).second)
        throw CorruptInputError(what + ": a second chunk of " + s.tensor + " in one safetensors blob (its tensors are named by fqn)");
    }
    if (start > all.size()) throw CorruptInputError(blob + ": beyond the end of the file (" + std::to_string(all.size()) + " bytes)");
    const auto st = parse_named(blob, [&] { return fmt::parse_safetensors(all.subspan(start)); });
    std::string sharding;
    for (const auto& [k, v] : st.metadata)
      if (k == "DCP_SHARDING_INFO") sharding = v;
    if (sharding.empty()) throw CorruptInputError(blob + ": no DCP_SHARDING_INFO in its __metadata__");
    nlohmann::json info;
    try {
      info = nlohmann::json::parse(sharding);
    } catch (const nlohmann::json::exception&) {
      throw CorruptInputError(blob + ": DCP_SHARDING_INFO is not JSON");
    }
    if (!info.is_object()) throw CorruptInputError(blob + ": DCP_SHARDING_INFO is not a JSON object");
    for (const auto& [fqn, v] : info.items())
      if (!by_fqn.count(fqn)) throw CorruptInputError(blob + ": DCP_SHARDING_INFO names " + fqn + ", which .metadata places in no chunk of this file");
    for (const auto& t : st.tensors) {
      const auto it = by_fqn.find(t.name);
      if (it == by_fqn.end()) throw CorruptInputError(blob + ": tensor " + t.name + " is no chunk .metadata places in this file");
      const auto& s = *it->second;
      const auto& c = *s.chunk;
      const std::string what = blob + ": tensor " + t.name;
      if (!info.contains(t.name)) throw CorruptInputError(what + ": not in DCP_SHARDING_INFO");
      const auto& e = info.at(t.name);
      std::vector<std::uint64_t> saved;
      try {
        saved = e.at("saved_offsets").get<std::vector<std::uint64_t>>();
      } catch (const nlohmann::json::exception&) {
        throw CorruptInputError(what + ": its DCP_SHARDING_INFO entry has no saved_offsets list of integers");
      }
      if (saved != c.offsets) throw CorruptInputError(what + ": its saved_offsets in DCP_SHARDING_INFO are not the chunk's offsets in .metadata");
      if (t.dtype != s.dtype) throw CorruptInputError(what + ": its dtype is not the one .metadata gives");
      if (t.shape != c.sizes) throw CorruptInputError(what + ": its shape is not the chunk's sizes in .metadata");
      if (t.size != c.length) throw CorruptInputError(what + ": " + std::to_string(t.size) + " bytes, .metadata's length says " + std::to_string(c.length));
      Item item;
      item.tensor = make_tensor(s.inner, TensorRole::other, t.dtype, c.sizes, false);
      item.extent = {start + t.offset, t.size};
      item.size = static_cast<unsigned>(fmt::dtype_size(t.dtype));
      add(std::move(item));
      by_fqn.erase(it);
    }
    if (!by_fqn.empty())
      throw CorruptInputError(blob + ": no tensor " + by_fqn.begin()->first + ", a chunk .metadata places in this file");
  }
  Format format() const noexcept override { return Format::dcp; }
};

TensorRole role_of(const std::string& fqn) {
  for (const char* p : {"optimizer.", "optim.", "optimizer_state", "optim_state"})
    if (fqn.starts_with(p)) return TensorRole::optimizer;
  for (const char* s : {".exp_avg", ".exp_avg_sq", ".momentum_buffer", ".step"})
    if (fqn.ends_with(s)) return TensorRole::optimizer;
  return TensorRole::model;
}

class DcpStorage final : public Storage {
public:
  DcpStorage(const std::string& path, Access access) : Storage(path, access), set_(file_set(path, Format::dcp)) {
    const std::string mdpath = (set_.dir / set_.index).string();
    const Mapping m = map_for_parsing(mdpath);
    md_ = parse_named(mdpath, [&] { return fmt::parse_dcp_metadata(fmt::bytes_of(m.data(), m.size())); });
    for (const auto& f : set_.files)
      if (const auto r = writer_rank(f)) world_ = std::max(world_, *r + 1);
    std::map<std::string, std::vector<DcpFile::Spec>> specs;
    for (const auto& t : md_.tensors) {
      Global g;
      g.dtype = t.dtype;
      g.meta = &t;
      std::uint64_t covered = 0;
      for (std::size_t c = 0; c < t.chunks.size(); ++c) {
        const auto& ch = t.chunks[c];
        covered += numel_of(ch.sizes);
        Chunk k{ch.file, t.name + "#" + std::to_string(c), &ch};
        specs[ch.file].push_back({k.inner, &ch, t.dtype, t.name});
        k.inner = "/" + k.inner;  // the name DcpFile gives it
        g.chunks.push_back(std::move(k));
      }
      // The chunks must tile the tensor: no element in two (checked pairwise) and none in none (counts).
      for (std::size_t a = 0; a < t.chunks.size(); ++a)
        for (std::size_t b = a + 1; b < t.chunks.size(); ++b)
          if (overlap(t.chunks[a], t.chunks[b]))
            throw CorruptInputError(mdpath + ": dcp metadata: chunks " + std::to_string(a) + " and " + std::to_string(b) + " of " + t.name + " overlap");
      if (covered != numel_of(t.size))
        throw CorruptInputError(mdpath + ": dcp metadata: the chunks of " + t.name + " hold " + std::to_string(covered) + " of its " +
                                std::to_string(numel_of(t.size)) + " elements");
      g.tensor = make_tensor(t.name, role_of(t.name), t.dtype, t.size, false);
      g.tensor.storage = "dcp:" + t.name;
      g.tensor.counter = t.size.empty() && !fmt::dtype_is_float(t.dtype);
      if (!by_name_.emplace(g.tensor.info.path, std::move(g)).second) throw CorruptInputError(mdpath + ": dcp metadata: tensor " + t.name + " twice");
    }
    for (auto& [file, list] : specs) {
      const std::string fp = (set_.dir / file).string();
      bool st = false;
      {
        const Mapping fm = map_for_parsing(fp);
        st = safetensors_at(fmt::bytes_of(fm.data(), fm.size()), list.front().chunk->offset);
      }
      if (st)
        files_[file] = std::make_unique<DcpSafetensorsFile>(fp, access, list);
      else
        files_[file] = std::make_unique<DcpFile>(fp, access, list);
    }
  }

  Format format() const noexcept override { return Format::dcp; }
  std::vector<Tensor> tensors() override {
    std::vector<Tensor> out;
    for (const auto& [name, g] : by_name_) out.push_back(g.tensor);
    return out;
  }
  std::vector<Extent> extents(const std::string&) override { return {}; }  // chunked: located chunk by chunk
  std::string unwritable(const std::string&) override { return {}; }
  void edit(const std::string& t, std::vector<std::uint64_t> indices, const BlockFn& fn) override {
    const Global& g = global(t);
    // Each index to its chunk and its index there; a chunk's indices stay ascending (C order in a
    // box follows C order in the tensor).
    std::map<std::size_t, std::pair<std::vector<std::uint64_t>, std::vector<std::uint64_t>>> per;  // chunk -> (local, global)
    const auto& shape = g.meta->size;
    std::vector<std::uint64_t> nd(shape.size());
    for (const auto i : indices) {
      unravel(i, shape, nd);
      const std::size_t c = chunk_of(g, nd, t);
      auto& [local, glob] = per[c];
      local.push_back(ravel_local(nd, g.meta->chunks[c]));
      glob.push_back(i);
    }
    for (auto& [c, lg] : per) {
      const auto& local = lg.first;
      const auto& glob = lg.second;
      files_.at(g.chunks[c].file)->edit(g.chunks[c].inner, local, [&](std::span<const std::uint64_t> li, std::span<std::uint64_t> w) {
        std::vector<std::uint64_t> gi(li.size());
        for (std::size_t k = 0; k < li.size(); ++k) gi[k] = glob[static_cast<std::size_t>(std::lower_bound(local.begin(), local.end(), li[k]) - local.begin())];
        fn(gi, w);
      });
    }
  }
  std::vector<std::uint64_t> staged_only(const std::string&, std::vector<std::uint64_t>) override { return {}; }
  unsigned width_of(const std::string& t) override { return fmt::dtype_bits(global(t).dtype); }
  StoredLayout stored_layout(const std::string&) override { return {}; }  // every element is stored
  void read_box(const std::string& t, const std::vector<hsize_t>& start, const std::vector<hsize_t>& count, std::vector<std::byte>& buf) override {
    const Global& g = global(t);
    const auto& shape = g.meta->size;
    const std::size_t rank = shape.size(), size = fmt::dtype_size(g.dtype);
    if (start.size() != rank || count.size() != rank) throw UsageError(path_ + ": " + t + ": box of rank " + std::to_string(start.size()));
    std::uint64_t total = 1;
    for (std::size_t d = 0; d < rank; ++d) {
      if (start[d] > shape[d] || count[d] > shape[d] - start[d]) throw UsageError(path_ + ": " + t + ": box outside the tensor");
      total *= count[d];
    }
    buf.assign(total * size, std::byte{0});
    if (total == 0) return;
    // Each chunk's part of the box, read from its file and put in place row by row.
    std::vector<std::byte> part;
    for (std::size_t c = 0; c < g.chunks.size(); ++c) {
      const auto& ch = *g.chunks[c].meta;
      std::vector<hsize_t> lo(rank), n(rank);
      bool empty = false;
      for (std::size_t d = 0; d < rank; ++d) {
        const std::uint64_t a = std::max<std::uint64_t>(start[d], ch.offsets[d]), b = std::min<std::uint64_t>(start[d] + count[d], ch.offsets[d] + ch.sizes[d]);
        if (a >= b) empty = true;
        lo[d] = a - ch.offsets[d];
        n[d] = empty ? 0 : b - a;
      }
      if (empty) continue;
      files_.at(g.chunks[c].file)->read_box(g.chunks[c].inner, lo, n, part);
      const std::uint64_t run = rank ? n[rank - 1] : 1, rows = numel_of(std::vector<std::uint64_t>(n.begin(), n.end())) / std::max<std::uint64_t>(run, 1);
      std::vector<std::uint64_t> at(rank, 0);  // position in the part's box, last dimension 0
      for (std::uint64_t r = 0; r < rows; ++r) {
        std::uint64_t dst = 0;
        for (std::size_t d = 0; d < rank; ++d) dst = dst * count[d] + (ch.offsets[d] + lo[d] + at[d] - start[d]);
        std::memcpy(buf.data() + dst * size, part.data() + r * run * size, run * size);
        for (std::size_t d = rank >= 1 ? rank - 1 : 0; d-- > 0;) {
          if (++at[d] < n[d]) break;
          at[d] = 0;
        }
      }
    }
  }
  void for_each_slab(const std::string& t, std::size_t max_bytes, const std::function<void(std::span<const std::byte>)>& fn) override {
    const Global& g = global(t);
    const auto& shape = g.meta->size;
    std::vector<hsize_t> start(shape.size(), 0), count(shape.begin(), shape.end());
    std::vector<std::byte> buf;
    if (shape.empty()) {
      read_box(t, start, count, buf);
      fn(buf);
      return;
    }
    // C-order slabs of at most max_bytes (flat ranges, as the few boxes that hold each): a row
    // larger than the slab is split.
    const ckpt::Shape sh(shape.begin(), shape.end());
    const std::uint64_t numel = numel_of(std::vector<std::uint64_t>(shape.begin(), shape.end()));
    const std::uint64_t step = std::max<std::uint64_t>(1, max_bytes / std::max<std::size_t>(1, fmt::dtype_size(g.dtype)));
    std::vector<std::byte> part;
    for (std::uint64_t e = 0; e < numel; e += step) {
      buf.clear();
      for (const auto& b : ckpt::flat_boxes(sh, e, std::min(step, numel - e))) {
        read_box(t, b.start, b.count, part);
        buf.insert(buf.end(), part.begin(), part.end());
      }
      fn(buf);
    }
  }
  std::uint64_t checksum(const std::string& t) override {
    ckpt::Xxh64 h;
    for_each_slab(t, std::size_t{32} << 20, [&](std::span<const std::byte> b) { h.update(b); });
    return h.digest();
  }
  // Each non-tensor value (a torch.save of it, stored as bytes): the XXH64 of its stored bytes.
  std::vector<OtherContent> other_content() override {
    std::vector<OtherContent> out;
    for (const auto& v : md_.values) {
      if (v.file.empty()) {
        out.push_back({v.name, "no storage_data entry", false});
        continue;
      }
      const std::string fp = (set_.dir / v.file).string();
      const Mapping m = map_for_parsing(fp);
      if (v.offset > m.size() || v.length > m.size() - v.offset)
        throw CorruptInputError(fp + ": value " + v.name + " lies beyond the end of the file");
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016llx",
                    static_cast<unsigned long long>(ckpt::xxh64(std::span<const std::byte>(m.data() + v.offset, v.length))));
      std::string text = std::string("XXH64 ") + hex + " of its " + std::to_string(v.length) + " stored bytes";
      for (const auto& t : v.transforms) text += ", transform " + t;
      out.push_back({v.name, std::move(text)});
    }
    return out;
  }
  SharedText location(const std::string& t, std::uint64_t index) override {
    // Called once per flip, tensor by tensor: the last tensor is kept, and the texts are keyed by
    // the tensor's entry, so a call compares one name and allocates nothing.
    if (!last_global_ || last_name_ != t) {
      last_global_ = &global(t);
      last_name_ = t;
    }
    const Global& g = *last_global_;
    nd_.resize(g.meta->size.size());
    unravel(index, g.meta->size, nd_);
    const std::size_t c = chunk_of(g, nd_, t);
    SharedText& text = locations_[{&g, c}];  // one text per chunk: a campaign of 100,000 flips builds it once
    if (text.empty()) text = chunk_location(g, c);
    return text;
  }
  void finish() override {
    for (auto& [f, s] : files_) s->finish();
  }
  void close() override {
    std::exception_ptr first;
    for (auto& [f, s] : files_) {
      try {
        s->set_sync(sync());
        s->close();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }

private:
  struct Chunk {
    std::string file, inner;
    const fmt::DcpChunk* meta;
  };
  struct Global {
    Tensor tensor;
    fmt::DType dtype = fmt::DType::f32;
    const fmt::DcpTensor* meta = nullptr;
    std::vector<Chunk> chunks;
  };

  static bool overlap(const fmt::DcpChunk& a, const fmt::DcpChunk& b) {
    if (numel_of(a.sizes) == 0 || numel_of(b.sizes) == 0) return false;
    for (std::size_t d = 0; d < a.offsets.size(); ++d)
      if (a.offsets[d] + a.sizes[d] <= b.offsets[d] || b.offsets[d] + b.sizes[d] <= a.offsets[d]) return false;
    return true;
  }
  static void unravel(std::uint64_t flat, const std::vector<std::uint64_t>& shape, std::vector<std::uint64_t>& nd) {
    for (std::size_t d = shape.size(); d-- > 0;) {
      nd[d] = shape[d] ? flat % shape[d] : 0;
      flat = shape[d] ? flat / shape[d] : 0;
    }
  }
  static std::uint64_t ravel_local(const std::vector<std::uint64_t>& nd, const fmt::DcpChunk& c) {
    std::uint64_t i = 0;
    for (std::size_t d = 0; d < nd.size(); ++d) i = i * c.sizes[d] + (nd[d] - c.offsets[d]);
    return i;
  }
  std::size_t chunk_of(const Global& g, const std::vector<std::uint64_t>& nd, const std::string& t) const {
    for (std::size_t c = 0; c < g.chunks.size(); ++c) {
      const auto& ch = *g.chunks[c].meta;
      bool in = true;
      for (std::size_t d = 0; d < nd.size() && in; ++d) in = nd[d] >= ch.offsets[d] && nd[d] < ch.offsets[d] + ch.sizes[d];
      if (in) return c;
    }
    throw UsageError(path_ + ": " + t + ": an index in no chunk");
  }
  const Global& global(const std::string& t) const {
    const auto it = by_name_.find(t);
    if (it == by_name_.end()) throw UsageError(path_ + ": no tensor " + t + " in the checkpoint");
    return it->second;
  }

  // What location() says of chunk c of g: its file, box, placement and the ranks that load it.
  std::string chunk_location(const Global& g, std::size_t c) const {
    const auto& ch = *g.chunks[c].meta;
    const auto writer = writer_rank(ch.file);
    // One chunk holding the whole tensor: stored once, loaded by every rank (replicated). Several:
    // sharded, this chunk loaded by the rank holding it (its writer under the checkpoint's plan).
    const bool replicated = g.chunks.size() == 1 && numel_of(ch.sizes) == numel_of(g.meta->size);
    nlohmann::json j = {{"chunk", c}, {"offsets", ch.offsets}, {"sizes", ch.sizes}, {"world", world_},
                        {"writer_rank", writer ? nlohmann::json(*writer) : nlohmann::json(nullptr)},
                        {"placement", replicated ? "replicated" : "sharded"}};
    put_name(j, "file", ch.file);  // a .metadata path is bytes: one that is not UTF-8 is escaped and flagged
    nlohmann::json loaders = nlohmann::json::array();
    if (replicated)
      for (std::uint64_t r = 0; r < world_; ++r) loaders.push_back(r);
    else if (writer)
      loaders.push_back(*writer);
    j["loaded_by"] = loaders;
    return j.dump();
  }

  FileSet set_;
  fmt::DcpMetadata md_;
  std::uint64_t world_ = 0;
  std::map<std::string, Global> by_name_;
  std::map<std::string, std::unique_ptr<Storage>> files_;
  std::map<std::pair<const Global*, std::size_t>, SharedText> locations_;  // (tensor, chunk) -> location()
  const Global* last_global_ = nullptr;  // location()'s last tensor
  std::string last_name_;
  std::vector<std::uint64_t> nd_;
};

}  // namespace

std::unique_ptr<Storage> open_dcp(const std::string& path, Access access) { return std::make_unique<DcpStorage>(path, access); }

}  // namespace resil::inject
