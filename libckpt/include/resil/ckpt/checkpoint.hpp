// The resil checkpoint schema (docs/reference/checkpoint-format.md) and its crash-safe commit protocol.
//
//   /model/<param>                 tensors of the model
//   /optimizer/<param>/<slot>      optimizer state (momentum, adam m/v, adagrad sum, ...)
//   /meta                          group: attributes + /meta/rng_state dataset
//
// Commit protocol for DIR/NAME.h5: write DIR/.NAME.h5.tmp.<pid>, fsync, rename to DIR/NAME.h5,
// fsync DIR, then write the commit marker DIR/NAME.h5.done atomically. A checkpoint without its
// marker (writer killed at any point) is never picked by latest().
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "resil/ckpt/io.hpp"
#include "resil/ckpt/tensor.hpp"

namespace resil::ckpt {

/// 2: /meta gained `optimizer_step` (ec-train had kept its optimizer step in /meta/rng_state).
/// Version 1 files still read (optimizer_step absent); newer versions are refused.
inline constexpr std::int64_t format_version = 2;

/// none: one process; dp: data parallel (replicas); mp: pipeline over a layer chain (mlp, cnn);
/// tp: tensor parallel (gpt: Megatron-style column- and row-parallel Linears, shards hold slices).
enum class ParallelMode { none, dp, mp, tp };
std::string_view mode_name(ParallelMode m) noexcept;
ParallelMode mode_from_name(std::string_view s);  // throws UsageError

struct Meta {
  std::int64_t format_version = ckpt::format_version;
  std::int64_t step = 0;   // optimizer steps completed
  std::int64_t epoch = 0;  // epochs completed
  std::int64_t world_size = 1;
  std::int64_t rank = 0;
  ParallelMode mode = ParallelMode::none;
  std::string stage_layout;      // mp: JSON array of [first_layer, end_layer) per stage; "" otherwise
  std::string model;             // model name, e.g. "mlp"
  std::string config;            // JSON of the training configuration (optimizer, lr, batch, ...)
  std::uint64_t seed = 0;        // root seed of the run
  std::vector<std::uint64_t> rng_state;  // counter-based RNG positions, stored as /meta/rng_state
  std::uint64_t data_cursor = 0; // samples consumed in the current epoch
  std::string program_version;   // resil version that wrote it
  /// The optimizer's own step count (Adam's bias correction) where the writer keeps one apart from
  /// `step`; stored as the attribute only when set (format version >= 2).
  std::optional<std::int64_t> optimizer_step;
};

struct Checkpoint {
  Meta meta;
  std::map<std::string, Tensor> model;                               // param -> tensor
  std::map<std::string, std::map<std::string, Tensor>> optimizer;    // param -> slot -> tensor
  /// tp shards: param -> the slice of the global tensor this shard holds, as JSON
  /// ({"global_shape": [...], "dim": d, "ranges": [[lo, hi], ...]}: the local tensor is the global
  /// one's indices lo..hi-1 of each range along `dim`, concatenated). Written as the attribute
  /// `resil_tp_slice` on /model/<param> and on each of its /optimizer/<param>/<slot> datasets.
  std::map<std::string, std::string> slices;
};

/// A tp shard's slice of a global tensor: along dimension `dim`, the global indices of each range
/// [lo, hi), concatenated in order, all of every other dimension.
struct TpSlice {
  Shape global_shape;
  std::size_t dim = 0;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  std::string to_json() const;
  /// CorruptInputError naming `where` for text that is not a slice of its global shape.
  static TpSlice from_json(const std::string& text, const std::string& where);
  Shape local_shape() const;
  /// The global tensor's flat (row-major) index of the local tensor's flat index `local`.
  std::uint64_t global_index(std::uint64_t local) const;
  /// Copy `local` (of local_shape()) into its place in `global` (of global_shape, the same dtype).
  void place(const Tensor& local, Tensor& global) const;
};

/// Write a whole checkpoint to an open file (no commit protocol; use save() for that).
void write(hid_t file, const Checkpoint& c, const WriteOptions& opt = {});
/// Read a whole checkpoint; validates /meta (format version) and, when `verify_checksums`,
/// every dataset's checksum (a mismatch raises CorruptInputError naming the dataset).
Checkpoint read(const std::filesystem::path& p, bool verify_checksums = false);
Meta read_meta(const std::filesystem::path& p);

/// Crash-safe save (protocol above). Returns the final path.
std::filesystem::path save(const std::filesystem::path& path, const Checkpoint& c, const WriteOptions& opt = {});
/// Whether `path` has its commit marker and the size it records.
bool is_committed(const std::filesystem::path& path);

/// Canonical file name for a step: "ckpt-step00000469.h5" (the step sorts lexically).
std::string file_name_for_step(std::int64_t step);
/// Whether `p` lies in checkpoint directory `dir` under a checkpoint's name (ckpt-step*: a file, a
/// manifest, or anything inside an mp checkpoint's step directory), comparing the resolved paths
/// (links, "..", "./" and relative spellings of paths not made yet alike): a run writing
/// checkpoints into `dir` would replace it, or it a checkpoint.
bool is_checkpoint_name_in(const std::filesystem::path& p, const std::filesystem::path& dir);

// ---- sharded checkpoints (one file per rank/stage + manifest) ----
/// Shard file of a rank: DIR/ckpt-step<S>/rank-<R>.h5 (each committed like a single file).
std::filesystem::path shard_path(const std::filesystem::path& dir, std::int64_t step, int rank);
/// Manifest: DIR/ckpt-step<S>.manifest.json, written atomically after all shards committed;
/// it is the commit marker of the whole set.
std::filesystem::path manifest_path(const std::filesystem::path& dir, std::int64_t step);

struct Manifest {
  std::int64_t format_version = ckpt::format_version;
  std::int64_t step = 0, epoch = 0, world_size = 1;
  ParallelMode mode = ParallelMode::mp;
  std::string model;
  std::vector<std::filesystem::path> shards;  // relative to the manifest's directory, by rank
};
void write_manifest(const std::filesystem::path& p, const Manifest& m);
Manifest read_manifest(const std::filesystem::path& p);  // throws CorruptInputError on malformed JSON
/// Commit a sharded checkpoint: every rank calls this with its own shard (shard.meta: step, epoch,
/// rank, world_size, mode, model). Three phases, each run through `collective(phase)`, which must
/// run `phase` on this rank, return once every rank has run its own, and throw on every rank when
/// any rank's phase failed (libckpt knows no MPI: the caller agrees over its communicator):
/// rank 0 creates the step's directory; every rank saves its shard (committed like a single file);
/// rank 0 writes the manifest, the commit marker of the set, once every shard is durable.
/// Returns the manifest's path.
std::filesystem::path save_sharded(const std::filesystem::path& dir, const Checkpoint& shard,
                                   const std::function<void(const std::function<void()>&)>& collective, const WriteOptions& opt = {});

/// True when every shard named by the manifest is committed.
bool manifest_complete(const std::filesystem::path& manifest);

/// The newest complete checkpoint in `dir` (committed file or complete manifest), by step;
/// nullopt when none. Temporary and uncommitted files are ignored.
std::optional<std::filesystem::path> latest(const std::filesystem::path& dir);

}  // namespace resil::ckpt
