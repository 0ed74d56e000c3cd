// sdk/analysis/launch_attribution.h: which host phase launched each piece of
// device work.
//
// A kernel (or copy, or set) carries the correlation id of the CUDA API call
// that launched it; that call ran on a host thread at a known time; the
// innermost phase range open on that thread at that time is the phase that
// launched the kernel, and its step is the kernel's step. No hot-path cost:
// the join happens here, after the run.
#ifndef TRAINSCOPE_SDK_ANALYSIS_LAUNCH_ATTRIBUTION_H_
#define TRAINSCOPE_SDK_ANALYSIS_LAUNCH_ATTRIBUTION_H_

#include <string>
#include <utility>
#include <vector>

#include "sdk/analysis/timeline.h"

namespace trainscope::analysis {

struct LaunchAttribution {
  int64_t attributed = 0;    // device intervals tagged with a launching phase
  int64_t unattributed = 0;  // no matching call, or no phase open at the call
  // Device busy time (union per phase) by launching phase, largest first;
  // "unattributed" for the rest.
  std::vector<std::pair<std::string, TimestampNs>> busy_by_phase;
};

// Sets `step` and `phase` of every device interval whose launch call is
// found. Cost: O(n log n).
LaunchAttribution AttributeLaunches(Timeline* timeline);

}  // namespace trainscope::analysis

#endif  // TRAINSCOPE_SDK_ANALYSIS_LAUNCH_ATTRIBUTION_H_
