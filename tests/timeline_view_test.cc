// analysis::CutTimelineView: which steps a page's timeline shows, how the
// ranges stack, how short neighbours merge, and that the view stays within
// its bound whatever the timeline holds; on synthetic timelines and on a
// real PyTorch-profiler trace.
#include "sdk/analysis/timeline_view.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "sdk/analyze/analyze.h"
#include "sdk/kineto/trace_import.h"

namespace trainscope::analysis {
namespace {

using ground::Interval;
using ground::IntervalKind;
using ground::Timeline;
using ground::TrackKind;

constexpr TimestampNs kMs = 1'000'000;

struct Builder {
  Timeline t;
  uint32_t host = t.AddTrack({TrackKind::kHostThread, 1, 10, "thread 10"});
  uint32_t stream = t.AddTrack({TrackKind::kDeviceStream, 0, 7, "GPU 0 stream 7"});

  void Add(uint32_t track, TimestampNs start, TimestampNs end, IntervalKind kind,
           const std::string& name, int64_t step = -1, int64_t value = 0,
           Phase phase = Phase::kOther) {
    Interval iv;
    iv.start_ns = start;
    iv.end_ns = end;
    iv.step = step;
    iv.value = value;
    iv.name = t.Intern(name);
    iv.track = track;
    iv.kind = kind;
    iv.phase = phase;
    t.Add(iv);
  }
  // Steps back to back from `start`, their lengths in ms; each with a
  // forward phase of half its length.
  TimestampNs Steps(int64_t first, const std::vector<int>& ms, TimestampNs start) {
    for (size_t i = 0; i < ms.size(); ++i) {
      const int64_t step = first + static_cast<int64_t>(i);
      const TimestampNs end = start + ms[i] * kMs;
      Add(host, start, end, IntervalKind::kStep, "ProfilerStep#" + std::to_string(step), step);
      Add(host, start, start + (end - start) / 2, IntervalKind::kHostRange, "forward", step, 0,
          Phase::kForward);
      start = end;
    }
    return start;
  }
};

TEST(TimelineViewTest, ShowsTheMedianRunOfConsecutiveSteps) {
  Builder b;
  // Steps 0-9: a slow warm-up, then a typical stretch; 20-21 kept apart
  // (a trace window of the slowest steps), too few to form a run of 3.
  TimestampNs at = b.Steps(0, {40, 10, 10, 11, 12, 10, 30, 30, 30, 10}, 0);
  b.Steps(20, {100, 100}, at + 50 * kMs);
  const TimelineView view = CutTimelineView(b.t);
  // Runs of 3: 0-2 (60), 1-3 (31), 2-4 (33), 3-5 (33), 4-6 (52), 5-7 (70),
  // 6-8 (90), 7-9 (70): the median of the 8 is the 4th by time, 4-6 (52).
  ASSERT_EQ(view.steps.size(), 3u);
  EXPECT_EQ(view.steps[0].step, 4);
  EXPECT_EQ(view.steps[2].step, 6);
  EXPECT_EQ(view.start_ns, (40 + 10 + 10 + 11) * kMs);
  EXPECT_EQ(view.end_ns, view.start_ns + 52 * kMs);
  EXPECT_EQ(view.steps_in_timeline, 12);
  EXPECT_NE(
      view.choice.find("Steps 4 to 6: of the 8 runs of 3 consecutive steps, the median by time."),
      std::string::npos)
      << view.choice;
  // Only the window's intervals: 3 steps and their phases.
  EXPECT_EQ(view.intervals, 6);
  ASSERT_EQ(view.lanes.size(), 1u);
  EXPECT_EQ(view.lanes[0].rows, 2);  // the steps, their phases below
  for (const ViewBox& box : view.boxes) {
    EXPECT_EQ(box.row, box.view_class == static_cast<uint8_t>(ViewClass::kStep) ? 0 : 1);
  }
}

TEST(TimelineViewTest, FewerStepsInARowOrNoneAtAll) {
  Builder two;
  two.Steps(5, {10, 20}, 0);
  two.Steps(9, {30}, 100 * kMs);
  TimelineView view = CutTimelineView(two.t);
  ASSERT_EQ(view.steps.size(), 2u);
  EXPECT_EQ(view.steps[0].step, 5);
  EXPECT_NE(view.choice.find("No 3 steps in a row"), std::string::npos) << view.choice;

  Builder none;
  none.Add(none.stream, 5 * kMs, 6 * kMs, IntervalKind::kKernel, "k");
  none.Add(none.stream, 90 * kMs, 91 * kMs, IntervalKind::kKernel, "k");
  view = CutTimelineView(none.t);
  EXPECT_TRUE(view.steps.empty());
  EXPECT_EQ(view.start_ns, 5 * kMs);
  EXPECT_EQ(view.end_ns, 91 * kMs + 1) << "the last interval's end inside";
  EXPECT_EQ(view.boxes.size(), 2u);
  EXPECT_NE(view.choice.find("marks no steps"), std::string::npos);

  const TimelineView empty = CutTimelineView(Timeline());
  EXPECT_TRUE(empty.empty());
  EXPECT_NE(TimelineViewToJson(empty).find("\"boxes\":[]}"), std::string::npos);
}

// Host threads come before streams, streams by device then stream; a
// step's CUDA calls sit under its phases; the window reaches to where the
// work its calls launched ends, but not further than one window.
TEST(TimelineViewTest, StacksHostRangesAboveStreamsAndFollowsTheLaunchedWork) {
  Builder b;
  const uint32_t late_stream = b.t.AddTrack({TrackKind::kDeviceStream, 0, 3, "GPU 0 stream 3"});
  const uint32_t other_gpu = b.t.AddTrack({TrackKind::kDeviceStream, 1, 1, "GPU 1 stream 1"});
  const uint32_t loader = b.t.AddTrack({TrackKind::kHostThread, 1, 11, "thread 11"});
  b.Steps(0, {10, 10, 10}, 0);
  b.Add(b.host, 1 * kMs, 2 * kMs, IntervalKind::kRuntimeCall, "cudaLaunchKernel", 0, 42);
  b.Add(b.host, 25 * kMs, 26 * kMs, IntervalKind::kRuntimeCall, "cudaLaunchKernel", 2, 43);
  b.Add(b.host, 27 * kMs, 28 * kMs, IntervalKind::kRuntimeCall, "cudaLaunchKernel", 2, 44);
  b.Add(b.stream, 2 * kMs, 8 * kMs, IntervalKind::kKernel, "gemm", -1, 42);
  b.Add(late_stream, 26 * kMs, 38 * kMs, IntervalKind::kKernel, "late", -1, 43);
  // Launched at 27 ms, running until 100 ms: the window stops at 60 ms.
  b.Add(other_gpu, 28 * kMs, 100 * kMs, IntervalKind::kMemcpy, "copy", -1, 44);
  b.Add(loader, 3 * kMs, 4 * kMs, IntervalKind::kHostRange, "loader.next", -1, 0, Phase::kDataWait);
  const TimelineView view = CutTimelineView(b.t);
  EXPECT_EQ(view.start_ns, 0);
  EXPECT_EQ(view.end_ns, 60 * kMs);
  ASSERT_EQ(view.lanes.size(), 5u);
  EXPECT_EQ(view.lanes[0].name, "thread 10");
  EXPECT_EQ(view.lanes[0].rows, 3);  // step, forward, the call inside forward
  EXPECT_EQ(view.lanes[1].name, "thread 11");
  EXPECT_EQ(view.lanes[2].name, "GPU 0 stream 3");
  EXPECT_EQ(view.lanes[3].name, "GPU 0 stream 7");
  EXPECT_EQ(view.lanes[4].name, "GPU 1 stream 1");
  EXPECT_TRUE(view.lanes[4].device);
  EXPECT_FALSE(view.lanes[1].device);
  std::map<std::string, ViewBox> by_name;
  std::map<TimestampNs, int> call_rows;
  for (const ViewBox& box : view.boxes) {
    by_name[view.names[box.name]] = box;
    if (view.names[box.name] == "cudaLaunchKernel") call_rows[box.start_ns] = box.row;
  }
  // Inside step 0's forward; in step 2 after its forward ended.
  EXPECT_EQ(call_rows, (std::map<TimestampNs, int>{{1 * kMs, 2}, {25 * kMs, 1}, {27 * kMs, 1}}));
  EXPECT_EQ(by_name.at("copy").end_ns, 100 * kMs) << "its own end, not cut";
  EXPECT_EQ(by_name.at("loader.next").view_class, static_cast<uint8_t>(Phase::kDataWait));
  EXPECT_EQ(ViewClassName(by_name.at("gemm").view_class), "kernel");
  EXPECT_EQ(ViewClassColor(static_cast<int>(Phase::kForward)), "#4e79a7");
}

// Intervals shorter than the window / resolution merge with their short
// neighbours; long ones stay whole; nesting past max_depth and tracks past
// max_lanes are counted, not shown.
TEST(TimelineViewTest, MergesShortNeighboursAndCountsWhatItLeavesOut) {
  Builder b;
  b.Steps(0, {10}, 0);
  // 1000 kernels of 2 us, 3 us apart, from 1 ms; one of 5 us; then a long one.
  for (int i = 0; i < 1000; ++i) {
    const TimestampNs at = kMs + i * 5000;
    b.Add(b.stream, at, at + (i == 500 ? 4000 : 2000), IntervalKind::kKernel,
          i == 500 ? "the longest short one" : "tiny");
  }
  b.Add(b.stream, 7 * kMs, 9 * kMs, IntervalKind::kKernel, "long");
  TimelineViewOptions options;
  options.resolution = 2;  // 5 ms in a 10 ms window: the short ones start within 5 ms
  options.max_depth = 2;
  b.Add(b.host, 1 * kMs, 2 * kMs, IntervalKind::kRuntimeCall, "too deep");
  TimelineView view = CutTimelineView(b.t, options);
  EXPECT_EQ(view.ranges_dropped, 1);
  EXPECT_EQ(view.intervals, 1 + 1 + 1001 + 1);
  std::vector<ViewBox> stream_boxes;
  for (const ViewBox& box : view.boxes) {
    if (view.lanes[box.lane].device) stream_boxes.push_back(box);
  }
  ASSERT_EQ(stream_boxes.size(), 2u);
  EXPECT_EQ(stream_boxes[0].merged, 1000u);
  EXPECT_EQ(view.names[stream_boxes[0].name], "the longest short one");
  EXPECT_EQ(stream_boxes[0].start_ns, kMs);
  EXPECT_EQ(stream_boxes[0].end_ns, kMs + 999 * 5000 + 2000);
  EXPECT_EQ(stream_boxes[1].merged, 1u);
  EXPECT_EQ(view.names[stream_boxes[1].name], "long");

  // At 10 us (resolution 1000) a group spans at most 10 us: two of the
  // kernels 5 us apart.
  options.resolution = 1000;
  view = CutTimelineView(b.t, options);
  int64_t groups = 0;
  for (const ViewBox& box : view.boxes) {
    if (!view.lanes[box.lane].device || box.merged == 1) continue;
    EXPECT_EQ(box.merged, 2u);
    ++groups;
  }
  EXPECT_EQ(groups, 500);

  // At a finer resolution nothing merges, until the boxes pass max_boxes:
  // then the resolution halves until they fit, and no further (a halving
  // about halves the boxes: a cliff would leave a handful).
  options.resolution = 1'000'000;
  view = CutTimelineView(b.t, options);
  EXPECT_EQ(view.boxes.size(), 1u + 1u + 1001u);
  options.max_boxes = 100;
  view = CutTimelineView(b.t, options);
  EXPECT_LE(view.boxes.size(), 100u);
  EXPECT_GE(view.boxes.size(), 25u);
  EXPECT_LT(view.resolution, 1'000'000);

  options = TimelineViewOptions{};
  options.max_lanes = 1;
  view = CutTimelineView(b.t, options);
  EXPECT_EQ(view.lanes_dropped, 1);
  ASSERT_EQ(view.lanes.size(), 1u);
  EXPECT_FALSE(view.lanes[0].device);
}

// The bound: a window of a million intervals on 64 tracks, 8 deep, gives at
// most max_boxes boxes, and the JSON stays about 35 bytes a box.
TEST(TimelineViewTest, AMillionIntervalsStayWithinMaxBoxes) {
  Timeline t;
  std::vector<uint32_t> tracks;
  for (int k = 0; k < 70; ++k) {
    tracks.push_back(t.AddTrack({k < 35 ? TrackKind::kHostThread : TrackKind::kDeviceStream, 0, k,
                                 "track " + std::to_string(k)}));
  }
  const uint32_t name = t.Intern("k");
  Interval step;
  step.start_ns = 0;
  step.end_ns = 1'000'000'000;
  step.step = 0;
  step.kind = IntervalKind::kStep;
  step.track = tracks[0];
  step.name = t.Intern("ProfilerStep#0");
  t.Add(step);
  for (int i = 0; i < 1'000'000; ++i) {
    Interval iv;
    iv.track = tracks[static_cast<size_t>(i % 70)];
    // On each track, groups of 9 nested intervals: one more than max_depth.
    const int64_t j = i / 70, group = j / 9, depth = j % 9;
    iv.start_ns = group * 100'000 + depth * 5000;
    iv.end_ns = group * 100'000 + 90'000 - depth * 5000;
    iv.kind = i % 70 < 35 ? IntervalKind::kHostRange : IntervalKind::kKernel;
    iv.name = name;
    t.Add(iv);
  }
  const TimelineView view = CutTimelineView(t);
  EXPECT_EQ(view.lanes.size(), 64u);
  EXPECT_EQ(view.lanes_dropped, 6);
  EXPECT_GT(view.ranges_dropped, 0);
  EXPECT_LE(view.boxes.size(), 50'000u);
  EXPECT_GE(view.boxes.size(), 50'000u / 4) << "resolution " << view.resolution;
  const std::string json = TimelineViewToJson(view);
  EXPECT_LE(json.size(), 2000 + view.boxes.size() * 60) << json.size();
  int64_t shown = 0;
  for (const ViewBox& box : view.boxes) shown += box.merged;
  EXPECT_EQ(shown + view.ranges_dropped, view.intervals);
}

// What the input may hold: a range that overlaps its neighbour partly
// (the next ones use the first free row, not a row below it), a numbering
// that restarts (another step, not the same one), the steps after the
// warm-up preferred, times at the ends of what a trace may hold (no
// overflow), and more name bytes than the view keeps.
TEST(TimelineViewTest, PartialOverlapsRestartsWarmUpExtremesAndManyNames) {
  Builder overlap;
  overlap.Add(overlap.stream, 0, 100, IntervalKind::kKernel, "a");
  overlap.Add(overlap.stream, 50, 1000, IntervalKind::kKernel, "b");
  overlap.Add(overlap.stream, 200, 300, IntervalKind::kKernel, "c");
  TimelineView view = CutTimelineView(overlap.t);
  ASSERT_EQ(view.boxes.size(), 3u);
  EXPECT_EQ(view.lanes[0].rows, 2);
  EXPECT_EQ(view.names[view.boxes[1].name], "c");
  EXPECT_EQ(view.boxes[1].row, 0) << "row 0 is free again at 200";

  Builder restart;
  TimestampNs at = restart.Steps(0, {10, 10, 10}, 0);
  restart.Steps(0, {20, 20, 20, 20}, at + 5 * kMs);
  view = CutTimelineView(restart.t);
  EXPECT_EQ(view.steps_in_timeline, 7);
  // Runs: 0-2 (30 ms), then 0-2 and 1-3 of the second numbering (60 ms).
  EXPECT_NE(view.choice.find("of the 3 runs"), std::string::npos) << view.choice;

  Builder warm;
  warm.Steps(0, {50, 50, 50, 10, 10, 10, 10, 10, 10, 10}, 0);
  TimelineViewOptions options;
  options.steady_from_step = 5;
  view = CutTimelineView(warm.t, options);
  EXPECT_EQ(view.steps.front().step, 6) << view.choice;  // of 5-7, 6-8, 7-9
  EXPECT_NE(view.choice.find("of the 3 runs of 3 consecutive steps after the warm-up (8 in all)"),
            std::string::npos)
      << view.choice;
  options.steady_from_step = 50;
  view = CutTimelineView(warm.t, options);
  EXPECT_NE(view.choice.find("The trace keeps no 3 steps in a row after the report's warm-up, "
                             "from step 50 on."),
            std::string::npos)
      << view.choice;
  // Only the warm-up has 3 in a row; after it, 2 (a trace window of the
  // slowest steps, not typical): the 3 of the warm-up, said so.
  Builder pairs;
  at = pairs.Steps(0, {10, 10, 10}, 0);
  pairs.Steps(5, {90, 90}, at + 100 * kMs);
  options.steady_from_step = 5;
  view = CutTimelineView(pairs.t, options);
  ASSERT_EQ(view.steps.size(), 3u);
  EXPECT_EQ(view.steps[0].step, 0);
  EXPECT_NE(view.choice.find("no 3 steps in a row after the report's warm-up"), std::string::npos)
      << view.choice;

  Builder far;
  far.Add(far.stream, -ground::kMaxTraceNanos + 1, -ground::kMaxTraceNanos + 1000,
          IntervalKind::kKernel, "first");
  far.Add(far.stream, ground::kMaxTraceNanos - 1000, ground::kMaxTraceNanos - 1,
          IntervalKind::kKernel, "last");
  view = CutTimelineView(far.t);  // UBSan (the asan build) checks the arithmetic
  EXPECT_EQ(view.boxes.size(), 2u);
  EXPECT_NE(TimelineViewToJson(view).find("\"window_us\":"), std::string::npos);

  Builder named;
  named.Steps(0, {1000}, 0);
  for (int i = 0; i < 4000; ++i) {
    named.Add(named.stream, i * 100'000, i * 100'000 + 50'000, IntervalKind::kKernel,
              fmt::format("{:0>150}", i));
  }
  options = TimelineViewOptions{};
  options.max_name_total_bytes = 100'000;
  view = CutTimelineView(named.t, options);
  size_t bytes = 0;
  for (const std::string& n : view.names) bytes += n.size();
  EXPECT_LE(bytes, 100'000u + 64);
  EXPECT_GT(view.names_dropped, 3000);
  EXPECT_EQ(std::count(view.names.begin(), view.names.end(), "kernel"), 1);
}

// Names: cut at a UTF-8 boundary, and the JSON is valid whatever they hold.
TEST(TimelineViewTest, JsonIsValidForHostileAndLongNames) {
  Builder b;
  b.Steps(0, {1}, 0);
  std::string long_name;
  for (int i = 0; i < 100; ++i) long_name += "\xc3\xa9";  // 200 bytes of é
  b.Add(b.stream, 100, 200, IntervalKind::kKernel, long_name);
  b.Add(b.stream, 300, 400, IntervalKind::kKernel, "\"</script><script>alert(1)</script>\\\n");
  const TimelineView view = CutTimelineView(b.t);
  const std::string json = TimelineViewToJson(view);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << json;
  std::vector<std::string> names;
  for (simdjson::dom::element n : doc["names"].get_array()) {
    names.emplace_back(std::string_view(n.get_string()));
  }
  EXPECT_NE(std::find(names.begin(), names.end(), "\"</script><script>alert(1)</script>\\\n"),
            names.end());
  bool cut = false;
  for (const std::string& n : names) {
    if (n.rfind("\xc3\xa9", 0) != 0) continue;
    cut = true;
    EXPECT_EQ(n.size(), 156u + 3u);  // 78 whole é, then "…" (at most 160)
    EXPECT_EQ(n.substr(n.size() - 3), "\u2026");
  }
  EXPECT_TRUE(cut);
  EXPECT_EQ(int64_t(doc["boxes"].get_array().size()), int64_t(view.boxes.size()));
  EXPECT_EQ(int64_t(doc["classes"].get_array().size()), kViewClassCount);
}

// A real trace: rank0_queue's three typical steps, every device interval
// of the window in a box (alone or merged), none lost.
TEST(TimelineViewTest, ARealTracesTypicalSteps) {
  const std::string path = std::string(TRAINSCOPE_SHARED_KINETO_DIR) + "/rank0_queue.json.gz";
  absl::StatusOr<kineto::ImportedTrace> trace = kineto::ImportTrace(path, 1);
  ASSERT_TRUE(trace.ok()) << trace.status();
  const TimelineView view = CutTimelineView(trace->timeline);
  ASSERT_EQ(view.steps.size(), 3u);
  EXPECT_EQ(view.steps[0].step, 552);
  EXPECT_EQ(view.steps[2].step, 554);
  int64_t device_in_window = 0;
  for (const Interval& iv : trace->timeline.intervals()) {
    const bool overlaps =
        iv.start_ns < view.end_ns &&
        (iv.end_ns > view.start_ns || (iv.end_ns == iv.start_ns && iv.start_ns >= view.start_ns));
    if (ground::IsDeviceKind(iv.kind) && overlaps) ++device_in_window;
  }
  int64_t device_boxed = 0;
  for (const ViewBox& box : view.boxes) {
    if (view.lanes[box.lane].device) device_boxed += box.merged;
  }
  EXPECT_GT(device_in_window, 3000);
  EXPECT_EQ(device_boxed, device_in_window);
  EXPECT_EQ(view.ranges_dropped, 0);

  // What the CLI's read gives is the same cut.
  absl::StatusOr<TimelineView> read = analyze::ReadTimelineView(path, 1);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(TimelineViewToJson(*read), TimelineViewToJson(view));
  const analysis::TimelineViewOptions options;
  absl::StatusOr<analyze::AnalyzedTrace> analyzed = analyze::AnalyzeFile(path, 1, &options);
  ASSERT_TRUE(analyzed.ok()) << analyzed.status();
  EXPECT_EQ(TimelineViewToJson(analyzed->view), TimelineViewToJson(view));
}

}  // namespace
}  // namespace trainscope::analysis
