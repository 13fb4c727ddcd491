// The injection transaction of an in-place edit (docs/reference/flip-log.md), one for `ckpt-flip inject
// --in-place` and for every campaign trial: the flip log's header and records are durable (fsync)
// before the first byte of the file changes, then the records are applied, then the footer (words
// changed, output hash) completes the log. A kill at any point leaves a log revert and replay can
// finish from: cut before its records are complete, nothing was applied; complete without a footer,
// each touched word holds its old or its new bits.
#pragma once

#include <filesystem>
#include <span>
#include <string>

#include "resil/inject/apply.hpp"
#include "resil/inject/flip_log.hpp"
#include "resil/inject/storage.hpp"

namespace resil::inject {

struct TransactionOptions {
  /// fsync the file's edited words at the end (the log is durable before any change either way).
  bool sync = true;
  /// The edited file's hash, by the header's `hash`, into the footer; "" when false.
  bool hash_output = true;
  /// The file's format (the path overload; automatic: detected from its content).
  Format format = Format::automatic;
};

struct TransactionResult {
  ApplyStats stats;
  std::string output_hash;  // "" unless TransactionOptions::hash_output and a header's hash
};

/// Write the log `log` (created or truncated) with `header` and `records`, make it durable, apply
/// `records` forward to `file` crash-safely in place (inject::apply), then finish the log with its
/// footer. Errors as LogWriter and apply (IoError, MismatchError, ...). After an error the touched
/// words are read back (holds_old_bits): a log of flips the file holds none of is removed (no output
/// of a failed run remains); otherwise it is the undo record, kept without its footer, and the
/// error's message (same class) says so.
TransactionResult apply_logged(const std::filesystem::path& log, const LogHeader& header, std::span<const FlipRecord> records,
                               const std::string& file, const TransactionOptions& opt = {});
/// The same through an open Storage (Access::in_place), which it closes; its set_sync applies, not
/// TransactionOptions::sync nor format.
TransactionResult apply_logged(const std::filesystem::path& log, const LogHeader& header, std::span<const FlipRecord> records, Storage& file,
                               const TransactionOptions& opt = {});

}  // namespace resil::inject
