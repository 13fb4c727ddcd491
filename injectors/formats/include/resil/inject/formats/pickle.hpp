// A restricted, non-executing reader for the pickle subset torch.save writes (protocol 2, a few
// protocol-4 framing opcodes tolerated). It builds a value tree and never imports or calls
// anything: GLOBAL resolves only an allow-list of names (collections.OrderedDict, torch's tensor
// rebuild functions, storage classes and dtypes, torch.Size), REDUCE applies only those, and any
// other opcode or name is refused with a CorruptInputError naming it and its offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "resil/inject/formats/bytes.hpp"

namespace resil::inject::formats {

enum class PickleKind : std::uint8_t {
  none,
  boolean,   // `integer` is 0 or 1
  integer,
  real,
  string,    // `text` (BINUNICODE is UTF-8; BINSTRING bytes are kept as they are)
  tuple,     // `items`: the elements
  list,      // `items`: the elements
  dict,      // `items`: key, value, key, value... in insertion order; `text` "collections.OrderedDict" for one
  global,    // `text`: "module.name", one of the allow-list
  call,      // REDUCE of an allow-listed function: `items` = {the global, the argument tuple}
  persistent_id,  // BINPERSID: `items` = {the persistent id}
};

struct PickleNode {
  PickleKind kind = PickleKind::none;
  std::int64_t integer = 0;
  double real = 0.0;
  std::string text;
  std::vector<std::size_t> items;  // indices into Pickle::nodes
  std::uint64_t offset = 0;        // of the opcode that made the node (for messages)
};

/// The value tree: nodes refer to each other by index, so memoised values shared by several
/// parents (and even cycles a hostile input builds) are plain indices, never owning pointers.
struct Pickle {
  std::vector<PickleNode> nodes;
  std::size_t root = 0;
  const PickleNode& operator[](std::size_t i) const { return nodes.at(i); }
};

/// Read one pickle from `data`; `base` is the pickle's offset in its file (for messages). Bytes
/// after STOP are refused. Memory is proportional to data.size().
Pickle parse_pickle(Bytes data, std::uint64_t base = 0);

}  // namespace resil::inject::formats
