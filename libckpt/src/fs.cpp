#include "resil/ckpt/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "resil/core/error.hpp"
#include "resil/core/fd.hpp"

namespace resil::ckpt::fs {

namespace {
[[noreturn]] void fail(const std::string& what, const stdfs::path& p) {
  throw IoError(p.string() + ": " + what + ": " + std::strerror(errno));
}

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  return "not a regular file";
}

// `p`'s name is held by something this process did not make. Named by its file name too: `p` may be
// a temporary the message goes on to name by the user's path (rethrow_renamed), and this name is
// the one to remove.
[[noreturn]] void name_taken(const stdfs::path& p, const std::string& how) {
  throw IoError(p.string() + ": cannot write: the name " + p.filename().string() + " in its directory " + how);
}

// A regular file with no other link, of this user or of `also_owner` (lone_file_of).
bool lone_file(const struct stat& st, uid_t also_owner) {
  return S_ISREG(st.st_mode) && st.st_nlink == 1 && (st.st_uid == ::geteuid() || st.st_uid == also_owner);
}

std::string errno_text(int err) {
  if (err == ENOENT) return "no such file";
  if (err == EACCES || err == EPERM) return "permission denied";
  return std::strerror(err);
}

// What identifies a path's file: device and inode when it exists (links included), else its
// canonical path (the parent's symbolic links resolved).
struct Identity {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  std::string canonical;
  bool operator==(const Identity& o) const {
    return exists == o.exists && (exists ? dev == o.dev && ino == o.ino : canonical == o.canonical);
  }
};
// The path a write through `p` lands on: p unless it is a symbolic link, followed at most 40 hops
// (the kernel's limit); a loop is left where it stopped (still a link).
stdfs::path follow_links(stdfs::path q) {
  std::error_code ec;
  for (int hop = 0; hop < 40 && stdfs::is_symlink(q, ec); ++hop) {
    const auto t = stdfs::read_symlink(q, ec);
    if (ec) break;
    q = t.is_absolute() ? t : q.parent_path() / t;
  }
  return q;
}

Identity identity_of(const stdfs::path& p) {
  Identity id;
  struct stat st {};
  if (::stat(p.c_str(), &st) == 0) {
    id.exists = true;
    id.dev = st.st_dev;
    id.ino = st.st_ino;
    return id;
  }
  // Not there (yet): a dangling link names the file a write through it would create. Absolute
  // first: weakly_canonical leaves a relative path with no existing prefix as it is, so "s.json"
  // and "./s.json" would compare unequal.
  std::error_code ec;
  stdfs::path q = follow_links(stdfs::absolute(p, ec));
  const auto c = stdfs::weakly_canonical(q, ec);
  id.canonical = ec ? q.lexically_normal().string() : c.string();
  return id;
}
}  // namespace

bool same_file(const stdfs::path& a, const stdfs::path& b) { return identity_of(a) == identity_of(b); }

stdfs::path write_target(const stdfs::path& p, const std::string& option) {
  const stdfs::path q = follow_links(p);
  std::error_code ec;
  if (stdfs::is_symlink(q, ec) && !stdfs::exists(q, ec)) throw IoError((option.empty() ? "" : option + " ") + p.string() + ": a loop of symbolic links");
  return q;
}

void require_input_file(const stdfs::path& p, const std::string& option) {
  const std::string name = (option.empty() ? "" : option + " ") + p.string();
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) throw IoError(name + ": " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) throw IoError(name + ": is " + kind_of(st.st_mode) + ", not a regular file");
  // A regular file: O_NONBLOCK changes nothing, but keeps a file swapped for a FIFO since the
  // stat from blocking this open.
  Fd f{::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (f.get() < 0) throw IoError(name + ": cannot open for reading: " + errno_text(errno));
}

void require_output_file(const stdfs::path& p, const std::string& option) {
  const std::string name = (option.empty() ? "" : option + " ") + p.string();
  struct stat st {};
  if (::stat(p.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) throw IoError(name + ": is " + kind_of(st.st_mode) + ", not a regular file to write");
    return;
  }
  if (errno != ENOENT) throw IoError(name + ": " + errno_text(errno));
  const stdfs::path dir = p.parent_path().empty() ? stdfs::path(".") : p.parent_path();
  if (::stat(dir.c_str(), &st) != 0) throw IoError(name + ": its directory " + dir.string() + ": " + errno_text(errno));
  if (!S_ISDIR(st.st_mode)) throw IoError(name + ": " + dir.string() + " is not a directory");
}

