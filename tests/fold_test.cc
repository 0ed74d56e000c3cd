// The analysis folded as the run goes (RunFold) against the whole-run
// analysis (AnalyzeRun) on the same recordings, and the quantile sketch it
// folds per-step times into.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "sdk/analysis/launch_attribution.h"
#include "sdk/analysis/quantile_sketch.h"
#include "sdk/analysis/run_analysis.h"
#include "sdk/analysis/run_fold.h"
#include "sdk/analysis/step_analysis.h"
#include "sdk/ground/timeline.h"
#include "sdk/session/segment_policy.h"
#include "tests/hta_fold_testing.h"

namespace trainscope::analysis {
namespace {

constexpr TimestampNs kUs = 1000;
constexpr TimestampNs kMs = 1000 * kUs;

// Within the sketch's relative error of `want`.
void ExpectWithinSketchError(double got, double want, const std::string& what) {
  EXPECT_LE(std::abs(got - want), QuantileSketch::kRelativeError * std::abs(want) + 1e-12)
      << what << ": " << got << " vs " << want;
}

TEST(QuantileSketchTest, ExactModeAgreesWithMedianAndPercentile) {
  std::mt19937_64 rng(1);
  std::lognormal_distribution<double> ms(1.0, 0.8);
  for (int n : {1, 2, 3, 10, 101, 1000}) {
    QuantileSketch sketch(1000);
    std::vector<double> values;
    for (int i = 0; i < n; ++i) {
      values.push_back(ms(rng));
      sketch.Add(values.back());
    }
    ASSERT_TRUE(sketch.exact());
    EXPECT_EQ(sketch.Median(), Median(values)) << n;
    for (double p : {1.0, 50.0, 90.0, 99.0, 100.0}) {
      EXPECT_EQ(sketch.Percentile(p), Percentile(values, p)) << n << " p" << p;
    }
    EXPECT_EQ(sketch.count(), n);
  }
  EXPECT_EQ(QuantileSketch().Median(), 0);
  EXPECT_EQ(QuantileSketch().Percentile(90), 0);
}

TEST(QuantileSketchTest, BucketModeIsWithinItsRelativeError) {
  std::mt19937_64 rng(2);
  std::lognormal_distribution<double> ms(0.0, 2.5);  // microseconds to seconds
  QuantileSketch sketch(64);
  std::vector<double> values;
  for (int i = 0; i < 200000; ++i) {
    values.push_back(ms(rng));
    sketch.Add(values.back());
  }
  ASSERT_FALSE(sketch.exact());
  ExpectWithinSketchError(sketch.Median(), Median(values), "median");
  for (double p : {0.1, 1.0, 10.0, 25.0, 75.0, 90.0, 99.0, 99.9}) {
    ExpectWithinSketchError(sketch.Percentile(p), Percentile(values, p), "p" + std::to_string(p));
  }
  EXPECT_EQ(sketch.Percentile(100), *std::max_element(values.begin(), values.end()));
  EXPECT_EQ(sketch.min(), *std::min_element(values.begin(), values.end()));
  EXPECT_LE(sketch.bytes(), 8u * QuantileSketch::kMaxBuckets + 256);
}

TEST(QuantileSketchTest, MergedSketchesAnswerAsOne) {
  std::mt19937_64 rng(3);
  std::exponential_distribution<double> ms(0.1);
  QuantileSketch a(100), b(100), whole(100);
  for (int i = 0; i < 5000; ++i) {
    const double v = ms(rng);
    (i % 3 == 0 ? a : b).Add(v);
    whole.Add(v);
  }
  a.Merge(b);
  EXPECT_EQ(a.count(), whole.count());
  for (double p : {10.0, 50.0, 90.0, 100.0}) EXPECT_EQ(a.Percentile(p), whole.Percentile(p)) << p;
  QuantileSketch small_a(100), small_b(100);
  small_a.Add(3);
  small_b.Add(1);
  small_b.Add(2);
  small_a.Merge(small_b);
  EXPECT_TRUE(small_a.exact());
  EXPECT_EQ(small_a.Median(), 2);
}

// A synthetic recording: a training loop on the main thread (warmup steps
// slow, then steady ones with data_wait, h2d, forward with a nested custom
// range, backward, optimizer, sometimes a sync), eval and checkpoint ranges
// between some steps, a loader thread whose ranges are tagged with the step
// they feed and cross step boundaries, cross-thread copies, and, with
// `device`, kernels on two streams launched by runtime calls and blocking
// syncs. With `one_thread`, the main thread's ranges alone (no loader, no
// cross-thread copies): the causes' spans never overlap.
struct Recording {
  Timeline timeline;
  TimestampNs start_ns = 0;
  TimestampNs end_ns = 0;
  std::vector<std::pair<TimestampNs, TimestampNs>> steps;  // to know the open step
};

Recording Record(int steps, bool device, uint64_t seed, bool one_thread = false) {
  Recording r;
  Timeline& t = r.timeline;
  std::mt19937_64 rng(seed);
  auto uniform = [&](TimestampNs lo, TimestampNs hi) {
    return std::uniform_int_distribution<TimestampNs>(lo, hi)(rng);
  };
  const uint32_t main = t.AddTrack({TrackKind::kHostThread, 1, 1, "main"});
  const uint32_t loader = t.AddTrack({TrackKind::kHostThread, 1, 2, "loader/0"});
  // LibTorch's autograd device thread: launches backward kernels, no ranges.
  const uint32_t autograd = t.AddTrack({TrackKind::kHostThread, 1, 3, "pt_autograd_0"});
  const uint32_t async = t.AddTrack({TrackKind::kHostAsync, 1, 0, "cross-thread ranges"});
  const uint32_t streams[2] = {t.AddTrack({TrackKind::kDeviceStream, 0, 7, "stream 7"}),
                               t.AddTrack({TrackKind::kDeviceStream, 0, 9, "stream 9"})};
  const uint32_t custom = t.Intern("clip_grad");
  const uint32_t launch = t.Intern("cudaLaunchKernel");
  const uint32_t copy = t.Intern("cudaMemcpyAsync");
  const uint32_t sync = t.Intern("cudaStreamSynchronize");
  auto add = [&](TimestampNs a, TimestampNs b, int64_t step, Phase phase, IntervalKind kind,
                 uint32_t track, uint32_t name, int64_t value = 0) {
    Interval i;
    i.start_ns = a;
    i.end_ns = b;
    i.step = step;
    i.phase = phase;
    i.kind = kind;
    i.track = track;
    i.name = name;
    i.value = value;
    t.Add(i);
  };
  auto range = [&](TimestampNs a, TimestampNs b, int64_t step, Phase phase) {
    add(a, b, step, phase, IntervalKind::kHostRange, main, t.Intern(PhaseName(phase)));
  };
  int64_t correlation = 1;
  TimestampNs device_free[2] = {0, 0};
  TimestampNs now = r.start_ns = 1'000 * kMs;
  for (int s = 0; s < steps; ++s) {
    if (s % 97 == 50) {  // eval between steps
      const TimestampNs e = now + uniform(2 * kMs, 30 * kMs);
      range(now, e, -1, Phase::kEval);
      now = e + uniform(0, 200 * kUs);
    }
    if (s % 211 == 100) {
      const TimestampNs e = now + uniform(5 * kMs, 40 * kMs);
      range(now, e, -1, Phase::kCheckpoint);
      now = e;
    }
    const TimestampNs step_start = now;
    const double slow = s < 8 ? 6.0 : 1.0;
    TimestampNs at = now + uniform(0, 50 * kUs);
    auto phase = [&](Phase p, TimestampNs lo, TimestampNs hi) {
      const TimestampNs b = at + static_cast<TimestampNs>(slow * uniform(lo, hi));
      range(at, b, s, p);
      const TimestampNs a = at;
      at = b + uniform(0, 30 * kUs);  // unmarked host time between phases
      return std::pair(a, b);
    };
    phase(Phase::kDataWait, 10 * kUs, s % 13 == 0 ? 3 * kMs : 300 * kUs);
    const auto h2d = phase(Phase::kHostToDevice, 20 * kUs, 200 * kUs);
    const auto fwd = phase(Phase::kForward, 300 * kUs, 2 * kMs);
    const TimestampNs c0 = fwd.first + (fwd.second - fwd.first) / 3;
    add(c0, c0 + (fwd.second - fwd.first) / 4, s, Phase::kOther, IntervalKind::kHostRange, main,
        custom);
    const auto bwd = phase(Phase::kBackward, 500 * kUs, 3 * kMs);
    phase(Phase::kOptimizer, 50 * kUs, 400 * kUs);
    if (s % 5 == 0) phase(Phase::kSync, 10 * kUs, 800 * kUs);
    const TimestampNs step_end = at;
    add(step_start, step_end, s, Phase::kOther, IntervalKind::kStep, main, 0, 32);
    r.steps.emplace_back(step_start, step_end);
    if (one_thread) {
      now = step_end + uniform(0, 100 * kUs);
      continue;
    }
    // The loader prepares the next batch while this step runs.
    const TimestampNs l0 = step_start + uniform(0, 1 * kMs);
    add(l0, l0 + uniform(200 * kUs, 4 * kMs), s + 1, Phase::kDataWait, IntervalKind::kHostRange,
        loader, t.Intern("decode"));
    if (s % 7 == 3) {
      add(h2d.first, h2d.second + uniform(0, 2 * kMs), s, Phase::kHostToDevice,
          IntervalKind::kAsyncRange, async, t.Intern("prefetch.h2d"));
    }
    if (device) {
      for (const auto& [a, b] : {h2d, fwd, bwd}) {
        for (int k = 0; k < 4; ++k) {
          const TimestampNs call = a + (b - a) * k / 5;
          const TimestampNs call_end = call + uniform(3 * kUs, 20 * kUs);
          const int stream = (k == 0 && a == h2d.first) ? 1 : 0;
          add(call, call_end, -1, Phase::kOther, IntervalKind::kRuntimeCall,
              a == bwd.first ? autograd : main, stream == 1 ? copy : launch, correlation);
          const TimestampNs k0 =
              std::max(call_end + uniform(5 * kUs, 40 * kUs), device_free[stream]);
          const TimestampNs k1 = k0 + uniform(20 * kUs, 600 * kUs);
          device_free[stream] = k1;
          add(k0, k1, -1, Phase::kOther,
              stream == 1 ? IntervalKind::kMemcpy : IntervalKind::kKernel, streams[stream],
              t.Intern(stream == 1 ? "Memcpy HtoD" : "gemm"), correlation);
          ++correlation;
        }
      }
      if (s % 5 == 0) {
        add(step_end - 300 * kUs, step_end - 50 * kUs, -1, Phase::kOther, IntervalKind::kSyncCall,
            main, sync);
      }
    }
    now = step_end + uniform(0, 100 * kUs);
  }
  r.end_ns = now + 10 * kMs;
  return r;
}

// Feeds `r` to a fold as a Session would: every `drain` of simulated time,
// the intervals that ended by then, and a watermark `delay` behind and not
// inside the open step.
struct Folded {
  Report report;
  std::vector<Report::Step> rows;
  int64_t late = 0;
  size_t most_held = 0;
};

Folded Fold(const Recording& r, RunFoldOptions options, TimestampNs drain, TimestampNs delay) {
  Folded out;
  RunFold fold(options, [&](Report::Step& row) { out.rows.push_back(row); });
  for (uint32_t n = 0; n < r.timeline.names(); ++n) fold.input().Intern(r.timeline.name(n));
  for (const Track& track : r.timeline.tracks()) fold.input().AddTrack(track);
  std::vector<Interval> by_end = r.timeline.intervals();
  std::stable_sort(by_end.begin(), by_end.end(),
                   [](const Interval& a, const Interval& b) { return a.end_ns < b.end_ns; });
  size_t next = 0;
  size_t open = 0;  // the first step not yet ended
  for (TimestampNs t = r.start_ns; next < by_end.size(); t += drain) {
    while (next < by_end.size() && by_end[next].end_ns <= t) fold.input().Add(by_end[next++]);
    while (open < r.steps.size() && r.steps[open].second <= t) ++open;
    TimestampNs watermark = t - delay;
    if (open < r.steps.size() && r.steps[open].first <= t) {
      watermark = std::min(watermark, r.steps[open].first);
    }
    fold.Advance(watermark);
    out.most_held = std::max(out.most_held, fold.held());
  }
  RunClock clock;
  clock.process_start_ns = options.process_start_ns;
  clock.finish_ns = r.end_ns;
  clock.window_first_step = options.window_first_step;
  clock.window_end_step = options.window_end_step;
  fold.Finish(clock, &out.report);
  out.late = fold.late();
  return out;
}

struct Whole {
  Report report;
  std::vector<Report::Step> rows;
};

Whole Analyze(const Recording& r, const RunFoldOptions& options) {
  Whole out;
  Timeline timeline = r.timeline;
  timeline.Sort();
  LaunchAttribution launches = AttributeLaunches(&timeline);
  for (const auto& [phase, ns] : launches.busy_by_phase) {
    out.report.device_timeline.busy_s_by_phase.emplace_back(phase, ns / 1e9);
  }
  RunClock clock;
  clock.process_start_ns = options.process_start_ns;
  clock.finish_ns = r.end_ns;
  clock.window_first_step = options.window_first_step;
  clock.window_end_step = options.window_end_step;
  AnalyzeRun(timeline, clock, options.warmup_override, &out.report, &out.rows);
  FillHta(ComputeHtaBreakdown(timeline, HtaTraceFacts{}), 0, &out.report.device_timeline.hta);
  return out;
}

// Every report field the analysis fills: exact, but for per-step quantiles
// past the sketch's exact limit (`exact_quantiles` false).
void ExpectSameReport(const Report& got, const Report& want, bool exact_quantiles,
                      bool exact_steady_median) {
  EXPECT_EQ(got.timing.steps, want.timing.steps);
  EXPECT_EQ(got.timing.warmup_steps, want.timing.warmup_steps);
  EXPECT_EQ(got.timing.startup_s, want.timing.startup_s);
  EXPECT_EQ(got.timing.steps_s, want.timing.steps_s);
  EXPECT_EQ(got.timing.total_s, want.timing.total_s);
  EXPECT_EQ(got.throughput.steady_steps, want.throughput.steady_steps);
  EXPECT_DOUBLE_EQ(got.throughput.steady_steps_per_s, want.throughput.steady_steps_per_s);
  EXPECT_DOUBLE_EQ(got.throughput.steady_samples_per_s, want.throughput.steady_samples_per_s);
  if (exact_steady_median) {
    EXPECT_EQ(got.throughput.median_step_ms, want.throughput.median_step_ms);
  } else {
    ExpectWithinSketchError(got.throughput.median_step_ms, want.throughput.median_step_ms,
                            "median_step_ms");
  }
  EXPECT_EQ(got.resource_hours, want.resource_hours);
  ASSERT_EQ(got.phases.size(), want.phases.size());
  for (size_t p = 0; p < want.phases.size(); ++p) {
    const PhaseStat& g = got.phases[p];
    const PhaseStat& w = want.phases[p];
    SCOPED_TRACE(w.phase);
    EXPECT_EQ(g.phase, w.phase);
    EXPECT_EQ(g.steps, w.steps);
    EXPECT_EQ(g.total_s, w.total_s);
    EXPECT_EQ(g.share_of_steps, w.share_of_steps);
    EXPECT_EQ(g.max_ms, w.max_ms);
    if (exact_quantiles) {
      EXPECT_EQ(g.median_ms, w.median_ms);
      EXPECT_EQ(g.p90_ms, w.p90_ms);
    } else {
      ExpectWithinSketchError(g.median_ms, w.median_ms, "median_ms");
      ExpectWithinSketchError(g.p90_ms, w.p90_ms, "p90_ms");
    }
  }
  EXPECT_EQ(got.idle.share, want.idle.share);
  EXPECT_EQ(got.idle.idle_s, want.idle.idle_s);
  EXPECT_EQ(got.idle.window_s, want.idle.window_s);
  EXPECT_EQ(got.idle.busy_source, want.idle.busy_source);
  EXPECT_EQ(got.idle.by_cause, want.idle.by_cause);
  EXPECT_EQ(got.idle.top_cause, want.idle.top_cause);
  // The gaps, folded segment by segment, as the whole window's.
  EXPECT_EQ(got.gaps.count, want.gaps.count);
  EXPECT_EQ(got.gaps.largest_ms, want.gaps.largest_ms);
  ASSERT_EQ(got.gaps.histogram.size(), 7u);
  ASSERT_EQ(got.gaps.histogram.size(), want.gaps.histogram.size());
  for (size_t k = 0; k < want.gaps.histogram.size(); ++k) {
    SCOPED_TRACE(want.gaps.histogram[k].label);
    EXPECT_EQ(got.gaps.histogram[k].label, want.gaps.histogram[k].label);
    EXPECT_EQ(got.gaps.histogram[k].count, want.gaps.histogram[k].count);
    EXPECT_DOUBLE_EQ(got.gaps.histogram[k].total_ms, want.gaps.histogram[k].total_ms);
  }
  ASSERT_EQ(got.gaps.largest.size(), want.gaps.largest.size());
  for (size_t k = 0; k < want.gaps.largest.size(); ++k) {
    SCOPED_TRACE("largest gap " + std::to_string(k));
    EXPECT_EQ(got.gaps.largest[k].start_s, want.gaps.largest[k].start_s);
    EXPECT_EQ(got.gaps.largest[k].duration_ms, want.gaps.largest[k].duration_ms);
    EXPECT_EQ(got.gaps.largest[k].step, want.gaps.largest[k].step);
    EXPECT_EQ(got.gaps.largest[k].cause, want.gaps.largest[k].cause);
  }
  EXPECT_EQ(got.utilization.allocated_device_hours, want.utilization.allocated_device_hours);
  EXPECT_EQ(got.utilization.busy_device_hours, want.utilization.busy_device_hours);
  EXPECT_DOUBLE_EQ(got.utilization.samples_per_busy_device_s,
                   want.utilization.samples_per_busy_device_s);
  EXPECT_EQ(got.device_timeline.busy_s_by_phase, want.device_timeline.busy_s_by_phase);
  // HTA's breakdowns, folded in start order as rows are released.
  testing::ExpectSameHta(got.device_timeline.hta, want.device_timeline.hta);
  EXPECT_EQ(got.recommendation, want.recommendation);
}

void ExpectSameRows(const std::vector<Report::Step>& got, const std::vector<Report::Step>& want,
                    bool with_idle) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    SCOPED_TRACE("row " + std::to_string(k));
    EXPECT_EQ(got[k].index, want[k].index);
    EXPECT_EQ(got[k].start_s, want[k].start_s);
    EXPECT_EQ(got[k].duration_ms, want[k].duration_ms);
    EXPECT_EQ(got[k].samples, want[k].samples);
    EXPECT_EQ(got[k].sync_ms, want[k].sync_ms);
    EXPECT_EQ(got[k].data_wait_ms, want[k].data_wait_ms);
    EXPECT_EQ(got[k].phase_ms, want[k].phase_ms);
    if (with_idle) {
      EXPECT_EQ(got[k].idle_ms, want[k].idle_ms);
      EXPECT_EQ(got[k].top_cause, want[k].top_cause);
    }
    if (::testing::Test::HasFailure()) return;
  }
}

