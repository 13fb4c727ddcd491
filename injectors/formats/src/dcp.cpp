#include "resil/inject/formats/dcp.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "resil/inject/formats/pickle.hpp"
#include "resil/inject/formats/torch.hpp"

namespace resil::inject::formats {

namespace {

constexpr std::string_view kFormat = "dcp metadata";
constexpr std::string_view kMetadata = "torch.distributed.checkpoint.metadata.Metadata";
constexpr std::string_view kTensorMeta = "torch.distributed.checkpoint.metadata.TensorStorageMetadata";
constexpr std::string_view kBytesMeta = "torch.distributed.checkpoint.metadata.BytesStorageMetadata";
constexpr std::string_view kChunkMeta = "torch.distributed.checkpoint.metadata.ChunkStorageMetadata";
constexpr std::string_view kIndex = "torch.distributed.checkpoint.metadata.MetadataIndex";
constexpr std::string_view kStorageInfo = "torch.distributed.checkpoint.filesystem._StorageInfo";
constexpr std::size_t kMaxRank = 64;

class MetaReader {
public:
  explicit MetaReader(const Pickle& p) : p_(p) {}

  const PickleNode& at(std::size_t i) const { return p_.nodes.at(i); }
  [[noreturn]] void fail(const std::string& what, std::size_t node) const { corrupt(kFormat, what, at(node).offset); }

