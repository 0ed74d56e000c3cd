// The report's analysed sections. See run_analysis.h.
#include "sdk/analysis/run_analysis.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <unordered_map>

#include "absl/strings/str_format.h"
#include "sdk/analysis/gap_analyzer.h"
#include "sdk/analysis/interval_set.h"
#include "sdk/analysis/phase_stats.h"
#include "sdk/analysis/step_analysis.h"

namespace trainscope::analysis {
namespace {

int Percent(double share) { return static_cast<int>(std::lround(share * 100)); }

// One row per step, in start order.
void StepRows(const Timeline& timeline, const StepStats& steps, const IdleBreakdown& idle,
              const RunClock& clock, std::vector<Report::Step>* rows) {
  rows->clear();
  std::unordered_map<int64_t, size_t> step_at;
  for (const StepSpan& step : steps.steps) {
    Report::Step row;
    row.index = step.index;
    row.start_s = (step.start_ns - clock.process_start_ns) / 1e9;
    row.duration_ms = (step.end_ns - step.start_ns) / 1e6;
    row.samples = step.samples;
    step_at.emplace(step.index, rows->size());
    rows->push_back(row);
  }
  std::array<std::vector<IntervalSet::Span>, kPhaseCount> spans;
  std::vector<std::array<TimestampNs, 2>> tagged(rows->size());  // sync, data_wait ns
  for (const Interval& interval : timeline.intervals()) {
    if (interval.kind != IntervalKind::kHostRange && interval.kind != IntervalKind::kAsyncRange) {
      continue;
    }
    spans[static_cast<int>(interval.phase)].emplace_back(interval.start_ns, interval.end_ns);
    if (interval.phase != Phase::kSync && interval.phase != Phase::kDataWait) continue;
    auto it = step_at.find(interval.step);
    if (it == step_at.end()) continue;
    tagged[it->second][interval.phase == Phase::kSync ? 0 : 1] += interval.duration_ns();
  }
  for (size_t k = 0; k < rows->size(); ++k) {
    (*rows)[k].sync_ms = tagged[k][0] / 1e6;
    (*rows)[k].data_wait_ms = tagged[k][1] / 1e6;
  }
  for (int p = 0; p < kPhaseCount; ++p) {
    const IntervalSet covered = IntervalSet::FromUnsorted(std::move(spans[p]));
    for (size_t k = 0; k < steps.steps.size(); ++k) {
      (*rows)[k].phase_ms[p] =
          covered.LengthWithin(steps.steps[k].start_ns, steps.steps[k].end_ns) / 1e6;
    }
  }
  for (const StepIdle& step : idle.idle_per_step) {
    auto it = step_at.find(step.step);
    if (it == step_at.end()) continue;
    Report::Step& row = (*rows)[it->second];
    row.idle_ms = step.idle_ns / 1e6;
    TimestampNs top = 0;
    for (int c = 0; c < kIdleCauseCount; ++c) {
      if (step.by_cause[c] > top) {
        top = step.by_cause[c];
        row.top_cause = std::string(IdleCauseName(c));
      }
    }
  }
}

}  // namespace

void FillGaps(const IdleBreakdown& idle, TimestampNs process_start_ns, Report::Gaps* gaps) {
  gaps->count = idle.gaps;
  gaps->largest_ms = idle.largest_gap_ns / 1e6;
  gaps->histogram.clear();
  for (const GapBucket& bucket : idle.histogram) {
    gaps->histogram.push_back({bucket.label, bucket.count, bucket.total_ns / 1e6});
  }
  gaps->largest.clear();
  for (const Gap& gap : idle.largest_gaps) {
    gaps->largest.push_back(
        {(gap.start_ns - process_start_ns) / 1e9, gap.duration_ns / 1e6, gap.step, gap.cause});
  }
}

void FillHta(const HtaBreakdown& hta, int64_t late_rows, Report::DeviceTimeline::Hta* out) {
  out->rows = hta.rows;
  out->kernel_s = hta.temporal.kernel_us / 1e6;
  out->idle_s = hta.temporal.idle_us / 1e6;
  out->compute_s = hta.temporal.compute_us / 1e6;
  out->non_compute_s = hta.temporal.non_compute_us / 1e6;
  out->late_rows = late_rows;
  out->idle_by_stream.clear();
  for (const HtaStreamIdle& row : hta.idle_by_stream) {
    if (out->idle_by_stream.empty() || out->idle_by_stream.back().stream != row.stream) {
      out->idle_by_stream.push_back({row.stream});
    }
    Report::DeviceTimeline::Hta::Stream& stream = out->idle_by_stream.back();
    const double s = row.idle_us / 1e6;
    if (row.category == "host_wait") {
      stream.host_wait_s = s;
    } else if (row.category == "kernel_wait") {
      stream.kernel_wait_s = s;
    } else {
      stream.other_s = s;
    }
  }
}

void FillReport(const RunFigures& figures, const RunClock& clock, Report* report) {
  const StepStats& steps = figures.steps;
  Report::Timing& timing = report->timing;
  timing.steps = figures.step_count;
  timing.warmup_steps = steps.warmup_steps;
  timing.warmup_rule = steps.warmup_rule;
  timing.total_s = (clock.finish_ns - clock.process_start_ns) / 1e9;
  if (clock.submit_unix_s) {
    timing.queue_delay_s = clock.process_start_unix_s - *clock.submit_unix_s;
  }
  if (figures.step_count > 0) {
    timing.startup_s = (figures.first_start_ns - clock.process_start_ns) / 1e9;
    timing.steps_s = (figures.last_end_ns - figures.first_start_ns) / 1e9;
  }
  report->throughput.steady_steps = steps.steady_steps;
  report->throughput.steady_steps_per_s = steps.steady_steps_per_s;
  report->throughput.steady_samples_per_s = steps.steady_samples_per_s;
  report->throughput.median_step_ms = steps.median_step_ms;
  report->resource_hours = report->resource_request.accelerators * timing.total_s / 3600.0;
  report->phases = figures.phases;

  const IdleBreakdown& idle = figures.idle;
  report->idle.share = idle.share;
  report->idle.idle_s = idle.idle_ns / 1e9;
  report->idle.window_s = idle.window_ns / 1e9;
  report->idle.busy_source = idle.busy_source;
  report->idle.by_cause.clear();
  for (const auto& [cause, ns] : idle.by_cause) report->idle.by_cause.emplace_back(cause, ns / 1e9);
  report->idle.top_cause = idle.by_cause.empty() ? "" : idle.by_cause.front().first;
  FillGaps(idle, clock.process_start_ns, &report->gaps);

  Report::Utilization& use = report->utilization;
  use.allocated_device_hours = report->resource_hours;
  use.busy_device_hours = idle.busy_ns / 1e9 / 3600.0;
  use.samples_per_busy_device_s =
      idle.busy_ns > 0 ? figures.window_samples / (idle.busy_ns / 1e9) : 0;
}

void AnalyzeRun(const Timeline& timeline, const RunClock& clock, int64_t warmup_override,
                Report* report, std::vector<Report::Step>* rows) {
  RunFigures figures;
  figures.steps = AnalyzeSteps(timeline, warmup_override);
  const std::vector<StepSpan>& steps = figures.steps.steps;
  figures.step_count = static_cast<int64_t>(steps.size());
  TimestampNs window_start = clock.process_start_ns;
  TimestampNs window_end = clock.finish_ns;
  if (!steps.empty()) {
    figures.first_start_ns = window_start = steps.front().start_ns;
    figures.last_end_ns = window_end = steps.back().end_ns;
  }
  figures.phases = AnalyzePhases(timeline, figures.steps);
  if (clock.window_first_step >= 0 || clock.window_end_step >= 0) {
    // Only the profiled steps: outside them there are no device records.
    TimestampNs first = -1;
    TimestampNs last = -1;
    for (const StepSpan& step : steps) {
      if ((clock.window_first_step >= 0 && step.index < clock.window_first_step) ||
          (clock.window_end_step >= 0 && step.index >= clock.window_end_step)) {
        continue;
      }
      if (first < 0) first = step.start_ns;
      last = step.end_ns;
    }
    if (first >= 0) {
      window_start = first;
      window_end = last;
    }
  }
  figures.idle = GapAnalyzer::Analyze(timeline, window_start, window_end);
  for (const StepSpan& step : steps) {
    if (step.start_ns >= window_start && step.end_ns <= window_end) {
      figures.window_samples += step.samples;
    }
  }
  FillReport(figures, clock, report);
  report->recommendation = Recommend(*report);
  if (rows != nullptr) StepRows(timeline, figures.steps, figures.idle, clock, rows);
}

namespace {

// What to do about idle time of the cause a report names
// (ground::kIdleCauses; docs/report-schema.md, recommendation).
std::string CauseAdvice(const std::string& cause) {
  const std::optional<IdleCause> known = ground::IdleCauseNamed(cause);
  return std::string(known ? ground::IdleCauseAdvice(*known) : "see docs/guide-map.md");
}

}  // namespace

std::string Recommend(const Report& report) {
  const Report::Idle& idle = report.idle;
  if (report.timing.steps == 0) {
    return "no steps were recorded: wrap each iteration in a trainscope::StepScope";
  }
  if (idle.top_cause.empty() || idle.share < kRecommendNearLow) {
    return absl::StrFormat(
        "compute is busy %d%% of the time: no input or sync bottleneck; tune batch size or "
        "precision next (docs/guide-map.md#tune-the-application)",
        Percent(1 - idle.share));
  }
  const double cause_share = idle.window_s > 0 ? idle.by_cause.front().second / idle.window_s : 0;
  const std::string& cause = idle.top_cause;
  if (idle.share < kRecommendNearHigh) {
    // Near the threshold one sentence for both sides: equivalent runs at
    // 9.9% and 10.0% idle must not read as different diagnoses.
    return absl::StrFormat(
        "compute is busy %d%% of the time, near the %d%% idle threshold; the largest idle cause "
        "is %s (%d%% of the time): %s",
        Percent(1 - idle.share), Percent(kRecommendIdleThreshold), cause, Percent(cause_share),
        CauseAdvice(cause));
  }
  if (ground::IdleCauseNamed(cause) == IdleCause::kDataWait) {
    return absl::StrFormat("%d%% of step time waits on input: %s", Percent(cause_share),
                           CauseAdvice(cause));
  }
  return absl::StrFormat("compute idles %d%% of the time, %d%% on %s: %s", Percent(idle.share),
                         Percent(cause_share), cause, CauseAdvice(cause));
}

}  // namespace trainscope::analysis