// Adds [a, b) of `kind` and `phase`, tagged with `step`, on `track`.
void AddOnTrack(RunFold* fold, uint32_t track, TimestampNs a, TimestampNs b, Phase phase,
                IntervalKind kind, int64_t step) {
  Interval i;
  i.start_ns = a;
  i.end_ns = b;
  i.phase = phase;
  i.kind = kind;
  i.step = step;
  i.track = track;
  fold->input().Add(i);
}

RunFoldOptions FoldOptions(const Recording& r) {
  RunFoldOptions options;
  options.process_start_ns = r.start_ns - 3 * 1000 * kMs;
  options.exact_steps = 8192;
  options.launch_horizon_ns = 500 * kMs;
  return options;
}

// The acceptance comparison: 10^5 host intervals, drained every 50 ms with
// a 200 ms fold delay.
TEST(RunFoldTest, HostRecordingOf100kIntervalsMatchesTheWholeRunAnalysis) {
  const Recording r = Record(12000, false, 11);
  ASSERT_GE(r.timeline.size(), 100000u);
  const RunFoldOptions options = FoldOptions(r);
  const Folded folded = Fold(r, options, 50 * kMs, 200 * kMs);
  const Whole whole = Analyze(r, options);
  EXPECT_EQ(folded.late, 0);
  EXPECT_GE(whole.report.timing.warmup_steps, 8) << "the generated warmup";
  EXPECT_LE(whole.report.timing.warmup_steps, 12);
  ExpectSameReport(folded.report, whole.report, false, true);
  ExpectSameRows(folded.rows, whole.rows, true);
  EXPECT_LT(folded.most_held, 2000u) << "about 250 ms of intervals, not the run";
  EXPECT_GT(whole.report.gaps.count, 1000) << "gaps enough to compare";
  EXPECT_EQ(whole.report.gaps.largest.size(), 10u);
}

