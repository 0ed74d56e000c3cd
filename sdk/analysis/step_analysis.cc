// Steps, warmup and throughput. See step_analysis.h.
#include "sdk/analysis/step_analysis.h"

#include <algorithm>
#include <cmath>

#include "sdk/analysis/warmup.h"

namespace trainscope::analysis {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * values.size()));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

StepStats AnalyzeSteps(const Timeline& timeline, int64_t warmup_override) {
  StepStats stats;
  for (const Interval& interval : timeline.intervals()) {
    if (interval.kind != IntervalKind::kStep) continue;
    stats.steps.push_back(
        StepSpan{interval.start_ns, interval.end_ns, interval.step, interval.value});
  }
  std::stable_sort(stats.steps.begin(), stats.steps.end(),
                   [](const StepSpan& a, const StepSpan& b) { return a.start_ns < b.start_ns; });
  return SummarizeSteps(std::move(stats.steps), warmup_override);
}

StepStats SummarizeSteps(std::vector<StepSpan> steps, int64_t warmup_override) {
  StepStats stats;
  stats.steps = std::move(steps);
  const auto n = static_cast<int64_t>(stats.steps.size());
  WarmupRule rule(warmup_override);
  for (const StepSpan& step : stats.steps) rule.Add(step.end_ns - step.start_ns);
  rule.Finish();
  stats.warmup_steps = rule.warmup();
  stats.warmup_rule = rule.Describe();
  // With every step in warmup there is no steady state; measure all steps.
  const int64_t first = stats.warmup_steps < n ? stats.warmup_steps : 0;
  if (n == 0) return stats;
  std::vector<double> durations_ms;
  int64_t samples = 0;
  for (int64_t i = first; i < n; ++i) {
    durations_ms.push_back((stats.steps[i].end_ns - stats.steps[i].start_ns) / 1e6);
    samples += stats.steps[i].samples;
  }
  stats.steady_steps = n - first;
  const double span_s = (stats.steps[n - 1].end_ns - stats.steps[first].start_ns) / 1e9;
  if (span_s > 0) {
    stats.steady_steps_per_s = stats.steady_steps / span_s;
    stats.steady_samples_per_s = samples / span_s;
  }
  stats.median_step_ms = Median(durations_ms);
  return stats;
}

}  // namespace trainscope::analysis
