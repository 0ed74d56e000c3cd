// The report's analysis, folded as the run goes. See run_fold.h; the
// structures it keeps between segments are run_fold_parts.h.
#include "sdk/analysis/run_fold.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "fmt/format.h"
#include "sdk/analysis/interval_set.h"
#include "sdk/analysis/launch_attribution.h"
#include "sdk/analysis/run_fold_parts.h"
#include "sdk/analysis/step_analysis.h"

namespace trainscope::analysis {
namespace {

using fold::FrontQueue;
using fold::IdleSums;
using fold::kAttributed;
using fold::kDeviceMode;
using fold::kHostMode;
using fold::kLaunchFound;
using fold::kMaxTime;
using fold::kModes;
using fold::kRunIntervals;
using fold::Mode;
using fold::ModeSums;
using fold::OpenStep;
using fold::StepLog;
using fold::Tagged;
using fold::TagTable;

}  // namespace

struct RunFold::Impl {
  Impl(const RunFoldOptions& o, const Timeline& input)
      : steps(o.exact_steps, o.exact_values, o.warmup_override), hta(input, o.launch_horizon_ns) {
    for (auto& sketch : phase_ms) sketch = QuantileSketch(o.exact_values);
  }

  // Intervals not yet behind the watermark, or launch history, in runs as
  // they arrived. A segment looks only at the runs whose earliest start is
  // before its end: the others lie wholly after it.
  struct Run {
    std::vector<Interval> intervals;
    std::vector<uint8_t> flags;  // parallel to intervals
    TimestampNs min_start = kMaxTime;
    bool fresh = true;  // arrived after the last segment
  };
  std::vector<Run> runs;
  std::vector<Run> spare_runs;  // at most 2 emptied runs, their room kept
  size_t pending = 0;           // intervals in all runs
  // By start (ties in arrival order): a segment looks at the steps that
  // begin before its end only, and takes the done ones off the front.
  FrontQueue<OpenStep> open_steps;
  // The steps (kStep intervals) of the launch horizon, at most
  // kStepHistory: launch attribution's step-owner rule looks up the step
  // open at a call from a thread without ranges (launch_attribution.h).
  static constexpr size_t kStepHistory = 4096;
  FrontQueue<Interval> step_history;
  TagTable tagged;  // by step index, until the step's row

  bool steps_seen = false;
  bool device_seen = false;
  bool device_side_seen = false;  // device work, CUDA calls or syncs: the trace wants them
  bool window_known = false;      // an in-window step came: first_start/last_end hold
  bool window_closed = false;     // a step past window_end_step came
  TimestampNs window_first_start = 0;
  TimestampNs window_last_start = 0;
  TimestampNs window_last_end = 0;
  int64_t window_samples = 0;
  std::array<ModeSums, kModes> idle;

  StepLog steps;
  std::array<QuantileSketch, kPhaseCount> phase_ms;
  std::array<TimestampNs, kPhaseCount> phase_total_ns{};
  std::array<TimestampNs, kPhaseCount> phase_in_steps_ns{};
  std::array<bool, kPhaseCount> phase_seen{};
  TimestampNs in_steps_ns = 0;
  // Device busy time by launching phase; the last entry is "unattributed".
  std::array<TimestampNs, kPhaseCount + 1> device_busy_ns{};
  std::array<bool, kPhaseCount + 1> device_busy_seen{};
  bool first_row_written = false;
  // HTA's breakdowns of the device rows, fed as they are released.
  HtaFold hta;

