// PreemptionGuard. See trainscope/preemption.h.
#include "trainscope/preemption.h"

#include <atomic>

namespace trainscope {
namespace {

std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the handler needs a lock-free flag");

extern "C" void OnTerminationSignal(int signo) { g_signal.store(signo, std::memory_order_relaxed); }

}  // namespace

PreemptionGuard::PreemptionGuard(bool also_sigusr1) : usr1_(also_sigusr1) {
  struct sigaction action {};
  action.sa_handler = OnTerminationSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // slow syscalls in the loop carry on
  sigaction(SIGTERM, &action, &previous_term_);
  if (usr1_) sigaction(SIGUSR1, &action, &previous_usr1_);
}

PreemptionGuard::~PreemptionGuard() {
  sigaction(SIGTERM, &previous_term_, nullptr);
  if (usr1_) sigaction(SIGUSR1, &previous_usr1_, nullptr);
}

bool PreemptionGuard::requested() const { return g_signal.load(std::memory_order_relaxed) != 0; }
int PreemptionGuard::signal() const { return g_signal.load(std::memory_order_relaxed); }
void PreemptionGuard::Reset() { g_signal.store(0, std::memory_order_relaxed); }

}  // namespace trainscope
