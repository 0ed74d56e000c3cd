// A few steps of a timeline, reduced for drawing. See timeline_view.h.
#include "sdk/analysis/timeline_view.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "fmt/format.h"
#include "sdk/ground/json_writer.h"

namespace trainscope::analysis {
namespace {

using ground::Interval;
using ground::IntervalKind;
using ground::Timeline;
using ground::TrackKind;

constexpr std::string_view kClassNames[kViewClassCount - kPhaseCount] = {
    "step", "cuda_call", "cuda_sync", "kernel", "memcpy", "memset"};
// Apart from the phases' colours, so that the key never shows a pair.
constexpr uint32_t kClassColors[kViewClassCount - kPhaseCount] = {
    0xD8DEE4,  // step: light grey, under its phases
    0x6E7781,  // CUDA call: dark grey
    0x8B0000,  // synchronisation: dark red, the host waits
    0x1F3A68,  // kernel: navy
    0xD95F02,  // memcpy: burnt orange
    0xE7298A,  // memset: magenta
};

// a - b and a + b, saturated: trace times reach +-2^53 us (about 9e18 ns),
// where a difference no longer fits.
TimestampNs Sub(TimestampNs a, TimestampNs b) {
  TimestampNs r;
  if (!__builtin_sub_overflow(a, b, &r)) return r;
  return b < 0 ? std::numeric_limits<TimestampNs>::max() : std::numeric_limits<TimestampNs>::min();
}
TimestampNs Add(TimestampNs a, TimestampNs b) {
  TimestampNs r;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? std::numeric_limits<TimestampNs>::max() : std::numeric_limits<TimestampNs>::min();
}

uint8_t ClassOf(const Interval& iv) {
  switch (iv.kind) {
    case IntervalKind::kStep:
      return static_cast<uint8_t>(ViewClass::kStep);
    case IntervalKind::kRuntimeCall:
      return static_cast<uint8_t>(ViewClass::kRuntimeCall);
    case IntervalKind::kSyncCall:
      return static_cast<uint8_t>(ViewClass::kSyncCall);
    case IntervalKind::kKernel:
      return static_cast<uint8_t>(ViewClass::kKernel);
    case IntervalKind::kMemcpy:
      return static_cast<uint8_t>(ViewClass::kMemcpy);
    case IntervalKind::kMemset:
      return static_cast<uint8_t>(ViewClass::kMemset);
    case IntervalKind::kHostRange:
    case IntervalKind::kAsyncRange:
      break;
  }
  const auto phase = static_cast<unsigned>(iv.phase);
  return static_cast<uint8_t>(phase < kPhaseCount ? phase : static_cast<unsigned>(Phase::kOther));
}

// `name` in at most `limit` bytes: cut, not inside a UTF-8 sequence, and
// marked with "…" (3 bytes).
std::string CutName(std::string_view name, size_t limit) {
  if (name.size() <= limit) return std::string(name);
  constexpr std::string_view kMark = "\u2026";
  size_t end = limit > kMark.size() ? limit - kMark.size() : 0;
  while (end > 0 && (static_cast<unsigned char>(name[end]) & 0xC0) == 0x80) --end;
  return std::string(name.substr(0, end)).append(limit >= kMark.size() ? kMark : "");
}

struct Window {
  TimestampNs start = 0, end = 0;
  std::vector<ViewStep> steps;
  std::string choice;
  int64_t steps_in_timeline = 0;
};

// The timeline's steps by start, each once: a step recorded on two threads
// at once counts once; an index that comes again later (a numbering
// restarted) is another step. `first` and `last`: the timeline's bounds.
std::vector<ViewStep> DistinctSteps(const Timeline& timeline, TimestampNs* first,
                                    TimestampNs* last) {
  std::vector<ViewStep> steps;
  bool any = false;
  for (const Interval& iv : timeline.intervals()) {
    if (!any || iv.start_ns < *first) *first = iv.start_ns;
    if (!any || iv.end_ns > *last) *last = iv.end_ns;
    any = true;
    if (iv.kind == IntervalKind::kStep) steps.push_back({iv.step, iv.start_ns, iv.end_ns});
  }
  std::sort(steps.begin(), steps.end(), [](const ViewStep& a, const ViewStep& b) {
    return std::tie(a.start_ns, a.step) < std::tie(b.start_ns, b.step);
  });
  absl::flat_hash_map<int64_t, TimestampNs> kept_end;
  size_t kept = 0;
  for (const ViewStep& s : steps) {
    auto [it, added] = kept_end.try_emplace(s.step, s.end_ns);
    if (!added && it->second > s.start_ns) continue;  // overlaps the one kept
    it->second = s.end_ns;
    steps[kept++] = s;
  }
  steps.resize(kept);
  return steps;
}

// run[i]: steps from steps[i] on with consecutive indices, each starting
// within one of its predecessor's lengths after it ended (not across a gap
// between trace windows).
std::vector<int> ConsecutiveRuns(const std::vector<ViewStep>& steps) {
  std::vector<int> run(steps.size(), 1);
  for (size_t i = steps.size(); i-- > 1;) {
    const ViewStep& a = steps[i - 1];
    const ViewStep& b = steps[i];
    if (b.step == a.step + 1 && b.start_ns <= Add(a.end_ns, Sub(a.end_ns, a.start_ns))) {
      run[i - 1] = run[i] + 1;
    }
  }
  return run;
}

// The median run of `want` consecutive steps (see the header).
Window ChooseWindow(const Timeline& timeline, const TimelineViewOptions& options) {
  const int want = std::max(1, options.steps);
  TimestampNs first = 0, last = 0;
  const std::vector<ViewStep> steps = DistinctSteps(timeline, &first, &last);
  Window w;
  w.steps_in_timeline = static_cast<int64_t>(steps.size());
  if (steps.empty()) {
    w.start = first;
    w.end = Add(last, 1);  // the last interval, if it takes no time, inside
    w.choice = "The whole trace: it marks no steps.";
    return w;
  }
  const std::vector<int> run = ConsecutiveRuns(steps);
  // After the warm-up where the trace has as long a run there as anywhere;
  // else from every step (runs after it that are shorter are the trace's
  // slowest steps, kept one or two at a time: not typical).
  const bool prefer = options.steady_from_step != std::numeric_limits<int64_t>::min();
  int longest = 0, longest_after = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    longest = std::max(longest, run[i]);
    if (steps[i].step >= options.steady_from_step) longest_after = std::max(longest_after, run[i]);
  }
  const int k = std::max(1, std::min(want, longest));
  const bool after = prefer && longest_after >= k;
  std::vector<std::pair<TimestampNs, size_t>> candidates;
  size_t all = 0;  // runs of k anywhere
  for (size_t i = 0; i < steps.size(); ++i) {
    if (run[i] < k) continue;
    ++all;
    if (after && steps[i].step < options.steady_from_step) continue;
    candidates.emplace_back(Sub(steps[i + k - 1].end_ns, steps[i].start_ns), i);
  }
  std::sort(candidates.begin(), candidates.end());
  const size_t at = candidates[(candidates.size() - 1) / 2].second;
  w.steps.assign(steps.begin() + static_cast<ptrdiff_t>(at),
                 steps.begin() + static_cast<ptrdiff_t>(at) + k);
  w.start = w.steps.front().start_ns;
  w.end = w.steps.front().end_ns;
  for (const ViewStep& s : w.steps) w.end = std::max(w.end, s.end_ns);
  const std::string what = k == 1 ? "steps" : fmt::format("runs of {} consecutive steps", k);
  const std::string which =
      after && candidates.size() < all
          ? fmt::format("the {} {} after the warm-up ({} in all)", candidates.size(), what, all)
          : fmt::format("the {} {}", candidates.size(), what);
  w.choice = k == 1 ? fmt::format("Step {}: of {}, the median by time.", w.steps[0].step, which)
                    : fmt::format("Steps {} to {}: of {}, the median by time.",
                                  w.steps.front().step, w.steps.back().step, which);
  if (k < want) {
    w.choice += fmt::format(" (No {} steps in a row in this trace.)", want);
  }
  if (prefer && !after) {
    w.choice += fmt::format(
        " (The trace keeps no {} steps in a row after the report's warm-up, from step {} on.)", k,
        options.steady_from_step);
  }
  return w;
}

// Extends the window's end to where the device work launched from it ends,
// at most one window's length later.
TimestampNs DeviceEnd(const Timeline& timeline, const Window& w) {
  absl::flat_hash_set<int64_t> launched;
  for (const Interval& iv : timeline.intervals()) {
    if (iv.kind == IntervalKind::kRuntimeCall && iv.value > 0 && iv.start_ns >= w.start &&
        iv.start_ns < w.end) {
      launched.insert(iv.value);
    }
  }
  TimestampNs end = w.end;
  if (launched.empty()) return end;
  const TimestampNs limit = Add(w.end, Sub(w.end, w.start));
  for (const Interval& iv : timeline.intervals()) {
    if (ground::IsDeviceKind(iv.kind) && iv.value > 0 && launched.contains(iv.value)) {
      end = std::max(end, std::min(iv.end_ns, limit));
    }
  }
  return end;
}

// The boxes of one row (intervals in start order) at `min_ns`, to `emit`
// (box, its longest member), or only counted when `emit` is null. A box is
// an interval that shows at least `min_ns` of itself in the window, or a
// group of shorter ones that start within `min_ns` of the group's first:
// so a row of span S holds at most about 2 x S / min_ns boxes, and halving
// the resolution about halves them.
template <typename Emit>
size_t ReduceRow(const std::vector<const Interval*>& row, uint32_t lane, uint16_t row_index,
                 TimestampNs start, TimestampNs end, TimestampNs min_ns, Emit* emit) {
  size_t boxes = 0;
  ViewBox group;
  const Interval* longest = nullptr;
  TimestampNs longest_ns = -1;
  auto flush = [&] {
    if (longest == nullptr) return;
    ++boxes;
    if (emit != nullptr) (*emit)(group, longest);
    longest = nullptr;
    longest_ns = -1;
  };
  for (const Interval* iv : row) {
    const TimestampNs shown = Sub(std::min(iv->end_ns, end), std::max(iv->start_ns, start));
    if (shown >= min_ns) {
      flush();
      ++boxes;
      if (emit != nullptr) {
        ViewBox box;
        box.start_ns = iv->start_ns;
        box.end_ns = iv->end_ns;
        box.lane = lane;
        box.row = row_index;
        box.view_class = ClassOf(*iv);
        (*emit)(box, iv);
      }
      continue;
    }
    if (longest != nullptr && iv->start_ns < Add(group.start_ns, min_ns)) {
      group.end_ns = std::max(group.end_ns, iv->end_ns);
      ++group.merged;
    } else {
      flush();
      group = ViewBox{};
      group.start_ns = iv->start_ns;
      group.end_ns = iv->end_ns;
      group.lane = lane;
      group.row = row_index;
    }
    if (shown > longest_ns) {
      longest = iv;
      longest_ns = shown;
      group.view_class = ClassOf(*iv);
    }
  }
  flush();
  return boxes;
}

}  // namespace

