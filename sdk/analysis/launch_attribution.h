// sdk/analysis/launch_attribution.h: which host phase launched each piece of
// device work.
//
// A kernel (or copy, or set) carries the correlation id of the CUDA API call
// that launched it; that call ran on a host thread at a known time; the
// innermost phase range open on that thread at that time is the phase that
// launched the kernel, and its step is the kernel's step. A call from a
// thread that holds no ranges (LibTorch runs CUDA backward on its own
// per-device autograd threads, "pt_autograd_<device>", which hold no
// trainscope range) takes the innermost phase open, at the call's time, on
// the thread that owns the step open then (the thread that recorded the
// kStep interval containing that time); the calling thread's own range
// always comes first. No hot-path cost: the join happens here, after the run.
#ifndef TRAINSCOPE_SDK_ANALYSIS_LAUNCH_ATTRIBUTION_H_
#define TRAINSCOPE_SDK_ANALYSIS_LAUNCH_ATTRIBUTION_H_

#include <string>
#include <utility>
#include <vector>

#include "sdk/analysis/model.h"

namespace trainscope::analysis {

struct LaunchAttribution {
  int64_t attributed = 0;    // device intervals tagged with a launching phase
  int64_t unattributed = 0;  // no matching call, or no phase open at the call
  // Of `attributed`: launched from a thread with no range open, and given
  // the phase open on the thread that owned the step at the time.
  int64_t from_step_thread = 0;
  // Device busy time (union per phase) by launching phase, largest first;
  // "unattributed" for the rest.
  std::vector<std::pair<std::string, TimestampNs>> busy_by_phase;
};

// Sets `step` and `phase` of every device interval whose launch call is
// found. Needs the timeline's kStep intervals for the step-owner rule.
// Cost: O(n log n).
LaunchAttribution AttributeLaunches(Timeline* timeline);

}  // namespace trainscope::analysis

#endif  // TRAINSCOPE_SDK_ANALYSIS_LAUNCH_ATTRIBUTION_H_
