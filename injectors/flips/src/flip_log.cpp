#include "resil/inject/flip_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "resil/ckpt/fs.hpp"
#include "resil/core/error.hpp"
#include "resil/core/rng.hpp"  // uint128_t
#include "resil/inject/names.hpp"
#include "resil/inject/select_expr.hpp"
#include "resil/inject/two_threads.hpp"

namespace resil::inject {

using nlohmann::json;

nlohmann::json value_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

namespace {
// "0x" and (width + 3) / 4 hex digits of v at p (at most 18 chars); returns the end.
char* write_hex(char* p, std::uint64_t v, unsigned width) {
  static constexpr char digits[] = "0123456789abcdef";
  *p++ = '0';
  *p++ = 'x';
  for (unsigned i = (width + 3) / 4; i-- > 0;) *p++ = digits[(v >> (4 * i)) & 0xf];
  return p;
}
}  // namespace

std::string hex_bits(std::uint64_t v, unsigned width) {
  char b[18];
  return std::string(b, write_hex(b, v, width));
}

std::string header_line(const LogHeader& h) {
  json j = {{"type", "header"}, {"format", log_format}, {"tool", "ckpt-flip"}, {"version", h.tool_version},
            {"seed", h.seed}, {"trial", h.trial}, {"model", h.model}, {"args", h.args},
            {"hash", ckpt::file_hash_name(h.hash)}, {"input_hash", h.input_hash}, {"output_hash", h.output_hash},
            {"in_place", h.in_place}, {"raw", h.raw}, {"planned", h.planned}};
  // The keys of logs written before "hash" existed, for readers of those: the same values.
  if (h.hash == ckpt::FileHash::sha256) {
    j["input_sha256"] = h.input_hash;
    j["output_sha256"] = h.output_hash;
  }
  // Optional fields (older logs lack them): the input's format, and --keep-crc.
  if (!h.file_format.empty()) j["file_format"] = h.file_format;
  if (h.keep_crc) j["keep_crc"] = true;
  if (h.finite) {  // only then: logs without --finite read as they always did
    j["finite"] = true;
    j["rejected"] = h.rejected;
  }
  // Paths and arguments are bytes: those that are not UTF-8 are escaped and flagged (names.hpp).
  put_name(j, "input", h.input);
  put_name(j, "output", h.output);
  if (!std::all_of(h.args.begin(), h.args.end(), [](const std::string& a) { return is_utf8(a); })) {
    for (auto& a : j["args"]) a = escape_name(a.get_ref<const std::string&>());
    j["args_escaped"] = true;
  }
  return j.dump();
}

namespace {
// The fields of a record in the order nlohmann::json (a std::map) writes them, formatted by hand
// into a buffer sized for the longest record: a log holds one line per flip, and building a json
// object per line was a quarter of the run time of a 10,000-flip injection (string appends a
// third of what was left). The bytes are the same as json::dump() of the object.
struct Cursor {
  char* p;
  template <std::size_t N>
  void lit(const char (&s)[N]) {  // a string literal, without its terminator
    std::memcpy(p, s, N - 1);
    p += N - 1;
  }
  void str(std::string_view s) {
    std::memcpy(p, s.data(), s.size());
    p += s.size();
  }
  void uint(std::uint64_t v) { p = std::to_chars(p, p + 20, v).ptr; }
  // "0x" and (width + 3) / 4 hex digits of v, quoted, then a comma.
  void hex(std::uint64_t v, unsigned width) {
    *p++ = '"';
    p = write_hex(p, v, width);
    lit("\",");
  }
  // value_json(v).dump() without building a json value, except for NaN/Inf (rare: the strings
  // value_json chose), else the serializer's own shortest round-trip formatting (nlohmann's
  // dump_float calls exactly this).
  void value(double v) {
    if (!std::isfinite(v)) return str(value_json(v).dump());
    p = nlohmann::detail::to_chars(p, p + 64, v);
  }
  void uints(std::span<const std::uint64_t> v) {  // a JSON array of integers
    *p++ = '[';
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) *p++ = ',';
      uint(v[i]);
    }
    *p++ = ']';
  }
  void bits(std::uint64_t mask) {
    *p++ = '[';
    bool first = true;
    for (unsigned b = 0; b < 64; ++b)
      if ((mask >> b) & 1) {
        if (!first) *p++ = ',';
        first = false;
        uint(b);
      }
    *p++ = ']';
  }
};
// Bound on a record line's length besides its dataset name and N-d index: keys and punctuation
// (~160), 64 bit positions (~180), four hex words (4 x 22), two values (2 x 64), four integers.
constexpr std::size_t record_fixed_max = 700;

