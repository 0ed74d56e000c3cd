// A few steps of a timeline, reduced for drawing. See timeline_view.h.
#include "sdk/analysis/timeline_view.h"

#include <algorithm>
#include <iterator>
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
constexpr uint32_t kClassColors[kViewClassCount - kPhaseCount] = {
    0xD8DEE4,  // step: light grey, under its phases
    0x9C9C9C,  // CUDA call
    0xE15759,  // synchronisation: red, the host waits
    0x4E79A7,  // kernel
    0xF28E2B,  // memcpy
    0xB07AA1,  // memset
};

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

// `name` cut to at most `limit` bytes, not inside a UTF-8 sequence.
std::string CutName(std::string_view name, size_t limit) {
  if (name.size() <= limit) return std::string(name);
  size_t end = limit;
  while (end > 0 && (static_cast<unsigned char>(name[end]) & 0xC0) == 0x80) --end;
  return std::string(name.substr(0, end)) + "\u2026";
}

struct Window {
  TimestampNs start = 0, end = 0;
  std::vector<ViewStep> steps;
  std::string choice;
  int64_t steps_in_timeline = 0;
};

// The median run of `want` consecutive steps (see the header).
Window ChooseWindow(const Timeline& timeline, int want) {
  std::vector<ViewStep> steps;
  TimestampNs first = 0, last = 0;
  bool any = false;
  for (const Interval& iv : timeline.intervals()) {
    if (!any || iv.start_ns < first) first = iv.start_ns;
    if (!any || iv.end_ns > last) last = iv.end_ns;
    any = true;
    if (iv.kind == IntervalKind::kStep) steps.push_back({iv.step, iv.start_ns, iv.end_ns});
  }
  Window w;
  std::sort(steps.begin(), steps.end(), [](const ViewStep& a, const ViewStep& b) {
    return std::tie(a.start_ns, a.step) < std::tie(b.start_ns, b.step);
  });
  // One step per index (a step recorded on two threads counts once).
  absl::flat_hash_set<int64_t> seen;
  steps.erase(std::remove_if(steps.begin(), steps.end(),
                             [&](const ViewStep& s) { return !seen.insert(s.step).second; }),
              steps.end());
  w.steps_in_timeline = static_cast<int64_t>(steps.size());
  if (steps.empty()) {
    w.start = first;
    w.end = last;
    w.choice = "The whole trace: it marks no steps.";
    return w;
  }
  // run[i]: consecutive indices from steps[i] on, in time order.
  std::vector<int> run(steps.size(), 1);
  for (size_t i = steps.size() - 1; i-- > 0;) {
    if (steps[i + 1].step == steps[i].step + 1) run[i] = run[i + 1] + 1;
  }
  const int longest = *std::max_element(run.begin(), run.end());
  const int k = std::max(1, std::min(want, longest));
  std::vector<std::pair<TimestampNs, size_t>> candidates;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (run[i] >= k) candidates.emplace_back(steps[i + k - 1].end_ns - steps[i].start_ns, i);
  }
  std::sort(candidates.begin(), candidates.end());
  const size_t at = candidates[(candidates.size() - 1) / 2].second;
  w.steps.assign(steps.begin() + static_cast<ptrdiff_t>(at),
                 steps.begin() + static_cast<ptrdiff_t>(at) + k);
  w.start = w.steps.front().start_ns;
  w.end = w.steps.back().end_ns;
  for (const ViewStep& s : w.steps) w.end = std::max(w.end, s.end_ns);
  w.choice = k == 1 ? fmt::format("Step {}: the median of {} steps by time.", w.steps[0].step,
                                  candidates.size())
                    : fmt::format(
                          "Steps {} to {}: of {} runs of {} consecutive steps, the median "
                          "by time.",
                          w.steps.front().step, w.steps.back().step, candidates.size(), k);
  if (k < want) {
    w.choice += fmt::format(" (No {} steps in a row in this trace.)", want);
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
  const TimestampNs limit = w.end + (w.end - w.start);
  for (const Interval& iv : timeline.intervals()) {
    if (ground::IsDeviceKind(iv.kind) && iv.value > 0 && launched.contains(iv.value)) {
      end = std::max(end, std::min(iv.end_ns, limit));
    }
  }
  return end;
}

