// Per-phase, per-step breakdown. See phase_stats.h.
#include "sdk/analysis/phase_stats.h"

#include <array>
#include <string>

#include "sdk/analysis/interval_set.h"

namespace trainscope::analysis {

std::vector<PhaseStat> AnalyzePhases(const Timeline& timeline, const StepStats& steps) {
  std::array<std::vector<IntervalSet::Span>, kPhaseCount> spans;
  for (const Interval& interval : timeline.intervals()) {
    if (interval.kind != IntervalKind::kHostRange && interval.kind != IntervalKind::kAsyncRange) {
      continue;
    }
    spans[static_cast<int>(interval.phase)].emplace_back(interval.start_ns, interval.end_ns);
  }
  TimestampNs in_steps_ns = 0;
  for (const StepSpan& step : steps.steps) in_steps_ns += step.end_ns - step.start_ns;

  std::vector<PhaseStat> stats;
  for (int p = 0; p < kPhaseCount; ++p) {
    if (spans[p].empty()) continue;
    const IntervalSet covered = IntervalSet::FromUnsorted(std::move(spans[p]));
    PhaseStat stat;
    stat.phase = std::string(PhaseName(static_cast<Phase>(p)));
    std::vector<double> per_step_ms;
    TimestampNs in_steps = 0;
    for (const StepSpan& step : steps.steps) {
      const TimestampNs ns = covered.LengthWithin(step.start_ns, step.end_ns);
      if (ns <= 0) continue;
      per_step_ms.push_back(ns / 1e6);
      in_steps += ns;
    }
    stat.steps = static_cast<int64_t>(per_step_ms.size());
    stat.median_ms = Median(per_step_ms);
    stat.p90_ms = Percentile(per_step_ms, 90);
    stat.max_ms = Percentile(per_step_ms, 100);
    stat.total_s = covered.Length() / 1e9;
    stat.share_of_steps = in_steps_ns > 0 ? static_cast<double>(in_steps) / in_steps_ns : 0;
    stats.push_back(std::move(stat));
  }
  return stats;
}

}  // namespace trainscope::analysis