// GapFold stitches a gap that runs from one piece into the next, within a
// fold and across folds appended in time order, and keeps the longest
// with the step and the cause they began in.
TEST(GapFoldTest, AGapAcrossPiecesAndFoldsIsOneGap) {
  constexpr TimestampNs us = 1000;
  const std::vector<std::pair<IntervalSet::Span, int64_t>> steps = {{{15 * us, 40 * us}, 3},
                                                                    {{40 * us, 90 * us}, 4}};
  GapFold a, b, c;
  a.Add(0, 10 * us, 0, steps);
  a.Add(20 * us, 30 * us, 1, steps);
  b.Add(30 * us, 35 * us, 2, steps);  // goes on from a's open gap
  b.Add(50 * us, 60 * us, 0, steps);
  b.Add(70 * us, 1000 * us, 3, steps);
  c.Add(1000 * us, 1005 * us, 5, steps);  // goes on from b's last
  a.Append(b);
  a.Append(c);
  IdleBreakdown out;
  a.Describe(&out);
  EXPECT_EQ(out.gaps, 4);
  EXPECT_EQ(out.largest_gap_ns, 935 * us);
  ASSERT_EQ(out.largest_gaps.size(), 4u);
  EXPECT_EQ(out.largest_gaps[0].start_ns, 70 * us);
  EXPECT_EQ(out.largest_gaps[0].step, 4);
  EXPECT_EQ(out.largest_gaps[0].cause, IdleCauseName(3));
  EXPECT_EQ(out.largest_gaps[1].start_ns, 20 * us);  // 10 us of cause 1, then 5 of cause 2
  EXPECT_EQ(out.largest_gaps[1].duration_ns, 15 * us);
  EXPECT_EQ(out.largest_gaps[1].step, 3);
  EXPECT_EQ(out.largest_gaps[1].cause, IdleCauseName(1));
  EXPECT_EQ(out.largest_gaps[2].start_ns, 0);  // 10 us each: the earlier first
  EXPECT_EQ(out.largest_gaps[2].step, -1);
  EXPECT_EQ(out.largest_gaps[3].start_ns, 50 * us);
  ASSERT_EQ(out.histogram.size(), 7u);
  EXPECT_EQ(out.histogram[1].label, "10us-100us");
  EXPECT_EQ(out.histogram[1].count, 3);
  EXPECT_EQ(out.histogram[1].total_ns, 35 * us);
  EXPECT_EQ(out.histogram[3].count, 0);
  EXPECT_EQ(out.histogram[2].count, 1);  // 935 us
  // Folds with one gap each, joined and not, and an empty one.
  GapFold d, e, f, none;
  d.Add(0, 5 * us, 0, steps);
  e.Add(5 * us, 8 * us, 0, steps);
  f.Add(9 * us, 10 * us, 0, steps);
  d.Append(none);
  d.Append(e);
  d.Append(f);
  IdleBreakdown two;
  d.Describe(&two);
  EXPECT_EQ(two.gaps, 2);
  EXPECT_EQ(two.largest_gap_ns, 8 * us);
  EXPECT_EQ(two.histogram[0].count, 2);
}

