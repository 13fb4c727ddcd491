// The resil checkpoint schema (docs/checkpoint-format.md) and its crash-safe commit protocol.
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
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "resil/ckpt/io.hpp"
#include "resil/ckpt/tensor.hpp"

namespace resil::ckpt {

inline constexpr std::int64_t format_version = 1;

enum class ParallelMode { none, dp, mp };
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
};

struct Checkpoint {
  Meta meta;
  std::map<std::string, Tensor> model;                               // param -> tensor
  std::map<std::string, std::map<std::string, Tensor>> optimizer;    // param -> slot -> tensor
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
/// True when every shard named by the manifest is committed.
bool manifest_complete(const std::filesystem::path& manifest);

/// The newest complete checkpoint in `dir` (committed file or complete manifest), by step;
/// nullopt when none. Temporary and uncommitted files are ignored.
std::optional<std::filesystem::path> latest(const std::filesystem::path& dir);

}  // namespace resil::ckpt
