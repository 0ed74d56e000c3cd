// sdk/analysis/run_fold.h: the report's analysis folded as the run goes, in
// memory that does not grow with the run's length.
//
// AnalyzeRun (run_analysis.h) reads a whole-run Timeline. A week-long job
// cannot keep one, so the Session feeds its intervals here as they are
// drained, and moves a watermark forward: every interval that overlaps time
// before the watermark has arrived. Advance(w) folds the time between the
// previous watermark and w into running aggregates and releases what no
// later time needs:
//
//   phases    the union of each phase's ranges per segment of time (exact
//             totals), and per step, once the step is before the watermark,
//             into a QuantileSketch per phase (median, p90, max);
//   idle      GapAnalyzer on the segment, for the busy source the whole run
//             would choose (device activity once any has arrived, else host
//             compute phases), summed over segments: exact, since idle time,
//             busy time and each cause's time add up over disjoint segments;
//   steps     warmup (WarmupRule, decided online), steady throughput and
//             median step time (StepLog, run_fold_parts.h);
//   device    each kernel, copy or set attributed to the phase that launched
//             it (launch_attribution.h), its busy time by phase;
//   hta       HTA's temporal and idle-time breakdowns of the device rows
//             (HtaFold, hta_breakdown.h): released rows folded in start
//             order once no row still held starts before them: exact;
//   rows      one Report::Step per step, handed to the step sink.
//
// Finish fills the same report fields as AnalyzeRun, with the same values
// for sums and counts and, for per-step quantiles, within
// QuantileSketch::kRelativeError once more than exact_values steps had a
// phase (tests/fold_test.cc compares the two).
//
// Late intervals. An interval that arrives with its start before the
// watermark has its part before the watermark left out of phases and idle
// (counted in late()); the Session keeps the watermark behind the open step,
// Options::fold_delay_ms behind the drain and behind the CUPTI collector's
// CompleteBefore() (device records still to come), so only ranges longer
// than that delay and outside steps arrive late.
//
// Memory: RunFold's part of the session's bound, stated once in
// docs/architecture.md ("Memory": the `fold` term, and the step state and
// open steps of `steps`, HTA's fold and the step history of `device`):
// the intervals held between the watermark and the newest drained one (48
// bytes each) and, once device records come, the host ranges and calls of
// the last launch_horizon_ns; one segment's scratch and the room of a few
// runs of kRunIntervals; (kPhaseCount + 2) sketches of at most
// 8 x max(exact_values, QuantileSketch::kMaxBuckets) bytes; 2 x exact_steps
// step spans of 24 bytes; the steps waiting for their rows and their sync
// and data_wait tags; the steps of the launch horizon (at most 4096 x 48
// bytes); HtaFold's launch calls of the launch horizon and at most
// HtaFold::kMaxHeldRows x 48 bytes of rows. Names and tracks of input()
// grow with distinct names and threads, not with time.
//
//   RunFold fold(options, [&](Report::Step& row) { steps_file.Append(row); });
//   fold.input().Add(interval);            // as drained
//   fold.Advance(now - delay);             // at each drain
//   fold.Finish(clock, &report);           // at the end
#ifndef TRAINSCOPE_SDK_ANALYSIS_RUN_FOLD_H_
#define TRAINSCOPE_SDK_ANALYSIS_RUN_FOLD_H_

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "sdk/analysis/gap_analyzer.h"
#include "sdk/analysis/model.h"
#include "sdk/analysis/quantile_sketch.h"
#include "sdk/analysis/run_analysis.h"
#include "trainscope/report.h"

namespace trainscope::analysis {

namespace fold {
struct OpenStep;
}  // namespace fold

struct RunFoldOptions {
  TimestampNs process_start_ns = 0;  // the idle window's start in a run without steps
  int64_t warmup_override = -1;      // as AnalyzeRun's
  // The idle analysis covers steps [window_first_step, window_end_step)
  // (-1: unbounded), as RunClock's.
  int64_t window_first_step = -1;
  int64_t window_end_step = -1;
  // Device records may come (a CUPTI collector runs): the device-busy idle
  // analysis runs from the start, beside the host one, until one is chosen.
  bool device = false;
  // Steps kept exactly; past 2 x exact_steps the median step time comes
  // from a sketch (StepLog, run_fold_parts.h).
  size_t exact_steps = 4096;
  // Values a per-step sketch keeps exactly before it switches to buckets.
  size_t exact_values = 8192;
  // How long host ranges and calls stay after the watermark passed them, for
  // device records launched by them that arrive later.
  TimestampNs launch_horizon_ns = 2'000'000'000;
};

class RunFold {
 public:
  // Receives each step's row once the watermark passed its end, in start
  // order. The sink may fill the memory fields.
  using StepSink = std::function<void(Report::Step& row)>;
  // Receives, once, the device intervals and CUDA calls the watermark passed,
  // attributed (step and phase set), in a Timeline that shares input()'s
  // names and tracks (valid during the call only).
  using DeviceSink = std::function<void(const Timeline& released)>;

