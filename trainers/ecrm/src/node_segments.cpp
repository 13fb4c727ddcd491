// The per-node housekeeping of a job's shared-memory state segments: their names in /dev/shm,
// the room they still need on this node, removal of one or all of them (segment.hpp).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "node_segments.hpp"
#include "resil/core/error.hpp"
#include "resil/core/fd.hpp"
#include "resil/ecrm/segment.hpp"

namespace resil::ecrm {

using detail::shm_name;
using detail::user_name;

std::string Segment::path(const std::string& job, int rank) {
  if (job.empty() || job.size() > 200 || job.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != std::string::npos)
    throw UsageError("--job-id '" + job + "': use 1-200 characters of A-Z a-z 0-9 . _ -");
  return "/dev/shm" + shm_name(job, rank);
}

bool Segment::remove(const std::string& job, int rank) {
  (void)path(job, rank);
  return ::shm_unlink(shm_name(job, rank).c_str()) == 0;
}

namespace {
// The names in /dev/shm of `job`'s segments on this node (resil-ec-<job>-<digits>).
std::vector<std::string> job_segments(const std::string& job) {
  (void)Segment::path(job, 0);
  const std::string prefix = "resil-ec-" + job + "-";
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const auto name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const auto tail = name.substr(prefix.size());
    if (!tail.empty() && tail.find_first_not_of("0123456789") == std::string::npos) out.push_back(name);
  }
  return out;
}

constexpr std::uint64_t unknown = UINT64_MAX;

// MemAvailable of /proc/meminfo in bytes.
std::uint64_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  std::uint64_t kib = 0;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return unknown;
}

std::string gib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GiB", bytes / (1u << 30));
  return b;
}
}  // namespace

void detail::require_memory(std::uint64_t bytes, const std::string& what) {
  const std::uint64_t mem = mem_available();
  if (bytes <= mem) return;
  throw IoError(what + " needs " + gib(static_cast<double>(bytes)) + " on each rank, but " + gib(static_cast<double>(mem)) +
                " is available: use a larger --rows-per-fragment or a smaller state (--rows, --tables)");
}

void Segment::require_room(const std::string& job) {
  // A new segment is sparse: its pages are taken as the run first writes them. What this node's
  // segments of the job still lack must fit now, or the run would end in the kernel's OOM kill
  // (or SIGBUS on a full /dev/shm) with no error line and ~all of it left behind.
  std::uint64_t lacking = 0, declared = 0;
  for (const auto& name : job_segments(job)) {
    struct stat st{};
    if (::stat(("/dev/shm/" + name).c_str(), &st) != 0) continue;
    const auto size = static_cast<std::uint64_t>(st.st_size), backed = static_cast<std::uint64_t>(st.st_blocks) * 512;
    declared += size;
    lacking += size > backed ? size - backed : 0;
  }
  struct statvfs vfs{};
  const std::uint64_t shm_free = ::statvfs("/dev/shm", &vfs) == 0 ? std::uint64_t{vfs.f_bavail} * vfs.f_frsize : unknown;
  const std::uint64_t mem = mem_available(), room = std::min(mem, shm_free);
  if (lacking <= room) return;
  throw IoError("/dev/shm/resil-ec-" + job + "-*: the job's state segments on this node need " + gib(static_cast<double>(lacking)) + " more memory (" +
                gib(static_cast<double>(declared)) + " in all), but " + gib(static_cast<double>(room)) + (room == mem ? " is available" : " is free in /dev/shm") +
                ": use fewer ranks per node or a smaller state (--rows, --tables, --dim, MLPs)");
}

std::size_t Segment::cleanup(const std::string& job) {
  // Every segment is locked first (a running rank holds its lock): when any is in use the job is
  // running and none is removed; the locks are held until the names are gone.
  std::vector<std::pair<std::string, Fd>> held;
  std::vector<std::string> left;  // "/dev/shm/NAME (owner uid N (user): why)"
  auto keep = [&](const std::string& name, int err) {
    struct stat st{};
    const std::string p = "/dev/shm/" + name;
    left.push_back(p + " (" + (::stat(p.c_str(), &st) == 0 ? "owner " + user_name(st.st_uid) + ": " : std::string()) + std::strerror(err) + ")");
  };
  for (const auto& name : job_segments(job)) {
    Fd fd(::shm_open(("/" + name).c_str(), O_RDONLY, 0));
    if (!fd) {
      if (errno != ENOENT) keep(name, errno);  // another user's, not readable by this one
      continue;                                // else gone meanwhile
    }
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0)
      throw IoError("/dev/shm/" + name + ": in use by a running ec-train of job " + job + " (nothing removed; --cleanup is for a run that ended)");
    held.emplace_back(name, std::move(fd));
  }
  std::size_t n = 0;
  for (const auto& [name, fd] : held) {
    if (::shm_unlink(("/" + name).c_str()) == 0) ++n;
    else if (errno != ENOENT) keep(name, errno);  // /dev/shm is sticky: only the owner (or root) removes
  }
  if (!left.empty()) {
    std::string list;
    for (const auto& l : left) list += (list.empty() ? "" : ", ") + l;
    throw IoError("removed " + std::to_string(n) + " state segment(s) of job " + job + " but could not remove " + std::to_string(left.size()) +
                  ": " + list + " (another user's: only its owner or root can remove it)");
  }
  return n;
}

}  // namespace resil::ecrm
