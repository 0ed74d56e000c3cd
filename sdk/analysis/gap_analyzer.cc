// Idle time and its causes. See gap_analyzer.h.
#include "sdk/analysis/gap_analyzer.h"

#include <algorithm>
#include <array>

#include "sdk/analysis/interval_set.h"

namespace trainscope::analysis {
namespace {

constexpr std::array<Phase, 6> kCausePriority = {
    Phase::kDataWait, Phase::kHostToDevice, Phase::kSync,
    Phase::kCheckpoint, Phase::kEval, Phase::kOther};

bool IsHostRange(IntervalKind kind) {
  return kind == IntervalKind::kHostRange || kind == IntervalKind::kAsyncRange;
}

}  // namespace

IdleBreakdown GapAnalyzer::Analyze(const Timeline& timeline, TimestampNs window_start,
                                   TimestampNs window_end) {
  const bool has_device =
      std::any_of(timeline.intervals().begin(), timeline.intervals().end(),
                  [](const Interval& i) { return IsDeviceKind(i.kind); });
  std::vector<IntervalSet::Span> busy_spans;
  std::vector<IntervalSet::Span> step_spans;
  std::array<std::vector<IntervalSet::Span>, kPhaseCount> phase_spans;
  for (const Interval& i : timeline.intervals()) {
    const IntervalSet::Span span(i.start_ns, i.end_ns);
    if (i.kind == IntervalKind::kStep) {
      step_spans.push_back(span);
    } else if (has_device ? IsDeviceKind(i.kind)
                          : IsHostRange(i.kind) && IsComputePhase(i.phase)) {
      busy_spans.push_back(span);
    }
    if (IsHostRange(i.kind) && !IsComputePhase(i.phase)) {
      phase_spans[static_cast<int>(i.phase)].push_back(span);
    }
  }

  const IntervalSet window = IntervalSet::Range(window_start, window_end);
  const IntervalSet busy = IntervalSet::FromUnsorted(std::move(busy_spans)).Intersect(window);
  IntervalSet idle = window.Subtract(busy);

  IdleBreakdown result;
  result.busy_source = has_device ? "device_activity" : "cpu_compute_phases";
  result.window_ns = window.Length();
  result.busy_ns = busy.Length();
  result.idle_ns = idle.Length();
  result.share = result.window_ns > 0
                     ? static_cast<double>(result.idle_ns) / result.window_ns
                     : 0;
  result.gaps = static_cast<int64_t>(idle.spans().size());
  for (const auto& gap : idle.spans()) {
    result.largest_gap_ns = std::max(result.largest_gap_ns, gap.second - gap.first);
  }

  for (Phase phase : kCausePriority) {
    auto& spans = phase_spans[static_cast<int>(phase)];
    if (spans.empty()) continue;
    const IntervalSet active = IntervalSet::FromUnsorted(std::move(spans));
    const TimestampNs blamed = idle.Intersect(active).Length();
    if (blamed > 0) result.by_cause.emplace_back(std::string(PhaseName(phase)), blamed);
    idle = idle.Subtract(active);
  }
  const IntervalSet in_steps = IntervalSet::FromUnsorted(std::move(step_spans));
  const TimestampNs host = idle.Intersect(in_steps).Length();
  const TimestampNs outside = idle.Length() - host;
  if (host > 0) result.by_cause.emplace_back(kCauseHost, host);
  if (outside > 0) result.by_cause.emplace_back(kCauseOutsideStep, outside);
  std::stable_sort(result.by_cause.begin(), result.by_cause.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return result;
}

}  // namespace trainscope::analysis
