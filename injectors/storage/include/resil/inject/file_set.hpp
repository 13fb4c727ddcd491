// A checkpoint stored as several files that the storage layer opens as one: a Hugging Face sharded
// checkpoint (an index `*.index.json` whose weight_map names each tensor's shard file, or a
// directory holding one such index or, without one, its `*.safetensors` files) and a
// torch.distributed.checkpoint directory (its `.metadata` and `__R_N.distcp` data files). The
// commands name such a set by its index file or its directory; its fault space spans the data
// files (docs/reference/formats.md, "Sharded sets"). These are the file-level operations the
// commands need beside open_storage: existence checks, hashing, copying, and the file an in-place
// run locks.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "resil/ckpt/hash.hpp"
#include "resil/inject/storage.hpp"

namespace resil::inject {

struct FileSet {
  Format format = Format::shards;     // shards or dcp
  std::filesystem::path dir;          // the folder holding every file of the set
  std::string index;                  // the index or .metadata file's name in dir; "" for a folder of *.safetensors
  std::vector<std::string> files;     // the data files' names in dir, sorted, each once
  /// Index (if any) first, then the data files: every file of the set, as names in dir.
  std::vector<std::string> all() const;
};

/// The format of a directory: dcp when it holds `.metadata`, shards when it holds one `*.index.json`
/// or (without one) `*.safetensors` files; nullopt otherwise. Throws UsageError naming the
/// directory when it holds two indexes (name the one meant) and IoError when it cannot be listed.
std::optional<Format> directory_format(const std::string& dir);
/// Whether `path` names a set: a directory, or a file whose content parses as a shard index.
bool is_file_set(const std::string& path);
/// The files of the set at `path` (a directory or an index file), each checked: a plain name in the
/// set's directory, a regular file this process can read, or a symbolic link to a regular file of
/// the owner of the set's directory (another user's file is refused, IoError). Parses the index or
/// `.metadata` (CorruptInputError naming it). A missing data file is IoError naming it and the index.
FileSet file_set(const std::string& path, Format format = Format::automatic);

/// An input path of a command: a regular readable file, or a directory (its content is checked
/// when it is opened). IoError naming it otherwise (exit 3).
void require_input(const std::string& path);
/// The identity hash `h` of a checkpoint (ckpt::file_hash): a file's, or for a set the SHA-256 of its
/// listing in sha256sum's form ("<hash>  <name>\n" per file of all(), in that order, each file hashed
/// with `h`), so one changed shard changes it. "" for FileHash::none.
std::string checkpoint_hash(const std::string& path, ckpt::FileHash h);
/// Copy the checkpoint at `from` to `to`, durable: a file to the file `to`; a set given by its
/// directory to the new directory `to`; a set given by its index to the index file `to`, its data
/// files beside it. Symbolic links in a set are copied as the files they point to.
void copy_checkpoint(const std::string& from, const std::filesystem::path& to, Format format = Format::automatic);
/// The file an in-place run on `path` locks (InPlaceLock): `path` itself, or a set's index (its
/// first data file when it has none).
std::string lock_file_of(const std::string& path);

}  // namespace resil::inject
