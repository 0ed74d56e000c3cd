// The drain's segment policy. See segment_policy.h.
#include "sdk/session/segment_policy.h"

#include <algorithm>
#include <limits>

namespace trainscope::drain {

TimestampNs SegmentEnd(const SegmentInput& in) {
  constexpr TimestampNs kMinSegment = 1000000;
  if (in.watermark <= in.folded) return in.folded;
  const bool first = in.folded == std::numeric_limits<TimestampNs>::min();
  if (first || in.over) return in.watermark;
  const bool long_enough =
      in.watermark - in.folded >= std::max<TimestampNs>((in.now - in.watermark) / 2, kMinSegment);
  if (!long_enough && !in.quiet) return in.folded;
  if (in.intervals_per_ns <= 0) return in.watermark;
  // In double: after a long pause the rate has decayed towards 0, and the
  // slice past any integer (the cast would be undefined).
  constexpr double kSliceIntervals = 8192;
  const double slice =
      std::max({static_cast<double>(kMinSegment), static_cast<double>(in.since_drain),
                kSliceIntervals / in.intervals_per_ns});
  if (slice >= static_cast<double>(in.watermark - in.folded)) return in.watermark;
  return in.folded + static_cast<TimestampNs>(slice);
}

}  // namespace trainscope::drain
