// How far a drain folds: the segment policy of Session's drain, a pure
// function so that its cases are tested on their own (tests/fold_test.cc).
#ifndef TRAINSCOPE_SDK_SESSION_SEGMENT_POLICY_H_
#define TRAINSCOPE_SDK_SESSION_SEGMENT_POLICY_H_

#include <cstddef>

#include "trainscope/clock.h"

namespace trainscope::drain {

// What one drain knows when it decides.
struct SegmentInput {
  TimestampNs now = 0;
  TimestampNs watermark = 0;    // what nothing still to come can reach
  TimestampNs folded = 0;       // the fold's watermark; the minimum before any
  TimestampNs since_drain = 0;  // since the last drain began
  double intervals_per_ns = 0;  // the rate intervals come at (0: not known)
  bool quiet = false;           // this drain took no interval from rings or CUPTI
  bool over = false;            // the held intervals exceed half the budget
};

// The time this drain folds up to: `folded` (none: only take the input) or
// a segment end in (folded, watermark].
//
// A segment folds when it is at least half as long as the time it waited
// (now - watermark) and at least 1 ms, so that each held interval is looked
// at a few times, not once a drain; always the first time, when the held
// intervals pass half the budget, and when this drain found nothing new
// (what is left is folded before it waits for more: a rest under the
// minimum would otherwise wait for the next input, or for Finish). A
// segment is at most about 8192 intervals' worth of time at the rate they
// come, at least 1 ms and the time since the last drain: a long one would
// keep the drainer from the rings longer than a fast producer takes to fill
// one (a 1 MiB ring holds 16 ms at 2 M events/s).
// Cost: a few comparisons.
TimestampNs SegmentEnd(const SegmentInput& in);

}  // namespace trainscope::drain

#endif  // TRAINSCOPE_SDK_SESSION_SEGMENT_POLICY_H_
