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
using fold::IdleBySource;
using fold::IdleSums;
using fold::kAttributed;
using fold::kLaunchFound;
using fold::kMaxTime;
using fold::kRunIntervals;
using fold::OpenStep;
using fold::SourceIdle;
using fold::StepLog;
using fold::Tagged;
using fold::TagTable;

}  // namespace

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

bool RunFold::InWindow(int64_t index) const {
  return (options_.window_first_step < 0 || index >= options_.window_first_step) &&
         (options_.window_end_step < 0 || index < options_.window_end_step);
}

// What the fold notes of an arriving interval, whichever run keeps it:
// lateness, steps, whether device work came, the time of tagged sync and
// data-wait ranges. True for a step (the open steps keep it).
bool RunFold::Note(const Interval& i) {
  Impl& s = *impl_;
  if (i.start_ns < watermark_) ++late_;
  if (i.kind == IntervalKind::kStep) {
    NoteStep(i);
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
}

// A step: into the launch history and the open steps (by start), and the
// idle analysis's step window.
void RunFold::NoteStep(const Interval& i) {
  Impl& s = *impl_;
  if (s.step_history.size() == Impl::kStepHistory) s.step_history.pop_front();
  s.step_history.push_back(i);
  OpenStep step;
  step.span = StepSpan{i.start_ns, i.end_ns, i.step, i.value};
  step.in_window = InWindow(i.step);
  s.steps_seen = true;
  if (step.in_window && !s.window_closed) {
    if (!s.window_known || i.start_ns < s.window_first_start) s.window_first_start = i.start_ns;
    if (!s.window_known || i.start_ns >= s.window_last_start) {
      // The window reaches this step: the idle since the last one is in it.
      for (SourceIdle& source : s.idle) {
        if (source.tail.empty()) continue;
        source.committed.Add(source.tail);
        source.tail = IdleSums();
      }
      s.window_last_start = i.start_ns;
      s.window_last_end = i.end_ns;
    }
    s.window_known = true;
  } else if (options_.window_end_step >= 0 && i.step >= options_.window_end_step) {
    s.window_closed = true;
    for (SourceIdle& source : s.idle) source.tail = IdleSums();
  }
  if (s.open_steps.empty() || s.open_steps.back().span.start_ns <= step.span.start_ns) {
    s.open_steps.push_back(step);
  } else {  // rare: a step that began before one already here
    auto at =
        std::upper_bound(s.open_steps.begin(), s.open_steps.end(), step.span.start_ns,
                         [](TimestampNs t, const OpenStep& o) { return t < o.span.start_ns; });
    s.open_steps.insert(at, step);
  }
}

RunFold::Impl::Run& RunFold::Impl::NewRun() {
  Run& run = runs.emplace_back();
  if (!spare_runs.empty()) {  // the room of a run released before
    run.intervals = std::move(spare_runs.back().intervals);
    run.flags = std::move(spare_runs.back().flags);
    spare_runs.pop_back();
  }
  return run;
}

void RunFold::Take() {
  Impl& s = *impl_;
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
    Impl::Run& run = s.NewRun();
    run.intervals.swap(in);
    // The input keeps room for a run's worth: no growth, no page faults.
    if (in.capacity() < kRunIntervals) in.reserve(kRunIntervals);
    run.flags.assign(run.intervals.size(), 0);
    for (const Interval& i : run.intervals) {
      Note(i);
      run.min_start = std::min(run.min_start, i.start_ns);
    }
    s.pending += run.intervals.size();
  } else {
    for (const Interval& i : in) {
      if (Note(i)) continue;
      // Small batches join the last fresh run.
      if (s.runs.empty() || !s.runs.back().fresh ||
          s.runs.back().intervals.size() >= kRunIntervals) {
        Impl::Run& run = s.NewRun();
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
  for (const TimestampNs end : SegmentEnds(watermark)) Segment(end);
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

std::vector<PhaseStat> RunFold::Phases() const {
  const Impl& s = *impl_;
  std::vector<PhaseStat> phases;
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
    phases.push_back(std::move(stat));
  }
  return phases;
}

IdleBreakdown RunFold::Idle() const {
  const Impl& s = *impl_;
  const SourceIdle& source = s.idle[s.device_seen ? BusySource::kDevice : BusySource::kHostPhases];
  const IdleSums& sums = s.steps_seen ? source.committed : source.nostep;
  IdleBreakdown idle;
  sums.gaps.Describe(&idle);
  idle.window_ns = sums.window;
  idle.busy_ns = sums.busy;
  idle.idle_ns = sums.idle;
  idle.share = sums.window > 0 ? static_cast<double>(sums.idle) / sums.window : 0;
  idle.busy_source = s.device_seen ? "device_activity" : "cpu_compute_phases";
  idle.cause_ns = sums.cause;
  SortCauses(&idle);
  return idle;
}

void RunFold::Finish(const RunClock& clock, Report* report) {
  Impl& s = *impl_;
  Take();
  for (const TimestampNs end : SegmentEnds(kMaxTime)) {
    if (end < kMaxTime && end < clock.finish_ns) Segment(end);
  }
  LastSegment(clock.finish_ns);

  RunFigures figures;
  figures.steps = s.steps.Summarize();
  figures.step_count = s.steps.count();
  figures.first_start_ns = s.steps.first_start();
  figures.last_end_ns = s.steps.last_end();
  figures.phases = Phases();
  figures.idle = Idle();
  figures.window_samples = s.steps_seen ? s.window_samples : 0;
  FillReport(figures, clock, report);

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
