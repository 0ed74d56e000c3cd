// sdk/analysis/gap_analyzer.h: when the compute was idle, and why.
//
// Busy time is the union of device activity when the timeline has any
// (kernels, copies), else of the host compute phases (forward, backward,
// optimizer). Idle time is the rest of the window. Each idle nanosecond is
// blamed on the first host phase active at that moment, in the priority
// order data_wait, h2d, sync, checkpoint, eval, other; idle time inside a
// step with no phase active is "host" (launch overhead or unmarked code),
// and idle time between steps is "outside_step".
//
//   IdleBreakdown idle = GapAnalyzer::Analyze(timeline, window_start, window_end);
#ifndef TRAINSCOPE_SDK_ANALYSIS_GAP_ANALYZER_H_
#define TRAINSCOPE_SDK_ANALYSIS_GAP_ANALYZER_H_

#include <string>
#include <utility>
#include <vector>

#include "sdk/analysis/timeline.h"

namespace trainscope::analysis {

// Cause names beyond the phase names.
inline constexpr char kCauseHost[] = "host";
inline constexpr char kCauseOutsideStep[] = "outside_step";

struct IdleBreakdown {
  TimestampNs window_ns = 0;
  TimestampNs busy_ns = 0;
  TimestampNs idle_ns = 0;
  double share = 0;         // idle_ns / window_ns
  std::string busy_source;  // "device_activity" or "cpu_compute_phases"
  std::vector<std::pair<std::string, TimestampNs>> by_cause;  // largest first, > 0 only
  int64_t gaps = 0;                   // number of idle gaps
  TimestampNs largest_gap_ns = 0;
};

class GapAnalyzer {
 public:
  // Analyses [window_start, window_end). The timeline need not be sorted.
  static IdleBreakdown Analyze(const Timeline& timeline, TimestampNs window_start,
                               TimestampNs window_end);
};

}  // namespace trainscope::analysis

#endif  // TRAINSCOPE_SDK_ANALYSIS_GAP_ANALYZER_H_
