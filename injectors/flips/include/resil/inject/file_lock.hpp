// An in-place run's hold on the checkpoint it edits (ckpt-flip inject --in-place, revert, replay,
// a campaign trial's work copy): two runs editing one file at once would each plan from bits the
// other changes, and one's flips would be lost while its log records them. The hold is an
// open-file-description lock (fcntl F_OFD_SETLK) on a byte range far past any data, in every
// format: it never conflicts with HDF5's own flock of the file, and lasts until the object is
// destroyed, across a staged edit's rename. A second byte locked at (base + 1 + pid) says who holds
// it, so the refusal names the holder.
#pragma once

#include <string>

#include "resil/core/fd.hpp"

namespace resil::inject {

class InPlaceLock {
public:
  /// Hold `path` for an in-place edit. Throws IoError (exit 3) naming the file and the holder (pid
  /// and command) when another process holds it. Where the file cannot be opened for writing, or
  /// its file system has no such locks, nothing is held: the edit's own open reports the former.
  /// Taking it again for the same file in the same process is a no-op.
  explicit InPlaceLock(const std::string& path);
  ~InPlaceLock();
  InPlaceLock(const InPlaceLock&) = delete;
  InPlaceLock& operator=(const InPlaceLock&) = delete;

  /// Whether this object holds the lock (false: held by an outer InPlaceLock of this process, or
  /// not lockable).
  bool held() const noexcept { return fd_.get() >= 0; }

private:
  Fd fd_;
  unsigned long long dev_ = 0, ino_ = 0;
};

}  // namespace resil::inject
