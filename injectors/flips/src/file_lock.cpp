// InPlaceLock: one in-place run per file at a time (see file_lock.hpp).
#include "resil/inject/file_lock.hpp"

#include "resil/inject/file_set.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <utility>

#include "resil/core/error.hpp"

namespace resil::inject {

namespace {

// The range: far beyond any checkpoint's bytes (2^62), so no other byte-range lock of the data
// meets it. base: "an in-place run holds the file"; base + 1 + pid: which process.
constexpr off_t base = off_t{1} << 62;
constexpr off_t pid_span = off_t{1} << 32;

// Files this process holds (device, inode): OFD locks of two descriptors of one process conflict
// with each other, so a nested hold (inject's, then apply's) must not lock again.
std::mutex held_mutex;
std::set<std::pair<unsigned long long, unsigned long long>>& held_files() {
  static std::set<std::pair<unsigned long long, unsigned long long>> s;
  return s;
}

int lock_range(int fd, int cmd, off_t start, off_t len, struct flock& fl) {
  std::memset(&fl, 0, sizeof fl);
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = start;
  fl.l_len = len;
  return ::fcntl(fd, cmd, &fl);
}

// "pid N (COMMAND)" of the process holding `fd`'s file, or "another process" when it cannot be told.
std::string holder_of(int fd) {
  struct flock fl {};
  if (lock_range(fd, F_OFD_GETLK, base + 1, pid_span, fl) != 0 || fl.l_type == F_UNLCK) return "another process";
  const long long pid = static_cast<long long>(fl.l_start - base - 1);
  std::string comm;
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::getline(in, comm);
  return "pid " + std::to_string(pid) + (comm.empty() ? std::string() : " (" + comm + ")");
}

}  // namespace

InPlaceLock::InPlaceLock(const std::string& given) {
  // A set of files (a sharded checkpoint) is held through its index file.
  const std::string path = lock_file_of(given);
  // Regular files only: opening a device for writing may act on it (a tape rewinds).
  struct stat pre {};
  if (::stat(path.c_str(), &pre) != 0 || !S_ISREG(pre.st_mode)) return;
  Fd fd{::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK)};
  if (!fd) return;  // not writable (or gone): the edit's own open says so, in its words
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  const std::pair<unsigned long long, unsigned long long> id{st.st_dev, st.st_ino};
  std::lock_guard guard(held_mutex);
  if (held_files().count(id)) return;
  struct flock fl {};
  if (lock_range(fd.get(), F_OFD_SETLK, base, 1, fl) != 0) {
    if (errno == EAGAIN || errno == EACCES)
      throw IoError(path + ": in use by another in-place run (" + holder_of(fd.get()) + "): wait for it to end, or edit a copy (-o)");
    return;  // ENOLCK, EINVAL, EOPNOTSUPP: a file system without these locks; the edit goes on unheld
  }
  (void)lock_range(fd.get(), F_OFD_SETLK, base + 1 + static_cast<off_t>(::getpid()), 1, fl);  // best effort: names the holder
  held_files().insert(id);
  dev_ = id.first;
  ino_ = id.second;
  fd_ = std::move(fd);
}

InPlaceLock::~InPlaceLock() {
  if (!fd_) return;
  std::lock_guard guard(held_mutex);
  held_files().erase({dev_, ino_});
  fd_.reset();  // closing the last descriptor of the description releases its locks
}

}  // namespace resil::inject
