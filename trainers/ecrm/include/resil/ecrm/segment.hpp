// A rank's state that outlives its process: a named POSIX shared-memory segment
// `/dev/shm/resil-ec-<job>-<rank>` (shm_open + ftruncate + mmap), so that after a real death the
// relaunched job finds every survivor's state where it left it (docs/design/ec-train-protocol.md, "Real failures").
//
// Layout (each region 4 KiB aligned):
//   header   magic, version, identity (config hash, seed, rank, world), region sizes, two commit
//            records (A/B, each with its own checksum), two undo heads, the fired `--kill`s
//   store    the shard store's data and parity fragments and its parity ledgers (ShardStore works
//            in place: no copy; a commit costs what the step changed, not the size of the state)
//   undo[2]  one-step undo records: before a step overwrites bytes of the store, their old
//            values are appended here ([u64 offset][u64 length][bytes]) and only then overwritten
//   slot[2]  the small state (MLP replica and Adam state, lost members, report records),
//            written whole at each commit into the slot the commit record does not name
//   log      the report's per-step timeline, append-only (its length lives in the slot)
//
// Crash consistency (a process killed at any instruction; a node loss removes the whole segment):
// a commit writes the slot, then the commit record (step, slot, current undo record, checksum),
// then empties the old undo record and gives it the new base. Until the record is written, the
// previous commit stands and every byte changed since is in the current undo record; an undo
// record counts only while its base equals the commit it started from, so a record not yet
// emptied is never replayed. The undo record of the step before is kept until the next commit:
// a rank one step ahead of the others rolls back through both (rollback_to). Stores are ordered
// by compiler fences only: a killed process loses no store it executed (the page stays in memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "resil/core/fd.hpp"

namespace resil::ecrm {

/// Records the old bytes of a store range before it is overwritten (the segment's undo record).
class UndoSink {
public:
  virtual ~UndoSink() = default;
  virtual void save(std::span<const std::byte> range) = 0;
};

/// Sizes of a segment's regions (all fixed by the configuration).
struct SegmentLayout {
  std::size_t store_bytes = 0, undo_bytes = 0, slot_bytes = 0, log_entries = 0;
};

/// What makes a segment this job's: a segment whose identity differs is never attached.
struct SegmentIdentity {
  std::uint64_t config_hash = 0, seed = 0;
  int rank = 0, world = 0;
  // The settings behind config_hash as a flat JSON object (option name -> value), kept in the
  // header page so that a refused attach can say which settings differ (cut when over 3 KiB).
  std::string settings;
};

/// One step of the report's timeline, as the segment keeps it.
struct LogEntry {
  std::int64_t step = 0;
  double t_end = 0, dt = 0, loss = 0;
  std::uint32_t phase = 0, pad = 0;
};

class Segment final : public UndoSink {
public:
  static constexpr std::uint32_t version = 3;  // 2: the parity ledgers moved into the store; 3: settings text

  /// `/dev/shm/resil-ec-<job>-<rank>`; `job` may hold [A-Za-z0-9._-] only (UsageError otherwise).
  static std::string path(const std::string& job, int rank);
  /// Remove one segment (false: there was none).
  static bool remove(const std::string& job, int rank);
  /// Remove every segment of `job`; returns how many. Nothing when one is in use (IoError). A
  /// segment this user may not remove (another user's: /dev/shm is sticky) is left, and after the
  /// others are removed an IoError lists each with its owner.
  static std::size_t cleanup(const std::string& job);
  /// IoError when what `job`'s segments on this node have not yet taken (they are sparse until
  /// written) exceeds the memory available (MemAvailable) or /dev/shm's free space.
  static void require_room(const std::string& job);
  /// The seed recorded in an existing segment's header, for a run without --seed: only from a
  /// segment of this user's open to no one else (attach refuses the others); no other check.
  static std::optional<std::uint64_t> peek_seed(const std::string& job, int rank);

  /// Attach the existing segment: nullopt when there is none. A segment owned by another user, or
  /// that grants group or others any access, is refused (IoError naming its owner and mode) before
  /// anything of it is read; one of another configuration, rank, world size or format too
  /// (MismatchError, CorruptInputError naming it). Refused segments are never attached or changed. Waits up to ~3 s for a dying process of the previous launch to let go of
  /// it (IoError when it stays in use).
  static std::optional<Segment> attach(const std::string& job, const SegmentIdentity& id, const SegmentLayout& lay);
  /// A new, empty segment (any old one of that name is removed first); no committed state.
  static Segment create(const std::string& job, const SegmentIdentity& id, const SegmentLayout& lay);

  Segment(Segment&&) noexcept = default;
  Segment& operator=(Segment&&) noexcept = default;

  const std::string& name() const noexcept { return path_; }
  std::span<std::byte> store() const noexcept;

  // ---- commit and rollback ----
  struct Committed {
    std::int64_t step = 0;
    std::uint64_t wall_ns = 0;  // CLOCK_REALTIME at the commit
  };
  /// The last committed step (nullopt: no valid commit record, the state counts as lost).
  std::optional<Committed> committed() const noexcept;
  /// Make `step` the committed state: `small` goes into the free slot, then the commit record.
  /// The store must already hold the step's bytes. Recommitting the committed step is a no-op.
  void commit(std::int64_t step, std::span<const std::byte> small);
  /// The same, with the small state (`size` bytes) written by `write` straight into the slot: no
  /// copy of it on the heap first (the MLP replica and Adam state of a large MLP are megabytes).
  void commit(std::int64_t step, std::size_t size, const std::function<void(std::byte*)>& write);
  /// The small state of the committed step (checked against its checksum by committed()).
  std::span<const std::byte> small_state() const;
  /// Whether rollback_to(target) can succeed (target = committed, or committed - 1 with both undo
  /// records and the older slot intact).
  bool can_roll_back_to(std::int64_t target) const noexcept;
  /// Undo every change since commit `target` and make it the committed state again. Idempotent
  /// (a kill during a rollback leaves it to be redone). EcError when !can_roll_back_to(target).
  void rollback_to(std::int64_t target);
  /// The state no longer matches any commit (a bulk overwrite without undo: a wipe, a checkpoint
  /// load): until the next commit this segment counts as lost, and no rollback behind it works.
  void invalidate() noexcept;
  /// Record the old bytes of `range` (inside store()) before they are overwritten.
  void save(std::span<const std::byte> range) override;
  /// Bytes the current undo record holds (for the report on the commit cost).
  std::size_t undo_used() const noexcept;

  // ---- the timeline and the fired --kill specs (not part of the commit) ----
  std::size_t log_capacity() const noexcept;
  void log_put(std::size_t i, const LogEntry& e) noexcept;
  LogEntry log_get(std::size_t i) const noexcept;
  std::uint64_t kills_fired() const noexcept;
  void set_kills_fired(std::uint64_t mask) noexcept;

private:
  Segment() = default;
  static Segment open_mapped(const std::string& path, Fd fd, const SegmentLayout& lay);
  struct Header;
  Header& head() const noexcept;
  std::byte* undo_area(unsigned i) const noexcept;
  std::byte* slot_area(unsigned i) const noexcept;
  void replay(unsigned area) noexcept;

  std::string path_;
  Fd fd_;          // held open: its lock says the segment is in use
  Mapping map_;
  std::size_t store_off_ = 0, undo_off_[2]{}, slot_off_[2]{}, log_off_ = 0;
  std::size_t undo_bytes_ = 0, slot_bytes_ = 0, log_entries_ = 0;
};

}  // namespace resil::ecrm
