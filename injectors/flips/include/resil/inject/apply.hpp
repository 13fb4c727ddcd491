// inject::apply: flip records -> file, exactly (forward) or as an exact undo (revert), crash-safe in
// place (the last step of select -> sample_sites -> plan -> apply).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "resil/inject/flip_log.hpp"
#include "resil/inject/storage.hpp"

namespace resil::inject {

enum class Direction { forward, revert };
struct ApplyStats {
  std::uint64_t words = 0;       // distinct words the records touch
  std::uint64_t changed = 0;     // words written
  std::uint64_t unchanged = 0;   // already in the target state (e.g. revert of an interrupted run)
};

/// Apply records to `file` (forward: replay/inject; revert: exact undo, in reverse order).
/// Per word the current bits must be a state of its record chain (forward: the first old or the
/// last new; revert: the first old or any new); otherwise MismatchError names dataset and index,
/// unless `force`. Raw records are applied to the file's bytes.
/// Crash safety (`crash_safe`, i.e. in place): HDF5 is opened read-only, never read-write (a
/// superblock v2/3 file opened for writing and killed would no longer open). Contiguous data and
/// allocated chunks of unfiltered datasets are changed word by word with pwrite at their file
/// addresses. A change HDF5 alone can make - a filtered chunk (HDF5 may relocate it and update the
/// chunk index later), an unallocated chunk, compact or unallocated data - stages the file: copy to
/// a temporary sibling, edit there through HDF5, fsync, rename over `file` (always before or
/// after). Which way is decided by a read-only probe before any byte changes. Stale
/// `.NAME.tmp.PID` siblings of dead processes are removed first.
/// `format`: the file's (automatic: detected from its content); the file is opened through that
/// adapter, and the format's finishing step (Storage::finish) runs after the edits.
/// `sync` false (in place only): the file's edited bytes are not fsynced at the end (the staged
/// path always is). A crash then may lose some of the edits, never tear a word; the log's
/// old/new chains let revert and replay finish from any such state.
ApplyStats apply(const std::string& file, std::span<const FlipRecord> records, Direction dir, bool force = false,
                 bool crash_safe = true, bool sync = true, Format format = Format::automatic);
/// The same through an open Storage, which it closes (its set_sync applies): Access::in_place is the
/// crash-safe way (a staged edit closes it and works on a copy of its path), Access::rewrite the
/// other; Access::read is a UsageError. Raw records reopen the file by path.
ApplyStats apply(Storage& file, std::span<const FlipRecord> records, Direction dir, bool force = false);

/// A log made from a file of one format (its header's `file_format`) applied to a file of another
/// (`format` forced, or detected from the content) is refused with MismatchError naming both,
/// before anything is written. Logs without the field (older ones, --raw) pass.
void require_logged_format(const std::string& file, const LogHeader& header, const std::string& log, Format format = Format::automatic);

/// A complete log (one with its footer) whose header names a hash: `file` must hash (by that
/// algorithm) to the logged input's or output's hash, i.e. be the file the log was made from, before
/// or after the flips, else MismatchError naming the file, the log and the algorithm, before
/// anything is written. Not checked: a log without a footer (an interrupted injection: the file may
/// hold any mix of old and new words and, for a zip, old CRC-32s) and one with hash none. With
/// sample-sha256, a file that differs from the logged one only between the samples passes
/// (hash.hpp: sample_sha256_file).
void require_logged_identity(const std::string& file, const FlipLog& log, const std::string& log_path);

/// Whether every word the records touch holds its first record's old bits in `file`: none of them
/// is applied (a record that changes no bit counts either way). Reads only those words, read-only.
/// Errors as open_storage and Storage::edit; a raw record beyond the file's end is false.
bool holds_old_bits(const std::string& file, std::span<const FlipRecord> records, Format format = Format::automatic);

}  // namespace resil::inject
