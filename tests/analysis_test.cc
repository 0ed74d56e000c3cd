// The analyses on hand-built timelines with hand-computed answers.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "sdk/analysis/checkpoint_advice.h"
#include "sdk/analysis/counter_series.h"
#include "sdk/analysis/gap_analyzer.h"
#include "sdk/analysis/interval_set.h"
#include "sdk/analysis/launch_attribution.h"
#include "sdk/analysis/phase_stats.h"
#include "sdk/analysis/quantile_sketch.h"
#include "sdk/analysis/run_analysis.h"
#include "sdk/analysis/step_analysis.h"
#include "sdk/analysis/straggler.h"
#include "sdk/analysis/trace_analysis.h"
#include "sdk/analysis/warmup.h"

namespace trainscope::analysis {
namespace {

constexpr TimestampNs kMs = 1000000;

class TimelineBuilder {
 public:
  TimelineBuilder() { track_ = timeline_.AddTrack({TrackKind::kHostThread, 1, 1, "main"}); }
  TimelineBuilder& Range(Phase phase, double start_ms, double end_ms, int64_t step = -1) {
    Interval i;
    i.start_ns = static_cast<TimestampNs>(start_ms * kMs);
    i.end_ns = static_cast<TimestampNs>(end_ms * kMs);
    i.step = step;
    i.phase = phase;
    i.kind = IntervalKind::kHostRange;
    i.name = timeline_.Intern(PhaseName(phase));
    i.track = track_;
    timeline_.Add(i);
    return *this;
  }
  TimelineBuilder& Step(int64_t index, double start_ms, double end_ms, int64_t samples = 10) {
    Interval i;
    i.start_ns = static_cast<TimestampNs>(start_ms * kMs);
    i.end_ns = static_cast<TimestampNs>(end_ms * kMs);
    i.step = index;
    i.value = samples;
    i.kind = IntervalKind::kStep;
    i.track = track_;
    timeline_.Add(i);
    return *this;
  }
  TimelineBuilder& Kernel(double start_ms, double end_ms, int64_t stream = 7) {
    Interval i;
    i.start_ns = static_cast<TimestampNs>(start_ms * kMs);
    i.end_ns = static_cast<TimestampNs>(end_ms * kMs);
    i.kind = IntervalKind::kKernel;
    i.track = timeline_.FindOrAddTrack(TrackKind::kDeviceStream, 0, stream, "stream");
    timeline_.Add(i);
    return *this;
  }
  TimelineBuilder& Call(const std::string& name, double start_ms, double end_ms) {
    Interval i;
    i.start_ns = static_cast<TimestampNs>(start_ms * kMs);
    i.end_ns = static_cast<TimestampNs>(end_ms * kMs);
    i.kind = IntervalKind::kRuntimeCall;
    i.name = timeline_.Intern(name);
    i.track = track_;
    timeline_.Add(i);
    return *this;
  }
  // Leaves the timeline unsorted, as sources may deliver it.
  Timeline BuildUnsorted() { return timeline_; }
  Timeline Build() {
    timeline_.Sort();
    return timeline_;
  }