  RunFold(RunFoldOptions options, StepSink steps, DeviceSink device = {});
  ~RunFold();
  RunFold(const RunFold&) = delete;
  RunFold& operator=(const RunFold&) = delete;

  // Where sources add intervals (any order), names and tracks. The fold
  // takes the intervals at the next Advance or Finish.
  Timeline& input() { return input_; }

  // Moves what input() holds into the fold (Advance and Finish do it first).
  // A batch of 12288 to 16384 intervals is taken whole, without a copy: a
  // caller adding many between two Advances calls this from 12288.
  void Take();

  // Folds all time before `watermark`: every interval overlapping it must
  // have been added. A watermark at or before the current one only takes
  // the new input. Cost: O(n log n) in the intervals overlapping the new
  // segment; held intervals are kept in runs as they arrived, and only the
  // runs with an interval that begins before `watermark` are looked at;
  // plus the held host ranges when device records came.
  void Advance(TimestampNs watermark);

  // Folds the rest and fills report->timing, throughput, resource_hours,
  // phases, idle, utilization, device_timeline.busy_s_by_phase and .hta,
  // events.late and recommendation, as AnalyzeRun does (with
  // clock.window_* from the options). Call once, last.
  void Finish(const RunClock& clock, Report* report);

  // Adds `ns` to step `step`'s sync_ms: collective time measured on the
  // device (NCCL), which no host range covers. Returns false, and counts it
  // in late_sync(), when the step's row was already written. Cost: a hash
  // lookup; the tag lives until the row (bounded as the range tags are).
  bool AddStepSyncTime(int64_t step, TimestampNs ns);

  TimestampNs watermark() const { return watermark_; }
  int64_t late() const { return late_; }
  int64_t late_sync() const { return late_sync_; }
  // Intervals held (pending and launch history), steps waiting and device
  // rows waiting for HTA's start order.
  size_t held() const;
  // The first step's row (for restart_delay); index -1 before any step.
  const Report::Step& first_row() const { return first_row_; }

  struct Impl;

 private:
  // Taking input (Take's stages).
  bool InWindow(int64_t step_index) const;
  bool Note(const Interval& interval);
  void NoteStep(const Interval& step);

  // Folding a segment of time [watermark_, end): its stages, in order.
  struct SegmentWork;  // the segment and what each stage hands on
  const std::vector<TimestampNs>& SegmentEnds(TimestampNs watermark);
  void Segment(TimestampNs end);
  void LastSegment(TimestampNs finish_ns);  // to the end of time, all held
  void FoldSegment(SegmentWork& work);
  void AttributeHeldLaunches(const SegmentWork& work);
  void CollectSteps(SegmentWork& work);
  void ClipIntervals(SegmentWork& work);
  int CallCause(const Interval& call);
  void SplitPhases(SegmentWork& work);
  void FoldIdle(SegmentWork& work);
  void WriteRows(const SegmentWork& work);
  Report::Step Row(const fold::OpenStep& step);
  void ReleaseDeviceWork(SegmentWork& work);
  void CompactRuns(const SegmentWork& work);

  // Finish's figures from what the segments added up.
  std::vector<PhaseStat> Phases() const;
  IdleBreakdown Idle() const;

  RunFoldOptions options_;
  StepSink step_sink_;
  DeviceSink device_sink_;
  Timeline input_;
  TimestampNs watermark_ = std::numeric_limits<TimestampNs>::min();
  int64_t late_ = 0;
  int64_t late_sync_ = 0;
  int64_t last_row_index_ = std::numeric_limits<int64_t>::min();  // rows come in start order
  Report::Step first_row_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainscope::analysis

#endif  // TRAINSCOPE_SDK_ANALYSIS_RUN_FOLD_H_
