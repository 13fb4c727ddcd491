// How many CPUs this process may run on: its affinity mask (what `nproc` prints), which a batch
// system's cpuset (Slurm, PBS) or `taskset` narrows to the allocation, not the node's count
// (std::thread::hardware_concurrency), which would oversubscribe a job given one core of 64.
#pragma once

#include <sched.h>

#include <thread>

namespace resil {

inline unsigned usable_cpus() noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    if (const int n = CPU_COUNT(&set); n > 0) return static_cast<unsigned>(n);
  const unsigned hw = std::thread::hardware_concurrency();
  return hw ? hw : 1u;
}

}  // namespace resil
