// sdk/ground/tick_clock.h: the recorder's timestamps, from the time-stamp
// counter to the session clock.
//
// Where the TSC is invariant (TscUsable), scopes record raw TSC ticks
// (ReadTicks in trainscope/clock.h, one `rdtsc`) and the drainer converts
// them into CLOCK_MONOTONIC nanoseconds, the clock CUPTI's records and every
// other trainscope time use. The conversion is measured while the run goes
// on: at each drain the drainer reads the pair (TSC, CLOCK_MONOTONIC) and
// adds it to a TickCalibration, which converts a tick by interpolating
// between the points around it. NTP slews CLOCK_MONOTONIC (up to 500 ppm)
// and a VM's TSC rate can be off by a few ppm, so one rate for the whole run
// would drift by milliseconds a day; interpolation between points tens of
// milliseconds apart follows both.
//
//   TickCalibration calibration;
//   calibration.Add(ReadTickPair());       // at each drain, before reading rings
//   event.start_ns = calibration.ToNs(event.start_ns);
#ifndef TRAINSCOPE_SDK_GROUND_TICK_CLOCK_H_
#define TRAINSCOPE_SDK_GROUND_TICK_CLOCK_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trainscope/clock.h"

namespace trainscope::ground {

// True when raw TSC ticks can stand for time on this machine: an x86-64 CPU
// whose /proc/cpuinfo flags include constant_tsc (a fixed rate) and
// nonstop_tsc (counting through sleep states), and a kernel whose current
// clocksource is "tsc" (the kernel found the counters of all CPUs in step;
// it says "tsc: Marking TSC unstable" and switches away otherwise).
// Otherwise false, with the reason in `why_not` ("clocksource is kvm-clock").
// Cost: reads two small files; call once per session.
bool TscUsable(std::string* why_not);

// One calibration point: a TSC reading and CLOCK_MONOTONIC at the same moment.
struct TickPair {
  int64_t ticks = 0;
  TimestampNs ns = 0;
};

// Reads the pair: rdtsc, NowNs(), rdtsc, up to four times, and keeps the
// reading whose two TSC reads were closest (a preempted read is thrown
// away), with the ticks halfway between them. Cost: about 4 x 50 ns. x86-64
// only; elsewhere ticks = ns.
TickPair ReadTickPair();

// Ticks to nanoseconds from calibration points added in increasing order.
// It keeps the last kFine points, and one point every kCoarseSpacingNs
// before them for the last kCoarse x kCoarseSpacingNs (about 68 minutes):
// 18 KiB at most, whatever the run's length. A tick between two kept points
// is interpolated between them; a tick after the last point is extrapolated
// at the rate of the last second or so; a tick before the first kept point
// at the rate of the oldest kept span.
class TickCalibration {
 public:
  static constexpr size_t kFine = 128;
  static constexpr size_t kCoarse = 1024;
  static constexpr TimestampNs kCoarseSpacingNs = 4'000'000'000;

  // Adds a point; one whose ticks or ns do not increase is ignored. Before
  // adding, measures how far the extrapolation from earlier points was from
  // it (max_error_ns). Cost: O(1) amortised.
  void Add(const TickPair& point);

  // The time of `ticks` on the session clock. Needs one point; with one,
  // assumes the nominal rate (tsc_hz() from the first two points, else
  // 1 GHz). Cost: a binary search over at most kFine + kCoarse points.
  // The span a tick fell in, kept by the caller for the next one.
  struct Hint {
    int64_t from = 1, to = 0;  // ticks [from, to); empty at first
    TimestampNs ns = 0;        // at `from`
    double ns_per_tick = 0;
  };
  // Inline for the common case, a tick after the last point.
  TimestampNs ToNs(int64_t ticks) const {
    Hint hint;
    return ToNs(ticks, &hint);
  }
  // The same, for ticks that come in about increasing order (a ring's
  // events): a tick in the span of the last one (`*hint`) converts without
  // a search. A hint is good until the next Add.
  TimestampNs ToNs(int64_t ticks, Hint* hint) const {
    // Both products are >= 0 (rates are positive): no sign test to round.
    if (points_ >= 2 && ticks >= last_.ticks) {
      return last_.ns + RoundUp(static_cast<double>(ticks - last_.ticks) * ahead_ns_per_tick_);
    }
    if (ticks >= hint->from && ticks < hint->to) {
      return hint->ns + RoundUp(static_cast<double>(ticks - hint->from) * hint->ns_per_tick);
    }
    return ToNsElsewhere(ticks, hint);
  }

  // Ticks per second between the first and the last point ever added; 0
  // before two points.
  double tsc_hz() const;
  int64_t points() const { return points_; }
  // The largest difference between a new point and its extrapolation from
  // the points before it, over the run (ns): a bound on the error of ticks
  // converted ahead of the last point, which is the worst case.
  TimestampNs max_error_ns() const { return max_error_ns_; }

 private:
  // Ring buffers of points, oldest first when read with At.
  struct Ring {
    std::vector<TickPair> slots;
    size_t first = 0, size = 0;
    const TickPair& At(size_t i) const { return slots[(first + i) % slots.size()]; }
    const TickPair& back() const { return At(size - 1); }
    void Push(const TickPair& p, size_t capacity);
  };
  // llround without the library call; half away from zero.
  static int64_t Round(double x) { return static_cast<int64_t>(x < 0 ? x - 0.5 : x + 0.5); }
  static int64_t RoundUp(double x) { return static_cast<int64_t>(x + 0.5); }  // x >= 0
  TimestampNs ToNsElsewhere(int64_t ticks, Hint* hint) const;
  static TimestampNs Line(const TickPair& a, const TickPair& b, int64_t ticks);
  const TickPair& PointAt(size_t i) const;  // coarse then fine, oldest first
  size_t Size() const { return coarse_.size + fine_.size; }

  Ring fine_;
  Ring coarse_;
  TickPair first_;
  int64_t points_ = 0;
  TimestampNs max_error_ns_ = 0;
  // The fast path: the last span (previous point, last point), and the rate
  // ahead of the last point, measured from `anchor_`, about a second back.
  TickPair previous_, last_, anchor_;
  double span_ns_per_tick_ = 1.0;
  double ahead_ns_per_tick_ = 1.0;
};

}  // namespace trainscope::ground

#endif  // TRAINSCOPE_SDK_GROUND_TICK_CLOCK_H_
