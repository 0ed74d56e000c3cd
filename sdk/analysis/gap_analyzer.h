// sdk/analysis/gap_analyzer.h: when the compute was idle, and why.
//
// Busy time is the union of device activity (kernels, copies, sets) when the
// timeline has any, else of the host compute phases (forward, backward,
// optimizer). Idle time is the rest of the window. Each idle nanosecond is
// blamed on the first cause active at that moment, in this priority order:
//   data_wait, h2d, sync, checkpoint, eval, other  host phases (sync also
//                                                  covers CUDA synchronisation
//                                                  records and blocking
//                                                  cudaMemcpy/…Synchronize calls)
//   copy_call     the host was inside an asynchronous copy or set call
//                 (cudaMemcpyAsync from pageable memory blocks the host)
//   launch        the host was inside a kernel or graph launch call
//                 (launch-bound: kernels too short for their launch cost)
//   cuda_api      the host was inside some other CUDA call (allocation,
//                 event queries, ...)
//   host          inside a step, the host did something no range marks
//   outside_step  between steps
// docs/gap-analysis.md explains each figure and what to do about each cause.
//
//   IdleBreakdown idle = GapAnalyzer::Analyze(timeline, window_start, window_end);
#ifndef TRAINSCOPE_SDK_ANALYSIS_GAP_ANALYZER_H_
#define TRAINSCOPE_SDK_ANALYSIS_GAP_ANALYZER_H_

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sdk/analysis/interval_set.h"
#include "sdk/analysis/model.h"
#include "sdk/ground/idle_cause.h"

namespace trainscope::analysis {

// The causes: ground::IdleCause (idle_cause.h). Arrays by cause are
// indexed by IdleCauseIndex, 0 .. kIdleCauseCount - 1.
using ground::IdleCause;
using ground::kIdleCauseCount;
// The name of cause index `cause` ("" out of range).
std::string_view IdleCauseName(int cause);

// What counts as busy.
enum class BusySource {
  kAuto,        // device activity if the timeline has any, else kHostPhases
  kDevice,      // device activity (kernels, copies, sets), even if there is none
  kHostPhases,  // the host compute phases (forward, backward, optimizer)
};

// Idle time inside one step.
struct StepIdle {
  int64_t step = -1;
  TimestampNs idle_ns = 0;
  std::array<TimestampNs, kIdleCauseCount> by_cause{};  // by IdleCauseName order
  bool operator==(const StepIdle& o) const {
    return step == o.step && idle_ns == o.idle_ns && by_cause == o.by_cause;
  }
};

// One idle gap of the busy union.
struct Gap {
  TimestampNs start_ns = 0;
  TimestampNs duration_ns = 0;
  int64_t step = -1;  // the step the gap starts in, -1 between steps
  std::string cause;  // the cause with the most time in the gap
};

// Gaps by length: [previous upper, upper_ns).
struct GapBucket {
  std::string label;  // "<10us", "10us-100us", ...
  TimestampNs upper_ns = 0;
  int64_t count = 0;
  TimestampNs total_ns = 0;
};

// One device stream's activity inside the window.
struct StreamActivity {
  int64_t device = 0;
  int64_t stream = 0;
  int64_t intervals = 0;
  TimestampNs busy_ns = 0;  // union of its kernels, copies and sets
  double busy_share = 0;    // of the window
};

struct IdleBreakdown {
  TimestampNs window_ns = 0;
  TimestampNs busy_ns = 0;
  TimestampNs idle_ns = 0;
  double share = 0;         // idle_ns / window_ns
  std::string busy_source;  // "device_activity" or "cpu_compute_phases"
  std::vector<std::pair<std::string, TimestampNs>> by_cause;  // largest first, > 0 only
  std::array<TimestampNs, kIdleCauseCount> cause_ns{};        // the same, by IdleCauseName order
  int64_t gaps = 0;
  TimestampNs largest_gap_ns = 0;
  std::vector<Gap> largest_gaps;        // the 10 longest, longest first
  std::vector<GapBucket> histogram;     // fixed decade buckets, all present
  std::vector<StreamActivity> streams;  // device tracks only, by (device, stream)
  // Idle time inside each step, in start order.
  std::vector<StepIdle> idle_per_step;
};

// Fills `idle->by_cause` from its cause_ns: the causes with time, largest
// first, ties in priority order.
void SortCauses(IdleBreakdown* idle);

// A span of time labelled with an idle cause (IdleCauseName order).
struct CauseSpan {
  CauseSpan() = default;
  // For emplace_back: built in place, not copied from the stack.
  CauseSpan(TimestampNs start_ns, TimestampNs end_ns, int cause_index)
      : start(start_ns), end(end_ns), cause(cause_index) {}
  TimestampNs start = 0;
  TimestampNs end = 0;
  int cause = 0;
};

// The sets the idle analysis works on, for a caller that builds them itself
// (RunFold classifies each segment's intervals once, for phases and idle).
struct IdleSets {
  IntervalSet busy;  // busy time (it may reach beyond the window)
  // When each cause was active, by IdleCauseName order. The last two, host
  // and outside_step, follow from in_steps and are not read.
  std::array<IntervalSet, kIdleCauseCount> active;
  IntervalSet in_steps;  // the union of the steps
  // The steps, sorted by start; idle_per_step follows this order.
  std::vector<std::pair<IntervalSet::Span, int64_t>> steps;
  // Optional: the spans of active[0 .. host) labelled with their cause,
  // sorted by start, no two overlapping (touching is fine), for a caller
  // that gets them in that order anyway (one thread's phases). Tally then
  // walks them instead of merging `active`. Empty: Tally merges `active`.
  std::vector<CauseSpan> by_start;
};

// Gaps folded as they come, window piece after window piece in time order
// (the run's fold tallies one segment at a time): the same count,
// histogram and 10 longest gaps, each with its step and cause, as
// AnalyzeWithin over the pieces' union, a gap that runs on from one piece
// into the next counted once. Memory: fixed (10 gaps, 7 buckets and three
// gaps' causes: the first, which may join a fold before this one, the one
// still open, and the sums).
class GapFold {
 public:
  // Idle time [a, b) blamed on `cause`, after every piece added so far;
  // `steps` (by start) give the step a new gap starts in.
  void Add(TimestampNs a, TimestampNs b, int cause,
           const std::vector<std::pair<IntervalSet::Span, int64_t>>& steps);
  // Appends `later`, whose pieces all come after this one's.
  void Append(const GapFold& later);
  // gaps, largest_gap_ns, largest_gaps (longest first, ties by start) and
  // histogram, the open gap included.
  void Describe(IdleBreakdown* out) const;
  bool empty() const { return !head_; }