// One thread's phases: the fold takes their causes in the order they come
// (IdleSets::by_start) instead of merging the sets, with the same figures.
TEST(RunFoldTest, OneThreadsRecordingMatchesTheWholeRunAnalysis) {
  const Recording r = Record(12000, false, 16, /*one_thread=*/true);
  ASSERT_GE(r.timeline.size(), 60000u);
  const RunFoldOptions options = FoldOptions(r);
  for (const TimestampNs drain : {50 * kMs, 2000 * kMs}) {  // short segments, and bursts
    SCOPED_TRACE(drain);
    const Folded folded = Fold(r, options, drain, 200 * kMs);
    const Whole whole = Analyze(r, options);
    EXPECT_EQ(folded.late, 0);
    ExpectSameReport(folded.report, whole.report, false, true);
    ExpectSameRows(folded.rows, whole.rows, true);
  }
}

TEST(RunFoldTest, DeviceRecordingMatchesTheWholeRunAnalysis) {
  const Recording r = Record(3000, true, 12);
  RunFoldOptions options = FoldOptions(r);
  options.device = true;
  const Folded folded = Fold(r, options, 50 * kMs, 200 * kMs);
  const Whole whole = Analyze(r, options);
  EXPECT_EQ(folded.late, 0);
  EXPECT_EQ(whole.report.idle.busy_source, "device_activity");
  // Backward's kernels come from the autograd thread: still backward's.
  std::map<std::string, double> busy(whole.report.device_timeline.busy_s_by_phase.begin(),
                                     whole.report.device_timeline.busy_s_by_phase.end());
  EXPECT_GT(busy["backward"], 0.2 * busy["forward"]) << "attributed through the step's thread";
  EXPECT_EQ(busy.count("unattributed"), 0u);
  // HTA's breakdowns see every kernel and copy, on both streams.
  const Report::DeviceTimeline::Hta& hta = whole.report.device_timeline.hta;
  EXPECT_EQ(hta.rows, 3000 * 12);
  EXPECT_GT(hta.idle_s, 0);
  EXPECT_GT(hta.compute_s, 0);
  EXPECT_GT(hta.non_compute_s, 0) << "the copies";
  ASSERT_EQ(hta.idle_by_stream.size(), 2u);
  EXPECT_GT(hta.idle_by_stream[0].host_wait_s, 0) << "needs each kernel's launch call";
  EXPECT_GT(hta.idle_by_stream[1].host_wait_s, 0);
  ExpectSameReport(folded.report, whole.report, true, true);
  ExpectSameRows(folded.rows, whole.rows, true);
}

