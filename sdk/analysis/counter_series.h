// sdk/analysis/counter_series.h: a counter's samples over time, in bounded
// memory.
//
// Samples fall into consecutive windows of equal width on a grid that
// starts at the first sample. When a sample falls past the last of the
// kWindows windows, neighbours merge pairwise and the width doubles, as
// often as needed, so a run of a minute and a run of a week both end with
// at most kWindows windows, the week's simply wider. A sample earlier than
// the first (threads drain in any order) counts in the first window.
//
//   CounterSeries depth;                    // 250 ms windows to start with
//   depth.Add(now_ns, ready_batches);
//   std::vector<Report::Counter::Window> w = depth.Windows(process_start_ns);
//
// Memory: kWindows x 32 bytes (1 KiB) and a few words, whatever the run's
// length or the number of samples. Cost of Add: a division, and a merge
// pass of kWindows every time the run doubles its length.
#ifndef TRAINSCOPE_SDK_ANALYSIS_COUNTER_SERIES_H_
#define TRAINSCOPE_SDK_ANALYSIS_COUNTER_SERIES_H_

#include <array>
#include <cstdint>
#include <vector>

#include "trainscope/report.h"

namespace trainscope::analysis {

class CounterSeries {
 public:
  static constexpr int kWindows = Report::kCounterWindows;
  static constexpr int64_t kFirstWidthNs = 250'000'000;

  // Adds `value` sampled at `t_ns` (any clock, the same for every call).
  void Add(int64_t t_ns, int64_t value);

  // The windows from the first to the last that holds a sample, their
  // times in seconds from `origin_ns` (same clock as Add); empty before the
  // first sample.
  std::vector<Report::Counter::Window> Windows(int64_t origin_ns) const;

  // The current width of a window, in nanoseconds.
  int64_t width_ns() const { return width_ns_; }

 private:
  struct Slot {
    int64_t samples = 0;
    int64_t min = 0;
    int64_t max = 0;
    double sum = 0;
  };
  void Merge();

  std::array<Slot, kWindows> slots_{};
  int64_t first_ns_ = 0;
  int64_t width_ns_ = kFirstWidthNs;
  int last_ = -1;  // the last slot that holds a sample
};

}  // namespace trainscope::analysis

#endif  // TRAINSCOPE_SDK_ANALYSIS_COUNTER_SERIES_H_
