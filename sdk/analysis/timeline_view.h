// sdk/analysis/timeline_view.h: a few steps of a timeline, cut out and
// reduced for drawing: host ranges above device streams, small enough to
// embed in a page whatever the size of what it came from.
//
//   TimelineView view = CutTimelineView(imported.timeline);
//   std::string json = TimelineViewToJson(view);  // `trainscope html`'s timeline
//
// Which steps: of every run of `steps` consecutive step indices, the one
// whose time (first start to last end) is the median: a typical stretch,
// not the warm-up nor the slowest. A trace without steps is shown whole.
// The window ends at the last step's end, or later, where the device work
// its CUDA calls launched ends (at most one window's length later).
//
// Reduction: each host thread's ranges are stacked by nesting (a step, its
// phases, the CUDA calls in them), each device stream's work on its own row
// (or more where it overlaps). On each row an interval shorter than the
// window / `resolution` is merged with its short neighbours closer than
// that into one box ("37 kernels"), named after its longest member. When
// the boxes would be more than `max_boxes`, the resolution halves until
// they fit.
//
// Memory: the cut points at the intervals in the window (8 bytes each; a
// few steps' worth of the timeline); the view holds at most
// max(max_boxes, 3 x max_lanes x max_depth) boxes of 40 bytes, their names
// (at most max_name_bytes each) and one lane per track shown.
#ifndef TRAINSCOPE_SDK_ANALYSIS_TIMELINE_VIEW_H_
#define TRAINSCOPE_SDK_ANALYSIS_TIMELINE_VIEW_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sdk/ground/timeline.h"

namespace trainscope::analysis {

struct TimelineViewOptions {
  int steps = 3;                // consecutive steps shown
  int resolution = 200000;      // boxes a row may keep across the window, about
  int max_boxes = 50000;        // in the whole view (see the memory bound above)
  int max_lanes = 64;           // tracks shown: host threads first, then streams
  int max_depth = 8;            // rows of nested ranges per host thread
  size_t max_name_bytes = 160;  // longer names are cut (at a UTF-8 boundary)
};

// What a box is, for its colour: a host range's phase (0 to kPhaseCount - 1),
// or one of these.
enum class ViewClass : uint8_t {
  kStep = kPhaseCount,
  kRuntimeCall,
  kSyncCall,
  kKernel,
  kMemcpy,
  kMemset,
};
inline constexpr int kViewClassCount = kPhaseCount + 6;

// A class's name ("forward", "step", "kernel", ...) and its colour as
// "#rrggbb" (the phases' colours are those of their NVTX ranges).
std::string_view ViewClassName(int view_class);
std::string ViewClassColor(int view_class);

struct ViewLane {
  std::string name;  // "thread 123", "GPU 0 stream 7"
  bool device = false;
  int rows = 1;
};

// One box: an interval, or `merged` (> 1) short neighbours on one row.
// Times are the interval's own (not cut at the window's edges).
struct ViewBox {
  TimestampNs start_ns = 0;
  TimestampNs end_ns = 0;
  uint32_t lane = 0;
  uint32_t name = 0;  // TimelineView::names
  uint32_t merged = 1;
  uint16_t row = 0;
  uint8_t view_class = 0;
};

struct ViewStep {
  int64_t step = 0;
  TimestampNs start_ns = 0;
  TimestampNs end_ns = 0;
};

struct TimelineView {
  TimestampNs start_ns = 0;  // the window
  TimestampNs end_ns = 0;
  std::string choice;  // which steps were chosen and why, a sentence
  int64_t steps_in_timeline = 0;
  std::vector<ViewStep> steps;  // those shown
  std::vector<ViewLane> lanes;
  std::vector<ViewBox> boxes;  // by lane, row, then start
  std::vector<std::string> names;
  int64_t intervals = 0;       // in the window, before merging
  int64_t lanes_dropped = 0;   // tracks past max_lanes, not shown
  int64_t ranges_dropped = 0;  // ranges nested deeper than max_depth
  int resolution = 0;          // the one used
  bool empty() const { return boxes.empty(); }
};

// Cuts and reduces `timeline` (sorted or not) as above. Pure. Cost:
// O(n log n) in the timeline's steps and the window's intervals, plus one
// pass over the timeline.
TimelineView CutTimelineView(const ground::Timeline& timeline,
                             const TimelineViewOptions& options = {});

// The view as one compact JSON object, times in microseconds from the
// window's start: {"choice", "window_us", "steps": [[step, start, end]],
// "lanes": [{"name", "device", "rows"}], "classes": [{"name", "color"}],
// "names": [...], "boxes": [[lane, row, start, duration, name, class,
// merged]], "intervals", "lanes_dropped", "ranges_dropped", "resolution"}.
// docs/html-report.md says how the page draws it.
std::string TimelineViewToJson(const TimelineView& view);

}  // namespace trainscope::analysis

#endif  // TRAINSCOPE_SDK_ANALYSIS_TIMELINE_VIEW_H_