// record_line's text appended to `out` (no newline). The dataset name comes JSON-escaped.
void append_record_line(std::string& out, const FlipRecord& r, std::uint64_t seq, std::string_view dataset_json) {
  const std::size_t at = out.size();
  // The global element's keys and brackets (50), its flat index (20), its N-d index and shape.
  const std::size_t global_max = r.global ? 70 + 21 * (r.global->nd.size() + r.global->shape.size()) : 0;
  out.resize(at + record_fixed_max + dataset_json.size() + 21 * r.nd.size() + global_max + r.location.size() + 16);
  Cursor c{out.data() + at};
  const std::uint64_t mask = r.mask();
  c.lit("{\"anchor\":");
  c.uint(r.anchor);
  c.lit(",\"bits\":");
  c.bits(mask);
  if (r.raw) {
    c.lit(",\"mask\":");
    c.hex(mask, 8);
    c.lit("\"new\":");
    c.hex(r.new_bits, 8);
    c.lit("\"offset\":");
    c.uint(r.index);
    c.lit(",\"old\":");
    c.hex(r.old_bits, 8);
    c.lit("\"seq\":");
    c.uint(seq);
    c.lit(",\"type\":\"raw\"}");
  } else {
    c.lit(",\"dataset\":");
    c.str(dataset_json);
    c.lit(",\"dtype\":\"");
    c.str(ckpt::dtype_name(r.dtype));
    if (r.global) {  // a tp shard's element in its global tensor (keys in json::dump()'s order)
      c.lit("\",\"global_index\":");
      c.uint(r.global->index);
      c.lit(",\"global_nd\":");
      c.uints(r.global->nd);
      c.lit(",\"global_shape\":");
      c.uints(r.global->shape);
      c.lit(",\"index\":");
    } else {
      c.lit("\",\"index\":");
    }
    c.uint(r.index);
    if (!r.location.empty()) {
      c.lit(",\"location\":");
      c.str(r.location);
    }
    c.lit(",\"mask\":");
    c.hex(mask, r.width);
    c.lit("\"nd\":");
    c.uints(r.nd);
    c.lit(",\"new\":");
    c.hex(r.new_bits, r.width);
    c.lit("\"new_value\":");
    c.value(ckpt::word_to_double(r.dtype, r.new_bits));
    c.lit(",\"old\":");
    c.hex(r.old_bits, r.width);
    c.lit("\"old_value\":");
    c.value(ckpt::word_to_double(r.dtype, r.old_bits));
    c.lit(",\"seq\":");
    c.uint(seq);
    c.lit(",\"type\":\"flip\"}");
  }
  out.resize(static_cast<std::size_t>(c.p - out.data()));
}

// Records come grouped by dataset: a dataset's escaped name is made once per run of records.
struct DatasetJson {
  std::string name, json;
  std::string_view of(const FlipRecord& r) {
    if (r.raw) return {};
    if (r.dataset != name || json.empty()) {
      name = r.dataset;
      // A name that is not UTF-8 is escaped and flagged; "dataset_escaped" sorts between
      // "dataset" and "dtype", where json::dump() would put it.
      json = is_utf8(r.dataset) ? nlohmann::json(r.dataset).dump()
                                : nlohmann::json(escape_name(r.dataset)).dump() + ",\"dataset_escaped\":true";
    }
    return json;
  }
};