  // An object of class `cls` (NEWOBJ or REDUCE, never constructed): the node of its BUILD state.
  std::size_t state_of(std::size_t obj, std::string_view cls, const char* what) const {
    const PickleNode& n = at(obj);
    if (n.kind != PickleKind::object || n.text != cls) fail(std::string(what) + " is not a " + std::string(cls), obj);
    if (n.items.size() < 3) fail(std::string(what) + " (" + std::string(cls) + ") has no state", obj);
    return n.items.back();
  }
  // The value of `key` in the dict node `dict`, or nullopt.
  std::optional<std::size_t> get(std::size_t dict, std::string_view key) const {
    const PickleNode& d = at(dict);
    if (d.kind != PickleKind::dict) fail("a state that is not a dict", dict);
    for (std::size_t i = 0; i + 1 < d.items.size(); i += 2)
      if (at(d.items[i]).kind == PickleKind::string && at(d.items[i]).text == key) return d.items[i + 1];
    return std::nullopt;
  }
  std::size_t need(std::size_t dict, std::string_view key, const char* what) const {
    const auto v = get(dict, key);
    if (!v) fail(std::string(what) + " has no \"" + std::string(key) + "\"", dict);
    return *v;
  }
  std::string text(std::size_t n, const char* what) const {
    if (at(n).kind != PickleKind::string) fail(std::string(what) + " is not a string", n);
    return at(n).text;
  }
  std::uint64_t count(std::size_t n, const char* what) const {
    if (at(n).kind != PickleKind::integer || at(n).integer < 0) fail(std::string(what) + " is not an integer >= 0", n);
    return static_cast<std::uint64_t>(at(n).integer);
  }
  // A torch.Size (read as its tuple) or a tuple/list of integers >= 0.
  std::vector<std::uint64_t> dims(std::size_t n, const char* what) const {
    const PickleNode& t = at(n);
    if (t.kind != PickleKind::tuple && t.kind != PickleKind::list) fail(std::string(what) + " is not a torch.Size", n);
    if (t.items.size() > kMaxRank) fail(std::string(what) + " has more than " + std::to_string(kMaxRank) + " dimensions", n);
    std::vector<std::uint64_t> out;
    for (const auto i : t.items) out.push_back(count(i, what));
    return out;
  }

private:
  const Pickle& p_;
};

std::string plain_file(const MetaReader& r, std::size_t n) {
  std::string f = r.text(n, "_StorageInfo.relative_path");
  if (f.empty() || f == "." || f == ".." || f.find('/') != std::string::npos || f.find('\0') != std::string::npos)
    r.fail("data file '" + printable(f) + "' is not a plain file name in the checkpoint's directory", n);
  // The metadata itself as a chunk's file: its bytes would be tensor bytes an edit changes.
  if (f == ".metadata") r.fail("data file '.metadata' is the checkpoint's metadata, not a data file", n);
  return f;
}

}  // namespace

DcpMetadata parse_dcp_metadata(Bytes file) {
  const Pickle p = parse_pickle(file);
  const MetaReader r(p);
  const std::size_t md = r.state_of(p.root, kMetadata, "the pickled object");
  DcpMetadata out;
  if (const auto v = r.get(md, "version"); v && r.at(*v).kind == PickleKind::string) out.version = r.at(*v).text;

  // storage_data: (fqn, chunk offsets) -> where the chunk's bytes are.
  struct Info {
    std::string file;
    std::uint64_t offset = 0, length = 0;
    std::vector<std::string> transforms;
    bool used = false;
  };
  std::map<std::pair<std::string, std::vector<std::uint64_t>>, Info> infos;
  const std::size_t sd = r.need(md, "storage_data", "Metadata");
  if (r.at(sd).kind != PickleKind::dict) r.fail("Metadata.storage_data is not a dict (a storage layer other than the file system's)", sd);
  for (std::size_t i = 0; i + 1 < r.at(sd).items.size(); i += 2) {
    const std::size_t key = r.at(sd).items[i], val = r.at(sd).items[i + 1];
    const std::size_t ks = r.state_of(key, kIndex, "a storage_data key");
    const std::string fqn = r.text(r.need(ks, "fqn", "MetadataIndex"), "MetadataIndex.fqn");
    std::vector<std::uint64_t> off;
    if (const auto o = r.get(ks, "offset"); o && r.at(*o).kind != PickleKind::none) off = r.dims(*o, "MetadataIndex.offset");
    const std::size_t vs = r.state_of(val, kStorageInfo, "a storage_data value");
    Info info;
    info.file = plain_file(r, r.need(vs, "relative_path", "_StorageInfo"));
    info.offset = r.count(r.need(vs, "offset", "_StorageInfo"), "_StorageInfo.offset");
    info.length = r.count(r.need(vs, "length", "_StorageInfo"), "_StorageInfo.length");
    if (info.offset > ~std::uint64_t{0} - info.length) r.fail("_StorageInfo offset + length overflows", val);
    if (const auto t = r.get(vs, "transform_descriptors"); t && r.at(*t).kind != PickleKind::none) {
      if (r.at(*t).kind != PickleKind::list && r.at(*t).kind != PickleKind::tuple) r.fail("_StorageInfo.transform_descriptors is not a list", *t);
      for (const auto d : r.at(*t).items) info.transforms.push_back(r.text(d, "a transform descriptor"));
    }
    if (!infos.emplace(std::make_pair(fqn, off), std::move(info)).second) r.fail("storage_data names chunk " + printable(fqn) + " twice", key);
  }

  // A chunk's or value's storage entry, taken once.
  auto take = [](Info& in, auto& dst) {
    in.used = true;
    dst.file = in.file;
    dst.offset = in.offset;
    dst.length = in.length;
    dst.transforms = in.transforms;
  };
  const std::size_t sdm = r.need(md, "state_dict_metadata", "Metadata");
  if (r.at(sdm).kind != PickleKind::dict) r.fail("Metadata.state_dict_metadata is not a dict", sdm);
  for (std::size_t i = 0; i + 1 < r.at(sdm).items.size(); i += 2) {
    const std::size_t key = r.at(sdm).items[i], val = r.at(sdm).items[i + 1];
    const std::string fqn = r.text(key, "a state_dict_metadata key");
    if (r.at(val).kind == PickleKind::object && r.at(val).text == kBytesMeta) {
      DcpValue v;
      v.name = fqn;
      if (const auto it = infos.find({fqn, {}}); it != infos.end()) {
        if (it->second.used) r.fail("storage_data entry of value " + printable(fqn) + " used twice", val);
        take(it->second, v);
      }
      out.values.push_back(std::move(v));
      continue;
    }
    const std::size_t ts = r.state_of(val, kTensorMeta, "a state_dict_metadata value");
    DcpTensor t;
    t.name = fqn;
    t.size = r.dims(r.need(ts, "size", "TensorStorageMetadata"), "TensorStorageMetadata.size");
    std::uint64_t bytes = 16;  // the widest element: the count of bytes, at most, fits 64 bits
    for (const auto d : t.size)
      if (__builtin_mul_overflow(bytes, d, &bytes)) r.fail("TensorStorageMetadata.size of " + printable(fqn) + " overflows 64 bits", ts);
    // TensorProperties' state is the tuple (dtype, layout, requires_grad, memory format, pin_memory).
    const std::size_t props = r.need(ts, "properties", "TensorStorageMetadata");
    const PickleNode& pn = r.at(props);
    if (pn.kind != PickleKind::object || pn.items.size() < 3) r.fail("TensorProperties of " + printable(fqn) + " has no state", props);
    const PickleNode& pstate = r.at(pn.items.back());
    std::optional<std::size_t> dt;
    if (pstate.kind == PickleKind::tuple && !pstate.items.empty()) dt = pstate.items[0];
    else if (pstate.kind == PickleKind::dict) dt = r.get(pn.items.back(), "dtype");
    if (!dt || r.at(*dt).kind != PickleKind::global) r.fail("TensorProperties of " + printable(fqn) + " names no dtype", props);
    const auto dtype = torch_dtype(r.at(*dt).text);
    if (!dtype) r.fail("tensor " + printable(fqn) + " has dtype " + printable(r.at(*dt).text) + ", which resil does not read", *dt);
    t.dtype = *dtype;
    const std::size_t chunks = r.need(ts, "chunks", "TensorStorageMetadata");
    if (r.at(chunks).kind != PickleKind::list) r.fail("TensorStorageMetadata.chunks of " + printable(fqn) + " is not a list", chunks);
    for (const auto c : r.at(chunks).items) {
      const std::size_t cs = r.state_of(c, kChunkMeta, "a chunk");
      DcpChunk ch;
      ch.offsets = r.dims(r.need(cs, "offsets", "ChunkStorageMetadata"), "ChunkStorageMetadata.offsets");
      ch.sizes = r.dims(r.need(cs, "sizes", "ChunkStorageMetadata"), "ChunkStorageMetadata.sizes");
      if (ch.offsets.size() != t.size.size() || ch.sizes.size() != t.size.size())
        r.fail("a chunk of " + printable(fqn) + " has another rank than the tensor", c);
      for (std::size_t d = 0; d < t.size.size(); ++d)
        if (ch.offsets[d] > t.size[d] || ch.sizes[d] > t.size[d] - ch.offsets[d]) r.fail("a chunk of " + printable(fqn) + " lies outside the tensor", c);
      const auto it = infos.find({fqn, ch.offsets});
      if (it == infos.end()) r.fail("no storage_data entry for a chunk of " + printable(fqn), c);
      if (it->second.used) r.fail("two chunks of " + printable(fqn) + " at one offset", c);
      take(it->second, ch);
      t.chunks.push_back(std::move(ch));
    }
    out.tensors.push_back(std::move(t));
  }
  for (const auto& [key, info] : infos) out.files.push_back(info.file);  // tensors' and values' files
  std::sort(out.files.begin(), out.files.end());
  out.files.erase(std::unique(out.files.begin(), out.files.end()), out.files.end());
  return out;
}

}  // namespace resil::inject::formats
