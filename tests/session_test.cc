// Session, scopes and the recorder, through their real outputs: trace.json
// and report.json read back from disk.
#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "sdk/export/report_json.h"
#include "sdk/export/steps_file.h"
#include "sdk/ground/cuda_devices.h"
#include "sdk/session/environment.h"
#include "tests/test_util.h"
#include "trainscope/trainscope.h"

namespace trainscope {
namespace {

using testing::TempDir;

// The session's own tests keep the device timeline as users get it: on
// this machine it degrades to a status line, which tests here read.
Options QuietOptions(const std::string& dir) {
  return trainscope::testing::QuietOptions(dir, "test", /*device_timeline=*/true);
}

struct TraceEvent {
  std::string ph, cat, name;
  int64_t tid = 0;
  double ts = 0, dur = 0;
  int64_t step = -2;
};

// Parses trace.json strictly; fails the test if it is not valid JSON.
std::vector<TraceEvent> ReadTrace(const std::string& path) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  auto error = parser.load(path).get(doc);
  EXPECT_EQ(error, simdjson::SUCCESS) << path << ": " << simdjson::error_message(error);
  std::vector<TraceEvent> events;
  if (error) return events;
  for (simdjson::dom::element e : doc["traceEvents"].get_array()) {
    TraceEvent event;
    event.ph = std::string(e["ph"].get_string().value());
    std::string_view text;
    if (e["cat"].get_string().get(text) == simdjson::SUCCESS) event.cat = std::string(text);
    if (e["name"].get_string().get(text) == simdjson::SUCCESS) event.name = std::string(text);
    event.tid = e["tid"].get_int64().value();
    double number = 0;
    if (e["ts"].get_double().get(number) == simdjson::SUCCESS) event.ts = number;
    if (e["dur"].get_double().get(number) == simdjson::SUCCESS) event.dur = number;
    int64_t step = 0;
    if (e["args"]["step"].get_int64().get(step) == simdjson::SUCCESS) event.step = step;
    events.push_back(event);
  }
  return events;
}

TEST(SessionTest, RecordsNestedPhasesStepsAndCustomRangesIntoTraceAndReport) {
  TempDir dir;
  Options options = QuietOptions(dir.path());
  // Every step in the trace: its first window starts at step 0, however
  // slow the first step (the default skips warmup; trace_windows_test).
  options.warmup_steps = 0;
  auto session = Session::Start(options);
  ASSERT_TRUE(session.ok()) << session.status();
  for (int64_t i = 0; i < 5; ++i) {
    StepScope step(*session, i, Samples(32));
    {
      TRAINSCOPE_PHASE(kDataWait);
      std::this_thread::sleep_for(std::chrono::milliseconds(6));
    }
    {
      TRAINSCOPE_PHASE(kForward);
      TRAINSCOPE_RANGE("attention");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  auto report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();

  const std::vector<TraceEvent> events = ReadTrace(dir.File("trace.json"));
  std::map<std::string, int> count;
  for (const TraceEvent& e : events) {
    if (e.ph == "X") ++count[e.name];
  }
  EXPECT_EQ(count["data_wait"], 5);
  EXPECT_EQ(count["forward"], 5);
  EXPECT_EQ(count["attention"], 5);
  EXPECT_EQ(count["ProfilerStep#0"], 1);
  EXPECT_EQ(count["ProfilerStep#4"], 1);
  // The custom range nests inside forward, which nests inside its step.
  const TraceEvent* forward = nullptr;
  const TraceEvent* step3 = nullptr;
  for (const TraceEvent& e : events) {
    if (e.name == "forward" && e.step == 3) forward = &e;
    if (e.name == "ProfilerStep#3") step3 = &e;
  }
  ASSERT_NE(forward, nullptr);
  ASSERT_NE(step3, nullptr);
  EXPECT_EQ(step3->cat, "user_annotation");
  EXPECT_GE(forward->ts, step3->ts);
  EXPECT_LE(forward->ts + forward->dur, step3->ts + step3->dur);
  for (const TraceEvent& e : events) {
    if (e.name == "attention" && e.step == 3) {
      EXPECT_GE(e.ts, forward->ts);
      EXPECT_LE(e.ts + e.dur, forward->ts + forward->dur + 0.001);
    }
  }

  EXPECT_EQ(report->timing.steps, 5);
  EXPECT_EQ(report->events.recorded, 5 * 4);
  EXPECT_EQ(report->events.dropped, 0);
  EXPECT_EQ(report->events.threads, 1);
  // 6 ms waits and 1 ms compute per step: about 6/7 idle, on input. (The
  // bounds hold while a loaded machine's sleeps overshoot by up to 5 ms.)
  EXPECT_EQ(report->idle.top_cause, "data_wait");
  EXPECT_GT(report->idle.share, 0.5);
  EXPECT_LT(report->idle.share, 0.97);
  const absl::StatusOr<Report> reread = exporter::ReadReportFile(dir.File("report.json"));
  ASSERT_TRUE(reread.ok()) << reread.status();
  EXPECT_EQ(reread->timing.steps, 5);
  EXPECT_EQ(reread->run.name, "test");
}

TEST(SessionTest, LoaderThreadsRegisterLazilyAndAreNamedInTheTrace) {
  TempDir dir;
  auto session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<std::thread> workers;
  // All three alive at once (an exited thread's ring may be given back).
  std::atomic<int> recorded{0};
  for (int w = 0; w < 3; ++w) {
    workers.emplace_back([w, &recorded] {
      NameThisThread("loader/" + std::to_string(w));
      for (int i = 0; i < 10; ++i) {
        TRAINSCOPE_RANGE_IN(kDataWait, "decode");
      }
      recorded.fetch_add(1);
      while (recorded.load() < 3) std::this_thread::yield();
    });
  }
  for (std::thread& t : workers) t.join();
  auto report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->events.threads, 3);
  EXPECT_EQ(report->events.recorded, 30);
  EXPECT_EQ(report->events.recorder_bytes, 3 * report->events.buffer_bytes_per_thread);

  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.load(dir.File("trace.json")).value();
  std::set<std::string> names;
  std::set<int64_t> decode_tids;
  for (simdjson::dom::element e : doc["traceEvents"].get_array()) {
    if (std::string_view(e["name"].get_string().value()) == "thread_name") {
      names.insert(std::string(e["args"]["name"].get_string().value()));
    }
    if (std::string_view(e["name"].get_string().value()) == "decode") {
      decode_tids.insert(e["tid"].get_int64().value());
    }
  }
  EXPECT_TRUE(names.count("loader/0") && names.count("loader/1") && names.count("loader/2"));
  EXPECT_EQ(decode_tids.size(), 3u);
}

TEST(SessionTest, AsyncRangeEndsOnAnotherThreadAndKeepsItsPhase) {
  TempDir dir;
  auto session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  {
    StepScope step(*session, 7);
    AsyncRange copy = AsyncRange::Begin(Phase::kHostToDevice);
    std::thread finisher([range = std::move(copy)]() mutable {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      range.End();
    });
    finisher.join();
  }
  ASSERT_TRUE(session->Finish().ok());
  const std::vector<TraceEvent> events = ReadTrace(dir.File("trace.json"));
  const TraceEvent* begin = nullptr;
  const TraceEvent* end = nullptr;
  for (const TraceEvent& e : events) {
    if (e.name == "h2d" && e.ph == "b") begin = &e;
    if (e.name == "h2d" && e.ph == "e") end = &e;
  }
  ASSERT_NE(begin, nullptr);
  ASSERT_NE(end, nullptr);
  EXPECT_EQ(begin->step, 7);
  EXPECT_EQ(begin->tid, static_cast<int64_t>(getpid()));  // began on the main thread
  EXPECT_NE(end->tid, begin->tid);                        // ended on the finisher
  EXPECT_GE(end->ts - begin->ts, 900.0);                  // >= ~1 ms, in microseconds
}

// Threads that exit give their rings back once drained: 100,000 short-lived
// threads, each recording a range, all recorded, in the memory of a few
// rings at a time.
TEST(SessionTest, ShortLivedThreadsGiveTheirRingsBackAndAllAreRecorded) {
#if defined(__SANITIZE_THREAD__)
  constexpr int kThreads = 5000;  // thread creation is slow under TSan
#else
  constexpr int kThreads = 100000;
#endif
  TempDir dir;
  Options options = QuietOptions(dir.path());
  options.buffer_bytes_per_thread = Bytes(64 * sizeof(Event));
  options.flush_interval_ms = 5;
  auto session = Session::Start(options);
  ASSERT_TRUE(session.ok()) << session.status();
  for (int t = 0; t < kThreads; t += 8) {
    std::thread batch[8];
    for (std::thread& thread : batch) thread = std::thread([] { TRAINSCOPE_RANGE("work"); });
    for (std::thread& thread : batch) thread.join();
  }
  auto report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->events.recorded, kThreads);
  EXPECT_EQ(report->events.dropped, 0);
  EXPECT_EQ(report->events.threads, kThreads);
  // The rings alive at once, at most: far fewer than the threads.
  EXPECT_LT(report->events.recorder_bytes, kThreads / 4 * report->events.buffer_bytes_per_thread)
      << report->events.recorder_bytes / report->events.buffer_bytes_per_thread << " rings";
}

// A step still open when Finish drains for the last time cannot be recorded:
// it is counted as dropped, not lost silently.
TEST(SessionTest, AStepOpenAtFinishIsCountedAsDropped) {
  TempDir dir;
  auto session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  for (int64_t i = 0; i < 3; ++i) {
    StepScope step(*session, i);
    TRAINSCOPE_PHASE(kForward);
  }
  absl::StatusOr<Report> report;
  {
    StepScope last(*session, 3);
    report = session->Finish();
  }
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->timing.steps, 3);
  EXPECT_EQ(report->events.recorded, 6);
  EXPECT_EQ(report->events.dropped, 1);
}

