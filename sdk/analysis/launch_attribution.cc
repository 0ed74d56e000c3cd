// Device work -> launching phase. See launch_attribution.h.
#include "sdk/analysis/launch_attribution.h"

#include <algorithm>
#include <array>
#include <unordered_map>

#include "sdk/analysis/interval_set.h"

namespace trainscope::analysis {
namespace {

// One thread's ranges flattened into disjoint segments, each labelled with
// the innermost range open there.
struct Segment {
  TimestampNs start_ns;
  TimestampNs end_ns;
  int64_t step;
  Phase phase;
};

std::vector<Segment> Flatten(std::vector<const Interval*> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const Interval* a, const Interval* b) {
    return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->end_ns > b->end_ns;
  });
  std::vector<Segment> segments;
  std::vector<const Interval*> open;  // the stack of enclosing ranges
  TimestampNs cursor = 0;
  auto emit = [&](TimestampNs until) {
    if (!open.empty() && until > cursor) {
      segments.push_back({cursor, until, open.back()->step, open.back()->phase});
    }
    cursor = std::max(cursor, until);
  };
  for (const Interval* r : ranges) {
    while (!open.empty() && open.back()->end_ns <= r->start_ns) {
      emit(open.back()->end_ns);
      open.pop_back();
    }
    emit(r->start_ns);
    cursor = r->start_ns;
    open.push_back(r);
  }
  while (!open.empty()) {
    emit(open.back()->end_ns);
    open.pop_back();
  }
  return segments;
}

// The segment of `track` open at `t`, or null.
const Segment* SegmentAt(const std::unordered_map<uint32_t, std::vector<Segment>>& segments,
                         uint32_t track, TimestampNs t) {
  auto it = segments.find(track);
  if (it == segments.end()) return nullptr;
  const std::vector<Segment>& s = it->second;
  auto seg = std::upper_bound(s.begin(), s.end(), t,
                              [](TimestampNs v, const Segment& g) { return v < g.start_ns; });
  if (seg == s.begin() || t >= (--seg)->end_ns) return nullptr;
  return &*seg;
}

// The steps of a timeline by start, to find the one open at a time: the
// latest-starting step that contains it (steps of one thread do not overlap;
// `reach[k]` is the largest end among the first k + 1, to stop the walk).
struct StepsByStart {
  std::vector<const Interval*> steps;
  std::vector<TimestampNs> reach;

  const Interval* At(TimestampNs t) const {
    auto k = std::upper_bound(steps.begin(), steps.end(), t,
                              [](TimestampNs v, const Interval* s) { return v < s->start_ns; }) -
             steps.begin();
    while (k-- > 0 && reach[k] > t) {
      if (steps[k]->end_ns > t) return steps[k];
    }
    return nullptr;
  }
};

}  // namespace

LaunchAttribution AttributeLaunches(Timeline* timeline) {
  const std::vector<Interval>& intervals = timeline->intervals();
  std::unordered_map<uint32_t, std::vector<const Interval*>> ranges_by_track;
  std::unordered_map<int64_t, const Interval*> calls;
  StepsByStart steps;
  for (const Interval& i : intervals) {
    if (i.kind == IntervalKind::kHostRange) ranges_by_track[i.track].push_back(&i);
    if (i.kind == IntervalKind::kRuntimeCall && i.value >= 0) calls[i.value] = &i;
    if (i.kind == IntervalKind::kStep) steps.steps.push_back(&i);
  }
  std::unordered_map<uint32_t, std::vector<Segment>> segments;
  for (auto& [track, ranges] : ranges_by_track) segments[track] = Flatten(std::move(ranges));
  std::sort(steps.steps.begin(), steps.steps.end(),
            [](const Interval* a, const Interval* b) { return a->start_ns < b->start_ns; });
  for (const Interval* s : steps.steps) {
    steps.reach.push_back(steps.reach.empty() ? s->end_ns
                                              : std::max(steps.reach.back(), s->end_ns));
  }

  LaunchAttribution result;
  std::array<std::vector<IntervalSet::Span>, kPhaseCount + 1> busy;  // last: unattributed
  for (Interval& i : timeline->mutable_intervals()) {
    if (!IsDeviceKind(i.kind)) continue;
    bool found = false;
    auto call = calls.find(i.value);
    if (i.value >= 0 && call != calls.end()) {
      const TimestampNs t = call->second->start_ns;
      const Segment* seg = SegmentAt(segments, call->second->track, t);
      if (seg == nullptr && segments.count(call->second->track) == 0) {
        // A thread that holds no ranges (autograd's device threads): the
        // phase open on the thread that owns the step open at the call. A
        // thread with ranges of its own (a loader, a side thread) keeps
        // its launches outside them unattributed.
        const Interval* step = steps.At(t);
        if (step != nullptr && step->track != call->second->track) {
          seg = SegmentAt(segments, step->track, t);
          if (seg != nullptr) ++result.from_step_thread;
        }
      }
      if (seg != nullptr) {
        i.step = seg->step;
        i.phase = seg->phase;
        found = true;
      }
    }
    ++(found ? result.attributed : result.unattributed);
    busy[found ? static_cast<int>(i.phase) : kPhaseCount].emplace_back(i.start_ns, i.end_ns);
  }
  for (int p = 0; p <= kPhaseCount; ++p) {
    if (busy[p].empty()) continue;
    const TimestampNs ns = IntervalSet::FromUnsorted(std::move(busy[p])).Length();
    result.busy_by_phase.emplace_back(p == kPhaseCount
                                          ? std::string("unattributed")
                                          : std::string(PhaseName(static_cast<Phase>(p))),
                                      ns);
  }
  std::stable_sort(result.busy_by_phase.begin(), result.busy_by_phase.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return result;
}

}  // namespace trainscope::analysis
