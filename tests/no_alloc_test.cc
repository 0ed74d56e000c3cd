// The hot path does not allocate once a thread is registered: every
// operator new on this thread is counted across 10^5 recorded scopes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>

#include "tests/test_util.h"
#include "trainscope/trainscope.h"

namespace {
thread_local long t_allocations = 0;
}  // namespace

void* operator new(std::size_t size) {
  ++t_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace trainscope {
namespace {

TEST(NoAllocationTest, HundredThousandScopesAfterRegistrationAllocateNothing) {
  testing::TempDir dir;
  Options options;
  options.output_dir = dir.path();
  options.sinks = Sink::kReportJson;
  options.buffer_bytes_per_thread = Bytes(16u << 20);  // room for every event
  auto session = Session::Start(options);
  ASSERT_TRUE(session.ok()) << session.status();
  auto one_step = [&](int64_t i) {
    StepScope step(*session, i, Samples(1));
    TRAINSCOPE_PHASE(kForward);
    { TRAINSCOPE_RANGE("custom"); }
    AsyncRange copy = AsyncRange::Begin(Phase::kHostToDevice);
    copy.End();
  };
  one_step(-1);  // registers this thread and interns "custom": may allocate
  const long before = t_allocations;
  for (int64_t i = 0; i < 25000; ++i) one_step(i);
  const long during = t_allocations - before;
  EXPECT_EQ(during, 0) << "allocations on the recording thread across 10^5 scopes";
  auto report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  // 4 events a step (step, forward, custom, async copy), warm-up step included.
  EXPECT_EQ(report->events.recorded + report->events.dropped, 25001 * 4);
  EXPECT_EQ(report->events.dropped, 0);
}

TEST(NoAllocationTest, CountingWorks) {
  const long before = t_allocations;
  auto* p = new int(3);
  delete p;
  EXPECT_EQ(t_allocations - before, 1);
}

}  // namespace
}  // namespace trainscope