// Lines of records[0..) numbered from `first`, each with its newline.
void append_record_lines(std::string& out, std::span<const FlipRecord> records, std::uint64_t first) {
  // Room for every line up front (a line is ~230 bytes besides its name, index and location), so
  // the buffer is not reallocated and copied as it grows.
  std::size_t need = record_fixed_max + 16;
  for (const auto& r : records) need += 260 + r.dataset.size() + r.location.size() + 21 * r.nd.size() + (r.global ? 200 : 0);
  out.reserve(out.size() + need);
  DatasetJson names;
  for (std::size_t i = 0; i < records.size(); ++i) {
    append_record_line(out, records[i], first + i, names.of(records[i]));
    out += '\n';
  }
}

}  // namespace

std::string record_line(const FlipRecord& r, std::uint64_t seq) {
  std::string out;
  append_record_line(out, r, seq, DatasetJson{}.of(r));
  return out;
}

std::string footer_line(std::uint64_t applied, const std::string& output_hash, ckpt::FileHash hash) {
  json j = {{"type", "footer"}, {"applied", applied}, {"output_hash", output_hash}};
  if (hash == ckpt::FileHash::sha256) j["output_sha256"] = output_hash;
  return j.dump();
}

namespace {

// The string at `key`, unescaped when `key`_escaped is true (names.hpp).
std::string name_at(const json& j, const std::string& key, const std::string& where) {
  auto s = j.at(key).get<std::string>();
  const std::string flag = key + "_escaped";
  if (!j.contains(flag) || !j.at(flag).get<bool>()) return s;
  auto bytes = unescape_name(s);
  if (!bytes) throw CorruptInputError(where + ": \"" + key + "\" is not a valid escaped name (\\xHH and \\\\ only)");
  return *bytes;
}

std::uint64_t parse_hex(const json& j, const char* key, unsigned width, const std::string& where) {
  const auto s = j.at(key).get<std::string>();
  std::string_view v = s;
  if (!v.starts_with("0x")) throw CorruptInputError(where + ": \"" + key + "\" must be a 0x-prefixed hex string");
  v.remove_prefix(2);
  std::uint64_t x = 0;
  const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), x, 16);
  if (v.empty() || ec != std::errc() || ptr != v.data() + v.size())
    throw CorruptInputError(where + ": \"" + key + "\" is not a 64-bit hex number");
  if ((x & ~width_mask(width)) != 0) throw CorruptInputError(where + ": \"" + key + "\" has bits beyond the word width");
  return x;
}

// A count, index or seed: a JSON integer >= 0. A float (1e28) or a negative number is rejected
// here: converting it to an unsigned integer would be undefined or wrap.
std::uint64_t as_uint(const json& v, const std::string& where, const char* key) {
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
    throw CorruptInputError(where + ": \"" + key + "\" must be an integer >= 0");
  return v.get<std::uint64_t>();
}

std::vector<std::uint64_t> uint_array(const json& j, const char* key, const std::string& where) {
  const auto& a = j.at(key);
  if (!a.is_array()) throw CorruptInputError(where + ": \"" + key + "\" must be an array");
  std::vector<std::uint64_t> out;
  for (const auto& v : a) out.push_back(as_uint(v, where, key));
  return out;
}

// A tp shard's element in its global tensor: all three keys, the N-d index inside the shape, and
// the flat index its C-order position (so a hand-edited index is caught, as "nd" is).
FlipRecord::Global parse_global(const json& j, bool all_three, const std::string& where) {
  if (!all_three) throw CorruptInputError(where + ": \"global_index\", \"global_nd\" and \"global_shape\" go together");
  FlipRecord::Global g;
  g.index = as_uint(j.at("global_index"), where, "global_index");
  g.nd = uint_array(j, "global_nd", where);
  g.shape = uint_array(j, "global_shape", where);
  if (g.nd.size() != g.shape.size() || g.shape.empty())
    throw CorruptInputError(where + ": \"global_nd\" and \"global_shape\" must have the same number of dimensions (at least one)");
  uint128_t flat = 0;
  for (std::size_t d = 0; d < g.shape.size(); ++d) {
    if (g.nd[d] >= g.shape[d]) throw CorruptInputError(where + ": \"global_nd\" lies outside \"global_shape\"");
    flat = flat * g.shape[d] + g.nd[d];  // < 2^64 before, so < 2^128 after: no overflow
    if (flat > UINT64_MAX) throw CorruptInputError(where + ": \"global_nd\" names an element beyond flat index 2^64 - 1");
  }
  if (flat != g.index) throw CorruptInputError(where + ": \"global_nd\" does not match \"global_index\"");
  return g;
}