std::string_view ViewClassName(int view_class) {
  if (view_class >= 0 && view_class < kPhaseCount) {
    return PhaseName(static_cast<Phase>(view_class));
  }
  if (view_class >= kPhaseCount && view_class < kViewClassCount) {
    return kClassNames[view_class - kPhaseCount];
  }
  return "unknown";
}

std::string ViewClassColor(int view_class) {
  uint32_t rgb = 0x000000;
  if (view_class >= 0 && view_class < kPhaseCount) {
    rgb = PhaseColor(static_cast<Phase>(view_class)) & 0xFFFFFF;
  } else if (view_class >= kPhaseCount && view_class < kViewClassCount) {
    rgb = kClassColors[view_class - kPhaseCount];
  }
  return fmt::format("#{:06x}", rgb);
}

namespace {

// Each track's intervals in the view's window.
std::vector<std::vector<const Interval*>> IntervalsByTrack(const Timeline& timeline,
                                                           const TimelineView& view) {
  std::vector<std::vector<const Interval*>> by_track(timeline.tracks().size());
  for (const Interval& iv : timeline.intervals()) {
    const bool inside =
        iv.start_ns < view.end_ns &&
        (iv.end_ns > view.start_ns || (iv.end_ns == iv.start_ns && iv.start_ns >= view.start_ns));
    if (inside && iv.track < by_track.size()) by_track[iv.track].push_back(&iv);
  }
  return by_track;
}

// Lanes: host threads (as the timeline added them), then streams (by
// device, stream); past max_lanes, each kind keeps at least half. Returns
// the tracks drawn, in lane order.
std::vector<uint32_t> ChooseLanes(const std::vector<ground::Track>& tracks,
                                  const std::vector<std::vector<const Interval*>>& by_track,
                                  const TimelineViewOptions& options, TimelineView* view) {
  std::vector<uint32_t> host, device;
  for (uint32_t t = 0; t < tracks.size(); ++t) {
    if (by_track[t].empty()) continue;
    (tracks[t].kind == TrackKind::kDeviceStream ? device : host).push_back(t);
  }
  std::sort(device.begin(), device.end(), [&](uint32_t a, uint32_t b) {
    return std::tie(tracks[a].pid, tracks[a].tid, a) < std::tie(tracks[b].pid, tracks[b].tid, b);
  });
  const size_t lanes = static_cast<size_t>(std::max(1, options.max_lanes));
  const size_t hosts =
      std::min(host.size(), std::max(lanes - std::min(lanes, device.size()), (lanes + 1) / 2));
  const size_t devices = std::min(device.size(), lanes - hosts);
  std::vector<uint32_t> order(host.begin(), host.begin() + static_cast<ptrdiff_t>(hosts));
  order.insert(order.end(), device.begin(), device.begin() + static_cast<ptrdiff_t>(devices));
  view->lanes_dropped = static_cast<int64_t>(host.size() + device.size() - order.size());
  return order;
}

// A lane's intervals (taken from `ivs`) on rows: each (parents first: by
// start, then the longer first) on the lowest row free at its start, so a
// range sits below the ranges it is nested in; a row's intervals never
// overlap. Past max_depth rows an interval is dropped (counted in view).
std::vector<std::vector<const Interval*>> StackRows(std::vector<const Interval*> ivs,
                                                    size_t max_depth, TimelineView* view) {
  std::vector<std::vector<const Interval*>> rows;
  view->intervals += static_cast<int64_t>(ivs.size());
  std::stable_sort(ivs.begin(), ivs.end(), [](const Interval* a, const Interval* b) {
    if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns;
    return a->end_ns > b->end_ns;
  });
  std::vector<TimestampNs> row_end;
  for (const Interval* iv : ivs) {
    size_t r = 0;
    while (r < row_end.size() && row_end[r] > iv->start_ns) ++r;
    if (r == max_depth) {
      ++view->ranges_dropped;
      continue;
    }
    if (r == row_end.size()) {
      row_end.push_back(iv->end_ns);
      rows.emplace_back();
    }
    // A zero-length interval holds its row for no time.
    row_end[r] = std::max(iv->end_ns, iv->start_ns);
    rows[r].push_back(iv);
  }
  return rows;
}

using LaneRows = std::vector<std::vector<std::vector<const Interval*>>>;  // lane, row, intervals

// The finest resolution whose boxes fit in max_boxes: counted, halving
// from options.resolution.
int ChooseResolution(const LaneRows& rows, const TimelineView& view,
                     const TimelineViewOptions& options) {
  const TimestampNs span = Sub(view.end_ns, view.start_ns);
  int resolution = std::max(1, options.resolution);
  using NoEmit = void (*)(const ViewBox&, const Interval*);
  for (;;) {
    size_t boxes = 0;
    for (size_t l = 0; l < rows.size(); ++l) {
      for (size_t r = 0; r < rows[l].size(); ++r) {
        boxes += ReduceRow<NoEmit>(rows[l][r], 0, 0, view.start_ns, view.end_ns,
                                   std::max<TimestampNs>(1, span / resolution), nullptr);
      }
    }
    if (boxes <= static_cast<size_t>(std::max(0, options.max_boxes)) || resolution == 1) break;
    resolution /= 2;
  }
  return resolution;
}

// The boxes at view->resolution, with their names: each once; past
// max_name_total_bytes, a box is named by its class.
void EmitBoxes(const Timeline& timeline, const LaneRows& rows, const TimelineViewOptions& options,
               TimelineView* view) {
  absl::flat_hash_map<uint32_t, uint32_t> names;       // timeline's id -> view's
  absl::flat_hash_map<uint8_t, uint32_t> class_names;  // class -> view's
  size_t name_bytes = 0;
  auto emit = [&](ViewBox box, const Interval* longest) {
    auto it = names.find(longest->name);
    if (it != names.end()) {
      box.name = it->second;
    } else {
      std::string name = CutName(timeline.name(longest->name), options.max_name_bytes);
      if (name_bytes + name.size() <= options.max_name_total_bytes) {
        name_bytes += name.size();
        box.name = static_cast<uint32_t>(view->names.size());
        names.emplace(longest->name, box.name);
        view->names.push_back(std::move(name));
      } else {
        ++view->names_dropped;
        auto [c, added] =
            class_names.try_emplace(box.view_class, static_cast<uint32_t>(view->names.size()));
        if (added) view->names.emplace_back(ViewClassName(box.view_class));
        box.name = c->second;
      }
    }
    view->boxes.push_back(box);
  };
  const TimestampNs min_ns =
      std::max<TimestampNs>(1, Sub(view->end_ns, view->start_ns) / view->resolution);
  for (size_t l = 0; l < rows.size(); ++l) {
    for (size_t r = 0; r < rows[l].size(); ++r) {
      ReduceRow(rows[l][r], static_cast<uint32_t>(l), static_cast<uint16_t>(r), view->start_ns,
                view->end_ns, min_ns, &emit);
    }
  }
}

}  // namespace