void require_distinct(std::initializer_list<PathArg> args) { require_distinct(std::vector<PathArg>(args)); }

void require_distinct(const std::vector<PathArg>& args) {
  std::vector<std::pair<const PathArg*, Identity>> ids;
  for (const auto& a : args)
    if (!a.path.empty()) ids.emplace_back(&a, identity_of(a.path));
  for (std::size_t i = 0; i < ids.size(); ++i)
    for (std::size_t j = i + 1; j < ids.size(); ++j) {
      const PathArg& a = *ids[i].first;
      const PathArg& b = *ids[j].first;
      if ((a.written || b.written) && ids[i].second == ids[j].second)
        throw UsageError(b.name + " " + b.path.string() + " is the same file as " + a.name + " " + a.path.string() +
                         " (give " + b.name + " a path of its own)");
    }
}

void fsync_file(const stdfs::path& p) {
  Fd f{::open(p.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.get() < 0) fail("cannot open to fsync", p);
  if (::fsync(f.get()) != 0) fail("fsync failed", p);
}

void fsync_dir(const stdfs::path& dir) {
  Fd f{::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (f.get() < 0) fail("cannot open directory to fsync", dir);
  if (::fsync(f.get()) != 0) fail("fsync of directory failed", dir);
}

void durable_rename(const stdfs::path& from, const stdfs::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) fail("cannot rename from " + from.string(), to);
  fsync_dir(to.parent_path());
}

bool owned_by_me(const stdfs::path& p) noexcept {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) && st.st_uid == ::geteuid();
}

bool lone_file_of(const stdfs::path& p, unsigned also_owner) noexcept {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && lone_file(st, also_owner);
}

RemoveOnError::~RemoveOnError() {
  if (kept_) return;
  struct stat st {};
  if (adopted_ ? ::lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_ : owned_by_me(path_))
    ::unlink(path_.c_str());
}

void RemoveOnError::adopt() noexcept {
  struct stat st {};
  if (::lstat(path_.c_str(), &st) != 0) return;
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  adopted_ = true;
}

void clear_for_new(const stdfs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    fail("cannot stat", p);
  }
  std::error_code ec;
  if (lone_file(st, ::geteuid())) {
    if (::unlink(p.c_str()) != 0 && errno != ENOENT) fail("cannot remove this user's earlier file", p);
    return;
  }
  if (S_ISDIR(st.st_mode) && st.st_uid == ::geteuid()) {
    stdfs::remove_all(p, ec);
    if (ec) throw IoError(p.string() + ": cannot remove this user's earlier directory: " + ec.message());
    return;
  }
  const std::string what = S_ISLNK(st.st_mode)          ? "a symbolic link (uid " + std::to_string(st.st_uid) + ")"
                           : st.st_uid != ::geteuid()   ? "another user's file (uid " + std::to_string(st.st_uid) + ")"
                                                        : "a file with " + std::to_string(st.st_nlink) + " links";
  name_taken(p, "is taken by " + what + ", not made by this process: nothing written through it; remove it, or write elsewhere");
}

int create_new(const stdfs::path& p, unsigned mode) {
  clear_for_new(p);
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    if (errno == EEXIST)
      name_taken(p, "was taken while it was being created: nothing written through it");
    fail("cannot create", p);
  }
  return fd;
}

void create_new_directory(const stdfs::path& p, unsigned mode) {
  clear_for_new(p);
  if (::mkdir(p.c_str(), mode) != 0) {
    if (errno == EEXIST)
      name_taken(p, "was taken while it was being created: nothing written into it");
    fail("cannot create the directory", p);
  }
}

stdfs::path temp_sibling(const stdfs::path& p) {
  return p.parent_path() / ("." + p.filename().string() + ".tmp." + std::to_string(::getpid()));
}

void write_file_atomic(const stdfs::path& p, const std::string& text) {
  require_output_file(p);  // the rename would replace a device node (as root) or a directory's entry
  const stdfs::path target = write_target(p);  // through a symbolic link: its target (the link stays)
  const stdfs::path tmp = temp_sibling(target);
  RemoveOnError guard(tmp);
  {
    Fd f{create_new(tmp, 0644)};
    std::size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(f.get(), text.data() + done, text.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        fail("write failed", tmp);
      }
      done += static_cast<std::size_t>(n);
    }
    if (::fsync(f.get()) != 0) fail("fsync failed", tmp);
  }
  durable_rename(tmp, target);
  guard.keep();
}

