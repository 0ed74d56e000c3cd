// Steps, warmup and throughput. See step_analysis.h.
#include "sdk/analysis/step_analysis.h"

#include <algorithm>
#include <cmath>

#include "fmt/format.h"

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

int64_t AutoWarmupSteps(const std::vector<StepSpan>& steps) {
  const size_t n = steps.size();
  if (n < 4) return 0;
  std::vector<double> second_half;
  for (size_t i = n / 2; i < n; ++i) {
    second_half.push_back(static_cast<double>(steps[i].end_ns - steps[i].start_ns));
  }
  const double limit = 1.25 * Median(second_half);
  for (size_t k = 0; k <= n / 2; ++k) {
    bool settled = true;
    for (size_t i = k; i < std::min(n, k + 3); ++i) {
      settled = settled && static_cast<double>(steps[i].end_ns - steps[i].start_ns) <= limit;
    }
    if (settled) return static_cast<int64_t>(k);
  }
  return static_cast<int64_t>(n / 2);
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
  if (warmup_override >= 0) {
    stats.warmup_steps = std::min(warmup_override, n);
    stats.warmup_rule = fmt::format("fixed: {} step(s) by option", stats.warmup_steps);
  } else {
    stats.warmup_steps = AutoWarmupSteps(stats.steps);
    stats.warmup_rule = kAutoWarmupRule;
  }
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
