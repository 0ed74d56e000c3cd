// One trace's analysis. See trace_analysis.h.
#include "sdk/analysis/trace_analysis.h"

#include <algorithm>
#include <limits>

namespace trainscope::analysis {

TraceAnalysis AnalyzeTimeline(const Timeline& timeline, const HtaTraceFacts& facts) {
  TraceAnalysis result;
  result.hta = ComputeHtaBreakdown(timeline, facts);
  result.steps = AnalyzeSteps(timeline, -1);
  if (!result.steps.steps.empty()) {
    result.window_start_ns = result.steps.steps.front().start_ns;
    for (const StepSpan& step : result.steps.steps) {
      result.window_end_ns = std::max(result.window_end_ns, step.end_ns);
    }
  } else {
    TimestampNs first = std::numeric_limits<TimestampNs>::max();
    TimestampNs last = std::numeric_limits<TimestampNs>::min();
    for (const Interval& i : timeline.intervals()) {
      if (!IsDeviceKind(i.kind)) continue;
      first = std::min(first, i.start_ns);
      last = std::max(last, i.end_ns);
    }
    if (first <= last) {
      result.window_start_ns = first;
      result.window_end_ns = last;
    }
  }
  result.idle = GapAnalyzer::Analyze(timeline, result.window_start_ns, result.window_end_ns);
  return result;
}

}  // namespace trainscope::analysis
