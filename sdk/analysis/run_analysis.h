// sdk/analysis/run_analysis.h: the report's analysed sections from a Timeline.
#ifndef TRAINSCOPE_SDK_ANALYSIS_RUN_ANALYSIS_H_
#define TRAINSCOPE_SDK_ANALYSIS_RUN_ANALYSIS_H_

#include <optional>
#include <string>
#include <vector>

#include "sdk/analysis/gap_analyzer.h"
#include "sdk/analysis/hta_breakdown.h"
#include "sdk/analysis/model.h"
#include "sdk/analysis/phase_stats.h"
#include "sdk/analysis/step_analysis.h"
#include "trainscope/report.h"

namespace trainscope::analysis {

// The run's fixed points in time.
struct RunClock {
  TimestampNs process_start_ns = 0;  // on the recorder's clock
  TimestampNs finish_ns = 0;         // Session::Finish()
  double process_start_unix_s = 0;
  std::optional<double> submit_unix_s;  // job submission, if known
  // The idle analysis covers steps [window_first_step, window_end_step)
  // (-1: unbounded): the steps the device was profiled in.
  int64_t window_first_step = -1;
  int64_t window_end_step = -1;
};

// Fills report->timing, throughput, resource_hours (from
// report->resource_request), phases, idle and recommendation from a whole
// run's timeline, and, if `rows` is given, one row per step in start order
// (without memory). The Session folds the same figures as the run goes
// (run_fold.h); this is the reference it is tested against, and what
// offline tools use.
void AnalyzeRun(const Timeline& timeline, const RunClock& clock, int64_t warmup_override,
                Report* report, std::vector<Report::Step>* rows = nullptr);

// What a run's analysis adds up, however it does: AnalyzeRun over a whole
// timeline at once, RunFold segment by segment as the run goes. FillReport
// turns it into the report's sections, so both write them alike.
struct RunFigures {
  StepStats steps;  // warmup and steady figures (`steps.steps` may be empty)
  int64_t step_count = 0;
  TimestampNs first_start_ns = 0;  // the first step's start, when step_count > 0
  TimestampNs last_end_ns = 0;     // the last step's end, when step_count > 0
  std::vector<PhaseStat> phases;
  // Over the analysed window: idle, busy and window time, the causes
  // (cause_ns and by_cause), the gaps described, the busy source.
  IdleBreakdown idle;
  int64_t window_samples = 0;  // samples of the steps in the analysed window
};

// Fills report->timing, throughput, resource_hours (from
// report->resource_request), phases, idle, gaps and utilization. The
// recommendation is the caller's to set last (Recommend reads the rest).
void FillReport(const RunFigures& figures, const RunClock& clock, Report* report);

// report.gaps from an idle breakdown's gaps (count, histogram, longest),
// start times made seconds since `process_start_ns`. Pure.
void FillGaps(const IdleBreakdown& idle, TimestampNs process_start_ns, Report::Gaps* gaps);

// report.device_timeline.hta from HTA's breakdowns: microseconds made
// seconds, each stream's categories in one entry (0 for one it never had).
// Pure.
void FillHta(const HtaBreakdown& hta, int64_t late_rows, Report::DeviceTimeline::Hta* out);

// The recommendation's thresholds: ground/idle_cause.h.
using ground::kRecommendIdleThreshold;
using ground::kRecommendNearHigh;
using ground::kRecommendNearLow;

// The one-line recommendation for a report's idle and phase figures
// (the rules: docs/report-schema.md, recommendation). Cost: a string.
std::string Recommend(const Report& report);

}  // namespace trainscope::analysis

#endif  // TRAINSCOPE_SDK_ANALYSIS_RUN_ANALYSIS_H_
