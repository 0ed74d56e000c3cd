// tests/hta_fold_testing.h: report.device_timeline.hta folded as a run goes
// against the whole run's (ComputeHtaBreakdown), every field.
#ifndef TRAINSCOPE_TESTS_HTA_FOLD_TESTING_H_
#define TRAINSCOPE_TESTS_HTA_FOLD_TESTING_H_

#include <gtest/gtest.h>

#include <string>

#include "trainscope/report.h"

namespace trainscope::testing {

// Exact: the fold takes the rows in the whole run's order, none late.
inline void ExpectSameHta(const Report::DeviceTimeline::Hta& got,
                          const Report::DeviceTimeline::Hta& want) {
  EXPECT_EQ(got.late_rows, 0);
  EXPECT_EQ(got.rows, want.rows);
  EXPECT_EQ(got.kernel_s, want.kernel_s);
  EXPECT_EQ(got.idle_s, want.idle_s);
  EXPECT_EQ(got.compute_s, want.compute_s);
  EXPECT_EQ(got.non_compute_s, want.non_compute_s);
  ASSERT_EQ(got.idle_by_stream.size(), want.idle_by_stream.size());
  for (size_t k = 0; k < want.idle_by_stream.size(); ++k) {
    const Report::DeviceTimeline::Hta::Stream& g = got.idle_by_stream[k];
    const Report::DeviceTimeline::Hta::Stream& w = want.idle_by_stream[k];
    SCOPED_TRACE("stream " + std::to_string(w.stream));
    EXPECT_EQ(g.stream, w.stream);
    EXPECT_EQ(g.host_wait_s, w.host_wait_s);
    EXPECT_EQ(g.kernel_wait_s, w.kernel_wait_s);
    EXPECT_EQ(g.other_s, w.other_s);
  }
}

}  // namespace trainscope::testing

#endif  // TRAINSCOPE_TESTS_HTA_FOLD_TESTING_H_