FlipRecord parse_record(const json& j, bool raw, const std::string& where) {
  FlipRecord r;
  r.raw = raw;
  if (raw) {
    r.index = as_uint(j.at("offset"), where, "offset");
    r.width = 8;
  } else {
    r.dataset = name_at(j, "dataset", where);
    if (r.dataset.empty() || r.dataset.front() != '/') throw CorruptInputError(where + ": dataset path must be absolute");
    r.index = as_uint(j.at("index"), where, "index");
    if (j.contains("location")) {
      if (!j.at("location").is_object()) throw CorruptInputError(where + ": \"location\" must be an object");
      r.location = j.at("location").dump();
    }
    if (j.contains("nd")) {
      if (!j.at("nd").is_array()) throw CorruptInputError(where + ": \"nd\" must be an array");
      for (const auto& v : j.at("nd")) r.nd.push_back(as_uint(v, where, "nd"));
    }
    const bool gi = j.contains("global_index"), gn = j.contains("global_nd"), gs = j.contains("global_shape");
    if (gi || gn || gs) r.global = parse_global(j, gi && gn && gs, where);
    const auto dt = ckpt::dtype_from_name(j.at("dtype").get<std::string>());
    if (!dt) throw CorruptInputError(where + ": unknown dtype");
    r.dtype = *dt;
    r.width = ckpt::dtype_bits(*dt);
  }
  const std::uint64_t anchor = j.contains("anchor") ? as_uint(j.at("anchor"), where, "anchor") : 0;
  if (anchor >= r.width) throw CorruptInputError(where + ": anchor bit beyond the word width");
  r.anchor = static_cast<unsigned>(anchor);
  r.old_bits = parse_hex(j, "old", r.width, where);
  r.new_bits = parse_hex(j, "new", r.width, where);
  if (j.contains("mask") && parse_hex(j, "mask", r.width, where) != r.mask())
    throw CorruptInputError(where + ": mask does not equal old XOR new");
  if (j.contains("bits")) {  // the mask's set bits, ascending
    const auto& bits = j.at("bits");
    if (!bits.is_array()) throw CorruptInputError(where + ": \"bits\" must be an array");
    std::uint64_t listed = 0;
    unsigned next = 0;  // bits must ascend: the lowest position the next one may take
    for (const auto& b : bits) {
      const std::uint64_t bit = as_uint(b, where, "bits");
      if (bit >= r.width || bit < next) throw CorruptInputError(where + ": \"bits\" must list bit positions of the word in ascending order");
      listed |= std::uint64_t{1} << bit;
      next = static_cast<unsigned>(bit) + 1;
    }
    if (listed != r.mask()) throw CorruptInputError(where + ": \"bits\" does not list the set bits of old XOR new");
  }
  return r;
}