  // Buffers each segment refills; their room stays for the next one.
  std::array<std::vector<IntervalSet::Span>, kPhaseCount> phase_spans;
  std::array<std::vector<IntervalSet::Span>, kPhaseCount + 1> device_spans;
  std::array<std::vector<IntervalSet::Span>, kIdleCauseCount> call_spans;
  std::vector<OpenStep*> segment_steps;
  std::vector<TimestampNs> segment_starts;
  std::vector<TimestampNs> segment_ends;
  std::vector<int64_t> tag_keys;
  std::vector<int8_t> call_cause;      // GapAnalyzer::CallCause by name id, -1 until known
  std::vector<CauseSpan> cause_spans;  // IdleSets::by_start, its room kept
};

RunFold::RunFold(RunFoldOptions options, StepSink steps, DeviceSink device)
    : options_(options),
      step_sink_(std::move(steps)),
      device_sink_(std::move(device)),
      impl_(std::make_unique<Impl>(options, input_)) {
  first_row_.index = -1;
}

RunFold::~RunFold() = default;

bool RunFold::AddStepSyncTime(int64_t step, TimestampNs ns) {
  if (step < 0 || step <= last_row_index_) {
    ++late_sync_;
    return false;
  }
  impl_->tagged[step].sync_ns += ns;
  return true;
}

size_t RunFold::held() const {
  return impl_->pending + impl_->open_steps.size() + impl_->hta.held_rows();
}

void RunFold::Take() {
  Impl& s = *impl_;
  auto in_window = [this](int64_t index) {
    return (options_.window_first_step < 0 || index >= options_.window_first_step) &&
           (options_.window_end_step < 0 || index < options_.window_end_step);
  };
  // Everything but where the interval is kept. True for a step.
  auto take = [&](const Interval& i) {
    if (i.start_ns < watermark_) ++late_;
    if (i.kind == IntervalKind::kStep) {
      if (s.step_history.size() == Impl::kStepHistory) s.step_history.pop_front();
      s.step_history.push_back(i);
      OpenStep step;
      step.span = StepSpan{i.start_ns, i.end_ns, i.step, i.value};
      step.in_window = in_window(i.step);
      s.steps_seen = true;
      if (step.in_window && !s.window_closed) {
        if (!s.window_known || i.start_ns < s.window_first_start) s.window_first_start = i.start_ns;
        if (!s.window_known || i.start_ns >= s.window_last_start) {
          // The window reaches this step: the idle since the last one is in it.
          for (ModeSums& mode : s.idle) {
            if (mode.tail.empty()) continue;
            mode.committed.Add(mode.tail);
            mode.tail = IdleSums();
          }
          s.window_last_start = i.start_ns;
          s.window_last_end = i.end_ns;
        }
        s.window_known = true;
      } else if (options_.window_end_step >= 0 && i.step >= options_.window_end_step) {
        s.window_closed = true;
        for (ModeSums& mode : s.idle) mode.tail = IdleSums();
      }
      if (s.open_steps.empty() || s.open_steps.back().span.start_ns <= step.span.start_ns) {
        s.open_steps.push_back(step);
      } else {  // rare: a step that began before one already here
        auto at =
            std::upper_bound(s.open_steps.begin(), s.open_steps.end(), step.span.start_ns,
                             [](TimestampNs t, const OpenStep& o) { return t < o.span.start_ns; });
        s.open_steps.insert(at, step);
      }
      return true;
    }
    if (IsDeviceKind(i.kind)) s.device_seen = true;
    if (IsDeviceSide(i.kind)) s.device_side_seen = true;
    if (IsHostRange(i.kind)) {
      s.phase_seen[static_cast<int>(i.phase)] = true;
      if (i.step >= 0 && (i.phase == Phase::kSync || i.phase == Phase::kDataWait)) {
        Tagged& tag = s.tagged[i.step];
        (i.phase == Phase::kSync ? tag.sync_ns : tag.data_wait_ns) += i.duration_ns();
      }
    }
    return false;
  };
  auto new_run = [&s]() -> Impl::Run& {
    Impl::Run& run = s.runs.emplace_back();
    if (!s.spare_runs.empty()) {  // the room of a run released before
      run.intervals = std::move(s.spare_runs.back().intervals);
      run.flags = std::move(s.spare_runs.back().flags);
      s.spare_runs.pop_back();
    }
    return run;
  };
  std::vector<Interval>& in = input_.mutable_intervals();
  // A nearly full batch (a burst), or one of at least an eighth of a run
  // while fewer than kSwappedRuns runs are held and the input has no more
  // than a run's room (it grows past it as a segment's scratch) -- a drain
  // folding a busy ring chunk by chunk: each is folded and its run emptied
  // before the next -- becomes a run as it is, without a copy; its steps stay in it too
  // (a segment passes them by) until the watermark passes them. Else it
  // joins the last fresh run: runs of the input's room for a drain's few
  // thousand intervals each held 31 MB at 500,000 events/s (soak).
  constexpr size_t kSwappedRuns = 4;
  const bool swap = in.size() <= kRunIntervals &&
                    (in.size() >= kRunIntervals * 3 / 4 ||
                     (in.size() >= kRunIntervals / 8 && s.runs.size() < kSwappedRuns &&
                      in.capacity() <= kRunIntervals));
  if (swap) {
    Impl::Run& run = new_run();
    run.intervals.swap(in);
    // The input keeps room for a run's worth: no growth, no page faults.
    if (in.capacity() < kRunIntervals) in.reserve(kRunIntervals);
    run.flags.assign(run.intervals.size(), 0);
    for (const Interval& i : run.intervals) {
      take(i);
      run.min_start = std::min(run.min_start, i.start_ns);
    }
    s.pending += run.intervals.size();
  } else {
    for (const Interval& i : in) {
      if (take(i)) continue;
      // Small batches join the last fresh run.
      if (s.runs.empty() || !s.runs.back().fresh ||
          s.runs.back().intervals.size() >= kRunIntervals) {
        Impl::Run& run = new_run();
        const size_t room = std::min(kRunIntervals, in.size());
        run.intervals.reserve(room);
        run.flags.reserve(room);
      }
      Impl::Run& run = s.runs.back();
      run.intervals.push_back(i);
      run.flags.push_back(0);
      run.min_start = std::min(run.min_start, i.start_ns);
      ++s.pending;
    }
  }
  in.clear();
}

void RunFold::Advance(TimestampNs watermark) {
  Take();
  if (watermark <= watermark_) return;
  for (const TimestampNs end : SegmentEnds(watermark)) Segment(end, false, end);
}

// A segment's work and scratch room grow with the intervals in it: a burst
// (a drain that found full rings, the last one) is folded in segments of
// about kSegmentIntervals intervals that begin in them, which keeps the
// scratch in cache. The fold adds up over segments, so the figures are the
// same. The ends come from a sample of about 4096 starts.
const std::vector<TimestampNs>& RunFold::SegmentEnds(TimestampNs watermark) {
  constexpr size_t kSegmentIntervals = 16384;
  constexpr size_t kSample = 4096;
  Impl& s = *impl_;
  std::vector<TimestampNs>& ends = s.segment_ends;
  ends.clear();
  if (s.pending > kSegmentIntervals) {
    const size_t stride = std::max<size_t>(1, s.pending / kSample);
    std::vector<TimestampNs>& sample = s.segment_starts;
    sample.clear();
    for (const Impl::Run& run : s.runs) {
      if (run.min_start >= watermark) continue;
      for (size_t k = 0; k < run.intervals.size(); k += stride) {
        const TimestampNs start = run.intervals[k].start_ns;
        if (start > watermark_ && start < watermark) sample.push_back(start);
      }
    }
    std::sort(sample.begin(), sample.end());
    const size_t every = std::max<size_t>(1, kSegmentIntervals / stride);
    for (size_t k = every; k < sample.size(); k += every) {
      if (ends.empty() || sample[k] > ends.back()) ends.push_back(sample[k]);
    }
  }
  ends.push_back(watermark);
  return ends;
}

void RunFold::Segment(TimestampNs end, bool final, TimestampNs nostep_end) {
  Impl& s = *impl_;
  const TimestampNs begin = watermark_;
  auto overlaps = [&](TimestampNs a, TimestampNs b) {
    return a < end && (b > begin || a >= begin);
  };
  std::vector<Interval>& scratch = input_.mutable_intervals();  // empty after Take

  // Launch attribution for device intervals not yet attributed that began
  // before `end`, from the held host ranges and calls.
  // The runs this segment reaches (some of their intervals begin before its end).
  auto reaches = [&](const Impl::Run& run) { return final || run.min_start < end; };
  std::vector<std::pair<size_t, size_t>> to_attribute;  // (run, index)
  for (size_t r = 0; s.device_seen && r < s.runs.size(); ++r) {
    const Impl::Run& run = s.runs[r];
    if (!reaches(run)) continue;
    for (size_t k = 0; k < run.intervals.size(); ++k) {
      const Interval& i = run.intervals[k];
      if (IsDeviceKind(i.kind) && (run.flags[k] & kAttributed) == 0 && i.start_ns < end) {
        to_attribute.emplace_back(r, k);
      }
    }
  }
  if (!to_attribute.empty()) {
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
  const size_t reach =
      final ? s.open_steps.size()
            : static_cast<size_t>(std::upper_bound(s.open_steps.begin(), s.open_steps.end(), end,
                                                   [](TimestampNs t, const OpenStep& o) {
                                                     return t < o.span.start_ns;
                                                   }) -
                                  s.open_steps.begin());
  std::vector<OpenStep*>& by_start = s.segment_steps;
  by_start.clear();
  IdleSets sets;
  IntervalSet::Builder in_steps;
  for (size_t k = 0; k < reach; ++k) {
    OpenStep& step = s.open_steps[k];
    if (!overlaps(step.span.start_ns, step.span.end_ns)) continue;
    by_start.push_back(&step);
    const IntervalSet::Span span(step.span.start_ns, step.span.end_ns);
    in_steps.Add(span);
    sets.steps.emplace_back(span, step.span.index);
  }
  sets.in_steps = std::move(in_steps).Build();

  // One pass over the intervals overlapping [begin, end), clipped to it:
  // host ranges by phase, device work by launching phase, CUDA calls by
  // the idle cause they stand for.
  for (auto& spans : s.phase_spans) spans.clear();
  for (auto& spans : s.device_spans) spans.clear();
  for (auto& spans : s.call_spans) spans.clear();
  bool calls = false;
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
  bool in_order = true;
  auto add_cause = [&](TimestampNs a, TimestampNs b, int cause) {
    in_order = in_order && (causes.empty() || a >= causes.back().end);
    if (in_order) causes.emplace_back(a, b, cause);
  };
  for (const Impl::Run& run : s.runs) {
    if (!reaches(run)) continue;
    for (size_t k = 0; k < run.intervals.size(); ++k) {
      const Interval& i = run.intervals[k];
      if (!overlaps(i.start_ns, i.end_ns)) continue;
      const TimestampNs a = std::max(begin, i.start_ns);
      const TimestampNs b = std::min(end, i.end_ns);
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
        int cause = GapAnalyzer::PhaseCause(Phase::kSync);
        if (i.kind == IntervalKind::kRuntimeCall) {
          // Matching the name on every call would cost more than the rest:
          // a run has only a few distinct call names.
          if (i.name >= s.call_cause.size()) s.call_cause.resize(i.name + 1, -1);
          if (s.call_cause[i.name] < 0) {
            s.call_cause[i.name] = static_cast<int8_t>(GapAnalyzer::CallCause(input_.name(i.name)));
          }
          cause = s.call_cause[i.name];
        }
        if (b > a) {
          s.call_spans[cause].emplace_back(a, b);
          add_cause(a, b, cause);
        }
        calls = true;
      }
    }
  }
  IntervalSet device_busy;
  for (int p = 0; p <= kPhaseCount; ++p) {
    if (s.device_spans[p].empty()) continue;
    const IntervalSet busy = IntervalSet::FromSpans(&s.device_spans[p]);
    s.device_busy_ns[p] += busy.Length();
    device_busy = device_busy.Union(busy);
  }

  // Phases: their union in the segment, and each open step's share of it,
  // in one sweep over the steps by start with a cursor in each union.
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
  for (OpenStep* step : by_start) {
    const TimestampNs a = std::max(begin, step->span.start_ns);
    const TimestampNs b = std::min(end, step->span.end_ns);
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
  IntervalSet host_busy;
  for (int j = 0; j < phases; ++j) {
    const auto phase = static_cast<Phase>(present[j]);
    if (IsComputePhase(phase)) {
      host_busy = host_busy.Union(covered[present[j]]);
    } else {
      sets.active[GapAnalyzer::PhaseCause(phase)] = std::move(covered[present[j]]);
    }
  }
  for (int c = 0; calls && c < kIdleCauseCount; ++c) {
    if (s.call_spans[c].empty()) continue;
    sets.active[c] = sets.active[c].Union(IntervalSet::FromSpans(&s.call_spans[c]));
  }

  if (in_order) sets.by_start.swap(causes);  // swapped back below: its room stays

  // Idle, for each busy source the run may end up with.
  const int row_mode = s.device_seen ? kDeviceMode : kHostMode;
  for (int mode = 0; mode < kModes; ++mode) {
    if (mode == kHostMode && s.device_seen) continue;
    if (mode == kDeviceMode && !options_.device && !s.device_seen) continue;
    ModeSums& sums = s.idle[mode];
    std::swap(sets.busy, mode == kDeviceMode ? device_busy : host_busy);
    if (!s.steps_seen) {
      const TimestampNs a = std::max(begin, options_.process_start_ns);
      const TimestampNs b = final ? nostep_end : end;
      if (a < b) {
        sums.nostep.Add(GapAnalyzer::Tally(IntervalSet::Range(a, b), sets, &sums.nostep.gaps));
      }
    } else if (s.window_known) {
      const TimestampNs a = std::max(begin, s.window_first_start);
      const TimestampNs b = std::min(end, s.window_last_end);
      if (a < b) {
        const IdleBreakdown idle =
            GapAnalyzer::Tally(IntervalSet::Range(a, b), sets, &sums.committed.gaps);
        sums.committed.Add(idle);
        if (mode == row_mode) {
          for (size_t k = 0; k < by_start.size(); ++k) {
            const StepIdle& step = idle.idle_per_step[k];
            by_start[k]->idle_ns += step.idle_ns;
            for (int c = 0; c < kIdleCauseCount; ++c) by_start[k]->cause_ns[c] += step.by_cause[c];
          }
        }
      }
      const TimestampNs tail_start = std::max(a, s.window_last_end);
      if (!final && !s.window_closed && tail_start < end) {
        sums.tail.Add(
            GapAnalyzer::Tally(IntervalSet::Range(tail_start, end), sets, &sums.tail.gaps));
      }
    }
    std::swap(sets.busy, mode == kDeviceMode ? device_busy : host_busy);
  }
  if (in_order) sets.by_start.swap(causes);

  // Steps now behind the watermark: their rows, in start order.
  auto reached = s.open_steps.begin() + static_cast<std::ptrdiff_t>(reach);
  auto ended = [&](const OpenStep& step) { return final || step.span.end_ns <= end; };
  // Mostly the done ones come first already (steps that do not nest). A
  // stable partition keeps them by start, as open_steps is: rows are
  // written from where they are, then taken off the front.
  auto first_open = std::is_partitioned(s.open_steps.begin(), reached, ended)
                        ? std::partition_point(s.open_steps.begin(), reached, ended)
                        : std::stable_partition(s.open_steps.begin(), reached, ended);
  for (auto done = s.open_steps.begin(); done != first_open; ++done) {
    const OpenStep& step = *done;
    s.steps.Add(step.span);
    const TimestampNs length = step.span.end_ns - step.span.start_ns;
    s.in_steps_ns += length;
    if (step.in_window) s.window_samples += step.span.samples;
    Report::Step row;
    row.index = step.span.index;
    row.start_s = (step.span.start_ns - options_.process_start_ns) / 1e9;
    row.duration_ms = length / 1e6;
    row.samples = step.span.samples;
    for (int p = 0; p < kPhaseCount; ++p) {
      row.phase_ms[p] = step.phase_ns[p] / 1e6;
      if (step.phase_ns[p] <= 0) continue;
      s.phase_ms[p].Add(step.phase_ns[p] / 1e6);
      s.phase_in_steps_ns[p] += step.phase_ns[p];
    }
    row.idle_ms = step.idle_ns / 1e6;
    int top = -1;
    for (int c = 0; c < kIdleCauseCount; ++c) {
      if (step.cause_ns[c] > (top < 0 ? 0 : step.cause_ns[top])) top = c;
    }
    if (top >= 0) row.top_cause = IdleCauseName(top);
    const Tagged tag = s.tagged.Take(step.span.index);
    row.sync_ms = tag.sync_ns / 1e6;
    row.data_wait_ms = tag.data_wait_ns / 1e6;
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

  // Release what is behind the watermark; hand device work to the trace.
  const TimestampNs history_end =
      (s.device_seen || options_.device) && !final ? end - options_.launch_horizon_ns : kMaxTime;
  for (const Impl::Run& run : s.runs) {
    if (!s.device_side_seen || !reaches(run)) continue;
    for (const Interval& i : run.intervals) {
      const bool device_side = IsDeviceSide(i.kind);
      const bool passed = final || (i.end_ns <= end && i.start_ns < end);
      // Not released before: it ended in this segment, or it starts in it
      // (a zero-length row at `begin` ended at the last segment's end).
      if (device_side && passed && (i.end_ns > begin || i.start_ns >= begin || run.fresh)) {
        scratch.push_back(i);
        s.hta.Add(i);
      }
    }
  }
  if (!scratch.empty() && device_sink_) device_sink_(input_);
  scratch.clear();
  while (!s.step_history.empty() && s.step_history.front().end_ns <= history_end) {
    s.step_history.pop_front();
  }
  // Compact the runs the segment reached; drop the empty ones. HTA's fold
  // may take the rows that start before every device row or call still to
  // be released (these began before `end` but have not ended).
  TimestampNs hta_horizon = end;
  size_t kept_runs = 0;
  for (size_t r = 0; r < s.runs.size(); ++r) {
    Impl::Run& run = s.runs[r];
    if (reaches(run)) {
      size_t kept = 0;
      TimestampNs min_start = kMaxTime;
      for (size_t k = 0; k < run.intervals.size(); ++k) {
        const Interval& i = run.intervals[k];
        bool keep = !final && (i.end_ns > end || i.start_ns >= end);
        if (!keep && !final &&
            (i.kind == IntervalKind::kHostRange || i.kind == IntervalKind::kRuntimeCall)) {
          keep = i.end_ns > history_end;
        }
        if (!keep) continue;
        if (i.end_ns > end && IsDeviceSide(i.kind)) hta_horizon = std::min(hta_horizon, i.start_ns);
        run.intervals[kept] = i;
        run.flags[kept] = run.flags[k];
        min_start = std::min(min_start, i.start_ns);
        ++kept;
      }
      s.pending -= run.intervals.size() - kept;
      run.intervals.resize(kept);
      run.flags.resize(kept);
      // A run kept for a few long ranges or launch history gives back the
      // room of the batch it came in (held() counts intervals, not room).
      if (kept > 0 && run.intervals.capacity() > 4 * kept + 256) {
        run.intervals.shrink_to_fit();
        run.flags.shrink_to_fit();
      }
      run.min_start = min_start;
    }
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
  watermark_ = end;
}

void RunFold::Finish(const RunClock& clock, Report* report) {
  Impl& s = *impl_;
  Take();
  for (const TimestampNs end : SegmentEnds(kMaxTime)) {
    if (end < kMaxTime && end < clock.finish_ns) Segment(end, false, end);
  }
  Segment(kMaxTime, true, clock.finish_ns);

  const StepStats steps = s.steps.Summarize();
  Report::Timing& timing = report->timing;
  timing.steps = s.steps.count();
  timing.warmup_steps = steps.warmup_steps;
  timing.warmup_rule = steps.warmup_rule;
  timing.total_s = (clock.finish_ns - clock.process_start_ns) / 1e9;
  if (clock.submit_unix_s) {
    timing.queue_delay_s = clock.process_start_unix_s - *clock.submit_unix_s;
  }
  if (s.steps.count() > 0) {
    timing.startup_s = (s.steps.first_start() - clock.process_start_ns) / 1e9;
    timing.steps_s = (s.steps.last_end() - s.steps.first_start()) / 1e9;
  }
  report->throughput.steady_steps = steps.steady_steps;
  report->throughput.steady_steps_per_s = steps.steady_steps_per_s;
  report->throughput.steady_samples_per_s = steps.steady_samples_per_s;
  report->throughput.median_step_ms = steps.median_step_ms;
  report->resource_hours = report->resource_request.accelerators * timing.total_s / 3600.0;

  report->phases.clear();
  for (int p = 0; p < kPhaseCount; ++p) {
    if (!s.phase_seen[p]) continue;
    PhaseStat stat;
    stat.phase = std::string(PhaseName(static_cast<Phase>(p)));
    stat.steps = s.phase_ms[p].count();
    stat.median_ms = s.phase_ms[p].Median();
    stat.p90_ms = s.phase_ms[p].Percentile(90);
    stat.max_ms = s.phase_ms[p].max();
    stat.total_s = s.phase_total_ns[p] / 1e9;
    stat.share_of_steps =
        s.in_steps_ns > 0 ? static_cast<double>(s.phase_in_steps_ns[p]) / s.in_steps_ns : 0;
    report->phases.push_back(std::move(stat));
  }

  const int mode = s.device_seen ? kDeviceMode : kHostMode;
  const IdleSums& sums = s.steps_seen ? s.idle[mode].committed : s.idle[mode].nostep;
  Report::Idle& idle = report->idle;
  idle.idle_s = sums.idle / 1e9;
  idle.window_s = sums.window / 1e9;
  idle.share = sums.window > 0 ? static_cast<double>(sums.idle) / sums.window : 0;
  idle.busy_source = s.device_seen ? "device_activity" : "cpu_compute_phases";
  idle.by_cause.clear();
  std::vector<std::pair<std::string, TimestampNs>> causes;
  for (int c = 0; c < kIdleCauseCount; ++c) {
    if (sums.cause[c] > 0) causes.emplace_back(std::string(IdleCauseName(c)), sums.cause[c]);
  }
  std::stable_sort(causes.begin(), causes.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [cause, ns] : causes) idle.by_cause.emplace_back(cause, ns / 1e9);
  idle.top_cause = causes.empty() ? "" : causes.front().first;

  IdleBreakdown described;
  sums.gaps.Describe(&described);
  FillGaps(described, options_.process_start_ns, &report->gaps);

  Report::Utilization& use = report->utilization;
  use.allocated_device_hours = report->resource_hours;
  use.busy_device_hours = sums.busy / 1e9 / 3600.0;
  const int64_t samples = s.steps_seen ? s.window_samples : 0;
  use.samples_per_busy_device_s = sums.busy > 0 ? samples / (sums.busy / 1e9) : 0;

  auto& by_phase = report->device_timeline.busy_s_by_phase;
  by_phase.clear();
  std::vector<std::pair<std::string, TimestampNs>> busy;
  for (int p = 0; p <= kPhaseCount; ++p) {
    if (!s.device_busy_seen[p]) continue;
    busy.emplace_back(p == kPhaseCount ? std::string("unattributed")
                                       : std::string(PhaseName(static_cast<Phase>(p))),
                      s.device_busy_ns[p]);
  }
  std::stable_sort(busy.begin(), busy.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [phase, ns] : busy) by_phase.emplace_back(phase, ns / 1e9);
  FillHta(s.hta.Finish(), s.hta.late_rows(), &report->device_timeline.hta);
  report->events.late = late_;
  report->recommendation = Recommend(*report);
}

}  // namespace trainscope::analysis
