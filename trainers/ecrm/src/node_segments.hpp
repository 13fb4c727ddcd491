// Internal to resil::ecrm: the names of a job's state segments in /dev/shm and of their owners,
// shared by the segment (segment.cpp) and the per-node housekeeping of the job's segments
// (node_segments.cpp: room for them, cleanup).
#pragma once

#include <pwd.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace resil::ecrm::detail {

inline std::string shm_name(const std::string& job, int rank) { return "/resil-ec-" + job + "-" + std::to_string(rank); }

// "uid 1001 (alice)".
inline std::string user_name(uid_t uid) {
  std::string out = "uid " + std::to_string(uid);
  struct passwd pw{}, *found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found) out += std::string(" (") + found->pw_name + ")";
  return out;
}

/// Before a rank allocates `bytes` of working memory for `what` (its failure bookkeeping, one byte
/// per stripe and rank): IoError (exit 3) naming both when the node's MemAvailable is less, instead
/// of an allocation that fails with "out of memory" or takes the node's memory before anything runs.
void require_memory(std::uint64_t bytes, const std::string& what);

}  // namespace resil::ecrm::detail