TimelineView CutTimelineView(const Timeline& timeline, const TimelineViewOptions& options) {
  TimelineView view;
  if (timeline.size() == 0) {
    view.choice = "The trace holds no intervals.";
    return view;
  }
  const Window w = ChooseWindow(timeline, options);
  view.start_ns = w.start;
  view.end_ns = std::max(w.steps.empty() ? w.end : DeviceEnd(timeline, w), Add(w.start, 1));
  view.choice = w.choice;
  view.steps = w.steps;
  view.steps_in_timeline = w.steps_in_timeline;

  std::vector<std::vector<const Interval*>> by_track = IntervalsByTrack(timeline, view);
  const std::vector<ground::Track>& tracks = timeline.tracks();
  const std::vector<uint32_t> order = ChooseLanes(tracks, by_track, options, &view);
  LaneRows rows;
  for (const uint32_t track : order) {
    rows.push_back(StackRows(std::move(by_track[track]),
                             static_cast<size_t>(std::max(1, options.max_depth)), &view));
    by_track[track] = {};
    view.lanes.push_back({CutName(tracks[track].name, options.max_name_bytes),
                          tracks[track].kind == TrackKind::kDeviceStream,
                          std::max(1, static_cast<int>(rows.back().size()))});
  }
  by_track.clear();
  by_track.shrink_to_fit();
  view.resolution = ChooseResolution(rows, view, options);
  EmitBoxes(timeline, rows, options, &view);
  return view;
}

