// A program compiled with TRAINSCOPE_DISABLE (tests/CMakeLists.txt): its
// scopes and counters record nothing, even with a session active, and the
// headers' disabled forms compile under the project's strict warnings.
#include <gtest/gtest.h>

#include "tests/test_util.h"
#include "trainscope/trainscope.h"

#ifndef TRAINSCOPE_DISABLE
#error "disabled_test is compiled with TRAINSCOPE_DISABLE"
#endif

namespace trainscope {
namespace {

using testing::QuietOptions;
using testing::TempDir;

TEST(DisabledTest, ScopesAndCountersRecordNothingWithASessionActive) {
  TempDir dir;
  absl::StatusOr<Session> session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  const NameId depth = InternName("queue_depth");
  for (int i = 0; i < 1000; ++i) {
    TRAINSCOPE_PHASE(kForward);
    TRAINSCOPE_RANGE("custom");
    PhaseScope backward(Phase::kBackward);
    RecordCounter(depth, i);
  }
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->events.recorded, 0);
  EXPECT_TRUE(report->counters.empty());
  EXPECT_TRUE(report->phases.empty());
}

}  // namespace
}  // namespace trainscope
