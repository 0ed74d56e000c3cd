// The fold's segments: the stages that fold one segment of time. See
// run_fold.h; what the fold keeps between segments is run_fold_parts.h.
#include <algorithm>
#include <limits>
#include <utility>

#include "sdk/analysis/launch_attribution.h"
#include "sdk/analysis/run_fold.h"
#include "sdk/analysis/run_fold_parts.h"

namespace trainscope::analysis {
namespace {

using fold::kAttributed;
using fold::kFoldedSources;
using fold::kLaunchFound;
using fold::kMaxTime;
using fold::OpenStep;
using fold::SourceIdle;
using fold::Tagged;

}  // namespace

// One segment of time, [begin, end), as its stages see it: its bounds, and
// what each stage hands to the next.
struct RunFold::SegmentWork {
  TimestampNs begin = 0;
  TimestampNs end = 0;
  bool last = false;           // the run's last segment: everything held is in it
  TimestampNs nostep_end = 0;  // a run without steps counts idle up to here
  // How far launch history reaches back (kMaxTime in the last segment).
  TimestampNs history_end = kMaxTime;
  size_t reach = 0;  // open steps that begin before `end`
  IdleSets sets;     // the steps, the causes' activity, the busy time
  IntervalSet device_busy;
  IntervalSet host_busy;
  bool calls = false;    // CUDA calls or syncs in the segment
  bool in_order = true;  // the causes' spans came in start order, none overlapping