TEST(RunFoldTest, ProfiledStepWindowMatchesTheWholeRunAnalysis) {
  const Recording r = Record(2000, true, 13);
  RunFoldOptions options = FoldOptions(r);
  options.device = true;
  options.window_first_step = 300;
  options.window_end_step = 900;
  const Folded folded = Fold(r, options, 50 * kMs, 200 * kMs);
  const Whole whole = Analyze(r, options);
  ExpectSameReport(folded.report, whole.report, true, true);
  ExpectSameRows(folded.rows, whole.rows, true);
}

// A burst (a drain that finds full rings, the last one) folds everything in
// one Advance: in segments of bounded size, with the same figures, and the
// sync and data_wait time of every step whose row is still to come kept.
TEST(RunFoldTest, ABurstFoldedInOneAdvanceMatchesTheWholeRunAnalysis) {
  for (const bool device : {false, true}) {
    SCOPED_TRACE(device ? "device" : "host");
    const Recording r = Record(device ? 3000 : 12000, device, 15);
    RunFoldOptions options = FoldOptions(r);
    options.device = device;
    const Folded folded = Fold(r, options, r.end_ns - r.start_ns, 0);
    const Whole whole = Analyze(r, options);
    EXPECT_EQ(folded.late, 0);
    ExpectSameReport(folded.report, whole.report, device, true);
    ExpectSameRows(folded.rows, whole.rows, true);
  }
}

