// Output and input paths of a command, checked before anything is written (check_paths).
#include "resil/train/trainer.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "resil/ckpt/checkpoint.hpp"
#include "resil/ckpt/fs.hpp"
#include "run.hpp"

namespace resil::train {

namespace stdfs = std::filesystem;
using nlohmann::json;

namespace {
std::string errno_text() { return std::strerror(errno); }
}  // namespace

std::vector<OutputPath> outputs_of(const TrainConfig& c) {
  return {{"--ckpt-dir", c.ckpt_dir, true}, {"--metrics", c.metrics, false}, {"--summary", c.summary, false}};
}

std::vector<InputPath> inputs_of(const TrainConfig& c, const std::optional<stdfs::path>& from) {
  std::vector<InputPath> in;
  if (from) in = checkpoint_inputs(*from);
  if (!c.data.empty()) in.push_back({"--data", c.data});
  return in;
}

std::vector<InputPath> checkpoint_inputs(const stdfs::path& from) {
  std::vector<InputPath> in = {{"--from", from}, {"--from", from.string() + ".done"}};
  if (!from.string().ends_with(".manifest.json")) return in;
  try {
    for (const auto& shard : ckpt::read_manifest(from).shards) {
      in.push_back({"--from", from.parent_path() / shard});
      in.push_back({"--from", (from.parent_path() / shard).string() + ".done"});
    }
  } catch (const Error&) {
    // Unreadable: reading it for the run reports why.
  }
  return in;
}

void check_paths(const std::vector<OutputPath>& outputs, const std::vector<InputPath>& inputs) {
  std::vector<const OutputPath*> outs;
  for (const auto& o : outputs)
    if (!o.path.empty()) outs.push_back(&o);
  auto name = [](const OutputPath& o) { return o.option + " " + o.path.string(); };
  // Aliasing first: writing one output would destroy another, or the input being read.
  for (std::size_t i = 0; i < outs.size(); ++i) {
    for (std::size_t j = i + 1; j < outs.size(); ++j)
      if (ckpt::fs::same_file(outs[i]->path, outs[j]->path))
        throw UsageError(name(*outs[i]) + " and " + outs[j]->option + " " + outs[j]->path.string() + " name the same file");
    if (outs[i]->directory) continue;
    // A checkpoint the run writes would replace the file (or the file a committed checkpoint): a
    // ckpt-step* name inside the directory, or anything inside an mp checkpoint's ckpt-step*/ (its shards).
    for (const OutputPath* d : outs)
      if (d->directory && ckpt::is_checkpoint_name_in(outs[i]->path, d->path))
        throw UsageError(name(*outs[i]) + ": a checkpoint's name inside " + d->option + " " + d->path.string() + " (ckpt-step*)");
    for (const auto& in : inputs)
      if (!in.path.empty() && ckpt::fs::same_file(outs[i]->path, in.path))
        throw UsageError(name(*outs[i]) + " is the input " + in.path.string() + " (" + in.option + "): it would be overwritten");
  }
  for (const OutputPath* o : outs) {
    std::error_code ec;
    // What would be written: through links, also a dangling one (its directory must exist).
    const stdfs::path target = ckpt::fs::write_target(o->path, o->option);
    const auto st = stdfs::status(target, ec);
    // Missing parents of the named path are made, but a write through a dangling link lands in the
    // target's directory, which nothing makes.
    if (target != o->path && !stdfs::exists(st) && !stdfs::is_directory(target.parent_path(), ec))
      throw IoError(name(*o) + ": a symbolic link to " + target.string() + ", whose directory does not exist");
    if (stdfs::exists(st)) {
      // The wrong kind of thing is an I/O error (3), as in every resil command (docs/reference/exit-codes.md).
      if (o->directory && !stdfs::is_directory(st)) throw IoError(name(*o) + ": exists and is not a directory");
      if (!o->directory && stdfs::is_directory(st)) throw IoError(name(*o) + ": is a directory (" + o->option + " names a file)");
      if (!o->directory && !stdfs::is_regular_file(st))
        throw IoError(name(*o) + ": is not a regular file (a FIFO, device or socket; " + o->option + " names a file)");
      if (::access(o->path.c_str(), o->directory ? W_OK | X_OK : W_OK) != 0) throw IoError(name(*o) + ": not writable: " + errno_text());
    }
    // Missing directories (--ckpt-dir, a file's parent) are created and files are written beside
    // themselves (a temporary renamed over them): the nearest existing ancestor must be a writable
    // directory.
    stdfs::path dir = target.parent_path();
    if (dir.empty()) dir = ".";
    if (o->directory && stdfs::exists(st)) continue;
    while (!stdfs::exists(stdfs::symlink_status(dir, ec)) && dir.has_relative_path() && dir != dir.parent_path())
      dir = dir.parent_path().empty() ? stdfs::path(".") : dir.parent_path();
    const auto dst = stdfs::status(dir, ec);
    if (!stdfs::exists(dst)) throw IoError(name(*o) + ": directory " + dir.string() + " does not exist");
    if (!stdfs::is_directory(dst)) throw IoError(name(*o) + ": cannot create: " + dir.string() + " is not a directory");
    if (::access(dir.c_str(), W_OK | X_OK) != 0) throw IoError(name(*o) + ": cannot write in " + dir.string() + ": " + errno_text());
  }
}
}  // namespace resil::train
