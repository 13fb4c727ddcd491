// A Hugging Face sharded checkpoint opened as one Storage: each shard file through its own adapter
// (safetensors or torch.save), the tensors of all of them under their own names (the index maps
// each name to one file, so names are unique across files), every call passed to the shard that
// holds the tensor. The fault space is the union of the shards' stored bytes: a draw over stored
// bits spans the files in proportion to their bytes. Each tensor's location is its file.
#include <algorithm>
#include <exception>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "format_storages.hpp"
#include "resil/core/error.hpp"
#include "resil/inject/file_set.hpp"
#include "resil/inject/formats/shard_index.hpp"
#include "resil/inject/names.hpp"
#include "extent_storage.hpp"

namespace resil::inject {

namespace {

class SetStorage final : public Storage {
public:
  SetStorage(const std::string& path, Access access) : Storage(path, access), set_(file_set(path, Format::shards)) {
    std::map<std::string, std::string> listed;  // "/" + tensor -> file, from the index
    if (!set_.index.empty()) {
      const std::string ixpath = (set_.dir / set_.index).string();
      const Mapping m = map_for_parsing(ixpath);
      const auto ix = parse_named(ixpath, [&] { return formats::parse_shard_index(formats::bytes_of(m.data(), m.size())); });
      for (const auto& [t, f] : ix.weight_map) listed["/" + t] = f;
    }
    std::map<std::string, std::string> found;  // every name (and alias) -> file
    for (std::size_t k = 0; k < set_.files.size(); ++k) {
      const std::string& name = set_.files[k];
      const std::string fp = (set_.dir / name).string();
      const Format f = resolve_format(fp, Format::automatic);
      if (f != Format::safetensors && f != Format::torch)
        throw CorruptInputError(fp + ": a shard must be a safetensors or torch.save file, not " + std::string(format_name(f)));
      parts_.push_back(open_storage(fp, access, f));
      for (auto& t : parts_.back()->tensors()) {
        std::vector<std::string> names{t.info.path};
        names.insert(names.end(), t.info.aliases.begin(), t.info.aliases.end());
        bool in_index = set_.index.empty();
        for (const auto& n : names) {
          if (const auto [it, fresh] = found.emplace(n, name); !fresh)
            throw CorruptInputError(fp + ": tensor " + n.substr(1) + " is also in " + (set_.dir / it->second).string() +
                                    " (one tensor in two shards)");
          if (const auto it = listed.find(n); it != listed.end()) {
            if (it->second != name)
              throw CorruptInputError((set_.dir / set_.index).string() + ": names " + it->second + " for tensor " + n.substr(1) +
                                      ", which is in " + name);
            in_index = true;
          }
        }
        if (!in_index)
          throw CorruptInputError(fp + ": tensor " + t.info.path.substr(1) + " is not in the index " + (set_.dir / set_.index).string());
        t.storage = name + ":" + (t.storage.empty() ? t.info.path : t.storage);
        for (const auto& n : names) owner_[n] = k;
        tensors_.push_back(std::move(t));
      }
    }
    for (const auto& [t, f] : listed)
      if (!found.count(t))
        throw CorruptInputError((set_.dir / set_.index).string() + ": tensor " + t.substr(1) + " is not in its shard " + f);
    std::sort(tensors_.begin(), tensors_.end(), [](const Tensor& a, const Tensor& b) { return a.info.path < b.info.path; });
  }

  Format format() const noexcept override { return Format::shards; }
  std::vector<Tensor> tensors() override { return tensors_; }
  std::vector<Extent> extents(const std::string& t) override { return part(t).extents(t); }
  std::string unwritable(const std::string& t) override { return part(t).unwritable(t); }
  void edit(const std::string& t, std::vector<std::uint64_t> indices, const BlockFn& fn) override { part(t).edit(t, std::move(indices), fn); }
  std::vector<std::uint64_t> staged_only(const std::string& t, std::vector<std::uint64_t> indices) override {
    return part(t).staged_only(t, std::move(indices));
  }
  unsigned width_of(const std::string& t) override { return part(t).width_of(t); }
  StoredLayout stored_layout(const std::string& t) override { return part(t).stored_layout(t); }
  void read_box(const std::string& t, const std::vector<hsize_t>& start, const std::vector<hsize_t>& count, std::vector<std::byte>& buf) override {
    part(t).read_box(t, start, count, buf);
  }
  bool read_bytes(const std::string& t, std::uint64_t offset, std::uint64_t length, std::vector<std::byte>& buf) override {
    return part(t).read_bytes(t, offset, length, buf);
  }
  void for_each_slab(const std::string& t, std::size_t max_bytes, const std::function<void(std::span<const std::byte>)>& fn) override {
    part(t).for_each_slab(t, max_bytes, fn);
  }
  std::uint64_t checksum(const std::string& t) override { return part(t).checksum(t); }
  SharedText location(const std::string& t, std::uint64_t) override {
    SharedText& text = locations_[t];  // one text per tensor, not one per flip
    if (text.empty()) {  // a file name is bytes: one that is not UTF-8 is escaped and flagged, as names are
      nlohmann::json j = nlohmann::json::object();
      put_name(j, "file", set_.files[index_of(t)]);
      text = j.dump();
    }
    return text;
  }
  std::string content_format() const override {
    std::set<std::string> kinds;
    for (const auto& p : parts_) kinds.insert(std::string(format_name(p->format())));
    std::string s = "shards:";
    for (const auto& k : kinds) s += (s.back() == ':' ? "" : "+") + k;
    return s;
  }
  // Each shard's own (a torch.save's pickle, safetensors' __metadata__), under "<file>:".
  std::vector<OtherContent> other_content() override {
    std::vector<OtherContent> out;
    for (std::size_t k = 0; k < parts_.size(); ++k)
      for (auto& o : parts_[k]->other_content()) {
        o.name = set_.files[k] + ":" + o.name;
        out.push_back(std::move(o));
      }
    return out;
  }
  void finish() override {
    for (auto& p : parts_) p->finish();
  }
  void close() override {
    // Every shard is closed (its edits made durable) even when one fails; the first error surfaces.
    std::exception_ptr first;
    for (auto& p : parts_) {
      try {
        p->set_sync(sync());
        p->close();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }

private:
  std::size_t index_of(const std::string& t) const {
    const auto it = owner_.find(t);
    if (it == owner_.end()) throw UsageError(path_ + ": no tensor " + t + " in the set");
    return it->second;
  }
  Storage& part(const std::string& t) { return *parts_[index_of(t)]; }

  FileSet set_;
  std::vector<std::unique_ptr<Storage>> parts_;
  std::vector<Tensor> tensors_;
  std::map<std::string, SharedText> locations_;  // tensor -> location()
  std::map<std::string, std::size_t> owner_;  // every name and alias -> part
};

}  // namespace

std::unique_ptr<Storage> open_shards(const std::string& path, Access access) { return std::make_unique<SetStorage>(path, access); }

}  // namespace resil::inject
