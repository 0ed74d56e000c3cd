// trainscope/clock.h: the one clock every trainscope timestamp is given in,
// and the cheaper counter the recorder reads.
//
// Timestamps are int64 nanoseconds of CLOCK_MONOTONIC (NowNs). It is read
// through the vDSO (no syscall when the kernel clocksource is tsc, as on
// current x86 and cloud VMs), it is the clock CUPTI is told to use (through
// cuptiActivityRegisterTimestampCallback), and every process on the host
// reads the same, so host ranges, device records and other processes line up.
//
// Scopes read ReadTicks() instead: raw time-stamp-counter ticks (one
// unordered `rdtsc`, about 2.5x cheaper than CLOCK_MONOTONIC here) when the
// session found the TSC invariant (sdk/ground/tick_clock.h, TscUsable), else
// NowNs(). The drainer converts ticks into CLOCK_MONOTONIC nanoseconds with a
// calibration it re-measures at every drain, so nothing outside the rings
// ever sees a tick. docs/clock.md has the measurements.
//
//   trainscope::TimestampNs t0 = trainscope::NowNs();
#ifndef TRAINSCOPE_CLOCK_H_
#define TRAINSCOPE_CLOCK_H_

#include <time.h>

#include <atomic>
#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace trainscope {

// Nanoseconds of CLOCK_MONOTONIC.
using TimestampNs = int64_t;

// Reads CLOCK_MONOTONIC. Cost: about 15-25 ns through the vDSO. Never fails.
inline TimestampNs NowNs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<TimestampNs>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

namespace internal {
// True while the active session records TSC ticks (set by Session::Start).
extern std::atomic<bool> g_ticks_are_tsc;
}  // namespace internal

// The recorder's timestamp: TSC ticks while internal::g_ticks_are_tsc, else
// NowNs(). Only meaningful to the session's drainer, which converts it.
// Cost: a relaxed load, a predictable branch and `rdtsc` (about 10 ns here),
// else NowNs()'s. Never fails.
inline int64_t ReadTicks() noexcept {
#if defined(__x86_64__)
  if (__builtin_expect(internal::g_ticks_are_tsc.load(std::memory_order_relaxed), 1)) {
    return static_cast<int64_t>(__rdtsc());
  }
#endif
  return NowNs();
}

}  // namespace trainscope

#endif  // TRAINSCOPE_CLOCK_H_