// What the records so far say about the words they touch, to check each record against the ones
// before it: a hand-edited log (records reordered, duplicated, or one replaced) would otherwise be
// reverted or replayed in part and reported as done (docs/reference/flip-log.md).
class RecordChecks {
public:
  void add(const FlipRecord& r, const std::string& where) {
    Dataset& d = dataset_of(r);
    if (d.records == 0) {
      d.dtype = r.dtype;
      d.rank = r.nd.size();
    } else if (!r.raw && (r.dtype != d.dtype || r.nd.size() != d.rank)) {
      throw CorruptInputError(where + ": dataset " + display_name(r.dataset) +
                              " has another dtype or N-d index rank than in an earlier record");
    }
    ++d.records;
    // A 1-d index is the flat index itself (a rank above 1 needs the shape, which the log lacks).
    if (r.nd.size() == 1 && r.nd[0] != r.index) throw CorruptInputError(where + ": \"nd\" does not match \"index\"");
    // Records of one word chain: each starts from the bits the one before it left.
    const auto [it, first] = d.words.try_emplace(r.index, Word{r.old_bits, r.new_bits});
    if (!first) {
      if (r.old_bits != it->second.last_new)
        throw CorruptInputError(where + ": \"old\" " + hex_bits(r.old_bits, r.width) + " is not " +
                                hex_bits(it->second.last_new, r.width) +
                                ", the \"new\" of the record before it on the same word (records reordered, duplicated or edited)");
      it->second.last_new = r.new_bits;
    }
  }
  /// Words whose records change them overall (the footer's `applied`: an injection starts from
  /// every word's first old bits).
  std::uint64_t words_changed() const {
    std::uint64_t n = 0;
    for (const auto& [name, d] : datasets_)
      for (const auto& [index, w] : d.words) n += w.first_old != w.last_new;
    return n;
  }

private:
  struct Word {
    std::uint64_t first_old, last_new;
  };
  struct Dataset {
    ckpt::DType dtype = ckpt::DType::u8;
    std::size_t rank = 0;
    std::uint64_t records = 0;
    std::unordered_map<std::uint64_t, Word> words;  // by index (raw: byte offset)
  };
  // Records come grouped by dataset: the last one is looked up again without hashing its name.
  Dataset& dataset_of(const FlipRecord& r) {
    if (!last_ || last_name_ != r.dataset) {
      last_ = &datasets_[r.dataset];
      last_name_ = r.dataset;
    }
    return *last_;
  }
  std::unordered_map<std::string, Dataset> datasets_;  // raw records: the name ""
  Dataset* last_ = nullptr;
  std::string last_name_;
};

// The formats a header's "file_format" may name (storage.hpp's format_names without "auto").
// Not that table: storage.hpp includes HDF5's headers, and this parser is also built alone, without
// HDF5, into the log fuzzer (tests/inject/fuzz), which including it would break.
bool known_file_format(std::string_view f) {
  for (const std::string_view name : {"hdf5", "torch", "safetensors", "npy", "npz", "shards", "dcp"})
    if (f == name) return true;
  return false;
}

}  // namespace