// Boxes of one row (intervals in start order) at `min_ns`, appended.
void ReduceRow(const std::vector<const Interval*>& row, uint32_t lane, uint16_t row_index,
               TimestampNs start, TimestampNs end, TimestampNs min_ns,
               std::vector<std::pair<ViewBox, const Interval*>>* out) {
  ViewBox group;
  const Interval* longest = nullptr;
  TimestampNs longest_ns = -1;
  auto flush = [&] {
    if (longest == nullptr) return;
    out->emplace_back(group, longest);
    longest = nullptr;
    longest_ns = -1;
  };
  for (const Interval* iv : row) {
    const TimestampNs shown = std::min(iv->end_ns, end) - std::max(iv->start_ns, start);
    if (shown >= min_ns) {
      flush();
      ViewBox box;
      box.start_ns = iv->start_ns;
      box.end_ns = iv->end_ns;
      box.lane = lane;
      box.row = row_index;
      box.view_class = ClassOf(*iv);
      out->emplace_back(box, iv);
      continue;
    }
    if (longest != nullptr && iv->start_ns - group.end_ns < min_ns) {
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
    if (iv->duration_ns() > longest_ns) {
      longest = iv;
      longest_ns = iv->duration_ns();
      group.view_class = ClassOf(*iv);
    }
  }
  flush();
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

TimelineView CutTimelineView(const Timeline& timeline, const TimelineViewOptions& options) {
  TimelineView view;
  if (timeline.size() == 0) {
    view.choice = "The trace holds no intervals.";
    return view;
  }
  const Window w = ChooseWindow(timeline, std::max(1, options.steps));
  view.start_ns = w.start;
  view.end_ns = std::max(DeviceEnd(timeline, w), w.start + 1);
  view.choice = w.choice;
  view.steps = w.steps;
  view.steps_in_timeline = w.steps_in_timeline;

  // The window's intervals by track; host threads first, then streams.
  const auto& tracks = timeline.tracks();
  std::vector<std::vector<const Interval*>> by_track(tracks.size());
  for (const Interval& iv : timeline.intervals()) {
    const bool inside =
        iv.start_ns < view.end_ns &&
        (iv.end_ns > view.start_ns || (iv.end_ns == iv.start_ns && iv.start_ns >= view.start_ns));
    if (inside && iv.track < tracks.size()) by_track[iv.track].push_back(&iv);
  }
  std::vector<uint32_t> order;
  for (uint32_t t = 0; t < tracks.size(); ++t) {
    if (!by_track[t].empty()) order.push_back(t);
  }
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const bool da = tracks[a].kind == TrackKind::kDeviceStream;
    const bool db = tracks[b].kind == TrackKind::kDeviceStream;
    if (da != db) return db;
    if (!da) return false;  // host threads as the timeline added them
    return std::tie(tracks[a].pid, tracks[a].tid) < std::tie(tracks[b].pid, tracks[b].tid);
  });
  if (order.size() > static_cast<size_t>(std::max(1, options.max_lanes))) {
    view.lanes_dropped = static_cast<int64_t>(order.size()) - std::max(1, options.max_lanes);
    order.resize(static_cast<size_t>(std::max(1, options.max_lanes)));
  }

  // Rows: nesting depth on a stack of ends (parents first: by start, then
  // the longer first); a row's intervals never overlap.
  const int max_depth = std::max(1, options.max_depth);
  std::vector<std::vector<std::vector<const Interval*>>> rows(order.size());
  for (size_t l = 0; l < order.size(); ++l) {
    std::vector<const Interval*>& ivs = by_track[order[l]];
    view.intervals += static_cast<int64_t>(ivs.size());
    std::stable_sort(ivs.begin(), ivs.end(), [](const Interval* a, const Interval* b) {
      if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns;
      return a->end_ns > b->end_ns;
    });
    std::vector<TimestampNs> open;  // ends of the enclosing intervals
    for (const Interval* iv : ivs) {
      while (!open.empty() && open.back() <= iv->start_ns) open.pop_back();
      // A partial overlap (it ends after its "parent") goes below it too.
      const size_t depth = open.size();
      if (depth >= static_cast<size_t>(max_depth)) {
        ++view.ranges_dropped;
        continue;
      }
      if (rows[l].size() <= depth) rows[l].resize(depth + 1);
      rows[l][depth].push_back(iv);
      open.push_back(iv->end_ns);
    }
    const ground::Track& track = tracks[order[l]];
    view.lanes.push_back({CutName(track.name, options.max_name_bytes),
                          track.kind == TrackKind::kDeviceStream,
                          std::max(1, static_cast<int>(rows[l].size()))});
  }

  // Merge short neighbours, coarser until the boxes fit.
  std::vector<std::pair<ViewBox, const Interval*>> boxes;
  int resolution = std::max(1, options.resolution);
  const TimestampNs span = view.end_ns - view.start_ns;
  for (;;) {
    boxes.clear();
    const TimestampNs min_ns = std::max<TimestampNs>(1, span / resolution);
    for (size_t l = 0; l < rows.size(); ++l) {
      for (size_t r = 0; r < rows[l].size(); ++r) {
        ReduceRow(rows[l][r], static_cast<uint32_t>(l), static_cast<uint16_t>(r), view.start_ns,
                  view.end_ns, min_ns, &boxes);
      }
    }
    if (boxes.size() <= static_cast<size_t>(std::max(0, options.max_boxes)) || resolution == 1) {
      break;
    }
    resolution /= 2;
  }
  view.resolution = resolution;

  absl::flat_hash_map<uint32_t, uint32_t> names;  // timeline's id -> view's
  view.boxes.reserve(boxes.size());
  for (auto& [box, longest] : boxes) {
    auto [it, added] = names.try_emplace(longest->name, static_cast<uint32_t>(view.names.size()));
    if (added) view.names.push_back(CutName(timeline.name(longest->name), options.max_name_bytes));
    box.name = it->second;
    view.boxes.push_back(box);
  }
  return view;
}

std::string TimelineViewToJson(const TimelineView& view) {
  // The difference first: a trace's times (ns since 1970) are past a
  // double's whole numbers.
  auto us = [&](TimestampNs ns) { return static_cast<double>(ns - view.start_ns) / 1000.0; };
  std::string out = "{\"choice\":";
  ground::AppendJsonString(&out, view.choice);
  fmt::format_to(std::back_inserter(out),
                 ",\"window_us\":{:.3f},\"steps_in_trace\":{},\"intervals\":{},"
                 "\"lanes_dropped\":{},\"ranges_dropped\":{},\"resolution\":{},\"steps\":[",
                 us(view.end_ns), view.steps_in_timeline, view.intervals, view.lanes_dropped,
                 view.ranges_dropped, view.resolution);
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
                   b.lane, b.row, us(b.start_ns), (b.end_ns - b.start_ns) / 1000.0, b.name,
                   b.view_class, b.merged);
  }
  out += "]}";
  return out;
}

}  // namespace trainscope::analysis