 private:
  Timeline timeline_;
  uint32_t track_;
};

// Young and Daly: 4 saves that blocked 8 s in all (2 s each), one every
// 60 s, an MTBF of 1 h: sqrt(2 x 2 x 3600) = 120 s; at 60 s the run loses
// 2/60 + 60/7200 of its time, and 30 s plus the 5 s restart a failure.
Report::Checkpoint Saves(int64_t saves, double blocking_s, double interval_s) {
  Report::Checkpoint c;
  c.saves = saves;
  c.blocking_s = blocking_s;
  c.interval_s = interval_s;
  return c;
}

// A week of samples, one every 10 ms (60 million), ends in at most 32
// windows that still add up to every sample, with the right extremes.
TEST(CounterSeriesTest, AnyLengthOfRunKeepsAtMostThirtyTwoWindowsAndEverySample) {
  analysis::CounterSeries series;
  const int64_t start_ns = 5'000'000'000;  // the first sample, 5 s after the origin
  series.Add(start_ns, 7);
  EXPECT_EQ(series.Windows(0).size(), 1u);
  EXPECT_DOUBLE_EQ(series.Windows(0)[0].start_s, 5.0);
  EXPECT_DOUBLE_EQ(series.Windows(0)[0].end_s, 5.25);
  int64_t n = 1;
  const int64_t step_ns = 10'000'000, week_ns = int64_t{7} * 24 * 3600 * 1'000'000'000;
  for (int64_t t = start_ns + step_ns; t < start_ns + week_ns; t += step_ns * 997, ++n) {
    series.Add(t, (n % 5 == 0) ? 100 : n % 3);
  }
  series.Add(start_ns - 1'000'000, -4);  // drained late from another thread: the first window
  ++n;
  const std::vector<Report::Counter::Window> w = series.Windows(0);
  ASSERT_LE(w.size(), 32u);
  EXPECT_GE(w.size(), 17u) << "the week fills more than half of the windows";
  int64_t total = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    total += w[i].samples;
    EXPECT_NEAR(w[i].end_s - w[i].start_s, series.width_ns() / 1e9, 1e-6);
    if (i > 0) {
      EXPECT_DOUBLE_EQ(w[i].start_s, w[i - 1].end_s) << "consecutive";
    }
    if (w[i].samples > 0) {
      EXPECT_LE(w[i].min, w[i].mean);
      EXPECT_LE(w[i].mean, w[i].max);
      EXPECT_LE(w[i].max, 100);
    }
  }
  EXPECT_EQ(total, n);
  EXPECT_EQ(w[0].min, -4);
  EXPECT_GE(w.back().end_s * 1e9, static_cast<double>(start_ns + week_ns - step_ns * 997));
  EXPECT_GE(series.width_ns(), week_ns / 32) << "a week in 32 windows";
  EXPECT_LT(series.width_ns(), week_ns / 8);
}

TEST(CheckpointAdviceTest, YoungDalyIntervalAndTheRunsOwnCost) {
  Report::Checkpoint c = Saves(4, 8, 60);
  c.restart_delay_s = 5;
  AdviseCheckpointInterval(1.0, &c);
  EXPECT_EQ(c.mtbf_hours, 1.0);
  EXPECT_DOUBLE_EQ(c.optimal_interval_s, 120.0);
  EXPECT_DOUBLE_EQ(c.expected_overhead_share, 2.0 / 60 + 60.0 / 7200);
  EXPECT_DOUBLE_EQ(c.expected_lost_s_per_failure, 35.0);
}

TEST(CheckpointAdviceTest, NoAdviceWithoutAnMtbfOrASave) {
  Report::Checkpoint c = Saves(3, 3, 10);
  AdviseCheckpointInterval(0, &c);
  EXPECT_EQ(c.optimal_interval_s, 0);
  EXPECT_EQ(c.expected_overhead_share, 0);
  c.saves = 0;
  AdviseCheckpointInterval(2.0, &c);
  EXPECT_EQ(c.mtbf_hours, 2.0);
  EXPECT_EQ(c.optimal_interval_s, 0) << "no save: no cost to weigh";
}

TEST(IntervalSetTest, UnionIntersectSubtract) {
  const IntervalSet a = IntervalSet::FromUnsorted({{5, 8}, {0, 3}, {2, 4}, {8, 9}});
  ASSERT_EQ(a.spans().size(), 2u);  // [0,4) and [5,9)
  EXPECT_EQ(a.spans()[0], IntervalSet::Span(0, 4));
  EXPECT_EQ(a.spans()[1], IntervalSet::Span(5, 9));
  EXPECT_EQ(a.Length(), 8);
  const IntervalSet b = IntervalSet::FromUnsorted({{3, 6}, {7, 20}});
  EXPECT_EQ(a.Intersect(b).Length(), 1 + 1 + 2);  // [3,4) [5,6) [7,9)
  const IntervalSet diff = a.Subtract(b);         // [0,3) [6,7)
  ASSERT_EQ(diff.spans().size(), 2u);
  EXPECT_EQ(diff.spans()[0], IntervalSet::Span(0, 3));
  EXPECT_EQ(diff.spans()[1], IntervalSet::Span(6, 7));
  EXPECT_EQ(a.LengthWithin(2, 6), 2 + 1);
  EXPECT_EQ(IntervalSet::Range(5, 5).Length(), 0);
}

// Two steps of 10 ms: 4 ms data wait, 5 ms compute, 1 ms unmarked, then a
// 2 ms sync between the steps' windows that overlaps nothing busy.
Timeline TwoStepTimeline() {
  return TimelineBuilder()
      .Step(0, 0, 10)
      .Range(Phase::kDataWait, 0, 4, 0)
      .Range(Phase::kForward, 4, 6, 0)
      .Range(Phase::kBackward, 6, 9, 0)
      .Step(1, 12, 22)
      .Range(Phase::kDataWait, 12, 16, 1)
      .Range(Phase::kForward, 16, 18, 1)
      .Range(Phase::kBackward, 18, 21, 1)
      .Range(Phase::kSync, 10, 11)
      .Build();
}

TEST(GapAnalyzerTest, CpuComputePhasesAreBusyAndGapsAreBlamedByPriority) {
  const IdleBreakdown idle = GapAnalyzer::Analyze(TwoStepTimeline(), 0, 22 * kMs);
  EXPECT_EQ(idle.busy_source, "cpu_compute_phases");
  EXPECT_EQ(idle.window_ns, 22 * kMs);
  EXPECT_EQ(idle.busy_ns, 10 * kMs);
  EXPECT_EQ(idle.idle_ns, 12 * kMs);
  EXPECT_DOUBLE_EQ(idle.share, 12.0 / 22.0);
  std::map<std::string, TimestampNs> causes(idle.by_cause.begin(), idle.by_cause.end());
  EXPECT_EQ(causes["data_wait"], 8 * kMs);
  EXPECT_EQ(causes["sync"], 1 * kMs);
  EXPECT_EQ(causes["host"], 2 * kMs);          // 9..10 and 21..22, inside steps
  EXPECT_EQ(causes["outside_step"], 1 * kMs);  // 11..12
  EXPECT_EQ(idle.by_cause.front().first, "data_wait");
  EXPECT_EQ(idle.gaps, 3);  // [0,4) [9,16) [21,22)
}

// A trace of two windows of steps (0-1 and 7-8, as trainscope's trace
// windows keep): the 100 ms between them was not recorded and is neither
// busy nor idle; inside each window the analysis is as for one.
TEST(TraceAnalysisTest, WindowsOfStepsLeaveOutTheTimeBetweenThem) {
  TimelineBuilder b;
  for (int64_t w = 0; w < 2; ++w) {
    const double at = w * 122;  // 0 and 122 ms
    const int64_t first = w == 0 ? 0 : 7;
    b.Step(first, at + 0, at + 10)
        .Range(Phase::kDataWait, at + 0, at + 4, first)
        .Range(Phase::kForward, at + 4, at + 9, first)
        .Step(first + 1, at + 12, at + 22)
        .Range(Phase::kDataWait, at + 12, at + 16, first + 1)
        .Range(Phase::kForward, at + 16, at + 21, first + 1);
  }
  const TraceAnalysis a = AnalyzeTimeline(b.Build(), HtaTraceFacts{});
  EXPECT_EQ(a.step_windows, 2);
  EXPECT_EQ(a.idle.window_ns, 44 * kMs);  // 2 x [0, 22)
  EXPECT_EQ(a.idle.busy_ns, 20 * kMs);
  std::map<std::string, TimestampNs> causes(a.idle.by_cause.begin(), a.idle.by_cause.end());
  EXPECT_EQ(causes["data_wait"], 16 * kMs);
  EXPECT_EQ(causes["host"], 4 * kMs);          // 9..10 and 21..22 in each
  EXPECT_EQ(causes["outside_step"], 4 * kMs);  // 10..12 in each, not the 100 ms between
  EXPECT_EQ(a.idle.largest_gap_ns, 7 * kMs);   // 9..16 in each, not 22..122
  EXPECT_EQ(a.idle.gaps, 6);                   // [0,4) [9,16) [21,22) in each
  // The same steps numbered 0-3 are one window: the 100 ms is idle outside steps.
  TimelineBuilder c;
  for (int64_t w = 0; w < 2; ++w) {
    const double at = w * 122;
    c.Step(2 * w, at + 0, at + 10)
        .Range(Phase::kForward, at + 4, at + 9, 2 * w)
        .Step(2 * w + 1, at + 12, at + 22)
        .Range(Phase::kForward, at + 16, at + 21, 2 * w + 1);
  }
  const TraceAnalysis one = AnalyzeTimeline(c.Build(), HtaTraceFacts{});
  EXPECT_EQ(one.step_windows, 1);
  EXPECT_EQ(one.idle.window_ns, 144 * kMs);
}

TEST(GapAnalyzerTest, DeviceActivityReplacesHostComputeAsBusyTime) {
  const Timeline timeline = TimelineBuilder()
                                .Step(0, 0, 10)
                                .Range(Phase::kForward, 0, 10, 0)
                                .Range(Phase::kSync, 6, 10, 0)
                                .Kernel(1, 3)
                                .Kernel(2, 5)
                                .Build();
  const IdleBreakdown idle = GapAnalyzer::Analyze(timeline, 0, 10 * kMs);
  EXPECT_EQ(idle.busy_source, "device_activity");
  EXPECT_EQ(idle.busy_ns, 4 * kMs);  // [1,5)
  std::map<std::string, TimestampNs> causes(idle.by_cause.begin(), idle.by_cause.end());
  EXPECT_EQ(causes["sync"], 4 * kMs);  // [6,10)
  EXPECT_EQ(causes["host"], 2 * kMs);  // [0,1) and [5,6): forward is running, not waiting
}

TEST(GapAnalyzerTest, OverlappingCausesCountOnceForTheHigherPriority) {
  const Timeline timeline = TimelineBuilder()
                                .Step(0, 0, 10)
                                .Range(Phase::kCheckpoint, 0, 6, 0)
                                .Range(Phase::kDataWait, 4, 8, 0)
                                .Range(Phase::kForward, 8, 10, 0)
                                .Build();
  const IdleBreakdown idle = GapAnalyzer::Analyze(timeline, 0, 10 * kMs);
  std::map<std::string, TimestampNs> causes(idle.by_cause.begin(), idle.by_cause.end());
  EXPECT_EQ(causes["data_wait"], 4 * kMs);
  EXPECT_EQ(causes["checkpoint"], 4 * kMs);  // [0,4): data_wait owns [4,6)
  EXPECT_EQ(idle.idle_ns, 8 * kMs);
}

std::map<std::string, TimestampNs> Causes(const IdleBreakdown& idle) {
  return std::map<std::string, TimestampNs>(idle.by_cause.begin(), idle.by_cause.end());
}

TEST(GapAnalyzerTest, OverlappingStreamsAreBusyOnceAndPerStreamSeparately) {
  const Timeline timeline = TimelineBuilder()
                                .Step(0, 0, 10)
                                .Kernel(0, 6, 7)
                                .Kernel(4, 8, 8)  // overlaps stream 7 for 2 ms
                                .Build();
  const IdleBreakdown idle = GapAnalyzer::Analyze(timeline, 0, 10 * kMs);
  EXPECT_EQ(idle.busy_ns, 8 * kMs);
  EXPECT_EQ(idle.idle_ns, 2 * kMs);
  ASSERT_EQ(idle.streams.size(), 2u);
  EXPECT_EQ(idle.streams[0].stream, 7);
  EXPECT_EQ(idle.streams[0].busy_ns, 6 * kMs);
  EXPECT_EQ(idle.streams[1].busy_ns, 4 * kMs);
  EXPECT_DOUBLE_EQ(idle.streams[1].busy_share, 0.4);
}

TEST(GapAnalyzerTest, NestedPhasesBlameTheHigherPriorityCause) {
  // A sync inside an eval range, inside a checkpoint range: each idle
  // moment goes to the highest-priority phase active (sync > checkpoint > eval).
  const Timeline timeline = TimelineBuilder()
                                .Step(0, 0, 10)
                                .Kernel(0, 2)
                                .Range(Phase::kCheckpoint, 2, 10, 0)
                                .Range(Phase::kEval, 3, 9, 0)
                                .Range(Phase::kSync, 4, 5, 0)
                                .Build();
  const auto causes = Causes(GapAnalyzer::Analyze(timeline, 0, 10 * kMs));
  EXPECT_EQ(causes.at("sync"), 1 * kMs);
  EXPECT_EQ(causes.at("checkpoint"), 8 * kMs - 1 * kMs);  // [2,10) minus the sync
  EXPECT_EQ(causes.count("eval"), 0u);                    // covered entirely by checkpoint
}

TEST(GapAnalyzerTest, GapSpanningAStepBoundarySplitsBetweenHostAndOutsideStep) {
  const Timeline timeline =
      TimelineBuilder().Step(0, 0, 10).Step(1, 12, 22).Kernel(0, 8).Kernel(14, 22).Build();
  const IdleBreakdown idle = GapAnalyzer::Analyze(timeline, 0, 22 * kMs);
  const auto causes = Causes(idle);
  EXPECT_EQ(idle.gaps, 1);                        // one gap, [8, 14)
  EXPECT_EQ(causes.at("host"), 4 * kMs);          // [8,10) and [12,14)
  EXPECT_EQ(causes.at("outside_step"), 2 * kMs);  // [10,12)
  ASSERT_EQ(idle.largest_gaps.size(), 1u);
  EXPECT_EQ(idle.largest_gaps[0].step, 0);  // the step it starts in
  EXPECT_EQ(idle.largest_gaps[0].duration_ns, 6 * kMs);
  EXPECT_EQ(idle.largest_gaps[0].cause, "host");
  ASSERT_EQ(idle.idle_per_step.size(), 2u);
  EXPECT_EQ(idle.idle_per_step[0].idle_ns, 2 * kMs);
  EXPECT_EQ(idle.idle_per_step[1].idle_ns, 2 * kMs);
  EXPECT_EQ(idle.idle_per_step[0].by_cause[9], 2 * kMs) << IdleCauseName(9);  // host
}

TEST(GapAnalyzerTest, ZeroLengthKernelsNeitherFillNorSplitAGap) {
  const Timeline with =
      TimelineBuilder().Step(0, 0, 10).Kernel(0, 2).Kernel(5, 5).Kernel(8, 10).Build();
  const IdleBreakdown idle = GapAnalyzer::Analyze(with, 0, 10 * kMs);
  EXPECT_EQ(idle.idle_ns, 6 * kMs);
  EXPECT_EQ(idle.gaps, 1);
  EXPECT_EQ(idle.histogram[3].count, 1);  // one gap of 6 ms, in 1ms-10ms
  EXPECT_EQ(idle.histogram[3].label, "1ms-10ms");
}

TEST(GapAnalyzerTest, OutOfOrderRecordsGiveTheSameAnswer) {
  TimelineBuilder a;
  a.Kernel(6, 8).Step(0, 0, 10).Range(Phase::kDataWait, 2, 6, 0).Kernel(0, 2);
  TimelineBuilder b;
  b.Step(0, 0, 10).Kernel(0, 2).Range(Phase::kDataWait, 2, 6, 0).Kernel(6, 8);
  const IdleBreakdown unsorted = GapAnalyzer::Analyze(a.BuildUnsorted(), 0, 10 * kMs);
  const IdleBreakdown sorted = GapAnalyzer::Analyze(b.Build(), 0, 10 * kMs);
  EXPECT_EQ(unsorted.by_cause, sorted.by_cause);
  EXPECT_EQ(unsorted.idle_ns, 6 * kMs);
  EXPECT_EQ(Causes(sorted).at("data_wait"), 4 * kMs);
}

TEST(GapAnalyzerTest, DeviceRecordsSkewedOutsideTheWindowAreClipped) {
  // The device clock runs 3 ms ahead: a kernel appears to start before the
  // step began and another to end after it ended. Only the window counts.
  const Timeline timeline = TimelineBuilder().Step(0, 0, 10).Kernel(-3, 2).Kernel(9, 13).Build();
  const IdleBreakdown idle = GapAnalyzer::Analyze(timeline, 0, 10 * kMs);
  EXPECT_EQ(idle.busy_ns, 3 * kMs);
  EXPECT_EQ(idle.idle_ns, 7 * kMs);
  EXPECT_GE(idle.share, 0.0);
  EXPECT_LE(idle.share, 1.0);
  EXPECT_EQ(idle.streams[0].busy_ns, 3 * kMs);
}

TEST(GapAnalyzerTest, CudaCallsAreBlamedByWhatTheyDo) {
  const Timeline timeline = TimelineBuilder()
                                .Step(0, 0, 10)
                                .Kernel(0, 1)
                                .Call("cudaLaunchKernel", 1, 3)
                                .Kernel(3, 4)
                                .Call("cudaStreamSynchronize", 4, 7)
                                .Call("cudaMemcpyAsync", 7, 8)
                                .Call("cudaMemcpy", 8, 9)
                                .Call("cudaMalloc", 9, 9.5)
                                .Build();
  const auto causes = Causes(GapAnalyzer::Analyze(timeline, 0, 10 * kMs));
  EXPECT_EQ(causes.at("launch"), 2 * kMs);     // [1,3)
  EXPECT_EQ(causes.at("sync"), 4 * kMs);       // [4,7) and [8,9)
  EXPECT_EQ(causes.at("copy_call"), 1 * kMs);  // [7,8)
  EXPECT_EQ(causes.at("cuda_api"), kMs / 2);   // [9,9.5)
  EXPECT_EQ(causes.at("host"), kMs / 2);       // [9.5,10)
  EXPECT_TRUE(GapAnalyzer::IsBlockingCall("cudaDeviceSynchronize"));
  EXPECT_FALSE(GapAnalyzer::IsBlockingCall("cudaMemcpyAsync"));
}

// Adds an interval of [start, end) milliseconds to `timeline`.
void AddMs(Timeline* timeline, IntervalKind kind, uint32_t track, double start, double end,
           int64_t value, Phase phase, int64_t step) {
  Interval i;
  i.start_ns = static_cast<TimestampNs>(start * kMs);
  i.end_ns = static_cast<TimestampNs>(end * kMs);
  i.kind = kind;
  i.track = track;
  i.value = value;
  i.phase = phase;
  i.step = step;
  timeline->Add(i);
}

TEST(LaunchAttributionTest, KernelsGetThePhaseAndStepOpenWhenTheyWereLaunched) {
  Timeline timeline;
  const uint32_t main = timeline.AddTrack({TrackKind::kHostThread, 1, 1, "main"});
  const uint32_t loader = timeline.AddTrack({TrackKind::kHostThread, 1, 2, "loader"});
  const uint32_t stream = timeline.AddTrack({TrackKind::kDeviceStream, 0, 7, "stream 7"});
  auto add = [&](IntervalKind kind, uint32_t track, double start, double end, int64_t value,
                 Phase phase = Phase::kOther, int64_t step = -1) {
    AddMs(&timeline, kind, track, start, end, value, phase, step);
  };
  add(IntervalKind::kHostRange, main, 0, 10, 0, Phase::kForward, 4);
  add(IntervalKind::kHostRange, main, 2, 4, 0, Phase::kHostToDevice, 4);  // nested in forward
  add(IntervalKind::kHostRange, main, 10, 20, 0, Phase::kBackward, 4);
  add(IntervalKind::kRuntimeCall, main, 1, 1.1, 100);    // in forward
  add(IntervalKind::kRuntimeCall, main, 3, 3.1, 101);    // in the nested h2d
  add(IntervalKind::kRuntimeCall, main, 12, 12.1, 102);  // in backward
  add(IntervalKind::kRuntimeCall, loader, 5, 5.1, 103);  // a thread with no ranges
  add(IntervalKind::kKernel, stream, 1.5, 3, 100);
  add(IntervalKind::kMemcpy, stream, 3.5, 4, 101);
  add(IntervalKind::kKernel, stream, 12.5, 16, 102);
  add(IntervalKind::kKernel, stream, 16, 17, 103);
  add(IntervalKind::kKernel, stream, 17, 18, 999);  // no launch call
  timeline.Sort();
  const LaunchAttribution result = AttributeLaunches(&timeline);
  EXPECT_EQ(result.attributed, 3);
  EXPECT_EQ(result.unattributed, 2);
  std::map<int64_t, std::pair<Phase, int64_t>> tagged;
  for (const Interval& i : timeline.intervals()) {
    if (IsDeviceKind(i.kind)) tagged[i.value] = {i.phase, i.step};
  }
  EXPECT_EQ(tagged[100], std::make_pair(Phase::kForward, int64_t{4}));
  EXPECT_EQ(tagged[101], std::make_pair(Phase::kHostToDevice, int64_t{4}));
  EXPECT_EQ(tagged[102], std::make_pair(Phase::kBackward, int64_t{4}));
  std::map<std::string, TimestampNs> busy(result.busy_by_phase.begin(), result.busy_by_phase.end());
  EXPECT_EQ(busy["backward"], static_cast<TimestampNs>(3.5 * kMs));
  EXPECT_EQ(busy["forward"], static_cast<TimestampNs>(1.5 * kMs));
  EXPECT_EQ(busy["h2d"], static_cast<TimestampNs>(0.5 * kMs));
  EXPECT_EQ(busy["unattributed"], 2 * kMs);
  EXPECT_EQ(result.busy_by_phase.front().first, "backward");
}

// LibTorch runs CUDA backward on its own per-device thread (autograd's
// "pt_autograd_0"), which holds no trainscope range: its launches take the
// phase open on the thread that owns the step at that time. A thread's own
// range comes first; a call outside every step stays unattributed.
TEST(LaunchAttributionTest, LaunchesFromAThreadWithoutRangesTakeTheStepOwnersPhase) {
  Timeline timeline;
  const uint32_t main = timeline.AddTrack({TrackKind::kHostThread, 1, 1, "main"});
  const uint32_t autograd = timeline.AddTrack({TrackKind::kHostThread, 1, 2, "thread 2"});
  const uint32_t other = timeline.AddTrack({TrackKind::kHostThread, 1, 3, "worker"});
  const uint32_t stream = timeline.AddTrack({TrackKind::kDeviceStream, 0, 7, "stream 7"});
  auto add = [&](IntervalKind kind, uint32_t track, double start, double end, int64_t value,
                 Phase phase = Phase::kOther, int64_t step = -1) {
    AddMs(&timeline, kind, track, start, end, value, phase, step);
  };
  add(IntervalKind::kStep, main, 0, 30, 8, Phase::kOther, 4);
  add(IntervalKind::kHostRange, main, 0, 10, 0, Phase::kForward, 4);
  add(IntervalKind::kHostRange, main, 10, 25, 0, Phase::kBackward, 4);
  add(IntervalKind::kStep, main, 40, 50, 8, Phase::kOther, 5);
  add(IntervalKind::kHostRange, main, 40, 50, 0, Phase::kForward, 5);
  add(IntervalKind::kHostRange, other, 11, 13, 0, Phase::kOptimizer, 4);
  add(IntervalKind::kRuntimeCall, autograd, 12, 12.1, 200);  // during backward
  add(IntervalKind::kRuntimeCall, autograd, 20, 20.1, 201);  // during backward
  add(IntervalKind::kRuntimeCall, other, 12, 12.1, 202);     // its own range first
  add(IntervalKind::kRuntimeCall, autograd, 27, 27.1, 203);  // step open, no phase
  add(IntervalKind::kRuntimeCall, autograd, 35, 35.1, 204);  // between steps
  add(IntervalKind::kRuntimeCall, autograd, 45, 45.1, 205);  // in step 5's forward
  add(IntervalKind::kKernel, stream, 12.5, 15, 200);
  add(IntervalKind::kKernel, stream, 20.5, 22, 201);
  add(IntervalKind::kKernel, stream, 15, 16, 202);
  add(IntervalKind::kKernel, stream, 27.5, 28, 203);
  add(IntervalKind::kKernel, stream, 35.5, 36, 204);
  add(IntervalKind::kKernel, stream, 45.5, 46, 205);
  timeline.Sort();
  const LaunchAttribution result = AttributeLaunches(&timeline);
  std::map<int64_t, std::pair<Phase, int64_t>> tagged;
  for (const Interval& i : timeline.intervals()) {
    if (IsDeviceKind(i.kind)) tagged[i.value] = {i.phase, i.step};
  }
  EXPECT_EQ(tagged[200], std::make_pair(Phase::kBackward, int64_t{4}));
  EXPECT_EQ(tagged[201], std::make_pair(Phase::kBackward, int64_t{4}));
  EXPECT_EQ(tagged[202], std::make_pair(Phase::kOptimizer, int64_t{4}));
  EXPECT_EQ(tagged[205], std::make_pair(Phase::kForward, int64_t{5}));
  EXPECT_EQ(result.attributed, 4);
  EXPECT_EQ(result.from_step_thread, 3);
  EXPECT_EQ(result.unattributed, 2) << "step open without a phase; between steps";
  std::map<std::string, TimestampNs> busy(result.busy_by_phase.begin(), result.busy_by_phase.end());
  EXPECT_EQ(busy["backward"], 4 * kMs);
  EXPECT_EQ(busy["unattributed"], 1 * kMs);
}

// Feeds `ms` (milliseconds) to a rule; returns the position whose Add
// decided it (-1: undecided at the end, before Finish).
int64_t FeedRule(WarmupRule* rule, const std::vector<double>& ms) {
  int64_t decided_at = -1;
  for (size_t i = 0; i < ms.size(); ++i) {
    rule->Add(static_cast<int64_t>(ms[i] * 1e6));
    if (decided_at < 0 && rule->decided()) decided_at = static_cast<int64_t>(i);
  }
  return decided_at;
}

TEST(WarmupRuleTest, EndsBeforeThreeStepsWithinTheMedianOfTheEightAfterThem) {
  // Five equally slow first steps (the first three are within 1.25x of each
  // other, but not of the steps after them): warm-up 5, decided once step
  // 5 + 10 has come.
  std::vector<double> ms(40, 1.0);
  for (int i = 0; i < 5; ++i) ms[i] = 9.0;
  WarmupRule rule;
  EXPECT_EQ(FeedRule(&rule, ms), 15);
  EXPECT_EQ(rule.warmup(), 5);
  EXPECT_EQ(rule.settled_before(), 5);

  // One slow step inside the first three refuses that candidate only.
  WarmupRule blip;
  std::vector<double> with_blip(40, 1.0);
  with_blip[1] = 1.3;  // more than 1.25 x 1.0
  EXPECT_EQ(FeedRule(&blip, with_blip), 12);
  EXPECT_EQ(blip.warmup(), 2);
}

TEST(WarmupRuleTest, RefusedCandidatesAreWarmupBeforeTheRuleDecides) {
  std::vector<double> ms(14, 5.0);
  ms.push_back(1.0);
  WarmupRule rule;
  for (size_t i = 0; i < 11; ++i) rule.Add(static_cast<int64_t>(ms[i] * 1e6));
  EXPECT_TRUE(rule.decided()) << "eleven equal steps settle at once";
  EXPECT_EQ(rule.warmup(), 0);

  WarmupRule alternating;
  for (int i = 0; i < 30; ++i) alternating.Add(i % 2 == 0 ? 1'000'000 : 4'000'000);
  EXPECT_FALSE(alternating.decided());
  EXPECT_EQ(alternating.settled_before(), 20) << "candidates 0..19 refused by steps 10..29";
  EXPECT_EQ(alternating.warmup(), -1);
}

TEST(WarmupRuleTest, AtMostAHundredStepsDecidedByStep109) {
  WarmupRule rule;
  std::vector<double> ms;
  for (int i = 0; i < 300; ++i) ms.push_back(i % 2 == 0 ? 1.0 : 4.0);
  EXPECT_EQ(FeedRule(&rule, ms), 109);
  EXPECT_EQ(rule.warmup(), WarmupRule::kLatest);
}

TEST(WarmupRuleTest, ARunThatEndsFirstIsJudgedWithTheStepsThereAre) {
  WarmupRule none;
  FeedRule(&none, {7.0, 1.0});
  none.Finish();
  EXPECT_EQ(none.warmup(), 0) << "fewer than 3 steps";

  WarmupRule short_run;
  EXPECT_EQ(FeedRule(&short_run, {50, 50, 10, 10, 10}), -1);
  short_run.Finish();
  EXPECT_EQ(short_run.warmup(), 2);
  short_run.Finish();
  EXPECT_EQ(short_run.warmup(), 2) << "idempotent";

  WarmupRule unsettled;
  FeedRule(&unsettled, {1, 4, 1, 4, 1, 4, 1, 4, 1});
  unsettled.Finish();
  EXPECT_EQ(unsettled.warmup(), 6) << "the last three steps, judged against none";
}

TEST(WarmupRuleTest, AFixedCountIsDecidedWhenItsLastStepComesAndClampedAtTheEnd) {
  WarmupRule fixed(3);
  EXPECT_EQ(FeedRule(&fixed, {9, 9, 9, 9}), 2);
  EXPECT_EQ(fixed.warmup(), 3);
  EXPECT_EQ(fixed.Describe(), "fixed: 3 step(s) by option");

  WarmupRule longer(10);
  FeedRule(&longer, {1, 1, 1});
  EXPECT_EQ(longer.settled_before(), 3);
  longer.Finish();
  EXPECT_EQ(longer.warmup(), 3);

  WarmupRule zero(0);
  EXPECT_TRUE(zero.decided());
  EXPECT_EQ(zero.warmup(), 0);
}

TEST(StepAnalysisTest, AutoWarmupSkipsSlowFirstStepsAndThroughputUsesTheRest) {
  TimelineBuilder builder;
  // Steps 0 and 1 take 50 ms, the rest 10 ms: warmup is 2.
  double t = 0;
  for (int i = 0; i < 10; ++i) {
    const double d = i < 2 ? 50 : 10;
    builder.Step(i, t, t + d, 8);
    t += d;
  }
  const StepStats stats = AnalyzeSteps(builder.Build(), -1);
  EXPECT_EQ(stats.warmup_steps, 2);
  EXPECT_EQ(stats.steady_steps, 8);
  EXPECT_NEAR(stats.steady_steps_per_s, 8 / 0.080, 1e-9);
  EXPECT_NEAR(stats.steady_samples_per_s, 64 / 0.080, 1e-9);
  EXPECT_DOUBLE_EQ(stats.median_step_ms, 10);

  const StepStats fixed = AnalyzeSteps(builder.Build(), 5);
  EXPECT_EQ(fixed.warmup_steps, 5);
  EXPECT_EQ(fixed.steady_steps, 5);
}

TEST(StepAnalysisTest, MedianAndNearestRankPercentile) {
  EXPECT_DOUBLE_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(Median({5, 1, 3}), 3);
  std::vector<double> values;
  for (int i = 1; i <= 20; ++i) values.push_back(i);
  EXPECT_DOUBLE_EQ(Percentile(values, 90), 18);  // rank ceil(0.9*20) = 18
  EXPECT_DOUBLE_EQ(Percentile(values, 100), 20);
  EXPECT_DOUBLE_EQ(Percentile({}, 90), 0);
}

TEST(PhaseStatsTest, PerStepTimeIsTheUnionInsideEachStep) {
  const Timeline timeline = TwoStepTimeline();
  const StepStats steps = AnalyzeSteps(timeline, 0);
  const std::vector<PhaseStat> phases = AnalyzePhases(timeline, steps);
  std::map<std::string, PhaseStat> by_name;
  for (const PhaseStat& p : phases) by_name[p.phase] = p;
  EXPECT_DOUBLE_EQ(by_name["data_wait"].median_ms, 4);
  EXPECT_DOUBLE_EQ(by_name["backward"].max_ms, 3);
  EXPECT_DOUBLE_EQ(by_name["data_wait"].share_of_steps, 8.0 / 20.0);
  EXPECT_EQ(by_name["sync"].steps, 0);  // it ran between steps
  EXPECT_DOUBLE_EQ(by_name["sync"].total_s, 0.001);
  // Phase order follows the enum.
  ASSERT_GE(phases.size(), 2u);
  EXPECT_EQ(phases[0].phase, "data_wait");
}

TEST(RunAnalysisTest, AProfilingWindowLimitsTheIdleAnalysisToItsSteps) {
  Report report;
  RunClock clock;
  clock.finish_ns = 30 * kMs;
  clock.window_first_step = 1;  // only step 1 was profiled
  AnalyzeRun(TwoStepTimeline(), clock, 0, &report);
  EXPECT_DOUBLE_EQ(report.idle.window_s, 0.010);  // step 1: [12, 22)
  EXPECT_DOUBLE_EQ(report.idle.idle_s, 0.005);    // data_wait 4 + host 1
}

TEST(RunAnalysisTest, InputBoundRunRecommendsTheLoader) {
  Report report;
  RunClock clock;
  clock.process_start_ns = -5 * kMs;
  clock.finish_ns = 30 * kMs;
  AnalyzeRun(TwoStepTimeline(), clock, 0, &report);
  EXPECT_EQ(report.idle.top_cause, "data_wait");
  EXPECT_DOUBLE_EQ(report.timing.startup_s, 0.005);
  EXPECT_DOUBLE_EQ(report.timing.total_s, 0.035);
  EXPECT_NE(report.recommendation.find("36% of step time waits on input"), std::string::npos)
      << report.recommendation;
}

// Two equivalent runs either side of the 10% idle threshold read alike:
// near it, the recommendation says so and names the top cause either way.
TEST(RecommendTest, RunsNearTheIdleThresholdReadAlike) {
  auto recommend = [](double idle_share, double eval_share) {
    Report report;
    report.timing.steps = 100;
    report.idle.window_s = 10;
    report.idle.share = idle_share;
    report.idle.idle_s = idle_share * 10;
    report.idle.by_cause = {{"eval", eval_share * 10}, {"host", (idle_share - eval_share) * 10}};
    report.idle.top_cause = "eval";
    return Recommend(report);
  };
  const std::string below = recommend(0.099, 0.05);
  const std::string at = recommend(0.100, 0.05);
  EXPECT_EQ(below, at);
  EXPECT_EQ(at,
            "compute is busy 90% of the time, near the 10% idle threshold; the largest idle cause "
            "is eval (5% of the time): evaluate less often or on other resources");
  EXPECT_NE(recommend(0.081, 0.05).find("near the 10% idle threshold"), std::string::npos);
  EXPECT_NE(recommend(0.119, 0.05).find("near the 10% idle threshold"), std::string::npos);
  EXPECT_EQ(recommend(0.079, 0.05).rfind("compute is busy 92% of the time: no input or sync", 0),
            0u)
      << recommend(0.079, 0.05);
  EXPECT_EQ(recommend(0.12, 0.05).rfind("compute idles 12% of the time, 5% on eval:", 0), 0u)
      << recommend(0.12, 0.05);
}

// Three ranks, 10 steps of 100 ms each (synchronous: all alike). Rank 2
// computes 30 ms longer; ranks 0 and 1 wait those 30 ms (plus 5 ms of
// all-reduce that everyone pays) in sync. Values worked out by hand.
TEST(StragglerTest, TheRankThatMakesTheOthersWaitIsNamedWithItsLagAndTheWait) {
  std::vector<RankSteps> ranks(3);
  for (int r = 0; r < 3; ++r) {
    ranks[r].rank = r;
    ranks[r].world_size = 3;
    for (int i = 0; i < 10; ++i) {
      Report::Step step;
      step.index = i;
      step.duration_ms = 100;
      step.sync_ms = r == 2 ? 5 : 35;
      ranks[r].steps.push_back(step);
    }
  }
  const StragglerReport report = AnalyzeStragglers(ranks);
  EXPECT_EQ(report.slowest_rank, 2);
  EXPECT_TRUE(report.straggler);
  EXPECT_DOUBLE_EQ(report.lag_ms, 30.0);  // compute 95 vs 65
  EXPECT_DOUBLE_EQ(report.wait_caused_s, 2 * 10 * 0.030);
  EXPECT_DOUBLE_EQ(report.wait_share, 0.6 / 2.0);  // of the others' 2 s of steps
  EXPECT_EQ(report.common_steps, 10);
  ASSERT_EQ(report.ranks.size(), 3u);
  EXPECT_EQ(report.ranks[2].times_slowest, 10);
  EXPECT_DOUBLE_EQ(report.ranks[0].median_compute_ms, 65.0);
  EXPECT_TRUE(report.missing_ranks.empty());

  // Balanced ranks: one is still the slowest, but it is no straggler.
  std::vector<RankSteps> balanced = ranks;
  for (RankSteps& r : balanced) {
    for (Report::Step& step : r.steps) step.sync_ms = r.rank == 1 ? 4.5 : 5;
  }
  const StragglerReport even = AnalyzeStragglers(balanced);
  EXPECT_EQ(even.slowest_rank, 1);  // 95.5 ms of compute against 95
  EXPECT_FALSE(even.straggler) << "0.5 ms is under 5% of a 100 ms step";

  // A rank without a report, and one a survivor saw fail, are missing.
  ranks[0].missing_ranks = {3};
  ranks[0].world_size = 5;
  ranks[0].error = "allreduce failed";
  const StragglerReport partial = AnalyzeStragglers(ranks);
  EXPECT_EQ(partial.missing_ranks, (std::vector<int>{3, 4}));
  ASSERT_EQ(partial.errors.size(), 1u);
  EXPECT_EQ(partial.errors[0], "rank 0: allreduce failed");

  // Steps only some ranks reached are not compared.
  ranks[1].steps.resize(4);
  EXPECT_EQ(AnalyzeStragglers(ranks).common_steps, 4);
  EXPECT_EQ(AnalyzeStragglers({ranks[0]}).slowest_rank, -1) << "one rank: nobody to lag";
}

// Rows made up as they are read, never held: a rank of `steps` steps of
// 100 ms whose sync is `sync_ms` plus a jitter of a few microseconds
// (values all distinct, so medians past the exact limit are bucketed).
class MadeUpRows : public StepRows {
 public:
  MadeUpRows(int64_t steps, double sync_ms) : steps_(steps), sync_ms_(sync_ms) {}
  absl::Status Rewind() override {
    at_ = 0;
    ++rewinds;
    return absl::OkStatus();
  }
  absl::StatusOr<bool> Next(Report::Step* row) override {
    if (at_ == steps_) return false;
    row->index = at_;
    row->duration_ms = 100 + static_cast<double>(at_ % 1000) * 1e-3;
    row->sync_ms = sync_ms_ + static_cast<double>(at_ % 997) * 1e-3;
    ++at_;
    return true;
  }
  int rewinds = 0;