// A 64-event ring and 10,000 scopes back to back: the ring fills, and
// the scopes go on, dropping and counting. The drainer may still drain it
// a few times meanwhile (it looks every millisecond and drains a ring a
// quarter full; under a sanitizer the burst lasts a few of those), so
// what holds is: every event is recorded or counted, at least a ring's
// worth is recorded, and most are dropped (a drain a millisecond passes
// at most 64 events a millisecond, far below the burst's rate).
TEST(SessionTest, FullRingDropsAndCountsInsteadOfBlocking) {
  TempDir dir;
  Options options = QuietOptions(dir.path());
  options.buffer_bytes_per_thread = Bytes(64 * sizeof(Event));  // the minimum: 64 events
  options.flush_interval_ms = 100000;
  auto session = Session::Start(options);
  ASSERT_TRUE(session.ok()) << session.status();
  constexpr int kScopes = 10000;
  for (int i = 0; i < kScopes; ++i) {
    TRAINSCOPE_PHASE(kOther);
  }
  auto report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->events.recorded + report->events.dropped, kScopes);
  EXPECT_GE(report->events.recorded, 64);
  EXPECT_GT(report->events.dropped, kScopes / 2) << report->events.recorded << " recorded";
}

// The drainer's wait grows while nothing comes (doubling toward
// flush_interval_ms); between drains it still looks at the rings every
// millisecond and drains one that is a quarter full. Here the wait has
// grown to about a second when 3,000 events come (more than a quarter of
// the 8,192-event ring): the look drains them within the 300 ms that
// follow, so the next 7,000 fit. Without it the next drain is due about a
// second later and 1,808 of them are dropped. Not a timing race: 300 ms
// for a drain the drainer looks for every millisecond.
TEST(SessionTest, AFastStartAfterAQuietSpellIsDrainedBeforeTheRingFills) {
  TempDir dir;
  Options options = QuietOptions(dir.path());
  options.buffer_bytes_per_thread = Bytes(8192 * sizeof(Event));
  options.flush_interval_ms = 60000;
  auto session = Session::Start(options);
  ASSERT_TRUE(session.ok()) << session.status();
  {
    TRAINSCOPE_PHASE(kOther);  // registers this thread
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // waits 1, 2, ... 512 ms
  for (int i = 0; i < 3000; ++i) {
    TRAINSCOPE_PHASE(kOther);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (int i = 0; i < 7000; ++i) {
    TRAINSCOPE_PHASE(kOther);
  }
  auto report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->events.recorded, 10001);
  EXPECT_EQ(report->events.dropped, 0);
}

TEST(SessionTest, ScopesRecordNothingWithoutAnActiveSession) {
  TempDir dir;
  {
    TRAINSCOPE_PHASE(kForward);  // no session yet: must be a no-op
  }
  EXPECT_FALSE(Recording());
  auto session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok());
  EXPECT_TRUE(Recording());
  auto report = session->Finish();
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->events.recorded, 0);
  EXPECT_FALSE(Recording());
  {
    TRAINSCOPE_PHASE(kForward);  // finished: a no-op again
  }
  // Neither scope outside a session reaches the next one: it sees only its own.
  auto next = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(next.ok()) << next.status();
  { TRAINSCOPE_PHASE(kBackward); }
  auto second = next->Finish();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->events.recorded, 1);
  EXPECT_EQ(second->events.dropped, 0);
  ASSERT_EQ(second->phases.size(), 1u);
  EXPECT_EQ(second->phases[0].phase, "backward");
}

