// NVTX as Nsight Systems sees it: this test runs with NVTX_INJECTION64_PATH
// naming tests/nvtx's recording injection library, which NVTX loads at the
// first NVTX call exactly as it loads Nsight Systems' own. The records are
// the calls trainscope made: domain, registered names, categories, colors,
// payloads, nesting and thread names.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "sdk/nvtx/nvtx.h"
#include "tests/nvtx/injection_log.h"
#include "tests/test_util.h"
#include "trainscope/trainscope.h"

namespace trainscope {
namespace {

std::vector<TsNvtxRecord> Records(const TsNvtxApi& api) {
  std::vector<TsNvtxRecord> records(api.record_count());
  for (size_t i = 0; i < records.size(); ++i) api.get_record(i, &records[i]);
  return records;
}

class NvtxInjectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(std::getenv("NVTX_INJECTION64_PATH"), nullptr)
        << "run through ctest, which sets NVTX_INJECTION64_PATH";
    ASSERT_TRUE(nvtx::Available()) << "built without NVTX";
    InternName("warmup");  // the first NVTX call loads the injection
    ASSERT_TRUE(tsnvtx_load_api(&api_)) << "the injection library was not loaded by NVTX";
  }
  Options NvtxOptions() {
    Options options;
    options.output_dir = dir_.path();
    options.sinks = Sink::kNone;
    return options;
  }
  TsNvtxApi api_{};
  testing::TempDir dir_;
};

TEST_F(NvtxInjectionTest, PhasesAndStepsBecomeNestedRangesInTheTrainscopeDomain) {
  auto session = Session::Start(NvtxOptions());
  ASSERT_TRUE(session.ok()) << session.status();
  api_.clear();
  {
    StepScope step(*session, 3);
    TRAINSCOPE_PHASE(kForward);
    TRAINSCOPE_RANGE("attention");
  }
  ASSERT_TRUE(session->Finish().ok());

  std::vector<TsNvtxRecord> pushes;
  std::vector<TsNvtxRecord> pops;
  for (const TsNvtxRecord& r : Records(api_)) {
    if (r.kind == kTsNvtxPush) pushes.push_back(r);
    if (r.kind == kTsNvtxPop) pops.push_back(r);
  }
  ASSERT_EQ(pushes.size(), 3u);
  ASSERT_EQ(pops.size(), 3u);
  for (const TsNvtxRecord& r : pushes) {
    EXPECT_STREQ(r.domain_name, "trainscope");
    EXPECT_STREQ(r.api, "nvtxDomainRangePushEx");
    EXPECT_EQ(r.message_type, 3) << "registered string";  // NVTX_MESSAGE_TYPE_REGISTERED
    EXPECT_TRUE(r.has_payload);
    EXPECT_EQ(r.payload_int64, 3) << "the step index is the payload of " << r.message;
    EXPECT_TRUE(r.has_color);
  }
  EXPECT_STREQ(pushes[0].message, "step");
  EXPECT_EQ(pushes[0].category, nvtx::kStepCategory);
  EXPECT_EQ(pushes[0].depth, 0);
  EXPECT_STREQ(pushes[1].message, "forward");
  EXPECT_EQ(pushes[1].category, static_cast<uint32_t>(Phase::kForward) + 1);
  EXPECT_EQ(pushes[1].color, PhaseColor(Phase::kForward));
  EXPECT_EQ(pushes[1].depth, 1);
  EXPECT_STREQ(pushes[2].message, "attention");
  EXPECT_EQ(pushes[2].category, static_cast<uint32_t>(Phase::kOther) + 1);
  EXPECT_EQ(pushes[2].depth, 2);
  // Pops unwind innermost first.
  EXPECT_STREQ(pops[0].message, "attention");
  EXPECT_STREQ(pops[1].message, "forward");
  EXPECT_STREQ(pops[2].message, "step");
}

TEST_F(NvtxInjectionTest, EveryPhaseHasANamedCategory) {
  auto session = Session::Start(NvtxOptions());
  ASSERT_TRUE(session.ok());
  uint64_t domain = 0;
  { TRAINSCOPE_PHASE(kSync); }
  ASSERT_TRUE(session->Finish().ok());
  for (const TsNvtxRecord& r : Records(api_)) {
    if (r.kind == kTsNvtxPush && std::strcmp(r.domain_name, "trainscope") == 0)
      domain = r.domain_id;
  }
  ASSERT_NE(domain, 0u);
  for (int p = 0; p < kPhaseCount; ++p) {
    char name[64] = {};
    ASSERT_TRUE(api_.category_name(domain, static_cast<uint32_t>(p) + 1, name, sizeof(name)));
    EXPECT_EQ(std::string(name), PhaseName(static_cast<Phase>(p)));
  }
  char step[64] = {};
  ASSERT_TRUE(api_.category_name(domain, nvtx::kStepCategory, step, sizeof(step)));
  EXPECT_STREQ(step, "step");
}

TEST_F(NvtxInjectionTest, LoaderThreadsAreNamedAndAsyncRangesStartAndEndAcrossThreads) {
  auto session = Session::Start(NvtxOptions());
  ASSERT_TRUE(session.ok());
  api_.clear();
  uint64_t worker_tid = 0;
  AsyncRange copy = AsyncRange::Begin(Phase::kHostToDevice);
  std::thread loader([&] {
    worker_tid = static_cast<uint64_t>(syscall(SYS_gettid));
    NameThisThread("loader/0");
    copy.End();
  });
  loader.join();
  ASSERT_TRUE(session->Finish().ok());

  bool named = false;
  uint64_t started = 0;
  uint64_t ended = 0;
  for (const TsNvtxRecord& r : Records(api_)) {
    if (r.kind == kTsNvtxNameOsThread && std::strcmp(r.message, "loader/0") == 0) {
      named = true;
      EXPECT_EQ(r.named_tid, worker_tid);
    }
    if (r.kind == kTsNvtxRangeStart) {
      EXPECT_STREQ(r.message, "h2d");
      EXPECT_STREQ(r.domain_name, "trainscope");
      started = r.range_id;
    }
    if (r.kind == kTsNvtxRangeEnd) {
      EXPECT_EQ(r.os_tid, worker_tid);
      ended = r.range_id;
    }
  }
  EXPECT_TRUE(named);
  EXPECT_NE(started, 0u);
  EXPECT_EQ(started, ended);
}

TEST_F(NvtxInjectionTest, NvtxOffEmitsNoRanges) {
  Options options = NvtxOptions();
  options.nvtx = false;
  auto session = Session::Start(options);
  ASSERT_TRUE(session.ok());
  api_.clear();
  {
    StepScope step(*session, 1);
    TRAINSCOPE_PHASE(kForward);
  }
  auto report = session->Finish();
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->events.recorded, 2);  // still recorded in the timeline
  for (const TsNvtxRecord& r : Records(api_)) {
    EXPECT_NE(r.kind, kTsNvtxPush) << r.message;
  }
}

}  // namespace
}  // namespace trainscope
