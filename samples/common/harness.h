// samples/common/harness.h: what the tuning harnesses (tune_amp,
// tune_batch) share: the programs beside them, and a stop flag for Ctrl-C.
#ifndef TRAINSCOPE_SAMPLES_COMMON_HARNESS_H_
#define TRAINSCOPE_SAMPLES_COMMON_HARNESS_H_

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <string>

namespace trainscope::samples {

// The path of `name` in this program's directory (where the build puts
// every sample); `name` itself if /proc/self/exe cannot be read.
inline std::string BesideMe(const std::string& name) {
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return name;
  std::string path(self, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/') + 1) + name;
}

// Set by SIGINT and SIGTERM once StopOnSignals() ran: the engine's
// RunOptions::stop, so that an interrupted experiment writes what it has.
inline std::atomic<bool> g_stop{false};

inline void StopOnSignals() {
  struct sigaction action = {};
  action.sa_handler = [](int) { g_stop.store(true); };
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

}  // namespace trainscope::samples

#endif  // TRAINSCOPE_SAMPLES_COMMON_HARNESS_H_