 private:
  int64_t steps_;
  double sync_ms_;
  int64_t at_ = 0;
};

// The streaming analysis over rows it reads twice and never holds: 50,000
// steps a rank, past the sketches' exact limit. Counts and sums are exact,
// medians within QuantileSketch::kRelativeError of the exact ones, and the
// straggler is the one the in-memory analysis names.
TEST(StragglerTest, RowsReadAsStreamsGiveTheInMemoryFiguresWithinTheSketchError) {
  constexpr int64_t kSteps = 50000;
  std::vector<RankInfo> info(3);
  std::vector<MadeUpRows> made;
  made.reserve(3);
  std::vector<StepRows*> rows;
  std::vector<RankSteps> in_memory(3);
  for (int r = 0; r < 3; ++r) {
    info[r].rank = 2 - r;  // any order: the report is by rank
    info[r].world_size = 3;
    made.emplace_back(kSteps, r == 0 ? 5 : 35);  // rank 2 computes 30 ms longer
    rows.push_back(&made.back());
    static_cast<RankInfo&>(in_memory[r]) = info[r];
    Report::Step step;
    while (*made.back().Next(&step)) in_memory[r].steps.push_back(step);
    ASSERT_TRUE(made.back().Rewind().ok());
    made.back().rewinds = 0;
  }
  const absl::StatusOr<StragglerReport> streamed = AnalyzeStragglers(info, rows);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  const StragglerReport exact = AnalyzeStragglers(in_memory);  // the same rows, exact
  for (const MadeUpRows& m : made) EXPECT_EQ(m.rewinds, 2) << "read twice, from the start";
  EXPECT_EQ(streamed->common_steps, kSteps);
  EXPECT_EQ(streamed->slowest_rank, 2);
  EXPECT_EQ(exact.slowest_rank, 2);
  EXPECT_TRUE(streamed->straggler);
  EXPECT_DOUBLE_EQ(streamed->wait_caused_s, exact.wait_caused_s);
  EXPECT_DOUBLE_EQ(streamed->wait_share, exact.wait_share);
  auto near = [](double got, double want) {
    return std::abs(got - want) <= QuantileSketch::kRelativeError * std::abs(want);
  };
  EXPECT_TRUE(near(streamed->lag_ms, exact.lag_ms)) << streamed->lag_ms << " " << exact.lag_ms;
  ASSERT_EQ(streamed->ranks.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    const auto& s = streamed->ranks[r];
    const auto& e = exact.ranks[r];
    EXPECT_EQ(s.rank, r);
    EXPECT_EQ(s.steps, kSteps);
    EXPECT_EQ(s.times_slowest, e.times_slowest);
    EXPECT_DOUBLE_EQ(s.total_sync_s, e.total_sync_s);
    EXPECT_TRUE(near(s.median_step_ms, e.median_step_ms)) << r;
    EXPECT_TRUE(near(s.median_compute_ms, e.median_compute_ms)) << r;
    EXPECT_TRUE(near(s.median_sync_ms, e.median_sync_ms)) << r;
  }
  // Below the exact limit the streamed figures are the exact ones.
  StragglerOptions options;
  options.exact_steps = kSteps;
  const absl::StatusOr<StragglerReport> all_exact = AnalyzeStragglers(info, rows, options);
  ASSERT_TRUE(all_exact.ok());
  EXPECT_EQ(all_exact->lag_ms, exact.lag_ms);
  EXPECT_EQ(all_exact->ranks[1].median_compute_ms, exact.ranks[1].median_compute_ms);
}

// Lags of either sign: two ranks whose compute differs by noise of +-1 ms
// around a lead of 0.1 ms, over 20,000 steps (past the exact limit). The
// median lag read as streams is the exact one within the sketch's error.
TEST(StragglerTest, NegativeLagsCountInTheMedianLag) {
  std::vector<RankSteps> ranks(2);
  uint64_t x = 42;
  for (int r = 0; r < 2; ++r) {
    ranks[r].rank = r;
    ranks[r].world_size = 2;
    for (int i = 0; i < 20000; ++i) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      Report::Step step;
      step.index = i;
      step.duration_ms = 100;
      step.sync_ms = 50 - (r == 0 ? 0.1 : 0) + static_cast<double>((x >> 33) % 2001) / 1000 - 1;
      ranks[r].steps.push_back(step);
    }
  }
  class InMemory : public StepRows {
   public:
    explicit InMemory(const std::vector<Report::Step>& steps) : steps_(steps) {}
    absl::Status Rewind() override {
      at_ = 0;
      return absl::OkStatus();
    }
    absl::StatusOr<bool> Next(Report::Step* row) override {
      if (at_ == steps_.size()) return false;
      *row = steps_[at_++];
      return true;
    }