// Past 2 x exact_steps the steps are summarised from the first exact_steps
// and sketches: the warmup found is the same on this recording, the
// steady-state median within the sketch's error.
// Collective time measured on the device (NCCL) joins the step's sync_ms
// while its row is still to come, and is counted late after.
TEST(RunFoldTest, DeviceSyncTimeJoinsItsStepUntilTheRowIsWritten) {
  const Recording r = Record(40, false, 5);
  std::vector<Report::Step> rows;
  RunFold fold(FoldOptions(r), [&](Report::Step& row) { rows.push_back(row); });
  for (uint32_t n = 0; n < r.timeline.names(); ++n) fold.input().Intern(r.timeline.name(n));
  for (const Track& track : r.timeline.tracks()) fold.input().AddTrack(track);
  for (const Interval& i : r.timeline.intervals()) fold.input().Add(i);
  EXPECT_TRUE(fold.AddStepSyncTime(7, 3 * kMs));
  EXPECT_TRUE(fold.AddStepSyncTime(7, 2 * kMs));
  EXPECT_FALSE(fold.AddStepSyncTime(-1, kMs)) << "no step";
  fold.Advance(r.steps[20].second + 1);  // rows of steps 0 to 20 written
  ASSERT_GE(rows.size(), 21u);
  EXPECT_FALSE(fold.AddStepSyncTime(12, kMs)) << "step 12's row is written";
  EXPECT_TRUE(fold.AddStepSyncTime(30, 4 * kMs));
  Report report;
  fold.Finish(RunClock{}, &report);
  std::map<int64_t, double> sync;
  for (const Report::Step& row : rows) sync[row.index] = row.sync_ms;
  const Recording plain = Record(40, false, 5);  // the same steps without device time
  const Whole whole = Analyze(plain, FoldOptions(plain));
  std::map<int64_t, double> host;
  for (const Report::Step& row : whole.rows) host[row.index] = row.sync_ms;
  EXPECT_NEAR(sync[7], host[7] + 5, 1e-9);
  EXPECT_NEAR(sync[30], host[30] + 4, 1e-9);
  EXPECT_NEAR(sync[12], host[12], 1e-9);
  EXPECT_EQ(fold.late_sync(), 2);
}

TEST(RunFoldTest, LongRunsHoldFewStepsAndGetTheWholeRunsWarmup) {
  const Recording r = Record(10000, false, 14);
  RunFoldOptions options = FoldOptions(r);
  options.exact_steps = 256;
  options.exact_values = 512;
  const Folded folded = Fold(r, options, 50 * kMs, 200 * kMs);
  const Whole whole = Analyze(r, options);
  Report want = whole.report;
  ExpectSameReport(folded.report, want, false, false);
  // One warm-up rule, decided online: a long run's warm-up is the whole
  // run's exactly, though the fold keeps only a few of its steps.
  EXPECT_EQ(folded.report.timing.warmup_rule, want.timing.warmup_rule);
  EXPECT_GE(want.timing.warmup_steps, 8) << "the generated warmup";
  options.warmup_override = 1000;  // past the exact prefix
  const Folded fixed = Fold(r, options, 50 * kMs, 200 * kMs);
  const Whole fixed_whole = Analyze(r, options);
  EXPECT_EQ(fixed.report.timing.warmup_steps, 1000);
  EXPECT_DOUBLE_EQ(fixed.report.throughput.steady_steps_per_s,
                   fixed_whole.report.throughput.steady_steps_per_s);
  ExpectWithinSketchError(fixed.report.throughput.median_step_ms,
                          fixed_whole.report.throughput.median_step_ms, "fixed warmup median");
}

