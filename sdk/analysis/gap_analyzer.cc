// Idle time and its causes. See gap_analyzer.h.
#include "sdk/analysis/gap_analyzer.h"

#include <algorithm>
#include <array>
#include <limits>
#include <utility>
#include <tuple>
#include <vector>

#include "sdk/analysis/interval_set.h"

namespace trainscope::analysis {
namespace {

using Spans = std::vector<IntervalSet::Span>;

// Causes in priority order; the first six are the non-compute phases.
enum Cause { kDataWait, kH2D, kSync, kCheckpoint, kEval, kOtherPhase, kCopyCall, kLaunch,
             kCudaApi, kHost, kOutside, kCauseCount };
static_assert(kCauseCount == kIdleCauseCount);
constexpr std::array<const char*, kCauseCount> kCauseNames = {
    "data_wait", "h2d",         "sync",         "checkpoint", "eval",           "other",
    kCauseCopyCall, kCauseLaunch, kCauseCudaApi, kCauseHost, kCauseOutsideStep};

int CallCause(const std::string& name) {
  if (GapAnalyzer::IsBlockingCall(name)) return kSync;
  const bool copy = name.rfind("cudaMemcpy", 0) == 0 || name.rfind("cuMemcpy", 0) == 0 ||
                    name.rfind("cudaMemset", 0) == 0 || name.rfind("cuMemset", 0) == 0;
  if (copy) return kCopyCall;
  if (name.find("Launch") != std::string::npos) return kLaunch;
  return kCudaApi;
}

int PhaseCause(Phase phase) {
  switch (phase) {
    case Phase::kDataWait: return kDataWait;
    case Phase::kHostToDevice: return kH2D;
    case Phase::kSync: return kSync;
    case Phase::kCheckpoint: return kCheckpoint;
    case Phase::kEval: return kEval;
    default: return kOtherPhase;
  }
}

bool IsHostRange(IntervalKind kind) {
  return kind == IntervalKind::kHostRange || kind == IntervalKind::kAsyncRange;
}

constexpr TimestampNs kUs = 1000;
const std::array<std::pair<const char*, TimestampNs>, 7> kBuckets = {{
    {"<10us", 10 * kUs},
    {"10us-100us", 100 * kUs},
    {"100us-1ms", 1000 * kUs},
    {"1ms-10ms", 10000 * kUs},
    {"10ms-100ms", 100000 * kUs},
    {"100ms-1s", 1000000 * kUs},
    {">=1s", std::numeric_limits<TimestampNs>::max()},
}};


// One device track's busy time inside the window, as a running union that
// holds only the current merged span: a sorted timeline gives each track's
// spans in start order, so nothing is stored. A span out of that order
// marks the track for a recount from the timeline (TrackBusyNs).
class TrackUnion {
 public:
  TrackUnion(TimestampNs window_start, TimestampNs window_end)
      : window_start_(window_start), window_end_(window_end) {}
  void Add(TimestampNs start, TimestampNs end) {
    ++count_;
    if (end <= start) return;
    if (open_ && start < last_start_) out_of_order_ = true;
    last_start_ = start;
    if (open_ && start <= merged_.second) {
      merged_.second = std::max(merged_.second, end);
      return;
    }
    Close();
    merged_ = {start, end};
    open_ = true;
  }
  // The busy time within the window. Call once, after the last Add.
  TimestampNs Finish() {
    Close();
    return total_;
  }
  int64_t count() const { return count_; }
  bool out_of_order() const { return out_of_order_; }

