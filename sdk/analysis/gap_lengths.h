// sdk/analysis/gap_lengths.h: how idle gaps are counted, shared by the
// whole-run analysis (gap_analyzer.cc) and the fold's (gap_fold.cc): the
// histogram's buckets and the order of the longest gaps. Internal.
#ifndef TRAINSCOPE_SDK_ANALYSIS_GAP_LENGTHS_H_
#define TRAINSCOPE_SDK_ANALYSIS_GAP_LENGTHS_H_

#include <array>
#include <cstddef>
#include <limits>
#include <utility>

#include "trainscope/clock.h"

namespace trainscope::analysis {

// How many of the longest gaps a breakdown keeps.
inline constexpr size_t kLongestGaps = 10;

// The histogram's buckets, by upper bound: [previous upper, upper_ns).
inline constexpr TimestampNs kGapUs = 1000;
inline constexpr std::array<std::pair<const char*, TimestampNs>, 7> kGapBuckets = {{
    {"<10us", 10 * kGapUs},
    {"10us-100us", 100 * kGapUs},
    {"100us-1ms", 1000 * kGapUs},
    {"1ms-10ms", 10000 * kGapUs},
    {"10ms-100ms", 100000 * kGapUs},
    {"100ms-1s", 1000000 * kGapUs},
    {">=1s", std::numeric_limits<TimestampNs>::max()},
}};

// The order of the longest gaps: longer first; of equal ones, the earlier.
inline bool GapRanksBefore(TimestampNs length_a, TimestampNs start_a, TimestampNs length_b,
                           TimestampNs start_b) {
  return length_a > length_b || (length_a == length_b && start_a < start_b);
}

}  // namespace trainscope::analysis

#endif  // TRAINSCOPE_SDK_ANALYSIS_GAP_LENGTHS_H_