std::string read_file(const stdfs::path& p) {
  require_input_file(p);
  std::ifstream in(p, std::ios::binary);
  if (!in) throw IoError(p.string() + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

unsigned derived_mode(const stdfs::path& input) {
  struct stat st {};
  if (input.empty() || ::stat(input.c_str(), &st) != 0) return 0644;
  unsigned mode = (st.st_mode & 0666) | 0600;
  if (S_ISDIR(st.st_mode)) {
    std::error_code ec;
    for (stdfs::directory_iterator it(input, ec), end; !ec && it != end; it.increment(ec)) {
      struct stat f {};
      if (::lstat(it->path().c_str(), &f) == 0 && S_ISREG(f.st_mode)) mode &= (f.st_mode & 0666) | 0600;
    }
  }
  return mode;
}

unsigned derived_directory_mode(const stdfs::path& input) {
  struct stat st {};
  if (input.empty() || ::stat(input.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return 0755;
  return (st.st_mode & 0777) | 0700;
}

void bound_mode(int fd, unsigned mode, const stdfs::path& p) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail("cannot stat", p);
  if ((st.st_mode & 07777 & ~mode) != 0 && ::fchmod(fd, st.st_mode & 07777 & mode) != 0) fail("cannot change its permissions", p);
}

void keep_owner_and_mode(const stdfs::path& original, const stdfs::path& copy) {
  struct stat want {};
  if (::stat(original.c_str(), &want) != 0) fail("cannot stat", original);
  Fd f{::open(copy.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC)};  // the copy this process made: never a link
  if (f.get() < 0) fail("cannot open", copy);
  struct stat have {};
  if (::fstat(f.get(), &have) != 0) fail("cannot stat", copy);
  // Owner and group first: chown clears set-user-ID and set-group-ID bits, chmod then restores them.
  if ((have.st_uid != want.st_uid || have.st_gid != want.st_gid) && ::fchown(f.get(), want.st_uid, want.st_gid) != 0) {
    const int err = errno;
    throw IoError(original.string() + ": owned by uid " + std::to_string(want.st_uid) + ", gid " + std::to_string(want.st_gid) +
                  ", which a copy made by uid " + std::to_string(::geteuid()) + " cannot keep (" + std::strerror(err) +
                  "): a staged edit would replace it by a file of another owner or group; edit a copy (-o) instead");
  }
  if (::fchmod(f.get(), want.st_mode & 07777) != 0) fail("cannot change its permissions", copy);
}

void copy_file(const stdfs::path& from, const stdfs::path& to) {
  Fd in{::open(from.c_str(), O_RDONLY | O_CLOEXEC)};
  if (in.get() < 0) fail("cannot open", from);
  struct stat st {};
  if (::fstat(in.get(), &st) != 0) fail("cannot stat", from);
  const unsigned mode = (st.st_mode & 0666) | 0600;  // derived_mode, from the open file
  Fd out{create_new(to, mode)};
  bound_mode(out.get(), mode, to);
  off_t left = st.st_size;
  while (left > 0) {
    // copy_file_range lets the kernel (or the filesystem, by reflink) move the bytes.
    const ssize_t n = ::copy_file_range(in.get(), nullptr, out.get(), nullptr, static_cast<std::size_t>(left), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP || errno == EINVAL) {
        // Fallback: plain read/write in 8 MiB blocks.
        std::vector<char> buf(std::size_t{8} << 20);
        for (;;) {
          const ssize_t r = ::read(in.get(), buf.data(), buf.size());
          if (r < 0) fail("read failed", from);
          if (r == 0) break;
          for (ssize_t w = 0; w < r;) {
            const ssize_t k = ::write(out.get(), buf.data() + w, static_cast<std::size_t>(r - w));
            if (k < 0) fail("write failed", to);
            w += k;
          }
        }
        break;
      }
      fail("copy failed", to);
    }
    if (n == 0) break;
    left -= n;
  }
  if (::fsync(out.get()) != 0) fail("fsync failed", to);
}

}  // namespace resil::ckpt::fs