TEST(SessionTest, SecondConcurrentSessionIsRefused) {
  TempDir dir;
  auto first = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(first.ok());
  auto second = Session::Start(QuietOptions(dir.path()));
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("another trainscope::Session"), std::string::npos);
  ASSERT_TRUE(first->Finish().ok());
  auto third = Session::Start(QuietOptions(dir.path()));
  EXPECT_TRUE(third.ok()) << third.status();
}

TEST(SessionTest, ABorrowedHandleFollowsMovesAndNeverFinishesTheRun) {
  TempDir dir;
  auto started = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(started.ok());
  {
    Session borrowed = internal::BorrowSession(*started);
    EXPECT_TRUE(borrowed.active());
  }  // destroyed: the run goes on
  EXPECT_TRUE(started->active());
  Session borrowed = internal::BorrowSession(*started);
  EXPECT_EQ(borrowed.Finish().status().code(), absl::StatusCode::kFailedPrecondition)
      << "only the owner finishes the run";
  EXPECT_TRUE(started->active());
  Session owner = std::move(*started);
  borrowed.NoteResume(/*from_step=*/7, /*interrupted_at_step=*/9, /*restore_s=*/0.5);
  EXPECT_TRUE(owner.active());
  absl::StatusOr<Report> report = owner.Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->checkpoint.resumed_from_step, 7) << "noted through the borrowed handle";
  EXPECT_FALSE(borrowed.active()) << "the same run, finished";
  EXPECT_EQ(borrowed.Finish().status().code(), absl::StatusCode::kFailedPrecondition);
  auto next = Session::Start(QuietOptions(dir.path()));
  EXPECT_TRUE(next.ok()) << "a live borrowed handle does not hold the run open: " << next.status();
}

// Device-timed collective time (what libtorch::ProcessGroup measures under
// NCCL) lands in the steps' sync_ms and the report.
TEST(SessionTest, DeviceSyncTimeLandsInTheStepRowsAndTheReport) {
  TempDir dir;
  auto session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok());
  session->ExpectStepSyncTimes();  // as ProcessGroup does: the times come after the steps
  for (int64_t i = 0; i < 5; ++i) {
    StepScope step(*session, StepIndex(i), Samples(1));
    TRAINSCOPE_PHASE(kForward);
  }
  session->AddStepSyncTime(2, 0.005);
  session->AddStepSyncTime(3, 0.010);
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_NEAR(report->distributed.device_sync_s, 0.015, 1e-12);
  EXPECT_EQ(report->distributed.device_sync_late, 0);
  const auto rows = exporter::ReadStepsFile(dir.File("steps.jsonl"));
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::map<int64_t, double> sync;
  for (const Report::Step& row : *rows) sync[row.index] = row.sync_ms;
  EXPECT_NEAR(sync[2], 5, 1e-6);
  EXPECT_NEAR(sync[3], 10, 1e-6);
  EXPECT_EQ(sync[4], 0);
  const auto reread = exporter::ReadReportFile(dir.File("report.json"));
  ASSERT_TRUE(reread.ok()) << reread.status();
  EXPECT_NEAR(reread->distributed.device_sync_s, 0.015, 1e-9);
}

TEST(SessionTest, OutputDirectoryUnderARegularFileIsAClearError) {
  TempDir dir;
  testing::WriteAll(dir.File("plain-file"), "x");
  auto session = Session::Start(QuietOptions(dir.File("plain-file") + "/out"));
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(session.status().message().find("plain-file/out"), std::string::npos)
      << session.status();
}

TEST(SessionTest, UnwritableOutputDirectoryIsAClearError) {
  // /proc refuses new directories even for root.
  auto session = Session::Start(QuietOptions("/proc/trainscope-test/out"));
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("/proc/trainscope-test/out"), std::string::npos)
      << session.status();
  EXPECT_NE(session.status().message().find("cannot create"), std::string::npos);
  // The failed start left no session behind.
  TempDir dir;
  EXPECT_TRUE(Session::Start(QuietOptions(dir.path())).ok());
}

