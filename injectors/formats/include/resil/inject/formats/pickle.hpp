// A non-executing reader for the pickles torch.save writes (protocols 2 to 5). It builds a value
// tree and never imports, constructs or calls anything: a GLOBAL (or STACK_GLOBAL) is a name; a
// REDUCE, NEWOBJ or NEWOBJ_EX of a name the tensor subset knows (collections.OrderedDict,
// torch.Size, torch's tensor rebuild functions) becomes that value, of any other name (an
// argparse.Namespace, a numpy scalar or array, a user's class, os.system) an opaque `object`
// node holding the name, its arguments and any BUILD state, so the tensors beside it are still
// found. Opcodes torch.save never writes (the protocol 0/1 text forms, EXT*, out-of-band
// buffers) are refused with a CorruptInputError naming the opcode and its offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
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
  global,    // `text`: "module.name" (only a name: nothing is imported)
  call,      // REDUCE of a torch._utils tensor rebuild function: `items` = {the global, the argument tuple}
  persistent_id,  // BINPERSID: `items` = {the persistent id}
  object,    // REDUCE/NEWOBJ/NEWOBJ_EX of any other name, never called: `items` = {the global, the
             // arguments, then each BUILD state (or NEWOBJ_EX's keyword dict)}; `text` = "module.name"
  bytes,     // BINBYTES, SHORT_BINBYTES, BINBYTES8, BYTEARRAY8: `integer` = length (the bytes are not kept)
  set,       // EMPTY_SET + ADDITEMS, FROZENSET: `items` in pickle order
  big_integer,  // LONG1/LONG4 wider than 64 bits: `text` = the little-endian two's-complement bytes
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
/// Read the pickle at the start of `data`, which may go on after its STOP (a stream of pickles,
/// as legacy torch.save writes); `*used` = the bytes it took, STOP included.
Pickle parse_pickle_prefix(Bytes data, std::uint64_t base, std::size_t* used);
/// pickletools' name of an opcode ("STACK_GLOBAL"), or "" for a byte that is no opcode.
std::string_view pickle_opcode_name(std::uint8_t op) noexcept;

}  // namespace resil::inject::formats
