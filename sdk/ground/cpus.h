// sdk/ground/cpus.h: how many CPUs this process may run on (internal).
#ifndef TRAINSCOPE_SDK_GROUND_CPUS_H_
#define TRAINSCOPE_SDK_GROUND_CPUS_H_

#include <sched.h>

#include <algorithm>
#include <thread>

namespace trainscope::ground {

// The CPUs the calling thread may run on: its affinity mask, so `taskset`
// and container cpusets count, not the host's CPUs. At least 1. Cost: one
// sched_getaffinity call.
inline int AvailableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cpus = sched_getaffinity(0, sizeof(set), &set) == 0
                       ? CPU_COUNT(&set)
                       : static_cast<int>(std::thread::hardware_concurrency());
  return std::max(cpus, 1);
}

}  // namespace trainscope::ground

#endif  // TRAINSCOPE_SDK_GROUND_CPUS_H_
