// ExtentStorage: the shared base of the adapters whose tensors are plain byte runs of the file
// (safetensors, .npy, .npz, torch.save zip): each tensor is one extent of raw elements in C order,
// edited word by word through RawWords (mapping or pread/pwrite, durable at close), read in bulk
// by pread, never sparse. A tensor whose bytes exist only encoded (a deflated .npz member) is
// `staged`: its elements are held inflated in memory, an in-place edit refuses to change them, and
// a rewrite (a private copy) lets the adapter re-encode them in finish().
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "resil/core/error.hpp"
#include "resil/core/fd.hpp"
#include "resil/inject/formats/dtype.hpp"
#include "resil/inject/storage.hpp"
#include "resil/inject/word_io.hpp"

namespace resil::inject {

/// The injector's dtype for a parser's; none for the opaque ones (formats::dtype_opaque).
std::optional<ckpt::DType> dtype_of(formats::DType t) noexcept;
/// A tensor named "/" + `name` (names are the format's own: dict paths, safetensors keys), stored
/// contiguously, with no alias.
Tensor make_tensor(std::string name, TensorRole role, formats::DType dtype, std::vector<std::uint64_t> shape, bool big_endian);
/// The file mapped read-only for a parser (empty for an empty file). Throws IoError naming it.
Mapping map_for_parsing(const std::string& path);

/// parse() with the parser's CorruptInputError ("safetensors: ... at offset N") prefixed by the
/// file's path, so the one line the user sees names the file.
template <class Parse>
auto parse_named(const std::string& path, Parse&& parse) {
  try {
    return parse();
  } catch (const CorruptInputError& e) {
    throw CorruptInputError(path + ": " + e.what());
  }
}

class ExtentStorage : public Storage {
public:
  std::vector<Tensor> tensors() override;
  std::vector<Extent> extents(const std::string& tensor) override;
  std::string unwritable(const std::string&) override { return {}; }
  void edit(const std::string& tensor, std::vector<std::uint64_t> indices, const BlockFn& fn) override;
  std::vector<std::uint64_t> staged_only(const std::string& tensor, std::vector<std::uint64_t> indices) override;
  unsigned width_of(const std::string& tensor) override;
  StoredLayout stored_layout(const std::string&) override { return {}; }  // every byte is there
  void read_box(const std::string& tensor, const std::vector<hsize_t>& start, const std::vector<hsize_t>& count,
                std::vector<std::byte>& buf) override;
  void for_each_slab(const std::string& tensor, std::size_t max_bytes,
                     const std::function<void(std::span<const std::byte>)>& fn) override;
  bool read_bytes(const std::string& tensor, std::uint64_t offset, std::uint64_t length, std::vector<std::byte>& buf) override;
  std::uint64_t checksum(const std::string& tensor) override;
  void close() override;

protected:
  /// One tensor: its description and where its elements are.
  struct Item {
    Tensor tensor;
    Extent extent;       // the elements' bytes in the file (unless tensor.staged)
    unsigned size = 1;   // bytes per element
    bool big_endian = false;
    std::size_t part = 0;  // the adapter's unit holding the bytes (a zip entry), for changed()
  };

  ExtentStorage(const std::string& path, Access access);
  /// Register a tensor (adapters call this from their constructor). Its info.logical_bytes must
  /// equal numel x size, and the extent must lie inside the file.
  void add(Item item);
  const Item& item(const std::string& tensor) const;
  const std::vector<Item>& items() const noexcept { return items_; }
  /// A staged tensor's elements, decoded (called on first use, and again after an eviction).
  virtual std::vector<std::byte> load_staged(const Item&) { return {}; }
  /// The elements of a staged tensor as loaded and edited so far; whether an edit changed them.
  /// Loading one evicts every staged tensor no edit changed: the reference is good until the next
  /// staged() of another tensor.
  std::vector<std::byte>& staged(const Item& it);
  bool staged_changed(const Item& it) const { return staged_dirty_.count(&it - items_.data()) != 0; }
  /// After an edit stored changed words of a non-staged tensor, before close: one call per word,
  /// with its file offset and old and new bytes (file order). Zip adapters patch CRCs from these.
  virtual void changed(const Item&, std::uint64_t offset, std::span<const std::byte> old_bytes, std::span<const std::byte> new_bytes);
  /// "FILE: tensor NAME" for messages.
  std::string where(const Item& it) const;

  RawWords raw_;

private:
  std::vector<Item> items_;
  std::map<std::string, std::size_t> by_name_;  // every name and alias -> item
  std::map<std::size_t, std::vector<std::byte>> staged_;
  std::map<std::size_t, bool> staged_dirty_;
};

}  // namespace resil::inject
