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
  if (!long_enough && in.arrived > 0) return in.folded;
  if (in.intervals_per_ns <= 0) return in.watermark;
  constexpr double kSliceIntervals = 8192;
  return std::min(
      in.watermark,
      in.folded + std::max({kMinSegment, in.since_drain,
                            static_cast<TimestampNs>(kSliceIntervals / in.intervals_per_ns)}));
}

}  // namespace trainscope::drain