// A range still open when the fold passed its start arrives late: counted,
// and only its part after the watermark is folded.
// A zero-length kernel (a coarse GPU timer) that starts exactly where a
// segment ends is released in the next segment: to HTA's breakdowns and
// to the trace, once.
TEST(RunFoldTest, AZeroLengthKernelAtASegmentsEndIsReleasedOnce) {
  Timeline t;
  const uint32_t main = t.AddTrack({TrackKind::kHostThread, 1, 1, "main"});
  const uint32_t stream = t.AddTrack({TrackKind::kDeviceStream, 0, 7, "stream 7"});
  const uint32_t launch = t.Intern("cudaLaunchKernel");
  const uint32_t gemm = t.Intern("gemm");
  auto add = [&](TimestampNs a, TimestampNs b, IntervalKind kind, int64_t id) {
    Interval i;
    i.start_ns = a;
    i.end_ns = b;
    i.kind = kind;
    i.track = kind == IntervalKind::kRuntimeCall ? main : stream;
    i.name = kind == IntervalKind::kRuntimeCall ? launch : gemm;
    i.value = id;
    t.Add(i);
  };
  const TimestampNs w = 10 * kMs;
  add(1 * kMs, 1 * kMs + 5 * kUs, IntervalKind::kRuntimeCall, 1);
  add(2 * kMs, 3 * kMs, IntervalKind::kKernel, 1);
  add(w - 50 * kUs, w - 45 * kUs, IntervalKind::kRuntimeCall, 2);
  add(w, w, IntervalKind::kKernel, 2);  // zero length, at the first segment's end
  add(w + 1 * kMs, w + 1 * kMs + 5 * kUs, IntervalKind::kRuntimeCall, 3);
  add(w + 2 * kMs, w + 3 * kMs, IntervalKind::kKernel, 3);
  RunFoldOptions options;
  options.device = true;
  int64_t released_kernels = 0;
  RunFold fold(
      options, [](Report::Step&) {},
      [&](const Timeline& released) {
        for (const Interval& i : released.intervals()) {
          released_kernels += i.kind == IntervalKind::kKernel;
        }
      });
  for (uint32_t n = 0; n < t.names(); ++n) fold.input().Intern(t.name(n));
  for (const Track& track : t.tracks()) fold.input().AddTrack(track);
  for (const Interval& i : t.intervals()) {
    if (i.end_ns <= w) fold.input().Add(i);
  }
  fold.Advance(w);
  for (const Interval& i : t.intervals()) {
    if (i.end_ns > w) fold.input().Add(i);
  }
  fold.Advance(20 * kMs);
  Report report;
  RunClock clock;
  clock.finish_ns = 30 * kMs;
  fold.Finish(clock, &report);
  EXPECT_EQ(released_kernels, 3) << "each kernel to the trace once";
  Report::DeviceTimeline::Hta want;
  FillHta(ComputeHtaBreakdown(t, HtaTraceFacts{}), 0, &want);
  EXPECT_EQ(want.rows, 3);
  EXPECT_EQ(report.device_timeline.hta.rows, want.rows);
  EXPECT_EQ(report.device_timeline.hta.kernel_s, want.kernel_s);
  ASSERT_EQ(report.device_timeline.hta.idle_by_stream.size(), 1u);
  EXPECT_EQ(report.device_timeline.hta.idle_by_stream[0].host_wait_s,
            want.idle_by_stream[0].host_wait_s);
  EXPECT_EQ(report.device_timeline.hta.late_rows, 0);
}

TEST(RunFoldTest, RangesLongerThanTheDelayAreCountedLate) {
  RunFoldOptions options;
  RunFold fold(options, {});
  const uint32_t main = fold.input().AddTrack({TrackKind::kHostThread, 1, 1, "main"});
  auto add = [&](TimestampNs a, TimestampNs b, Phase phase, IntervalKind kind, int64_t step) {
    AddOnTrack(&fold, main, a, b, phase, kind, step);
  };
  add(0, 10 * kMs, Phase::kForward, IntervalKind::kHostRange, 0);
  add(0, 10 * kMs, Phase::kOther, IntervalKind::kStep, 0);
  fold.Advance(50 * kMs);
  add(20 * kMs, 100 * kMs, Phase::kCheckpoint, IntervalKind::kHostRange, -1);  // 30 ms late
  fold.Advance(60 * kMs);
  EXPECT_EQ(fold.late(), 1);
  Report report;
  RunClock clock;
  clock.finish_ns = 200 * kMs;
  fold.Finish(clock, &report);
  ASSERT_EQ(report.phases.size(), 2u);
  EXPECT_EQ(report.phases[1].phase, "checkpoint");
  EXPECT_DOUBLE_EQ(report.phases[1].total_s, 0.050) << "[50, 100) ms of [20, 100)";
  EXPECT_EQ(report.events.late, 1);
}

// A default fold of one host thread that keeps its rows.
struct RowFold {
  std::vector<Report::Step> rows;
  RunFold fold{RunFoldOptions(), [this](Report::Step& row) { rows.push_back(row); }};
  uint32_t main = fold.input().AddTrack({TrackKind::kHostThread, 1, 1, "main"});
  void Add(TimestampNs a, TimestampNs b, Phase phase, IntervalKind kind, int64_t step) {
    AddOnTrack(&fold, main, a, b, phase, kind, step);
  }
  const std::vector<Report::Step>& Finish(TimestampNs finish_ns) {
    Report report;
    RunClock clock;
    clock.finish_ns = finish_ns;
    fold.Finish(clock, &report);
    return rows;
  }
};

// Step indices far apart (a sample count, epoch * 10000 + i): each tag
// waits in the table, among empty room, until its row.
TEST(RunFoldTest, RowsKeepTheirTagsWhenStepIndicesAreFarApart) {
  RowFold f;
  constexpr int kSteps = 200;
  for (int k = 0; k < kSteps; ++k) {
    const TimestampNs t = k * kMs;
    const int64_t index = int64_t{10000} * k;
    f.Add(t, t + 100 * kUs, Phase::kDataWait, IntervalKind::kHostRange, index);
    f.Add(t, t + kMs, Phase::kOther, IntervalKind::kStep, index);
    // Rows are written 10 steps behind the newest one.
    if (k >= 10) f.fold.Advance((k - 9) * kMs);
  }
  const std::vector<Report::Step>& rows = f.Finish((kSteps + 1) * kMs);
  ASSERT_EQ(rows.size(), static_cast<size_t>(kSteps));
  for (const Report::Step& row : rows) {
    EXPECT_NEAR(row.data_wait_ms, 0.1, 1e-12) << "step " << row.index;
  }
}

