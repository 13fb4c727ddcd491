// Durable file-system steps for crash-safe commits: fsync a file and its directory, atomic
// replace by rename, fast whole-file copies.
#pragma once

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

namespace resil::ckpt::fs {

namespace stdfs = std::filesystem;

/// fsync the file's data and metadata. Throws IoError naming the path.
void fsync_file(const stdfs::path& p);
/// fsync a directory so a rename inside it is durable.
void fsync_dir(const stdfs::path& dir);
/// rename(from, to) then fsync the directory of `to`.
void durable_rename(const stdfs::path& from, const stdfs::path& to);
/// Write `text` to `p` atomically: p.tmp.<pid>, fsync, rename, fsync dir. Through a symbolic link
/// the file written is its target (write_target): the link stays a link.
void write_file_atomic(const stdfs::path& p, const std::string& text);
std::string read_file(const stdfs::path& p);
/// Copy a whole file efficiently (copy_file_range / reflink where the filesystem can), then fsync.
/// The copy is no more readable than `from` (derived_mode; the umask applies on top). `to` is a new
/// file (create_new): whatever is there must have been removed, or be this user's own stale file.
void copy_file(const stdfs::path& from, const stdfs::path& to);
/// Make way for a new file or directory at `p` (a temporary name, or an output just removed):
/// nothing there, or this user's own regular file with no other link, or own directory (what an
/// earlier process with the same pid left), which is removed. Anything else (a symbolic link,
/// another user's file or directory, a second link to some file) is refused with IoError naming
/// `p`: writing through it would write where whoever put it there chose.
void clear_for_new(const stdfs::path& p);
/// A new regular file at `p` only this process made: clear_for_new, then
/// open(O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW) (a link planted in between fails it). IoError naming `p`.
int create_new(const stdfs::path& p, unsigned mode);
/// A new directory at `p` the same way (clear_for_new, then mkdir, which never follows a link).
void create_new_directory(const stdfs::path& p, unsigned mode = 0755);
/// The permission bits of a file made from `input` (a copy, an edited copy, its flip log): the
/// input's read and write bits plus the owner's, so whoever may not read the input may not read
/// what was made from it either. 0644 when `input` is empty or cannot be stat'ed. open() applies
/// the umask on top; bound_mode narrows a file that already existed. A directory (a sharded or
/// distributed checkpoint): its bits and those of every regular file directly in it, so the log of
/// a set of 0600 shards is 0600 whatever the directory's mode.
unsigned derived_mode(const stdfs::path& input);
/// The mode of a directory made from the directory `input` (an -o copy of a set): its bits plus the
/// owner's; 0755 when `input` is not a directory.
unsigned derived_directory_mode(const stdfs::path& input);
/// Clear the permission bits of the open file `fd` (path `p`, for messages) that `mode` does not
/// have: O_TRUNC keeps the bits of a file that existed. Throws IoError naming `p`.
void bound_mode(int fd, unsigned mode, const stdfs::path& p);
/// Give `copy` the owner, group and mode bits of `original`, so renaming the copy over it changes
/// no one's access (a staged edit). Throws IoError naming `original` when this process cannot (its
/// owner or group is not this user's to give: only root may), before anything is renamed.
void keep_owner_and_mode(const stdfs::path& original, const stdfs::path& copy);
/// A temporary sibling name for `p` that the loader never picks: ".<name>.tmp.<pid>".
stdfs::path temp_sibling(const stdfs::path& p);

/// An input must be a regular file this process can read: throws IoError (exit 3) naming `p` when it
/// is missing, is not a regular file (a directory, FIFO, socket or device: opening a FIFO would
/// block, a device is no checkpoint), or cannot be opened for reading (permission denied). Symbolic
/// links are followed. Checked before anything is opened for writing. `option` ("--from"), when
/// given, starts the message.
void require_input_file(const stdfs::path& p, const std::string& option = {});
/// An output that is created or replaced (by rename, or truncated): it must not exist or be a
/// regular file, and its directory must exist. Throws IoError naming `p` otherwise (renaming onto
/// /dev/null as root would replace the device node; a FIFO would block the writer).
void require_output_file(const stdfs::path& p, const std::string& option = {});

/// One path argument of a command: its name in messages ("-o", "--log", "IN") and whether the
/// command writes it (created, replaced or modified).
struct PathArg {
  std::string name;
  stdfs::path path;
  bool written = false;
};
/// Throws UsageError (exit 2) naming both arguments when a written path names the same file as
/// any other argument: the same path, a hard link or a symbolic link to it (compared by device and
/// inode when the file exists, by canonical path otherwise). Empty paths are ignored. Call it
/// before anything is opened for writing: `--log` aliasing the input would replace the data with
/// the log, `-o` aliasing the log would overwrite the only undo record.
void require_distinct(std::initializer_list<PathArg> args);
/// The same for a list built at run time (a command's outputs against every file it reads).
void require_distinct(const std::vector<PathArg>& args);
/// Whether two paths name the same file, as require_distinct compares them: device and inode when
/// both exist; otherwise the canonical path of what would be written, a dangling symbolic link
/// followed to the file it would create.
bool same_file(const stdfs::path& a, const stdfs::path& b);
/// The path a write through `p` lands on: `p` itself, or for a symbolic link what it points to
/// (followed, so a dangling link gives the file it would create). Throws IoError naming `p` for a
/// loop of links (`option`, when given, starts the message).
stdfs::path write_target(const stdfs::path& p, const std::string& option = {});

/// Whether `p` is a file or directory (not a link) owned by this process's user: what it may have
/// made itself, and so may remove on error; another user's file at a temporary's name is theirs.
bool owned_by_me(const stdfs::path& p) noexcept;
/// Whether `p` is a regular file (not a link) with no other link, owned by this process's user or
/// by `also_owner`: a leftover at a temporary's name that its maker's user may remove (a staged copy
/// is given its file's owner before the rename, so a killed staged run leaves one of that owner's).
bool lone_file_of(const stdfs::path& p, unsigned also_owner) noexcept;

/// Removes the file in its destructor unless `keep()` was called: no partial outputs on error.
/// Until `adopt()`, only this user's own file is removed (owned_by_me): never a link or file
/// someone else put there. After it, exactly the file that was at the path then (device and inode),
/// whoever owns it by now (keep_owner_and_mode may have given it another owner).
class RemoveOnError {
public:
  explicit RemoveOnError(stdfs::path p) : path_(std::move(p)) {}
  RemoveOnError(const RemoveOnError&) = delete;
  RemoveOnError& operator=(const RemoveOnError&) = delete;
  ~RemoveOnError();
  /// The file at the path is the one this process made: remember it by device and inode.
  void adopt() noexcept;
  void keep() noexcept { kept_ = true; }
  const stdfs::path& path() const noexcept { return path_; }

private:
  stdfs::path path_;
  bool kept_ = false, adopted_ = false;
  std::uint64_t dev_ = 0, ino_ = 0;
};

}  // namespace resil::ckpt::fs