FlipLog parse_log(std::string_view text, const std::string& source, Tail tail) {
  FlipLog log;
  std::size_t pos = 0, lineno = 0;
  bool have_header = false, has_planned = false;
  RecordChecks checks;
  std::optional<std::pair<std::uint64_t, std::string>> footer_applied;  // the footer's `applied`, and where
  if (tail == Tail::may_be_cut && text.empty()) {  // killed between creating the log and its first write
    log.cut_short = true;
    log.has_header = false;
    return log;
  }
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    const bool unterminated = nl == std::string_view::npos;
    if (unterminated) nl = text.size();
    const std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = source + ":" + std::to_string(lineno);
    if (unterminated && tail == Tail::may_be_cut) {
      log.cut_short = true;  // even when the line parses: its newline was never written
      if (!json::accept(line)) {
        log.has_header = have_header;
        return log;
      }
    }
    try {
      const json j = json::parse(line);
      if (!j.is_object()) throw CorruptInputError(where + ": each line must be a JSON object");
      const auto type = j.at("type").get<std::string>();
      if (!have_header) {
        if (type != "header") throw CorruptInputError(where + ": the first line must be the header");
        if (j.at("format").get<std::string>() != log_format)
          throw CorruptInputError(where + ": unsupported log format (expected " + log_format + ")");
        auto& h = log.header;
        h.tool_version = j.value("version", "");
        h.seed = as_uint(j.at("seed"), where, "seed");
        h.trial = j.contains("trial") ? as_uint(j.at("trial"), where, "trial") : 0;
        h.model = j.value("model", "");
        if (j.contains("args")) h.args = j.at("args").get<std::vector<std::string>>();
        if (j.value("args_escaped", false))
          for (auto& a : h.args) {
            auto bytes = unescape_name(a);
            if (!bytes) throw CorruptInputError(where + ": \"args\" holds an invalid escaped string");
            a = std::move(*bytes);
          }
        h.input = j.contains("input") ? name_at(j, "input", where) : "";
        h.output = j.contains("output") ? name_at(j, "output", where) : "";
        if (j.contains("hash")) {
          const auto algo = ckpt::parse_file_hash(j.at("hash").get<std::string>());
          if (!algo) throw CorruptInputError(where + ": unknown \"hash\" (sample-sha256, sha256 or none)");
          h.hash = *algo;
          h.input_hash = j.value("input_hash", "");
          h.output_hash = j.value("output_hash", "");
        } else {  // a log written before "hash" existed: SHA-256 of the whole file, or nothing
          h.input_hash = j.value("input_sha256", "");
          h.output_hash = j.value("output_sha256", "");
          h.hash = h.input_hash.empty() && h.output_hash.empty() ? ckpt::FileHash::none : ckpt::FileHash::sha256;
        }
        h.in_place = j.value("in_place", false);
        h.raw = j.value("raw", false);
        h.file_format = j.value("file_format", "");
        if (!h.file_format.empty() && !known_file_format(h.file_format))
          throw CorruptInputError(where + ": unknown \"file_format\" (hdf5, torch, safetensors, npy, npz, shards or dcp)");
        h.keep_crc = j.value("keep_crc", false);
        h.planned = j.contains("planned") ? as_uint(j.at("planned"), where, "planned") : 0;
        has_planned = j.contains("planned");
        h.finite = j.value("finite", false);
        h.rejected = j.contains("rejected") ? as_uint(j.at("rejected"), where, "rejected") : 0;
        have_header = true;
      } else if (type == "flip" || type == "raw") {
        if (log.complete) throw CorruptInputError(where + ": record after the footer");
        if ((type == "raw") != log.header.raw) throw CorruptInputError(where + ": record type does not match the header");
        // Records are numbered in application order; a duplicate or a moved one breaks the count.
        if (!j.contains("seq") || as_uint(j.at("seq"), where, "seq") != log.records.size())
          throw CorruptInputError(where + ": \"seq\" must be " + std::to_string(log.records.size()) +
                                  " (records number 0..N-1 in application order: one duplicated, moved or removed?)");
        log.records.push_back(parse_record(j, type == "raw", where));
        checks.add(log.records.back(), where);
      } else if (type == "footer") {
        if (log.complete) throw CorruptInputError(where + ": second footer");
        log.complete = true;
        log.footer_output_hash = j.contains("output_hash") ? j.value("output_hash", "") : j.value("output_sha256", "");
        if (j.contains("applied")) footer_applied.emplace(as_uint(j.at("applied"), where, "applied"), where);
      } else {
        throw CorruptInputError(where + ": unknown record type \"" + type + "\"");
      }
    } catch (const json::exception& e) {
      throw CorruptInputError(where + ": malformed flip log line: " + e.what());
    }
  }
  if (!have_header) throw CorruptInputError(source + ": empty flip log (no header)");
  // A finished log holds exactly the records its header planned: one removed by hand would
  // otherwise be "reverted" as if it were all (its flip left in the file). (The footer's `applied`
  // counts words changed, which two records of one word make fewer; "planned": 0 is also what
  // hand-made logs without the field say, so only a positive count is held to.) No log holds
  // more records than planned.
  const bool counted = has_planned && log.header.planned > 0;
  const std::uint64_t planned = log.header.planned;
  if (counted && (log.records.size() > planned || (log.complete && log.records.size() != planned)))
    throw CorruptInputError(source + ": holds " + std::to_string(log.records.size()) + " flip records, but its header planned " +
                            std::to_string(planned) + " (records removed or added)");
  // The footer counts the words the records change (checked after the count: a record removed
  // by hand is named as that).
  if (footer_applied && footer_applied->first != checks.words_changed())
    throw CorruptInputError(footer_applied->second + ": \"applied\" is " + std::to_string(footer_applied->first) +
                            ", but the records change " + std::to_string(checks.words_changed()) + " word(s)");
  // Fewer records and no footer: cut by a kill between two writes of whole lines, before its
  // records were complete (nothing of it was applied). A cut log is read only as such (Tail::may_be_cut).
  if (counted && !log.complete && log.records.size() < planned && tail == Tail::strict)
    throw CorruptInputError(source + ": holds " + std::to_string(log.records.size()) + " of the " + std::to_string(planned) +
                            " planned flip records and no footer: a log cut short (an injection killed while writing it)");
  return log;
}

