// sdk/analysis/timeline_view.h: a few steps of a timeline, cut out and
// reduced for drawing: host ranges above device streams, small enough to
// embed in a page whatever the size of what it came from.
//
//   TimelineView view = CutTimelineView(imported.timeline);
//   std::string json = TimelineViewToJson(view);  // `trainscope html`'s timeline
//
// Which steps: of every run of `steps` consecutive step indices (each
// starting within one step's length of the one before: not across the gap
// between two trace windows), the one whose time (first start to last end)
// is the median: a typical stretch, not the slowest. With
// `steady_from_step`, the runs that start there or later, when the trace
// has one as long there as anywhere (a run's page passes its report's end
// of warm-up; shorter runs after it are the slowest steps the trace
// windows keep, not typical). A trace
// without steps is shown whole. The window ends at the last step's end, or
// later, where the device work its CUDA calls launched ends (at most one
// window's length later).
//
// Reduction: each lane's intervals go, parents first, on the lowest row
// free at their start (a host thread's step, its phases, the CUDA calls in
// them; a device stream's work, more rows where it overlaps), at most
// `max_depth` rows. On each row an interval that shows less than window /
// resolution of itself is merged with the short ones that start within that
// time of it into one box ("37x name" on the page), named after the member
// that shows the most. A row of the window holds at most about 2 x
// resolution boxes; while all of them would be more than `max_boxes`, the
// resolution halves (counted first, built once).
//
// Memory: up to 16 bytes for each interval in the window (a few steps'
// worth of the timeline; a trace without steps is all window) while it is
// cut; the
// view holds at most max(max_boxes, 2 x max_lanes x max_depth) boxes of 32
// bytes, names of at most max_name_total_bytes in all (past it a box is
// named by its class), and one lane per track shown.
#ifndef TRAINSCOPE_SDK_ANALYSIS_TIMELINE_VIEW_H_
#define TRAINSCOPE_SDK_ANALYSIS_TIMELINE_VIEW_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "sdk/ground/timeline.h"

namespace trainscope::analysis {

struct TimelineViewOptions {
  int steps = 3;  // consecutive steps shown
  // Steps from here on are past the warm-up (see above); the lowest: none.
  int64_t steady_from_step = std::numeric_limits<int64_t>::min();
  int resolution = 200000;      // the finest: boxes under window / resolution merge
  int max_boxes = 50000;        // in the whole view (see the memory bound above)
  int max_lanes = 64;           // host threads (at least half, rounded up), then streams
  int max_depth = 8;            // rows per lane
  size_t max_name_bytes = 160;  // longer names are cut (UTF-8 safe), "…" included
  size_t max_name_total_bytes = 128 << 10;  // all the names the view keeps
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
  int64_t ranges_dropped = 0;  // intervals past their lane's max_depth rows
  int64_t names_dropped = 0;   // boxes named by their class (max_name_total_bytes)
  int resolution = 0;          // the one used
  bool empty() const { return boxes.empty(); }
};

// Cuts and reduces `timeline` (sorted or not) as above. Pure. Cost: two
// passes over the timeline (four with steps), O(n log n) in its steps and
// in the window's intervals, and a counting pass over the window's rows
// for each halving of the resolution (at most log2(resolution): 18 at the
// default).
TimelineView CutTimelineView(const ground::Timeline& timeline,
                             const TimelineViewOptions& options = {});

// The view as one compact JSON object, times in microseconds from the
// window's start: {"choice", "window_us", "steps_in_trace" (the struct's
// steps_in_timeline), "intervals", "lanes_dropped", "ranges_dropped",
// "names_dropped", "resolution", "steps": [[step, start, end]], "lanes":
// [{"name", "device", "rows"}], "classes": [{"name", "color"}], "names":
// [...], "boxes": [[lane, row, start, duration, name, class, merged]]}.
// About 40 to 60 bytes a box. docs/html-report.md says how the page draws
// it.
std::string TimelineViewToJson(const TimelineView& view);

}  // namespace trainscope::analysis

#endif  // TRAINSCOPE_SDK_ANALYSIS_TIMELINE_VIEW_H_
