// trainscope/preemption.h: turn a termination notice into a clean resume.
//
//   trainscope::PreemptionGuard guard;                 // SIGTERM and SIGUSR1
//   for (int64_t step = start; step < steps; ++step) {
//     train(step);
//     if (guard.requested()) {                          // at a step boundary
//       save(step);
//       return trainscope::PreemptionGuard::kExitCode;  // 75: "try again"
//     }
//   }
//
// Kubernetes (and Polyaxon on it) sends SIGTERM, waits the pod's
// terminationGracePeriodSeconds, then SIGKILLs. The handler only sets a
// lock-free flag (async-signal-safe); the loop checks it at the next step
// boundary, saves, and exits with kExitCode, so the grace period is spent
// on one save instead of lost work. docs/checkpoint.md.
#ifndef TRAINSCOPE_PREEMPTION_H_
#define TRAINSCOPE_PREEMPTION_H_

#include <csignal>

namespace trainscope {

class PreemptionGuard {
 public:
  // The exit code for "preempted after saving; run me again" (EX_TEMPFAIL).
  static constexpr int kExitCode = 75;

  // Installs the handlers (SIGTERM, and SIGUSR1 when `also_sigusr1`), keeping
  // the previous ones to restore. One guard at a time per process; a second
  // one shares the flag. Cost: two sigaction calls.
  explicit PreemptionGuard(bool also_sigusr1 = true);
  // Restores the previous handlers.
  ~PreemptionGuard();
  PreemptionGuard(const PreemptionGuard&) = delete;
  PreemptionGuard& operator=(const PreemptionGuard&) = delete;

  // Whether a termination signal arrived. Cost: one relaxed atomic load.
  bool requested() const;
  // The signal that arrived (SIGTERM, SIGUSR1), or 0.
  int signal() const;
  // Clears the flag (tests; a loop that chooses to carry on).
  void Reset();

 private:
  struct sigaction previous_term_ {};
  struct sigaction previous_usr1_ {};
  bool usr1_;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_PREEMPTION_H_