// Ranges tag their step's sync and data_wait time by index. Tags of indices
// no step ever ends (between the steps' indices, and far ahead of them)
// are dropped in time, and each row still gets exactly its own.
TEST(RunFoldTest, EachRowGetsItsOwnTagsAmongTagsOfStepsThatNeverCame) {
  RowFold f;
  constexpr int kSteps = 30000;
  for (int k = 0; k < kSteps; ++k) {
    const TimestampNs t = k * kMs;
    f.Add(t, t + 100 * kUs, Phase::kDataWait, IntervalKind::kHostRange, 2 * k);
    f.Add(t + 100 * kUs, t + 150 * kUs, Phase::kSync, IntervalKind::kHostRange, 2 * k);
    // Index 2k + 1 never ends a step; 10^9 + k is far past every window.
    f.Add(t + 200 * kUs, t + 210 * kUs, Phase::kDataWait, IntervalKind::kHostRange, 2 * k + 1);
    f.Add(t + 300 * kUs, t + 320 * kUs, Phase::kSync, IntervalKind::kHostRange, 1000000000 + k);
    f.Add(t, t + kMs, Phase::kOther, IntervalKind::kStep, 2 * k);
    if (k % 1000 == 999) f.fold.Advance(t + kMs);
  }
  const std::vector<Report::Step>& rows = f.Finish((kSteps + 1) * kMs);
  ASSERT_EQ(rows.size(), static_cast<size_t>(kSteps));
  int wrong = 0;
  for (const Report::Step& row : rows) {
    if (std::abs(row.data_wait_ms - 0.1) > 1e-12 || std::abs(row.sync_ms - 0.05) > 1e-12) {
      if (++wrong <= 3) {
        ADD_FAILURE() << "step " << row.index << ": data_wait_ms " << row.data_wait_ms
                      << ", sync_ms " << row.sync_ms;
      }
    }
  }
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace trainscope::analysis

namespace trainscope::drain {
namespace {

// The drain's segment policy (sdk/session/segment_policy.h), in ms.
constexpr TimestampNs kMs = 1000000;

drain::SegmentInput Waiting(TimestampNs folded, TimestampNs watermark, TimestampNs now) {
  drain::SegmentInput in;
  in.folded = folded;
  in.watermark = watermark;
  in.now = now;
  in.since_drain = 1 * kMs;
  in.intervals_per_ns = 0.001;  // 1 an microsecond: 8192 of them are 8 ms
  return in;
}

TEST(SegmentPolicyTest, ASegmentWaitsUntilItIsHalfAsLongAsItsWait) {
  EXPECT_EQ(drain::SegmentEnd(Waiting(10 * kMs, 13 * kMs, 20 * kMs)), 10 * kMs)
      << "3 ms to fold, 7 ms behind now: not yet";
  EXPECT_EQ(drain::SegmentEnd(Waiting(10 * kMs, 13 * kMs, 19 * kMs)), 13 * kMs)
      << "3 ms to fold, 6 ms behind now";
  EXPECT_EQ(drain::SegmentEnd(Waiting(10 * kMs, 10 * kMs + kMs / 2, 10 * kMs + kMs / 2)), 10 * kMs)
      << "under the 1 ms minimum";
}

// A drain that found nothing new folds the rest, however short: else the
// rows of the last steps before a pause would wait for the next input (14
// rows held for 20 s on a loaded machine, a rest under 1 ms).
TEST(SegmentPolicyTest, ADrainThatFoundNothingNewFoldsTheRest) {
  drain::SegmentInput in = Waiting(10 * kMs, 10 * kMs + kMs / 2, 30 * kMs);
  EXPECT_EQ(drain::SegmentEnd(in), 10 * kMs);
  in.quiet = true;
  EXPECT_EQ(drain::SegmentEnd(in), 10 * kMs + kMs / 2);
}

TEST(SegmentPolicyTest, ASegmentIsAboutASliceOfIntervalsAtTheirRate) {
  drain::SegmentInput in = Waiting(0, 100 * kMs, 101 * kMs);
  EXPECT_EQ(drain::SegmentEnd(in), 8192 * 1000) << "8192 intervals at 1 a microsecond";
  in.intervals_per_ns = 0.1;  // 8192 of them are 82 us: the 1 ms minimum
  EXPECT_EQ(drain::SegmentEnd(in), 1 * kMs);
  in.since_drain = 20 * kMs;  // at least what came since the last drain
  EXPECT_EQ(drain::SegmentEnd(in), 20 * kMs);
}

// After a long pause the rate has decayed towards 0 (x0.8 an empty drain):
// a slice of 8192 intervals is then longer than any integer, and the rest
// is folded whole.
TEST(SegmentPolicyTest, ARateDecayedToNearlyNothingFoldsTheRest) {
  drain::SegmentInput in = Waiting(10 * kMs, 110 * kMs, 120 * kMs);
  in.quiet = true;
  in.intervals_per_ns = 1e-20;
  EXPECT_EQ(drain::SegmentEnd(in), 110 * kMs);
  in.intervals_per_ns = 1e-300;
  EXPECT_EQ(drain::SegmentEnd(in), 110 * kMs);
}

TEST(SegmentPolicyTest, TheFirstAndAnOverfullFoldAllTheyMay) {
  drain::SegmentInput in = Waiting(std::numeric_limits<TimestampNs>::min(), 50 * kMs, 60 * kMs);
  EXPECT_EQ(drain::SegmentEnd(in), 50 * kMs);
  in = Waiting(10 * kMs, 11 * kMs, 100 * kMs);
  in.over = true;
  EXPECT_EQ(drain::SegmentEnd(in), 11 * kMs);
  in = Waiting(10 * kMs, 9 * kMs, 100 * kMs);
  in.over = true;
  EXPECT_EQ(drain::SegmentEnd(in), 10 * kMs) << "never behind what is folded";
}

}  // namespace
}  // namespace trainscope::drain