 private:
  void Close() {
    if (!open_) return;
    const TimestampNs start = std::max(window_start_, merged_.first);
    const TimestampNs end = std::min(window_end_, merged_.second);
    if (end > start) total_ += end - start;
    open_ = false;
  }
  TimestampNs window_start_;
  TimestampNs window_end_;
  IntervalSet::Span merged_{0, 0};
  TimestampNs last_start_ = 0;
  TimestampNs total_ = 0;
  int64_t count_ = 0;
  bool open_ = false;
  bool out_of_order_ = false;
};

// The busy time of one device track within `window`, its spans in any order.
TimestampNs TrackBusyNs(const Timeline& timeline, uint32_t track, const IntervalSet& window) {
  Spans spans;
  for (const Interval& i : timeline.intervals()) {
    if (i.track == track && IsDeviceKind(i.kind)) spans.emplace_back(i.start_ns, i.end_ns);
  }
  return IntervalSet::FromUnsorted(std::move(spans)).Intersect(window).Length();
}

// What Analyze reads from the timeline, gathered in one pass. The builders
// merge as spans arrive, so a sorted timeline is never copied nor sorted.
struct Extracted {
  bool has_device = false;
  IntervalSet::Builder busy;
  IntervalSet::Builder in_steps;
  std::array<IntervalSet::Builder, kCauseCount> causes;
  std::vector<TrackUnion> tracks;  // by track index
  std::vector<std::pair<IntervalSet::Span, int64_t>> steps;
};

Extracted Extract(const Timeline& timeline, TimestampNs window_start, TimestampNs window_end,
                  BusySource source) {
  Extracted out;
  out.has_device = source == BusySource::kAuto
                       ? std::any_of(timeline.intervals().begin(), timeline.intervals().end(),
                                     [](const Interval& i) { return IsDeviceKind(i.kind); })
                       : source == BusySource::kDevice;
  out.tracks.assign(timeline.tracks().size(), TrackUnion(window_start, window_end));
  std::vector<int8_t> call_cause;  // CallCause by name id, -1 until known
  for (const Interval& i : timeline.intervals()) {
    const IntervalSet::Span span(i.start_ns, i.end_ns);
    // Busy time and causes count only within the window (idle is clipped to
    // it): what lies wholly outside is skipped. Steps and device tracks are
    // all listed, as before.
    const bool outside = i.end_ns <= window_start || i.start_ns >= window_end;
    if (i.kind == IntervalKind::kStep) {
      out.in_steps.Add(span);
      out.steps.emplace_back(span, i.step);
    } else if (IsDeviceKind(i.kind)) {
      if (out.has_device && !outside) out.busy.Add(span);
      out.tracks[i.track].Add(i.start_ns, i.end_ns);
    } else if (outside) {
      continue;
    } else if (i.kind == IntervalKind::kSyncCall) {
      out.causes[kSync].Add(span);
    } else if (i.kind == IntervalKind::kRuntimeCall) {
      // Matching the name on every call would cost half the pass; a trace
      // has only a few distinct call names.
      if (i.name >= call_cause.size()) call_cause.resize(i.name + 1, -1);
      if (call_cause[i.name] < 0) {
        call_cause[i.name] = static_cast<int8_t>(CallCause(timeline.name(i.name)));
      }
      out.causes[call_cause[i.name]].Add(span);
    } else if (IsHostRange(i.kind)) {
      if (IsComputePhase(i.phase)) {
        if (!out.has_device) out.busy.Add(span);
      } else {
        out.causes[PhaseCause(i.phase)].Add(span);
      }
    }
  }
  return out;
}

// Blame: each cause takes what is left of the idle time while it is active.
std::array<IntervalSet, kCauseCount> Blame(const IntervalSet& idle, const IntervalSet& in_steps,
                                           std::array<IntervalSet::Builder, kCauseCount>& causes) {
  std::array<IntervalSet, kCauseCount> blamed;
  IntervalSet remaining = idle;
  for (int c = 0; c < kHost; ++c) {
    if (causes[c].count() == 0) continue;
    const IntervalSet active = std::move(causes[c]).Build();
    blamed[c] = remaining.Intersect(active);
    remaining = remaining.Subtract(active);
  }
  blamed[kHost] = remaining.Intersect(in_steps);
  blamed[kOutside] = remaining.Subtract(in_steps);
  return blamed;
}

// Gap lengths: histogram and the longest ones with their step and cause;
// idle time per step.
// The length of `spans` (sorted, disjoint) within each step's span, for
// steps sorted by start: out(k, ns) for each. O(spans + steps) when steps do
// not nest.
template <typename Out>
void SweepWithin(const Spans& spans,
                 const std::vector<std::pair<IntervalSet::Span, int64_t>>& steps, Out&& out) {
  size_t first = 0;  // the first span ending after the current step's start
  for (size_t k = 0; k < steps.size(); ++k) {
    const auto [a, b] = steps[k].first;
    while (first < spans.size() && spans[first].second <= a) ++first;
    TimestampNs within = 0;
    for (size_t j = first; a < b && j < spans.size() && spans[j].first < b; ++j) {
      within += std::min(b, spans[j].second) - std::max(a, spans[j].first);
    }
    out(k, within);
  }
}

void DescribeGaps(const IntervalSet& idle, const std::array<IntervalSet, kCauseCount>& blamed,
                  std::vector<std::pair<IntervalSet::Span, int64_t>> steps,
                  IdleBreakdown* result) {
  for (const auto& [label, upper] : kBuckets) result->histogram.push_back({label, upper, 0, 0});
  std::vector<IntervalSet::Span> gaps = idle.spans();
  for (const auto& gap : gaps) {
    const TimestampNs length = gap.second - gap.first;
    result->largest_gap_ns = std::max(result->largest_gap_ns, length);
    for (GapBucket& bucket : result->histogram) {
      if (length < bucket.upper_ns) {
        ++bucket.count;
        bucket.total_ns += length;
        break;
      }
    }
  }
  std::sort(steps.begin(), steps.end());
  auto step_at = [&steps](TimestampNs t) -> int64_t {
    auto it = std::upper_bound(steps.begin(), steps.end(), t,
                               [](TimestampNs v, const auto& s) { return v < s.first.first; });
    if (it == steps.begin()) return -1;
    --it;
    return t < it->first.second ? it->second : -1;
  };
  const size_t top = std::min<size_t>(10, gaps.size());
  std::partial_sort(gaps.begin(), gaps.begin() + top, gaps.end(), [](const auto& a, const auto& b) {
    return a.second - a.first > b.second - b.first;
  });
  for (size_t g = 0; g < top; ++g) {
    Gap gap;
    gap.start_ns = gaps[g].first;
    gap.duration_ns = gaps[g].second - gaps[g].first;
    gap.step = step_at(gap.start_ns);
    TimestampNs best = -1;
    for (int c = 0; c < kCauseCount; ++c) {
      const TimestampNs ns = blamed[c].LengthWithin(gaps[g].first, gaps[g].second);
      if (ns > best) {
        best = ns;
        gap.cause = kCauseNames[c];
      }
    }
    result->largest_gaps.push_back(gap);
  }
  // Each step's idle and causes: one sweep over the steps (by start) per set.
  result->idle_per_step.resize(steps.size());
  for (size_t k = 0; k < steps.size(); ++k) result->idle_per_step[k].step = steps[k].second;
  SweepWithin(idle.spans(), steps,
              [&](size_t k, TimestampNs ns) { result->idle_per_step[k].idle_ns = ns; });
  for (int c = 0; c < kCauseCount; ++c) {
    if (blamed[c].empty()) continue;
    SweepWithin(blamed[c].spans(), steps,
                [&](size_t k, TimestampNs ns) { result->idle_per_step[k].by_cause[c] = ns; });
  }
}

// Per device track, by (device, stream).
void DescribeStreams(const Timeline& timeline, const IntervalSet& window,
                     std::vector<TrackUnion>& tracks, IdleBreakdown* result) {
  for (uint32_t track = 0; track < tracks.size(); ++track) {
    if (tracks[track].count() == 0) continue;
    StreamActivity activity;
    activity.device = timeline.tracks()[track].pid;
    activity.stream = timeline.tracks()[track].tid;
    activity.intervals = tracks[track].count();
    // One pass when the track came in order and the window is one span.
    activity.busy_ns = tracks[track].out_of_order() || window.spans().size() > 1
                           ? TrackBusyNs(timeline, track, window)
                           : tracks[track].Finish();
    activity.busy_share =
        result->window_ns > 0 ? static_cast<double>(activity.busy_ns) / result->window_ns : 0;
    result->streams.push_back(activity);
  }
  std::sort(result->streams.begin(), result->streams.end(), [](const auto& a, const auto& b) {
    return std::tie(a.device, a.stream) < std::tie(b.device, b.stream);
  });
}

}  // namespace

std::string_view IdleCauseName(int cause) {
  return cause >= 0 && cause < kCauseCount ? kCauseNames[cause] : "";
}

bool GapAnalyzer::IsBlockingCall(const std::string& name) {
  if (name.find("Synchronize") != std::string::npos) return true;
  const bool copy = name.rfind("cudaMemcpy", 0) == 0 || name.rfind("cuMemcpy", 0) == 0 ||
                    name.rfind("cudaMemset", 0) == 0 || name.rfind("cuMemset", 0) == 0;
  return copy && name.find("Async") == std::string::npos;
}

IdleBreakdown GapAnalyzer::Analyze(const Timeline& timeline, TimestampNs window_start,
                                   TimestampNs window_end, BusySource source) {
  return AnalyzeWithin(timeline, IntervalSet::Range(window_start, window_end), source);
}

IdleBreakdown GapAnalyzer::AnalyzeWithin(const Timeline& timeline, const IntervalSet& window,
                                         BusySource source) {
  // The spans' bounds: what lies wholly outside them is skipped.
  const TimestampNs window_start = window.empty() ? 0 : window.spans().front().first;
  const TimestampNs window_end = window.empty() ? 0 : window.spans().back().second;
  Extracted extracted = Extract(timeline, window_start, window_end, source);
  const IntervalSet busy = std::move(extracted.busy).Build().Intersect(window);
  const IntervalSet idle = window.Subtract(busy);
  const IntervalSet in_steps = std::move(extracted.in_steps).Build();

  IdleBreakdown result;
  result.busy_source = extracted.has_device ? "device_activity" : "cpu_compute_phases";
  result.window_ns = window.Length();
  result.busy_ns = busy.Length();
  result.idle_ns = idle.Length();
  result.share = result.window_ns > 0 ? static_cast<double>(result.idle_ns) / result.window_ns : 0;
  result.gaps = static_cast<int64_t>(idle.spans().size());

  const std::array<IntervalSet, kCauseCount> blamed = Blame(idle, in_steps, extracted.causes);
  for (int c = 0; c < kCauseCount; ++c) {
    const TimestampNs ns = blamed[c].Length();
    result.cause_ns[c] = ns;
    if (ns > 0) result.by_cause.emplace_back(kCauseNames[c], ns);
  }
  std::stable_sort(result.by_cause.begin(), result.by_cause.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });

  DescribeGaps(idle, blamed, std::move(extracted.steps), &result);
  DescribeStreams(timeline, window, extracted.tracks, &result);
  return result;
}

}  // namespace trainscope::analysis