FlipLog read_log(const std::filesystem::path& p, Tail tail) {
  ckpt::fs::require_input_file(p);  // a FIFO would block, a missing or unreadable log is exit 3
  std::ifstream in(p, std::ios::binary);
  if (!in) throw IoError(p.string() + ": cannot open flip log");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_log(ss.str(), p.string(), tail);
}

LogWriter::LogWriter(const std::filesystem::path& p, const std::filesystem::path& of, bool fresh) : path_(p) {
  const unsigned mode = ckpt::fs::derived_mode(of);
  fd_ = fresh ? ckpt::fs::create_new(p, mode) : ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd_ < 0) throw IoError(p.string() + ": cannot create flip log: " + std::strerror(errno));
  ckpt::fs::bound_mode(fd_, mode, p);
}

LogWriter::~LogWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void LogWriter::line(const std::string& json_line) {
  buf_ += json_line;
  buf_ += '\n';
  if (buf_.size() > (1u << 20)) write_out();
}

void LogWriter::records(std::span<const FlipRecord> records) {
  // Two threads from a few thousand records on: formatting is a visible share of an in-place
  // injection's time (docs/design/ckpt-flip-io.md, "Word I/O"). The halves are joined in order, so the text
  // is the same.
  // Batches of 64 Ki records (~16 MB of text) keep the buffer bounded for --ber runs with millions.
  constexpr std::size_t two_threads_from = 4096, batch = std::size_t{1} << 16;
  for (std::size_t at = 0; at < records.size(); at += batch) {
    const auto part = records.subspan(at, std::min(batch, records.size() - at));
    std::string second;  // the second half's text, when there is one
    detail::on_two_threads(part.size(), two_threads_from, [&](std::size_t from, std::size_t to) {
      append_record_lines(from == 0 ? buf_ : second, part.subspan(from, to - from), at + from);
    });
    if (!second.empty()) {  // the halves go out in order, each from its own buffer (no joined copy)
      write_out();
      buf_.swap(second);
      write_out();
    } else if (buf_.size() > (1u << 20)) {
      write_out();
    }
  }
}

void LogWriter::write_out() {
  std::size_t done = 0;
  while (done < buf_.size()) {
    const ssize_t n = ::write(fd_, buf_.data() + done, buf_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IoError(path_.string() + ": write failed: " + std::strerror(errno));
    }
    done += static_cast<std::size_t>(n);
  }
  buf_.clear();
}

void LogWriter::sync() {
  write_out();
  if (::fsync(fd_) != 0) throw IoError(path_.string() + ": fsync failed: " + std::strerror(errno));
  // A new file's name is durable only once its directory is: a power cut after the edit began must
  // leave the log to undo it, not only its contents without a name.
  if (!entry_synced_) {
    ckpt::fs::fsync_dir(path_.parent_path());
    entry_synced_ = true;
  }
}

void LogWriter::close() {
  sync();
  if (::close(fd_) != 0) {
    fd_ = -1;
    throw IoError(path_.string() + ": close failed");
  }
  fd_ = -1;
}

}  // namespace resil::inject
