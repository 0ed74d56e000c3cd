// sdk/analysis/step_analysis.h: steps, warmup and steady-state throughput.
#ifndef TRAINSCOPE_SDK_ANALYSIS_STEP_ANALYSIS_H_
#define TRAINSCOPE_SDK_ANALYSIS_STEP_ANALYSIS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "sdk/analysis/model.h"

namespace trainscope::analysis {

struct StepSpan {
  TimestampNs start_ns = 0;
  TimestampNs end_ns = 0;
  int64_t index = 0;
  int64_t samples = 0;
};

struct StepStats {
  std::vector<StepSpan> steps;  // by start time
  int64_t warmup_steps = 0;
  std::string warmup_rule;
  int64_t steady_steps = 0;
  double steady_steps_per_s = 0;
  double steady_samples_per_s = 0;
  double median_step_ms = 0;  // over steady steps
};

// Reads the kStep intervals of `timeline`. `warmup_override` >= 0 fixes the
// warmup count (clamped to the number of steps); -1 applies WarmupRule's
// auto rule (warmup.h).
StepStats AnalyzeSteps(const Timeline& timeline, int64_t warmup_override);
// The same from steps already sorted by start.
StepStats SummarizeSteps(std::vector<StepSpan> steps, int64_t warmup_override);

// Median (mean of the two middle values for an even count) and the p-th
// percentile by nearest rank (p in (0, 100]). 0 for an empty input.
double Median(std::vector<double> values);
double Percentile(std::vector<double> values, double p);

}  // namespace trainscope::analysis

#endif  // TRAINSCOPE_SDK_ANALYSIS_STEP_ANALYSIS_H_
