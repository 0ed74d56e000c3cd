// sdk/analysis/hta_breakdown.h: Holistic Trace Analysis' two GPU metrics,
// computed by HTA's rules (facebookresearch/HolisticTraceAnalysis at
// f4d0062: hta/analyzers/breakdown_analysis.py, hta/common/trace*.py).
//
//   HtaBreakdown hta = ComputeHtaBreakdown(timeline, facts);
//   hta.temporal.idle_us; hta.idle_by_stream[0].category;
//
// The rules, as HTA applies them (docs/gap-analysis.md has the full list):
// - Rows: device intervals (kernels, copies, sets, cuda_sync) and the host
//   runtime calls that launched them, matched by correlation id.
// - Iterations: with two or more ProfilerStep#N annotations, HTA drops the
//   last one: host rows from its start on, and device rows whose launch is
//   not among the kept host rows. With one or none, everything is kept.
// - Times: when the trace wrote any ts as a float literal, or left one out,
//   every start is ceil(ts) and every end floor(ts + dur) in microseconds,
//   where ts and dur are the doubles nearest their text and the sum is a
//   float64 one at the epoch-sized magnitude (0.25 us apart near 1.7e15 us),
//   as pandas computes them. Otherwise times are exact.
// - Temporal breakdown: over every kept row on a stream, kernel_time is the
//   span from the first start to the last end, idle is kernel_time minus
//   the union of all rows, compute is the union of the COMPUTATION rows
//   (classified by name), non_compute is the rest.
// - Idle-time breakdown: per stream (kernels, copies, sets; no syncs), each
//   gap before a kernel is host_wait if its launch call began after the
//   previous kernel ended, else kernel_wait if shorter than 30 us (negative
//   gaps of overlapping kernels included), else other.
#ifndef TRAINSCOPE_SDK_ANALYSIS_HTA_BREAKDOWN_H_
#define TRAINSCOPE_SDK_ANALYSIS_HTA_BREAKDOWN_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sdk/analysis/model.h"

namespace trainscope::analysis {

// What HTA knows about a trace beyond its intervals.
struct HtaTraceFacts {
  // Distinct ProfilerStep#N names (any category, GPU annotations too).
  int64_t profiler_steps = 0;
  // The latest start among them: HTA cuts the last iteration there.
  // (Until one is seen, the smallest TimestampNs: steps may start before 0.)
  TimestampNs last_step_start_ns = std::numeric_limits<TimestampNs>::min();
  // True when any event's ts was a float literal or missing: HTA then rounds
  // every start up and every end down to whole microseconds.
  bool round_to_us = false;
  // Event #0's start, if HTA keeps that event: HTA's fallback launch time
  // for a kernel with no matching runtime call.
  std::optional<TimestampNs> first_event_ns;
};

enum class KernelClass : uint8_t { kCommunication, kMemory, kComputation, kOther };

// HTA's kernel classification by name (prefix and substring rules).
KernelClass ClassifyKernel(std::string_view name);

// get_temporal_breakdown(), in microseconds.
struct HtaTemporalBreakdown {
  double idle_us = 0;
  double compute_us = 0;
  double non_compute_us = 0;
  double kernel_us = 0;
};

// One row of get_idle_time_breakdown(): a stream's idle time of one category.
struct HtaStreamIdle {
  int64_t stream = 0;
  std::string category;  // "host_wait", "kernel_wait" or "other"
  double idle_us = 0;    // rounded to 2 decimals, as HTA does
  double ratio = 0;      // of the stream's idle time
};

struct HtaBreakdown {
  HtaTemporalBreakdown temporal;
  std::vector<HtaStreamIdle> idle_by_stream;  // streams in order of first kernel
  int64_t rows = 0;                           // device rows kept after the iteration cut
};

// The default consecutive_kernel_delay of HTA: 30 (trace units, microseconds).
inline constexpr double kHtaConsecutiveKernelDelayUs = 30;

// Computes both metrics for one rank's timeline. Pure; O(n) on a sorted
// timeline (one pass, nothing sorted), O(n log n) otherwise.
HtaBreakdown ComputeHtaBreakdown(const Timeline& timeline, const HtaTraceFacts& facts,
                                 double consecutive_kernel_delay_us = kHtaConsecutiveKernelDelayUs);

// The same two metrics for a run a Session records, folded as its device
// work is released, in memory that does not grow with the run's length.
// They equal ComputeHtaBreakdown on the whole run's timeline with facts {}:
// no iteration cut (a Session's timeline has kStep intervals, not
// ProfilerStep# annotations), exact nanosecond times, no fallback launch
// for a kernel whose call is unknown.
//
//   HtaFold hta(fold_input);  // the Timeline whose names and tracks rows use
//   hta.Add(interval);        // each released device row and launch call
//   hta.Advance(horizon);     // no row still to come starts before it
//   HtaBreakdown done = hta.Finish();
//
// Rows may come in any order before the horizon passes them; they are
// folded in start order, ties in the order added (ComputeHtaBreakdown keeps
// the timeline's order: the two differ only for rows that start at the same
// nanosecond on one stream id). A row added after a later-starting one was
// folded is folded out of order and counted in late_rows(): its gap and the
// union are then approximate. A launch call is forgotten launch_horizon_ns
// after the horizon passed it: a kernel that starts later than that after
// its call is folded without a launch time (never host_wait), as launch
// attribution leaves it without a phase.
//
// Memory: the launch calls of the last launch_horizon_ns (about 56 bytes
// each), the rows added but not yet behind the horizon (48 bytes each, at
// most kMaxHeldRows: past it the earliest half is folded), one sweep per
// stream and one byte per distinct name.
class HtaFold {
 public:
  static constexpr size_t kMaxHeldRows = 65536;

  // `names` outlives the fold; its names and tracks may grow meanwhile.
  explicit HtaFold(const Timeline& names, TimestampNs launch_horizon_ns = 2'000'000'000,
                   double consecutive_kernel_delay_us = kHtaConsecutiveKernelDelayUs);
  ~HtaFold();
  HtaFold(const HtaFold&) = delete;
  HtaFold& operator=(const HtaFold&) = delete;

  // Takes a device row (kernel, copy, set, or sync on a device stream) or
  // a launch call (kRuntimeCall with a correlation id); ignores the rest.
  // Cost: amortised O(1), a hash insert for a call.
  void Add(const Interval& interval);
  // Folds the held rows that start before `horizon`, in start order, and
  // forgets launch calls that began launch_horizon_ns before it.
  // Cost: O(h log h) in the rows held.
  void Advance(TimestampNs horizon);
  // Folds the rest and returns the breakdown. Call once, last.
  HtaBreakdown Finish();

  int64_t late_rows() const;
  size_t held_rows() const;   // added, not yet folded
  size_t held_calls() const;  // launch calls not yet forgotten

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainscope::analysis

#endif  // TRAINSCOPE_SDK_ANALYSIS_HTA_BREAKDOWN_H_