std::string TimelineViewToJson(const TimelineView& view) {
  // The difference first: a trace's times (ns since 1970) are past a
  // double's whole numbers.
  auto us = [&](TimestampNs ns) { return static_cast<double>(Sub(ns, view.start_ns)) / 1000.0; };
  std::string out = "{\"choice\":";
  ground::AppendJsonString(&out, view.choice);
  fmt::format_to(std::back_inserter(out),
                 ",\"window_us\":{:.3f},\"steps_in_trace\":{},\"intervals\":{},"
                 "\"lanes_dropped\":{},\"ranges_dropped\":{},\"names_dropped\":{},"
                 "\"resolution\":{},\"steps\":[",
                 us(view.end_ns), view.steps_in_timeline, view.intervals, view.lanes_dropped,
                 view.ranges_dropped, view.names_dropped, view.resolution);
  for (size_t i = 0; i < view.steps.size(); ++i) {
    const ViewStep& s = view.steps[i];
    fmt::format_to(std::back_inserter(out), "{}[{},{:.3f},{:.3f}]", i ? "," : "", s.step,
                   us(s.start_ns), us(s.end_ns));
  }
  out += "],\"lanes\":[";
  for (size_t i = 0; i < view.lanes.size(); ++i) {
    out += i ? ",{\"name\":" : "{\"name\":";
    ground::AppendJsonString(&out, view.lanes[i].name);
    fmt::format_to(std::back_inserter(out), ",\"device\":{},\"rows\":{}}}",
                   view.lanes[i].device ? "true" : "false", view.lanes[i].rows);
  }
  out += "],\"classes\":[";
  for (int c = 0; c < kViewClassCount; ++c) {
    fmt::format_to(std::back_inserter(out), "{}{{\"name\":\"{}\",\"color\":\"{}\"}}", c ? "," : "",
                   ViewClassName(c), ViewClassColor(c));
  }
  out += "],\"names\":[";
  for (size_t i = 0; i < view.names.size(); ++i) {
    if (i) out += ',';
    ground::AppendJsonString(&out, view.names[i]);
  }
  out += "],\"boxes\":[";
  for (size_t i = 0; i < view.boxes.size(); ++i) {
    const ViewBox& b = view.boxes[i];
    fmt::format_to(std::back_inserter(out), "{}[{},{},{:.3f},{:.3f},{},{},{}]", i ? "," : "",
                   b.lane, b.row, us(b.start_ns),
                   static_cast<double>(Sub(b.end_ns, b.start_ns)) / 1000.0, b.name, b.view_class,
                   b.merged);
  }
  out += "]}";
  return out;
}

}  // namespace trainscope::analysis