TEST(SessionTest, BadOptionsNameTheOption) {
  TempDir dir;
  Options options = QuietOptions(dir.path());
  options.buffer_bytes_per_thread = Bytes(10);
  auto session = Session::Start(options);
  EXPECT_EQ(session.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(session.status().message().find("buffer_bytes_per_thread"), std::string::npos);
}

TEST(SessionTest, SubmissionTimeFromTheEnvironmentGivesQueueDelay) {
  TempDir dir;
  setenv("TRAINSCOPE_SUBMIT_TIME", "2020-01-01T00:00:00Z", 1);
  auto session = Session::Start(QuietOptions(dir.path()));
  unsetenv("TRAINSCOPE_SUBMIT_TIME");
  ASSERT_TRUE(session.ok()) << session.status();
  auto report = session->Finish();
  ASSERT_TRUE(report.ok());
  ASSERT_TRUE(report->timing.queue_delay_s.has_value());
  EXPECT_GT(*report->timing.queue_delay_s, 6 * 365 * 86400.0);  // years before now

  setenv("TRAINSCOPE_SUBMIT_TIME", "yesterday", 1);
  auto bad = Session::Start(QuietOptions(dir.path()));
  unsetenv("TRAINSCOPE_SUBMIT_TIME");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("TRAINSCOPE_SUBMIT_TIME"), std::string::npos);
  EXPECT_NE(bad.status().message().find("yesterday"), std::string::npos);
}

TEST(SessionTest, ReportCarriesTheBaselineRecord) {
  TempDir dir;
  Options options = QuietOptions(dir.path());
  options.code_version = "abc123";
  options.data_version = "imagenet-v2";
  options.container_image = "registry/train:1.0";
  options.resource_request.accelerators = 4;
  options.config = {{"lr", "0.1"}};
  auto session = Session::Start(options);
  ASSERT_TRUE(session.ok());
  session->SetConfig("batch_size", "64");
  session->SetAcceptance("top1", 0.75, 0.76, /*higher_is_better=*/true);
  // Startup is the process start to the first step: at least this pause.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int i = 0; i < 3; ++i) {
    StepScope step(*session, i, Samples(64));
    TRAINSCOPE_PHASE(kForward);
  }
  auto report = session->Finish();
  ASSERT_TRUE(report.ok());
  const absl::StatusOr<Report> r = exporter::ReadReportFile(dir.File("report.json"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->run.code_version, "abc123");
  EXPECT_EQ(r->run.data_version, "imagenet-v2");
  EXPECT_EQ(r->environment.container_image, "registry/train:1.0");
  EXPECT_FALSE(r->environment.accelerator.empty());
  EXPECT_EQ(r->config.size(), 2u);
  EXPECT_EQ(r->acceptance.metric, "top1");
  EXPECT_EQ(r->acceptance.passed, true);
  EXPECT_NEAR(r->resource_hours, 4 * r->timing.total_s / 3600, 1e-12);
  EXPECT_GE(r->timing.startup_s, 0.05);
  EXPECT_LT(r->timing.startup_s, r->timing.total_s);
  EXPECT_NEAR(r->timing.startup_s + r->timing.steps_s, r->timing.total_s, 0.05)
      << "startup, then the steps, then Finish soon after";
  EXPECT_GT(r->timing.total_s, r->timing.steps_s);
}

