// sdk/analysis/trace_analysis.h: everything `trainscope analyze` reports for
// one trace, from its Timeline.
#ifndef TRAINSCOPE_SDK_ANALYSIS_TRACE_ANALYSIS_H_
#define TRAINSCOPE_SDK_ANALYSIS_TRACE_ANALYSIS_H_

#include "sdk/analysis/gap_analyzer.h"
#include "sdk/analysis/hta_breakdown.h"
#include "sdk/analysis/model.h"
#include "sdk/analysis/step_analysis.h"

namespace trainscope::analysis {

struct TraceAnalysis {
  HtaBreakdown hta;
  IdleBreakdown idle;
  StepStats steps;
  // The analysed window: first step start to last step end, or the span of
  // device activity when the trace has no steps.
  TimestampNs window_start_ns = 0;
  TimestampNs window_end_ns = 0;
  // Runs of consecutive step indices (1 for a trace of every step, several
  // for trainscope's trace windows or a profiler schedule that repeated):
  // the idle analysis covers each run, first step start to last step end,
  // and not the unrecorded time between them.
  int step_windows = 1;
};

// Runs the gap analysis and HTA's breakdowns. Pure. With `threads` other
// than 1 (0: the CPUs this thread may run on) and a timeline of 10,000
// intervals or more, HTA's breakdowns run on a second thread while this one
// does the rest; the result is the same.
TraceAnalysis AnalyzeTimeline(const Timeline& timeline, const HtaTraceFacts& facts,
                              int threads = 1);

}  // namespace trainscope::analysis

#endif  // TRAINSCOPE_SDK_ANALYSIS_TRACE_ANALYSIS_H_
