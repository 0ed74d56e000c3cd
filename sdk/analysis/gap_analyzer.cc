// Idle time and its causes. See gap_analyzer.h.
#include "sdk/analysis/gap_analyzer.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <tuple>

#include "sdk/analysis/interval_set.h"

namespace trainscope::analysis {
namespace {

using Spans = std::vector<IntervalSet::Span>;

// Causes in priority order; the first six are the non-compute phases.
enum Cause { kDataWait, kH2D, kSync, kCheckpoint, kEval, kOtherPhase, kCopyCall, kLaunch,
             kCudaApi, kHost, kOutside, kCauseCount };
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

}  // namespace

bool GapAnalyzer::IsBlockingCall(const std::string& name) {
  if (name.find("Synchronize") != std::string::npos) return true;
  const bool copy = name.rfind("cudaMemcpy", 0) == 0 || name.rfind("cuMemcpy", 0) == 0 ||
                    name.rfind("cudaMemset", 0) == 0 || name.rfind("cuMemset", 0) == 0;
  return copy && name.find("Async") == std::string::npos;
}

IdleBreakdown GapAnalyzer::Analyze(const Timeline& timeline, TimestampNs window_start,
                                   TimestampNs window_end) {
  const bool has_device =
      std::any_of(timeline.intervals().begin(), timeline.intervals().end(),
                  [](const Interval& i) { return IsDeviceKind(i.kind); });
  Spans busy_spans;
  Spans step_spans;
  std::array<Spans, kCauseCount> cause_spans;
  std::map<uint32_t, Spans> stream_spans;
  std::vector<std::pair<IntervalSet::Span, int64_t>> steps;
  for (const Interval& i : timeline.intervals()) {
    const IntervalSet::Span span(i.start_ns, i.end_ns);
    if (i.kind == IntervalKind::kStep) {
      step_spans.push_back(span);
      steps.emplace_back(span, i.step);
    } else if (IsDeviceKind(i.kind)) {
      if (has_device) busy_spans.push_back(span);
      stream_spans[i.track].push_back(span);
    } else if (i.kind == IntervalKind::kSyncCall) {
      cause_spans[kSync].push_back(span);
    } else if (i.kind == IntervalKind::kRuntimeCall) {
      cause_spans[CallCause(timeline.name(i.name))].push_back(span);
    } else if (IsHostRange(i.kind)) {
      if (IsComputePhase(i.phase)) {
        if (!has_device) busy_spans.push_back(span);
      } else {
        cause_spans[PhaseCause(i.phase)].push_back(span);
      }
    }
  }

  const IntervalSet window = IntervalSet::Range(window_start, window_end);
  const IntervalSet busy = IntervalSet::FromUnsorted(std::move(busy_spans)).Intersect(window);
  const IntervalSet idle = window.Subtract(busy);
  const IntervalSet in_steps = IntervalSet::FromUnsorted(std::move(step_spans));

  IdleBreakdown result;
  result.busy_source = has_device ? "device_activity" : "cpu_compute_phases";
  result.window_ns = window.Length();
  result.busy_ns = busy.Length();
  result.idle_ns = idle.Length();
  result.share = result.window_ns > 0 ? static_cast<double>(result.idle_ns) / result.window_ns : 0;
  result.gaps = static_cast<int64_t>(idle.spans().size());

  // Blame: each cause takes what is left of the idle time while it is active.
  std::array<IntervalSet, kCauseCount> blamed;
  IntervalSet remaining = idle;
  for (int c = 0; c < kHost; ++c) {
    if (cause_spans[c].empty()) continue;
    const IntervalSet active = IntervalSet::FromUnsorted(std::move(cause_spans[c]));
    blamed[c] = remaining.Intersect(active);
    remaining = remaining.Subtract(active);
  }
  blamed[kHost] = remaining.Intersect(in_steps);
  blamed[kOutside] = remaining.Subtract(in_steps);
  for (int c = 0; c < kCauseCount; ++c) {
    const TimestampNs ns = blamed[c].Length();
    if (ns > 0) result.by_cause.emplace_back(kCauseNames[c], ns);
  }
  std::stable_sort(result.by_cause.begin(), result.by_cause.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });

  // Gap lengths: histogram and the longest ones with their step and cause.
  for (const auto& [label, upper] : kBuckets) result.histogram.push_back({label, upper, 0, 0});
  std::vector<IntervalSet::Span> gaps = idle.spans();
  for (const auto& gap : gaps) {
    const TimestampNs length = gap.second - gap.first;
    result.largest_gap_ns = std::max(result.largest_gap_ns, length);
    for (GapBucket& bucket : result.histogram) {
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
    result.largest_gaps.push_back(gap);
  }

  for (const auto& [span, index] : steps) {
    result.idle_per_step.emplace_back(index, idle.LengthWithin(span.first, span.second));
  }
  for (auto& [track, spans] : stream_spans) {
    StreamActivity activity;
    activity.device = timeline.tracks()[track].pid;
    activity.stream = timeline.tracks()[track].tid;
    activity.intervals = static_cast<int64_t>(spans.size());
    activity.busy_ns = IntervalSet::FromUnsorted(std::move(spans)).Intersect(window).Length();
    activity.busy_share =
        result.window_ns > 0 ? static_cast<double>(activity.busy_ns) / result.window_ns : 0;
    result.streams.push_back(activity);
  }
  std::sort(result.streams.begin(), result.streams.end(), [](const auto& a, const auto& b) {
    return std::tie(a.device, a.stream) < std::tie(b.device, b.stream);
  });
  return result;
}

}  // namespace trainscope::analysis