 private:
  struct Open {
    TimestampNs start = 0, end = 0;
    int64_t step = -1;
    std::array<TimestampNs, kIdleCauseCount> by_cause{};
  };
  struct Counted {
    int64_t gaps = 0;
    std::array<int64_t, 7> count{};
    std::array<TimestampNs, 7> total{};
    std::vector<Gap> largest;  // at most 10, longest first
  };
  static void Count(const Open& gap, Counted* into);
  Open* Current() { return last_ ? &*last_ : head_ ? &*head_ : nullptr; }

  std::optional<Open> head_;  // the first gap: never counted until Describe
  std::optional<Open> last_;  // the latest gap, when not the first
  Counted counted_;           // the gaps between them
};

class GapAnalyzer {
 public:
  // Analyses [window_start, window_end). The timeline need not be sorted.
  // Cost: O(n) in the intervals on a sorted timeline, O(n log n) otherwise.
  static IdleBreakdown Analyze(const Timeline& timeline, TimestampNs window_start,
                               TimestampNs window_end, BusySource source = BusySource::kAuto);

  // The same over a window of several spans (a trace of separate windows of
  // steps: the time between them was not recorded, so it is neither busy
  // nor idle). window_ns is the spans' total; gaps never cross from one
  // span to the next. Analyze(t, a, b) is AnalyzeWithin(t, Range(a, b)).
  static IdleBreakdown AnalyzeWithin(const Timeline& timeline, const IntervalSet& window,
                                     BusySource source = BusySource::kAuto);

  // The totals of AnalyzeWithin from sets already built: window_ns,
  // busy_ns, idle_ns, share, cause_ns, gaps and idle_per_step (in
  // sets.steps' order). busy_source, by_cause, largest_gap_ns,
  // largest_gaps, histogram and streams stay empty. Cost: the causes' spans
  // within the window merged once (each compared with the other causes
  // present, at most 9) unless sets.by_start has them, then one walk over
  // the idle spans, that merge and the steps.
  static IdleBreakdown Tally(const IntervalSet& window, const IdleSets& sets);
  // The same, also adding the idle pieces, in time order, to `gaps`.
  static IdleBreakdown Tally(const IntervalSet& window, const IdleSets& sets, GapFold* gaps);

  // The cause (IdleCauseName order) of idle time while the non-compute
  // phase `phase` is open: data_wait, h2d, sync, checkpoint, eval or other.
  static int PhaseCause(Phase phase);
  // The cause (IdleCauseName order) of time spent in the CUDA API call
  // `name`: sync, copy_call, launch or cuda_api.
  static int CallCause(const std::string& name);

  // True for CUDA API calls that block the host until the device catches up
  // (…Synchronize, a plain cudaMemcpy or cudaMemset): their idle time is
  // "sync".
  static bool IsBlockingCall(const std::string& name);
};

}  // namespace trainscope::analysis

#endif  // TRAINSCOPE_SDK_ANALYSIS_GAP_ANALYZER_H_