  // Whether an interval [a, b) is in the segment: it overlaps it, or it is
  // a zero-length one at its begin.
  bool Overlaps(TimestampNs a, TimestampNs b) const { return a < end && (b > begin || a >= begin); }
  // Whether the segment reaches a run (some of its intervals begin before its end).
  bool Reaches(const Impl::Run& run) const { return last || run.min_start < end; }
};

void RunFold::Segment(TimestampNs end) {
  SegmentWork work;
  work.begin = watermark_;
  work.end = end;
  work.nostep_end = end;
  FoldSegment(work);
}

void RunFold::LastSegment(TimestampNs finish_ns) {
  SegmentWork work;
  work.begin = watermark_;
  work.end = kMaxTime;
  work.last = true;
  work.nostep_end = finish_ns;
  FoldSegment(work);
}

void RunFold::FoldSegment(SegmentWork& work) {
  AttributeHeldLaunches(work);
  CollectSteps(work);
  ClipIntervals(work);
  SplitPhases(work);
  FoldIdle(work);
  WriteRows(work);
  ReleaseDeviceWork(work);
  CompactRuns(work);
  watermark_ = work.end;
}

// Launch attribution for the device intervals not yet attributed that
// began before the segment's end, from the held host ranges and calls.
void RunFold::AttributeHeldLaunches(const SegmentWork& work) {
  Impl& s = *impl_;
  std::vector<std::pair<size_t, size_t>> to_attribute;  // (run, index)
  for (size_t r = 0; s.device_seen && r < s.runs.size(); ++r) {
    const Impl::Run& run = s.runs[r];
    if (!work.Reaches(run)) continue;
    for (size_t k = 0; k < run.intervals.size(); ++k) {
      const Interval& i = run.intervals[k];
      if (IsDeviceKind(i.kind) && (run.flags[k] & kAttributed) == 0 && i.start_ns < work.end) {
        to_attribute.emplace_back(r, k);
      }
    }
  }
  if (to_attribute.empty()) return;
  std::vector<Interval>& scratch = input_.mutable_intervals();  // empty after Take
  constexpr int64_t kUnset = std::numeric_limits<int64_t>::min();
  for (const auto& [r, k] : to_attribute) {
    scratch.push_back(s.runs[r].intervals[k]);
    scratch.back().step = kUnset;  // AttributeLaunches sets it when it finds the launch
  }
  for (const Impl::Run& run : s.runs) {
    for (const Interval& i : run.intervals) {
      if (i.kind == IntervalKind::kHostRange || i.kind == IntervalKind::kRuntimeCall) {
        scratch.push_back(i);
      }
    }
  }
  scratch.insert(scratch.end(), s.step_history.begin(), s.step_history.end());
  AttributeLaunches(&input_);
  for (size_t j = 0; j < to_attribute.size(); ++j) {
    const auto [r, k] = to_attribute[j];
    Interval& i = s.runs[r].intervals[k];
    const Interval& attributed = scratch[j];
    const bool found = attributed.step != kUnset;
    if (found) {
      i.step = attributed.step;
      i.phase = attributed.phase;
    }
    s.runs[r].flags[k] = kAttributed | (found ? kLaunchFound : 0);
  }
  scratch.clear();
}

// The steps overlapping the segment, by start. Steps that begin after the
// segment's end are neither in it nor done.
void RunFold::CollectSteps(SegmentWork& work) {
  Impl& s = *impl_;
  work.reach =
      work.last
          ? s.open_steps.size()
          : static_cast<size_t>(std::upper_bound(s.open_steps.begin(), s.open_steps.end(), work.end,
                                                 [](TimestampNs t, const OpenStep& o) {
                                                   return t < o.span.start_ns;
                                                 }) -
                                s.open_steps.begin());
  std::vector<OpenStep*>& by_start = s.segment_steps;
  by_start.clear();
  IntervalSet::Builder in_steps;
  for (size_t k = 0; k < work.reach; ++k) {
    OpenStep& step = s.open_steps[k];
    if (!work.Overlaps(step.span.start_ns, step.span.end_ns)) continue;
    by_start.push_back(&step);
    const IntervalSet::Span span(step.span.start_ns, step.span.end_ns);
    in_steps.Add(span);
    work.sets.steps.emplace_back(span, step.span.index);
  }
  work.sets.in_steps = std::move(in_steps).Build();
}

// The idle cause a CUDA call stands for. Matching the name on every call
// would cost more than the rest of the segment: a run has only a few
// distinct call names, each matched once.
int RunFold::CallCause(const Interval& call) {
  Impl& s = *impl_;
  if (call.kind != IntervalKind::kRuntimeCall) return GapAnalyzer::PhaseCause(Phase::kSync);
  if (call.name >= s.call_cause.size()) s.call_cause.resize(call.name + 1, -1);
  if (s.call_cause[call.name] < 0) {
    s.call_cause[call.name] = static_cast<int8_t>(GapAnalyzer::CallCause(input_.name(call.name)));
  }
  return s.call_cause[call.name];
}

// One pass over the intervals overlapping the segment, clipped to it: host
// ranges by phase, device work by launching phase (and its busy union),
// CUDA calls by the idle cause they stand for.
void RunFold::ClipIntervals(SegmentWork& work) {
  Impl& s = *impl_;
  for (auto& spans : s.phase_spans) spans.clear();
  for (auto& spans : s.device_spans) spans.clear();
  for (auto& spans : s.call_spans) spans.clear();
  // The causes' spans in the order they come, for Tally while they are in
  // start order and do not overlap (one thread's phases, in a run or
  // several in time order); else Tally merges the sets.
  static const auto kCauseOfPhase = [] {
    std::array<int8_t, kPhaseCount> cause{};
    for (int p = 0; p < kPhaseCount; ++p) {
      const auto phase = static_cast<Phase>(p);
      cause[p] = static_cast<int8_t>(IsComputePhase(phase) ? -1 : GapAnalyzer::PhaseCause(phase));
    }
    return cause;
  }();
  std::vector<CauseSpan>& causes = s.cause_spans;
  causes.clear();
  auto add_cause = [&](TimestampNs a, TimestampNs b, int cause) {
    work.in_order = work.in_order && (causes.empty() || a >= causes.back().end);
    if (work.in_order) causes.emplace_back(a, b, cause);
  };
  for (const Impl::Run& run : s.runs) {
    if (!work.Reaches(run)) continue;
    for (size_t k = 0; k < run.intervals.size(); ++k) {
      const Interval& i = run.intervals[k];
      if (!work.Overlaps(i.start_ns, i.end_ns)) continue;
      const TimestampNs a = std::max(work.begin, i.start_ns);
      const TimestampNs b = std::min(work.end, i.end_ns);
      if (IsHostRange(i.kind)) {
        if (b <= a) continue;
        s.phase_spans[static_cast<int>(i.phase)].emplace_back(a, b);
        if (const int cause = kCauseOfPhase[static_cast<int>(i.phase)]; cause >= 0) {
          add_cause(a, b, cause);
        }
      } else if (IsDeviceKind(i.kind)) {
        const int p = (run.flags[k] & kLaunchFound) != 0 ? static_cast<int>(i.phase) : kPhaseCount;
        s.device_busy_seen[p] = true;
        if (b > a) s.device_spans[p].emplace_back(a, b);
      } else if (i.kind == IntervalKind::kSyncCall || i.kind == IntervalKind::kRuntimeCall) {
        const int cause = CallCause(i);
        if (b > a) {
          s.call_spans[cause].emplace_back(a, b);
          add_cause(a, b, cause);
        }
        work.calls = true;
      }
    }
  }
  for (int p = 0; p <= kPhaseCount; ++p) {
    if (s.device_spans[p].empty()) continue;
    const IntervalSet busy = IntervalSet::FromSpans(&s.device_spans[p]);
    s.device_busy_ns[p] += busy.Length();
    work.device_busy = work.device_busy.Union(busy);
  }
}

// Phases: their union in the segment and each open step's share of it, in
// one sweep over the steps by start with a cursor in each union; the host
// compute phases' union (the host's busy time) and the other phases' and
// calls' activity by idle cause.
void RunFold::SplitPhases(SegmentWork& work) {
  Impl& s = *impl_;
  std::array<IntervalSet, kPhaseCount> covered;
  std::array<int, kPhaseCount> present{};  // the phases the segment has
  int phases = 0;
  for (int p = 0; p < kPhaseCount; ++p) {
    if (s.phase_spans[p].empty()) continue;
    covered[p] = IntervalSet::FromSpans(&s.phase_spans[p]);
    s.phase_total_ns[p] += covered[p].Length();
    present[phases++] = p;
  }
  std::array<size_t, kPhaseCount> first{};  // per phase, the first span ending after a
  for (OpenStep* step : s.segment_steps) {
    const TimestampNs a = std::max(work.begin, step->span.start_ns);
    const TimestampNs b = std::min(work.end, step->span.end_ns);
    for (int j = 0; j < phases; ++j) {
      const int p = present[j];
      const std::vector<IntervalSet::Span>& spans = covered[p].spans();
      size_t& f = first[p];
      while (f < spans.size() && spans[f].second <= a) ++f;
      if (a >= b) continue;
      TimestampNs within = 0;
      for (size_t k = f; k < spans.size() && spans[k].first < b; ++k) {
        within += std::min(b, spans[k].second) - std::max(a, spans[k].first);
      }
      step->phase_ns[p] += within;
    }
  }
  for (int j = 0; j < phases; ++j) {
    const auto phase = static_cast<Phase>(present[j]);
    if (IsComputePhase(phase)) {
      work.host_busy = work.host_busy.Union(covered[present[j]]);
    } else {
      work.sets.active[GapAnalyzer::PhaseCause(phase)] = std::move(covered[present[j]]);
    }
  }
  for (int c = 0; work.calls && c < kIdleCauseCount; ++c) {
    if (s.call_spans[c].empty()) continue;
    work.sets.active[c] = work.sets.active[c].Union(IntervalSet::FromSpans(&s.call_spans[c]));
  }
}

// Idle, for each busy source the run may end up with: in the step window
// (and each step's share, for the source the rows use), after the newest
// step (the tail), or, before any step, since process start.
void RunFold::FoldIdle(SegmentWork& work) {
  Impl& s = *impl_;
  IdleSets& sets = work.sets;
  std::vector<CauseSpan>& causes = s.cause_spans;
  if (work.in_order) sets.by_start.swap(causes);  // swapped back below: its room stays
  const BusySource row_source = s.device_seen ? BusySource::kDevice : BusySource::kHostPhases;
  for (const BusySource source : fold::kFoldedSources) {
    if (source == BusySource::kHostPhases && s.device_seen) continue;
    if (source == BusySource::kDevice && !options_.device && !s.device_seen) continue;
    SourceIdle& sums = s.idle[source];
    IntervalSet& busy = source == BusySource::kDevice ? work.device_busy : work.host_busy;
    std::swap(sets.busy, busy);
    if (!s.steps_seen) {
      const TimestampNs a = std::max(work.begin, options_.process_start_ns);
      const TimestampNs b = work.last ? work.nostep_end : work.end;
      if (a < b) {
        sums.nostep.Add(GapAnalyzer::Tally(IntervalSet::Range(a, b), sets, &sums.nostep.gaps));
      }
    } else if (s.window_known) {
      const TimestampNs a = std::max(work.begin, s.window_first_start);
      const TimestampNs b = std::min(work.end, s.window_last_end);
      if (a < b) {
        const IdleBreakdown idle =
            GapAnalyzer::Tally(IntervalSet::Range(a, b), sets, &sums.committed.gaps);
        sums.committed.Add(idle);
        if (source == row_source) {
          for (size_t k = 0; k < s.segment_steps.size(); ++k) {
            const StepIdle& step = idle.idle_per_step[k];
            OpenStep* open = s.segment_steps[k];
            open->idle_ns += step.idle_ns;
            for (int c = 0; c < kIdleCauseCount; ++c) open->cause_ns[c] += step.by_cause[c];
          }
        }
      }
      const TimestampNs tail_start = std::max(a, s.window_last_end);
      if (!work.last && !s.window_closed && tail_start < work.end) {
        sums.tail.Add(
            GapAnalyzer::Tally(IntervalSet::Range(tail_start, work.end), sets, &sums.tail.gaps));
      }
    }
    std::swap(sets.busy, busy);
  }
  if (work.in_order) sets.by_start.swap(causes);
}

// A done step's row: its phases and idle from the segments it spanned, its
// tagged sync and data-wait time.
Report::Step RunFold::Row(const OpenStep& step) {
  Impl& s = *impl_;
  const TimestampNs length = step.span.end_ns - step.span.start_ns;
  Report::Step row;
  row.index = step.span.index;
  row.start_s = (step.span.start_ns - options_.process_start_ns) / 1e9;
  row.duration_ms = length / 1e6;
  row.samples = step.span.samples;
  for (int p = 0; p < kPhaseCount; ++p) row.phase_ms[p] = step.phase_ns[p] / 1e6;
  row.idle_ms = step.idle_ns / 1e6;
  int top = -1;
  for (int c = 0; c < kIdleCauseCount; ++c) {
    if (step.cause_ns[c] > (top < 0 ? 0 : step.cause_ns[top])) top = c;
  }
  if (top >= 0) row.top_cause = IdleCauseName(top);
  const Tagged tag = s.tagged.Take(step.span.index);
  row.sync_ms = tag.sync_ns / 1e6;
  row.data_wait_ms = tag.data_wait_ns / 1e6;
  return row;
}

// The steps now behind the watermark: into the step log and the phase
// sketches, and their rows to the step sink, in start order.
void RunFold::WriteRows(const SegmentWork& work) {
  Impl& s = *impl_;
  auto reached = s.open_steps.begin() + static_cast<std::ptrdiff_t>(work.reach);
  auto ended = [&](const OpenStep& step) { return work.last || step.span.end_ns <= work.end; };
  // Mostly the done ones come first already (steps that do not nest). A
  // stable partition keeps them by start, as open_steps is: rows are
  // written from where they are, then taken off the front.
  auto first_open = std::is_partitioned(s.open_steps.begin(), reached, ended)
                        ? std::partition_point(s.open_steps.begin(), reached, ended)
                        : std::stable_partition(s.open_steps.begin(), reached, ended);
  for (auto done = s.open_steps.begin(); done != first_open; ++done) {
    const OpenStep& step = *done;
    s.steps.Add(step.span);
    s.in_steps_ns += step.span.end_ns - step.span.start_ns;
    if (step.in_window) s.window_samples += step.span.samples;
    for (int p = 0; p < kPhaseCount; ++p) {
      if (step.phase_ns[p] <= 0) continue;
      s.phase_ms[p].Add(step.phase_ns[p] / 1e6);
      s.phase_in_steps_ns[p] += step.phase_ns[p];
    }
    Report::Step row = Row(step);
    last_row_index_ = std::max(last_row_index_, row.index);
    if (step_sink_) step_sink_(row);
    if (!s.first_row_written) {
      first_row_ = row;
      s.first_row_written = true;
    }
  }
  s.open_steps.erase_front(first_open);
  // Tags of steps that never came (an index no StepScope ended) would pile
  // up. Past twice the open steps and 4096 more, keep the newest of those
  // (steps still to come have the larger indices): amortised, a tag is
  // looked at a few times.
  if (const size_t keep = s.open_steps.size() + 4096; s.tagged.size() > 2 * keep) {
    s.tagged.Trim(keep, &s.tag_keys);
  }
}

// The device work, CUDA calls and syncs the watermark passed: to HTA's
// fold, and once to the device sink (the trace). Launch history older
// than the horizon leaves.
void RunFold::ReleaseDeviceWork(SegmentWork& work) {
  Impl& s = *impl_;
  work.history_end = (s.device_seen || options_.device) && !work.last
                         ? work.end - options_.launch_horizon_ns
                         : kMaxTime;
  std::vector<Interval>& scratch = input_.mutable_intervals();  // empty after Take
  for (const Impl::Run& run : s.runs) {
    if (!s.device_side_seen || !work.Reaches(run)) continue;
    for (const Interval& i : run.intervals) {
      const bool passed = work.last || (i.end_ns <= work.end && i.start_ns < work.end);
      // Not released before: it ended in this segment, or it starts in it
      // (a zero-length row at `begin` ended at the last segment's end).
      if (IsDeviceSide(i.kind) && passed &&
          (i.end_ns > work.begin || i.start_ns >= work.begin || run.fresh)) {
        scratch.push_back(i);
        s.hta.Add(i);
      }
    }
  }
  if (!scratch.empty() && device_sink_) device_sink_(input_);
  scratch.clear();
  while (!s.step_history.empty() && s.step_history.front().end_ns <= work.history_end) {
    s.step_history.pop_front();
  }
}

// Keeps in each run the segment reached what is not behind the watermark
// (and host ranges and calls within the launch horizon); drops the empty
// runs. HTA's fold may then take the rows that start before every device
// row or call still to be released (these began before the end but have
// not ended).
void RunFold::CompactRuns(const SegmentWork& work) {
  Impl& s = *impl_;
  TimestampNs hta_horizon = work.end;
  size_t kept_runs = 0;
  for (size_t r = 0; r < s.runs.size(); ++r) {
    Impl::Run& run = s.runs[r];
    if (work.Reaches(run)) hta_horizon = std::min(hta_horizon, s.CompactRun(work, &run));
    run.fresh = false;
    if (run.intervals.empty()) {
      if (s.spare_runs.size() < 2 && run.intervals.capacity() > 0) {
        s.spare_runs.push_back(std::move(run));
      }
      continue;
    }
    if (kept_runs != r) s.runs[kept_runs] = std::move(run);
    ++kept_runs;
  }
  s.runs.resize(kept_runs);
  s.hta.Advance(hta_horizon);
}

// One run's part of CompactRuns. Returns the earliest start of a device
// row or call it keeps that has not ended (kMaxTime if none).
TimestampNs RunFold::Impl::CompactRun(const SegmentWork& work, Run* run) {
  TimestampNs unreleased = kMaxTime;
  size_t kept = 0;
  TimestampNs min_start = kMaxTime;
  for (size_t k = 0; k < run->intervals.size(); ++k) {
    const Interval& i = run->intervals[k];
    bool keep = !work.last && (i.end_ns > work.end || i.start_ns >= work.end);
    if (!keep && !work.last &&
        (i.kind == IntervalKind::kHostRange || i.kind == IntervalKind::kRuntimeCall)) {
      keep = i.end_ns > work.history_end;
    }
    if (!keep) continue;
    if (i.end_ns > work.end && IsDeviceSide(i.kind)) unreleased = std::min(unreleased, i.start_ns);
    run->intervals[kept] = i;
    run->flags[kept] = run->flags[k];
    min_start = std::min(min_start, i.start_ns);
    ++kept;
  }
  pending -= run->intervals.size() - kept;
  run->intervals.resize(kept);
  run->flags.resize(kept);
  // A run kept for a few long ranges or launch history gives back the
  // room of the batch it came in (held() counts intervals, not room).
  if (kept > 0 && run->intervals.capacity() > 4 * kept + 256) {
    run->intervals.shrink_to_fit();
    run->flags.shrink_to_fit();
  }
  run->min_start = min_start;
  return unreleased;
}

}  // namespace trainscope::analysis
