// The flip log (JSONL, docs/reference/flip-log.md): the single source for revert, replay, campaigns and
// reports. Line 1 is a header, then one record per fault, then a footer with the output hash.
// Parsing has no HDF5 dependency so it can be fuzzed on its own.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "resil/ckpt/dtype.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/inject/shared_text.hpp"

namespace resil::inject {

inline constexpr const char* log_format = "resil-flip-log/1";

/// One fault on one stored word (or, for --raw, on one byte of the file).
/// Several records may hit the same word; they apply in log order (old of the second = new of the first).
struct FlipRecord {
  bool raw = false;               // true: file-byte record (offset/old/new are a byte)
  std::string dataset;            // absolute path (empty for raw)
  std::uint64_t index = 0;        // flat C-order element index (raw: byte offset in the file)
  std::vector<std::uint64_t> nd;  // N-d index (empty for raw and scalars)
  ckpt::DType dtype = ckpt::DType::u8;
  unsigned width = 8;             // stored bits of the word
  unsigned anchor = 0;            // the sampled bit (0 = LSB)
  std::uint64_t old_bits = 0, new_bits = 0;
  /// The element in the global tensor, when the dataset is a tp shard's slice of one (its
  /// `resil_tp_slice` attribute): the global flat C-order index, N-d index and shape.
  struct Global {
    std::uint64_t index = 0;
    std::vector<std::uint64_t> nd, shape;
    bool operator==(const Global&) const = default;
  };
  std::optional<Global> global;
  /// Where the word is stored beyond the dataset's name (Storage::location: a set's file, a
  /// distributed checkpoint's chunk), compact JSON with sorted keys; "" when the file says it all.
  /// Shared: the records of one chunk hold one text.
  SharedText location;
  std::uint64_t mask() const noexcept { return old_bits ^ new_bits; }
};

struct LogHeader {
  std::string tool_version;
  std::uint64_t seed = 0;
  std::uint64_t trial = 0;
  std::string model;               // fault model text
  std::vector<std::string> args;   // command line
  std::string input;               // input path as given
  /// How input_hash and output_hash identify the files ("hash"; a log without the key, written
  /// before it existed, holds SHA-256 in "input_sha256"/"output_sha256", or "" in both: none).
  ckpt::FileHash hash = ckpt::FileHash::none;
  std::string input_hash;          // "" when hashing was skipped
  std::string output;
  std::string output_hash;         // known up front with -o; for --in-place see the footer
  bool in_place = false;
  bool raw = false;
  std::uint64_t planned = 0;       // number of records that follow
  std::string file_format;         // the input's format (format_names: "hdf5", "torch"...); "" in older logs
  bool keep_crc = false;           // --keep-crc: container checksums (zip CRC-32) were left as they were
  bool finite = false;             // --finite: sites whose fault left a NaN or Inf were redrawn
  std::uint64_t rejected = 0;      // with finite: how many drawn sites were rejected
};

struct FlipLog {
  LogHeader header;
  std::vector<FlipRecord> records;
  bool complete = false;           // a footer was found (the injection finished)
  std::string footer_output_hash;  // by header.hash
  /// Only with Tail::may_be_cut: the text ended inside a line (a kill while the log was being
  /// written; every line ckpt-flip writes ends with a newline). That line was dropped unless it parses.
  bool cut_short = false;
  bool has_header = true;          // false: the log was cut before its header was complete
  /// Whether the log was cut while its header or records were being written: no header, or fewer
  /// records than planned and no footer, whether the text ends inside a line or between two whole
  /// lines (a kill between two writes). An in-place run changes the file only after all of them are
  /// durable, so then nothing it describes was applied.
  bool cut_before_records_complete() const noexcept { return !has_header || (!complete && records.size() < header.planned); }
};

/// How a log whose text ends inside a line is taken: an error (strict, e.g. for replay), or as
/// the lines before it (revert: a kill while the log was written leaves such a tail).
enum class Tail { strict, may_be_cut };

/// One JSON line (no newline) per object.
std::string header_line(const LogHeader& h);
std::string record_line(const FlipRecord& r, std::uint64_t seq);
/// The footer: words changed and the output's hash by `hash` ("" when skipped).
std::string footer_line(std::uint64_t applied, const std::string& output_hash, ckpt::FileHash hash = ckpt::FileHash::none);

/// Parse a whole log; throws CorruptInputError naming `source` and the line number. Records must
/// be numbered 0..N-1 in order (`seq`), chain on each word (old = the new of the word's record
/// before), list their mask's set bits in `bits`, and agree with the footer's `applied` (words
/// changed) and the header's `planned` (N).
/// With Tail::may_be_cut, an empty text or an unterminated last line that does not parse is a
/// log cut short (FlipLog::cut_short, has_header), not an error, and so is a log with fewer
/// records than planned and no footer (cut_before_records_complete); with Tail::strict the latter
/// is an error too.
FlipLog parse_log(std::string_view text, const std::string& source, Tail tail = Tail::strict);
/// Read a log file (a regular file: FIFOs and devices are refused with IoError, like a missing one).
FlipLog read_log(const std::filesystem::path& p, Tail tail = Tail::strict);

/// JSON number for a value, or a string "nan"/"inf"/"-inf" (JSON has no non-finite numbers).
nlohmann::json value_json(double v);
std::string hex_bits(std::uint64_t v, unsigned width);

/// Append-only log file; `sync()` makes everything written so far durable (fsync).
class LogWriter {
public:
  /// Creates or truncates `p`; throws IoError. A log of the file `of` is no more readable than it
  /// (ckpt::fs::derived_mode: its records hold the file's values). `fresh`: `p` is a temporary name,
  /// created new (ckpt::fs::create_new), never written through whatever is there.
  explicit LogWriter(const std::filesystem::path& p, const std::filesystem::path& of = {}, bool fresh = false);
  ~LogWriter();
  LogWriter(const LogWriter&) = delete;
  LogWriter& operator=(const LogWriter&) = delete;
  void line(const std::string& json_line);
  /// record_line(records[i], i) for each record, in order, one per line (on two threads when there
  /// are thousands; the text is the same).
  void records(std::span<const FlipRecord> records);
  void sync();
  void close();

private:
  void write_out();
  std::filesystem::path path_;
  int fd_ = -1;
  bool entry_synced_ = false;  // the log's directory entry made durable (first sync)
  std::string buf_;
};

}  // namespace resil::inject