   private:
    const std::vector<Report::Step>& steps_;
    size_t at_ = 0;
  } a(ranks[0].steps), b(ranks[1].steps);
  const StragglerReport exact = AnalyzeStragglers(ranks);
  const absl::StatusOr<StragglerReport> streamed =
      AnalyzeStragglers({ranks[0], ranks[1]}, {&a, &b});
  ASSERT_TRUE(streamed.ok());
  ASSERT_EQ(exact.slowest_rank, 0);
  EXPECT_EQ(streamed->slowest_rank, 0);
  EXPECT_GT(exact.lag_ms, 0.05);
  EXPECT_LT(exact.lag_ms, 0.15);
  EXPECT_NEAR(streamed->lag_ms, exact.lag_ms, QuantileSketch::kRelativeError * 1.0)
      << "within the error of a value of 1 ms (the lags around the median)";
  EXPECT_DOUBLE_EQ(streamed->wait_caused_s, exact.wait_caused_s);
}

// Steps are matched by index within runs of increasing indices: a loop
// that counts from 0 each epoch matches epoch with epoch, a step one rank
// lacks is not compared, and a read error is the analysis' error.
TEST(StragglerTest, EpochsThatCountFromZeroMatchEpochByEpoch) {
  std::vector<RankSteps> ranks(2);
  for (int r = 0; r < 2; ++r) {
    ranks[r].rank = r;
    ranks[r].world_size = 2;
    for (int epoch = 0; epoch < 3; ++epoch) {
      for (int i = 0; i < 10; ++i) {
        if (r == 1 && epoch == 1 && i == 4) continue;  // a row rank 1 lost
        Report::Step step;
        step.index = i;
        step.duration_ms = 100;
        step.sync_ms = r == 0 ? 10 : 30;
        ranks[r].steps.push_back(step);
      }
    }
  }
  const StragglerReport report = AnalyzeStragglers(ranks);
  EXPECT_EQ(report.common_steps, 29);
  EXPECT_EQ(report.ranks[0].steps, 30);
  EXPECT_EQ(report.ranks[1].steps, 29);
  EXPECT_EQ(report.slowest_rank, 0);
  EXPECT_DOUBLE_EQ(report.lag_ms, 20);
  EXPECT_EQ(report.ranks[0].times_slowest, 29);

  class Failing : public StepRows {
   public:
    absl::Status Rewind() override { return absl::OkStatus(); }
    absl::StatusOr<bool> Next(Report::Step*) override {
      return absl::DataLossError("steps-rank1.jsonl:3: broken");
    }
  } failing;
  MadeUpRows good(10, 5);
  const absl::StatusOr<StragglerReport> failed =
      AnalyzeStragglers({ranks[0], ranks[1]}, {&good, &failing});
  EXPECT_EQ(failed.status(), absl::DataLossError("steps-rank1.jsonl:3: broken"));
}

// Sorting in two halves on two threads and merging gives the stable order
// of one sort: by start, longer first, and ties in the order added.
TEST(TimelineTest, SortOnTwoThreadsIsTheStableSort) {
  Timeline one, two;
  uint64_t x = 12345;
  for (int i = 0; i < 50000; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    Interval interval;
    interval.start_ns = static_cast<TimestampNs>((x >> 33) % 5000);  // many equal starts
    interval.end_ns = interval.start_ns + static_cast<TimestampNs>((x >> 20) % 3);  // and ends
    interval.value = i;  // tells ties apart
    one.Add(interval);
    two.Add(interval);
  }
  one.Sort();
  two.Sort(/*two_threads=*/true);
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(one.intervals()[i].value, two.intervals()[i].value) << "position " << i;
  }
  for (size_t i = 1; i < one.size(); ++i) {
    const Interval &a = one.intervals()[i - 1], &b = one.intervals()[i];
    ASSERT_TRUE(a.start_ns < b.start_ns || (a.start_ns == b.start_ns && a.end_ns > b.end_ns) ||
                (a.start_ns == b.start_ns && a.end_ns == b.end_ns && a.value < b.value))
        << "position " << i;
  }
}

}  // namespace
}  // namespace trainscope::analysis