// MLPerf's rule: the clock stops at the first evaluation that meets the
// target; a later, worse value decides `passed` but not the time.
TEST(SessionTest, TimeToTargetIsTheFirstEvaluationThatMeetsIt) {
  TempDir dir;
  auto session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  const absl::StatusOr<environment::ProcessStart> start = environment::ReadProcessStart();
  ASSERT_TRUE(start.ok());
  session->SetQualityTarget("eval_mse", 0.5, /*higher_is_better=*/false);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  TimestampNs before = 0, after = 0;
  for (int i = 0; i < 6; ++i) {
    {
      StepScope step(*session, i);
      TRAINSCOPE_PHASE(kForward);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (i == 1) {
      EXPECT_TRUE(session->RecordQuality("eval_mse", 0.9).ok());
    }
    if (i == 3) {
      before = NowNs();
      EXPECT_TRUE(session->RecordQuality("eval_mse", 0.4).ok());
      after = NowNs();
    }
    if (i == 5) {
      EXPECT_TRUE(session->RecordQuality("eval_mse", 0.6).ok());
    }
  }
  const absl::Status other = session->RecordQuality("top1", 0.3);
  EXPECT_EQ(other.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(other.message().find("\"eval_mse\""), std::string::npos) << other;
  EXPECT_EQ(session->RecordQuality("eval_mse", std::nan("")).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(session->Finish().ok());

  const absl::StatusOr<Report> r = exporter::ReadReportFile(dir.File("report.json"));
  ASSERT_TRUE(r.ok()) << r.status();
  const Acceptance& a = r->acceptance;
  EXPECT_EQ(a.metric, "eval_mse");
  EXPECT_EQ(a.evaluations, 3);
  EXPECT_EQ(a.value, 0.6);
  EXPECT_EQ(a.passed, false);
  ASSERT_TRUE(a.time_to_target_s.has_value());
  EXPECT_GE(*a.time_to_target_s, (before - start->monotonic_ns) / 1e9);
  EXPECT_LE(*a.time_to_target_s, (after - start->monotonic_ns) / 1e9);
  ASSERT_TRUE(a.time_to_target_from_first_step_s.has_value());
  EXPECT_NEAR(*a.time_to_target_from_first_step_s, *a.time_to_target_s - r->timing.startup_s, 1e-9);
  EXPECT_GT(*a.time_to_target_from_first_step_s, 0.03);  // after steps 0 to 3
}

// 1000 requests of 1..1000 us arriving over about 0.1 s: the report's
// percentiles are the nearest-rank ones and the rate is requests over the
// span from the first arrival to the last answer.
TEST(SessionTest, RequestLatenciesGiveServingPercentilesAndTheirRate) {
  TempDir dir;
  auto session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  const TimestampNs begin = NowNs();
  for (int i = 1; i <= 1000; ++i) {
    ASSERT_TRUE(session->RecordLatency(((i * 7919) % 1000 + 1) * 1e-6).ok());
    if (i % 100 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const TimestampNs end = NowNs();
  EXPECT_EQ(session->RecordLatency(-1e-3).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(session->RecordLatency(std::nan("")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(session->RecordLatency(INFINITY).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(session->Finish().ok());

  const absl::StatusOr<Report> r = exporter::ReadReportFile(dir.File("report.json"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->serving.has_value());
  EXPECT_EQ(r->serving->requests, 1000) << "the refused values are not counted";
  EXPECT_NEAR(r->serving->p50_ms, 0.5, 1e-9);
  EXPECT_NEAR(r->serving->p90_ms, 0.9, 1e-9);
  EXPECT_NEAR(r->serving->p99_ms, 0.99, 1e-9);
  EXPECT_NEAR(r->serving->max_ms, 1.0, 1e-9);
  const double span_s = (end - begin) / 1e9;
  EXPECT_GE(r->serving->requests_per_s, 1000 / (span_s + 0.001));
  EXPECT_LE(r->serving->requests_per_s, 1000 / 0.09);
}

// The training curve goes to loss.jsonl, in the lines the experiment's
// curve check reads; the report counts it.
TEST(SessionTest, RecordLossWritesTheCurveTheExperimentReads) {
  TempDir dir;
  auto session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  for (int i = 0; i < 3000; ++i) {  // more than the 64 KiB buffer holds
    const double loss = i == 7 ? std::nan("") : 1.0 / (1 + i);
    ASSERT_TRUE(session->RecordLoss(i, loss, /*skipped=*/i == 7).ok());
  }
  ASSERT_TRUE(session->Finish().ok());
  EXPECT_EQ(session->RecordLoss(3000, 0.1).code(), absl::StatusCode::kFailedPrecondition);
  const std::string text = testing::ReadAll(dir.File("loss.jsonl"));
  EXPECT_EQ(text.substr(0, 48), "{\"step\": 0, \"loss\": 1}\n{\"step\": 1, \"loss\": 0.5}\n");
  EXPECT_NE(text.find("{\"step\": 7, \"loss\": null, \"skipped\": true}\n"), std::string::npos);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3000);
  const absl::StatusOr<Report> r = exporter::ReadReportFile(dir.File("report.json"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->loss_curve.has_value());
  EXPECT_EQ(r->loss_curve->file, "loss.jsonl");
  EXPECT_EQ(r->loss_curve->points, 3000);
  EXPECT_EQ(r->loss_curve->nonfinite, 1);
  EXPECT_EQ(r->loss_curve->skipped, 1);
  EXPECT_EQ(r->loss_curve->last, 1.0 / 3000);
  EXPECT_EQ(r->loss_curve->lines_lost, 0);
  EXPECT_FALSE(r->failure.has_value());
}

// A curve file that cannot be created is named once and counted; the run
// goes on and its report is written.
TEST(SessionTest, ALossFileThatCannotBeWrittenIsNamedAndCounted) {
  TempDir dir;
  auto session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  std::filesystem::create_directory(dir.File("loss.jsonl"));  // a directory in its way
  const absl::Status first = session->RecordLoss(0, 1.0);
  EXPECT_FALSE(first.ok());
  EXPECT_NE(first.message().find("cannot create " + dir.File("loss.jsonl")), std::string::npos)
      << first;
  EXPECT_EQ(session->RecordLoss(1, 0.5), first);
  ASSERT_TRUE(session->Finish().ok());
  const absl::StatusOr<Report> r = exporter::ReadReportFile(dir.File("report.json"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->loss_curve.has_value());
  EXPECT_EQ(r->loss_curve->points, 0);
  EXPECT_EQ(r->loss_curve->lines_lost, 2);
}

// Out of memory, as the program says it: the report carries the kind, the
// message, the step open then and when.
TEST(SessionTest, RecordOutOfMemoryPutsTheFailureInTheReport) {
  TempDir dir;
  auto session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  { StepScope step(*session, 0); }
  {
    StepScope step(*session, 1);
    session->RecordOutOfMemory("CUDA out of memory. Tried to allocate 2.00 GiB");
  }
  ASSERT_TRUE(session->Finish().ok());
  const absl::StatusOr<Report> r = exporter::ReadReportFile(dir.File("report.json"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->failure.has_value());
  EXPECT_EQ(r->failure->kind, "out_of_memory");
  EXPECT_EQ(r->failure->message, "CUDA out of memory. Tried to allocate 2.00 GiB");
  EXPECT_EQ(r->failure->step, 1);
  EXPECT_GT(r->failure->at_s, 0);
  EXPECT_LE(r->failure->at_s, r->timing.total_s + r->timing.startup_s + 1);
  EXPECT_FALSE(r->loss_curve.has_value());
}

// A program's own loader: its settings and its two counters, joined.
TEST(SessionTest, RecordLoaderJoinsTheSettingsWithTheLoadersCounters) {
  TempDir dir;
  auto session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  LoaderSettings settings;
  settings.name = "decode";
  settings.kind = "own thread pool";
  settings.workers = 3;
  settings.prefetch = 2;
  settings.batch_size = 32;
  ASSERT_TRUE(session->RecordLoader(settings).ok());
  settings.workers = 4;  // the same name again replaces it
  ASSERT_TRUE(session->RecordLoader(settings).ok());
  const NameId cpu = InternName("decode.cpu_us"), depth = InternName("decode.queue_depth");
  for (int64_t i = 0; i < 10; ++i) {
    RecordCounter(cpu, 1500 + 100 * (i % 2));  // 1.5 and 1.6 ms
    RecordCounter(depth, i % 4);
  }
  LoaderSettings bad;
  bad.name = "";
  EXPECT_EQ(session->RecordLoader(bad).code(), absl::StatusCode::kInvalidArgument);
  bad.name = "neg";
  bad.prefetch = -1;
  const absl::Status negative = session->RecordLoader(bad);
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(negative.message().find("prefetch -1"), std::string_view::npos) << negative;
  for (int i = 1; i < Report::kMaxLoaders; ++i) {
    LoaderSettings more;
    more.name = "more" + std::to_string(i);
    ASSERT_TRUE(session->RecordLoader(more).ok()) << i;
  }
  LoaderSettings one_too_many;
  one_too_many.name = "seventeenth";
  EXPECT_EQ(session->RecordLoader(one_too_many).code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(session->Finish().ok());
  const absl::StatusOr<Report> r = exporter::ReadReportFile(dir.File("report.json"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->loaders.size(), static_cast<size_t>(Report::kMaxLoaders));
  const Report::Loader& l = r->loaders[0];
  EXPECT_EQ(l.name, "decode");
  EXPECT_EQ(l.kind, "own thread pool");
  EXPECT_EQ(l.workers, 4);
  EXPECT_EQ(l.prefetch, 2);
  EXPECT_EQ(l.batch_size, 32);
  EXPECT_EQ(l.batches, 10);
  EXPECT_NEAR(l.cpu_s, 0.0155, 1e-9);
  EXPECT_NEAR(l.cpu_ms_per_batch, 1.55, 1e-9);
  EXPECT_NEAR(l.cpu_cores, l.cpu_s / r->timing.total_s, 1e-9);
  EXPECT_EQ(l.queue_samples, 10);
  EXPECT_NEAR(l.queue_depth_mean, 1.3, 1e-9);
  EXPECT_EQ(l.queue_depth_max, 3);
  EXPECT_EQ(r->loaders[1].batches, 0) << "a loader without counters made nothing we saw";
}

TEST(SessionTest, ATargetNeverMetHasNoTimeToTarget) {
  TempDir dir;
  auto session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  session->SetQualityTarget("top1", 0.75, /*higher_is_better=*/true);
  {
    StepScope step(*session, 0);
    TRAINSCOPE_PHASE(kForward);
  }
  EXPECT_TRUE(session->RecordQuality("top1", 0.7).ok());
  ASSERT_TRUE(session->Finish().ok());
  const std::string text = testing::ReadAll(dir.File("report.json"));
  EXPECT_TRUE(text.find("\"time_to_target_s\":null") != std::string::npos ||
              text.find("\"time_to_target_s\": null") != std::string::npos)
      << text;
  const absl::StatusOr<Report> r = exporter::ReadReportFile(dir.File("report.json"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->acceptance.passed, false);
  EXPECT_EQ(r->acceptance.evaluations, 1);
  EXPECT_FALSE(r->acceptance.time_to_target_s.has_value());
  EXPECT_FALSE(r->acceptance.time_to_target_from_first_step_s.has_value());
}

// `trainscope experiment` points each trial of an unchanged program at its
// own directory through the environment.
TEST(SessionTest, TheOutputDirectoryFromTheEnvironmentWins) {
  TempDir dir;
  const std::string chosen = dir.File("from-env");
  setenv("TRAINSCOPE_OUTPUT_DIR", chosen.c_str(), 1);
  auto session = Session::Start(QuietOptions(dir.File("from-options")));
  unsetenv("TRAINSCOPE_OUTPUT_DIR");
  ASSERT_TRUE(session.ok()) << session.status();
  {
    StepScope step(*session, 0);
    TRAINSCOPE_PHASE(kForward);
  }
  ASSERT_TRUE(session->Finish().ok());
  EXPECT_EQ(access((chosen + "/report.json").c_str(), R_OK), 0);
  EXPECT_NE(access(dir.File("from-options/report.json").c_str(), R_OK), 0);
}

TEST(SessionTest, WithoutACudaDriverTheDeviceTimelineIsReportedUnavailable) {
  TempDir dir;
  auto session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  {
    StepScope step(*session, 0);
    TRAINSCOPE_PHASE(kForward);
  }
  auto report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  if (ground::ProbeCudaDevices().count == 0) {
    EXPECT_EQ(report->device_timeline.status.rfind("unavailable (", 0), 0u)
        << report->device_timeline.status;
    EXPECT_EQ(report->idle.busy_source, "cpu_compute_phases");  // the host-only analysis ran
  } else {
    EXPECT_EQ(report->device_timeline.status, "collected");
  }
  const absl::StatusOr<Report> r = exporter::ReadReportFile(dir.File("report.json"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->device_timeline.status, report->device_timeline.status);
  Options off = QuietOptions(dir.path());
  off.device_timeline = false;
  auto quiet = Session::Start(off);
  ASSERT_TRUE(quiet.ok());
  EXPECT_EQ(quiet->Finish()->device_timeline.status, "off");
}

// A child records and is SIGKILLed after trace.json was republished: the
// file left behind must be complete, valid JSON holding the early events.
TEST(SessionTest, TraceStaysValidJsonWhenTheProcessIsKilledMidRun) {
  TempDir dir;
  const pid_t child = fork();
  if (child == 0) {
    Options options = QuietOptions(dir.path());
    options.flush_interval_ms = 5;
    options.trace_checkpoint_interval_ms = 20;
    options.fold_delay_ms = 10;
    auto session = Session::Start(options);
    if (!session.ok()) _exit(3);
    for (int64_t i = 0;; ++i) {
      StepScope step(*session, i);
      TRAINSCOPE_PHASE(kForward);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  const std::vector<TraceEvent> events = ReadTrace(dir.File("trace.json"));
  int steps = 0;
  for (const TraceEvent& e : events) steps += e.name.rfind("ProfilerStep#", 0) == 0;
  EXPECT_GT(steps, 10) << "trace.json should hold the steps up to the last checkpoint";
  // steps.jsonl: every complete line a row, in order, folded while running.
  const auto rows = exporter::ReadStepsFile(dir.File("steps.jsonl"));
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_GT(rows->size(), 10u);
  for (size_t k = 0; k < rows->size(); ++k) {
    EXPECT_EQ((*rows)[k].index, static_cast<int64_t>(k));
    EXPECT_GT((*rows)[k].phase_ms[static_cast<int>(Phase::kForward)], 0.1) << k;
  }
}

// The report holds aggregates only: its size does not depend on the number
// of steps. The rows go to steps.jsonl as the run goes (fold_delay_ms behind),
// before Finish.
TEST(SessionTest, ReportStaysTheSameSizeAndStepsGoToTheStepsFile) {
  std::vector<size_t> sizes;
  for (int steps : {40, 4000}) {
    TempDir dir;
    Options options = QuietOptions(dir.path());
    options.sinks = Sink::kReportJson;
    options.flush_interval_ms = 5;
    options.fold_delay_ms = 10;
    auto session = Session::Start(options);
    ASSERT_TRUE(session.ok()) << session.status();
    for (int64_t i = 0; i < steps; ++i) {
      StepScope step(*session, StepIndex(i), Samples(8));
      { TRAINSCOPE_PHASE(kDataWait); }
      TRAINSCOPE_PHASE(kForward);
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
      while (std::chrono::steady_clock::now() < until) {
      }
    }
    // The rows come fold_delay_ms behind, before Finish (waiting as long as
    // a loaded machine or a sanitizer needs).
    absl::StatusOr<std::vector<Report::Step>> early;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    do {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      early = exporter::ReadStepsFile(dir.File("steps.jsonl"));
      ASSERT_TRUE(early.ok()) << early.status();
    } while (early->size() < static_cast<size_t>(steps) &&
             std::chrono::steady_clock::now() < deadline);
    EXPECT_EQ(early->size(), static_cast<size_t>(steps)) << "written before Finish";
    absl::StatusOr<Report> report = session->Finish();
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->timing.steps, steps);
    EXPECT_EQ(report->events.late, 0);
    EXPECT_EQ(report->steps_file.rows, steps);
    EXPECT_EQ(report->steps_file.rows_dropped, 0);
    const std::string json = testing::ReadAll(dir.File("report.json"));
    EXPECT_EQ(json.find("\"steps\": ["), std::string::npos) << "no per-step array";
    sizes.push_back(json.size());
    const auto rows = exporter::ReadStepsFile(dir.File("steps.jsonl"));
    ASSERT_TRUE(rows.ok()) << rows.status();
    ASSERT_EQ(rows->size(), static_cast<size_t>(steps));
    EXPECT_EQ(rows->back().index, steps - 1);
    EXPECT_EQ(rows->back().samples, 8);
  }
  EXPECT_LT(std::max(sizes[0], sizes[1]) - std::min(sizes[0], sizes[1]), 200u)
      << sizes[0] << " vs " << sizes[1] << " bytes";
}

long ResidentKb() {
  const std::string status = testing::ReadAll("/proc/self/status");
  const size_t at = status.find("VmRSS:");
  return at == std::string::npos ? -1 : std::atol(status.c_str() + at + 6);
}

// Memory, not time: 10^7 recorded events leave the process's resident set
// within 64 MB of where 10^6 left it (the analysis folds as it goes, rows go
// to steps.jsonl). Paced at 2 x 10^6 events a second so that the drain keeps
// up. Skipped under sanitizers, whose allocators keep freed memory.
TEST(SessionTest, ResidentMemoryAfter10MillionEventsStaysNearThatAfter1Million) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "resident memory under a sanitizer's allocator says nothing";
#endif
  TempDir dir;
  Options options = QuietOptions(dir.path());
  options.sinks = Sink::kReportJson;
  options.nvtx = false;
  options.device_timeline = false;
  options.buffer_bytes_per_thread = Bytes(16u << 20);
  auto session = Session::Start(options);
  ASSERT_TRUE(session.ok()) << session.status();
  using Clock = std::chrono::steady_clock;
  const auto begin = Clock::now();
  constexpr double kRate = 2e6;
  long after_1m = 0;
  int64_t events = 0;
  for (int64_t i = 0; events < 10000000; ++i) {
    {
      StepScope step(*session, StepIndex(i), Samples(1));
      for (int p = 0; p < 9; ++p) PhaseScope phase(static_cast<Phase>(p));
    }
    events += 10;
    if ((i & 63) == 0) {
      const auto due = begin + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(events / kRate));
      std::this_thread::sleep_until(due);
    }
    // However loaded the machine, wait for the drain before the ring could
    // fill: every event is recorded, so the memory measured is theirs.
    ThreadBuffer* ring = ActiveBuffer();
    if ((i & 4095) == 0 && ring != nullptr) {
      while (ring->pending() > ring->capacity() / 4) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    if (events == 1000000) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      after_1m = ResidentKb();
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const long after_10m = ResidentKb();
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_GT(after_1m, 0);
  EXPECT_LT(after_10m - after_1m, 64 * 1024)
      << "RSS " << after_1m / 1024 << " MB after 10^6 events, " << after_10m / 1024
      << " MB after 10^7";
  EXPECT_EQ(report->events.dropped, 0);
  EXPECT_EQ(report->events.recorded, 10000000);
  EXPECT_EQ(report->timing.steps, 1000000);
}

// The total seconds of `phase` in the report, 0 when it did not occur.
double PhaseTotalS(const Report& report, Phase phase) {
  for (const PhaseStat& p : report.phases) {
    if (p.phase == PhaseName(phase)) return p.total_s;
  }
  return 0;
}

// Options whose fold waits a minute for a range still open: what it folds
// before that, it folds because it knows nothing older is open.
Options PatientOptions(const std::string& dir) {
  Options options = QuietOptions(dir);
  options.device_timeline = false;  // device records would hold the fold to CUPTI's flushes
  options.sinks = Sink::kReportJson;
  options.flush_interval_ms = 5;
  options.fold_delay_ms = 60000;
  return options;
}

// Steps of one forward phase each, busy for `us` microseconds.
void BusySteps(Session& session, int64_t first, int64_t count, int us) {
  for (int64_t i = first; i < first + count; ++i) {
    StepScope step(session, StepIndex(i), Samples(1));
    TRAINSCOPE_PHASE(kForward);
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
    while (std::chrono::steady_clock::now() < until) {
    }
  }
}

size_t RowsWithin(const std::string& path, size_t want, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  size_t rows = 0;
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const absl::StatusOr<std::vector<Report::Step>> read = exporter::ReadStepsFile(path);
    rows = read.ok() ? read->size() : 0;
  } while (rows < want && std::chrono::steady_clock::now() < deadline);
  return rows;
}

// Each thread says what it has open, so the fold need not wait
// fold_delay_ms (a minute here) when nothing is: the rows come as the
// steps end.
TEST(OpenScopesTest, RowsComeAsStepsEndWhenNothingIsOpen) {
  TempDir dir;
  auto session = Session::Start(PatientOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  BusySteps(*session, 0, 200, 50);
  EXPECT_EQ(RowsWithin(dir.File("steps.jsonl"), 199, std::chrono::seconds(20)), 199u)
      << "every row but the last step's (it waits for the next step) before Finish, long "
         "before fold_delay_ms";
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->events.late, 0);
  EXPECT_EQ(report->timing.steps, 200);
}

// A range open on another thread, outside the steps, holds the fold back
// to its start: the steps after it wait, and it is not late.
TEST(OpenScopesTest, ARangeOpenOnAnotherThreadIsWaitedFor) {
  TempDir dir;
  auto session = Session::Start(PatientOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  std::atomic<bool> opened{false}, close{false};
  std::thread other([&] {
    TRAINSCOPE_PHASE(kCheckpoint);
    opened = true;
    while (!close) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (!opened) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  BusySteps(*session, 0, 100, 500);  // 50 ms
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const absl::StatusOr<std::vector<Report::Step>> held =
      exporter::ReadStepsFile(dir.File("steps.jsonl"));
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(held->size(), 0u) << "no row while a range that began before them is open";
  close = true;
  other.join();
  // All but the last step's, which waits for a next step.
  EXPECT_EQ(RowsWithin(dir.File("steps.jsonl"), 99, std::chrono::seconds(20)), 99u);
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->events.late, 0);
  EXPECT_GT(PhaseTotalS(*report, Phase::kCheckpoint), 0.2) << "the whole range, not late";
}

// 10 steps, an idle spell (the idle drain's wait grows to about a quarter
// second), `burst` (steps 10 to 20009: 40,000 events, so that one drain,
// or Finish's, most likely takes them whole), 10 more steps. The report,
// checked for nothing late or dropped.
Report BurstAfterAnIdleSpell(const TempDir& dir, const std::function<void(Session&)>& burst) {
  Options options = PatientOptions(dir.path());
  options.buffer_bytes_per_thread = Bytes(uint64_t{16} << 20);
  options.flush_interval_ms = 1000;  // the idle drain's wait may grow to a second
  auto session = Session::Start(options);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return Report{};
  BusySteps(*session, 0, 10, 10);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  burst(*session);
  BusySteps(*session, 20010, 10, 10);
  absl::StatusOr<Report> report = session->Finish();
  EXPECT_TRUE(report.ok()) << report.status();
  if (!report.ok()) return Report{};
  EXPECT_EQ(report->events.late, 0);
  EXPECT_EQ(report->events.dropped, 0);
  EXPECT_EQ(report->timing.steps, 20020);
  return *report;
}

// A range around many steps on the thread that records them, ended before
// the drain looks, the range's Event last. Its steps end no cut, so the
// fold stays behind the range's start until the drain reached its end;
// were each step a cut, the fold would pass its start chunks before (4096
// events a chunk) and the range would be late.
TEST(OpenScopesTest, ARangeAroundTheStepsIsNotLate) {
  TempDir dir;
  BurstAfterAnIdleSpell(dir, [](Session& session) {
    TRAINSCOPE_PHASE(kEval);
    BusySteps(session, 10, 20000, 0);
  });
  const absl::StatusOr<std::vector<Report::Step>> rows =
      exporter::ReadStepsFile(dir.File("steps.jsonl"));
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 20020u);
  for (size_t k = 0; k < rows->size(); ++k) {
    ASSERT_EQ((*rows)[k].index, static_cast<int64_t>(k));
    // The eval range covers steps 10 to 20009 whole.
    ASSERT_EQ((*rows)[k].phase_ms[static_cast<int>(Phase::kEval)] > 0, k >= 10 && k < 20010) << k;
  }
}

// An open async range holds the fold back for fold_delay_ms: its start is
// on no thread's open scope, and it is not late.
TEST(OpenScopesTest, AnOpenAsyncRangeIsWaitedFor) {
  TempDir dir;
  auto session = Session::Start(PatientOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  AsyncRange copy = AsyncRange::Begin(Phase::kHostToDevice);
  BusySteps(*session, 0, 100, 500);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const absl::StatusOr<std::vector<Report::Step>> held =
      exporter::ReadStepsFile(dir.File("steps.jsonl"));
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(held->size(), 0u);
  std::thread([&] { copy.End(); }).join();
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->events.late, 0);
  EXPECT_GT(PhaseTotalS(*report, Phase::kHostToDevice), 0.2);
  EXPECT_EQ(report->timing.steps, 100);
}

// An async range that began and ended on the busiest thread since the
// last drain lies in its ring after steps that began after it: that drain
// folds its rings whole, not chunk by chunk up to the steps' ends.
TEST(OpenScopesTest, AnAsyncRangeInsideABurstIsNotLate) {
  TempDir dir;
  BurstAfterAnIdleSpell(dir, [](Session& session) {
    AsyncRange copy = AsyncRange::Begin(Phase::kHostToDevice);
    BusySteps(session, 10, 20000, 0);
  });  // the range ended there, on this thread, after 40,000 events
}

// The ring's view of the scopes open on its thread.
TEST(OpenScopesTest, TheRingKnowsTheOutermostOpenScope) {
  ThreadBuffer ring(64, 0, 0);
  EXPECT_EQ(ring.open_since(), ThreadBuffer::kNothingOpen);
  EXPECT_TRUE(ring.OpenScope());
  EXPECT_EQ(ring.open_since(), ThreadBuffer::kOpening);
  ring.SetOpenStart(1234);
  EXPECT_FALSE(ring.OpenScope());  // nested
  EXPECT_EQ(ring.ScopeDepth(), 2);
  ring.CloseScope();
  EXPECT_EQ(ring.open_since(), 1234);
  EXPECT_EQ(ring.ScopeDepth(), 1);  // the outermost: its Event is a cut
  ring.CloseScope();
  EXPECT_EQ(ring.open_since(), ThreadBuffer::kNothingOpen);
}

}  // namespace
}  // namespace trainscope
