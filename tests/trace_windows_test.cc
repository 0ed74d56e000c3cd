// trace.json keeps windows of steps (sdk/export/trace_windows.h): fed with
// drained events and device intervals directly, and through a Session; the
// trace is read back from disk.
#include "sdk/export/trace_windows.h"

#include <gtest/gtest.h>
#include <simdjson.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "fmt/format.h"
#include "sdk/analysis/step_analysis.h"
#include "sdk/analysis/warmup.h"
#include "sdk/export/report_json.h"
#include "sdk/export/trace_writer.h"
#include "sdk/ground/timeline.h"
#include "tests/test_util.h"
#include "trainscope/trainscope.h"

namespace trainscope {
namespace {

using exporter::TraceWindowOptions;
using exporter::TraceWindows;
using exporter::TraceWriter;
using testing::TempDir;

struct Read {
  std::set<int64_t> steps;                           // ProfilerStep#N present
  std::map<std::string, std::set<int64_t>> by_name;  // name -> args.step of ph X
  size_t events = 0;
};

// Parses trace.json strictly; fails the test if it is not valid JSON.
Read ReadTrace(const std::string& path) {
  Read read;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  const auto error = parser.load(path).get(doc);
  EXPECT_EQ(error, simdjson::SUCCESS) << path;
  if (error != simdjson::SUCCESS) return read;
  for (simdjson::dom::element e : doc["traceEvents"].get_array()) {
    ++read.events;
    const std::string name(e["name"].get_string().value());
    if (name.rfind("ProfilerStep#", 0) == 0) {
      read.steps.insert(std::stoll(name.substr(13)));
      continue;
    }
    int64_t step = -2;
    if (e["args"]["step"].get_int64().get(step) == simdjson::SUCCESS) {
      read.by_name[name].insert(step);
    }
  }
  return read;
}

// Steps of 1 ms with one "forward" range each, on one thread, fed to the
// windows in drains of `per_drain` steps; `slow` steps last 10 ms.
class Feeder {
 public:
  explicit Feeder(TraceWindows* windows) : windows_(windows) {}
  void Steps(int64_t first, int64_t count, const std::set<int64_t>& slow = {}, int per_drain = 7) {
    std::vector<Event> events;
    for (int64_t i = first; i < first + count; ++i) {
      const TimestampNs length = slow.count(i) != 0 ? 10'000'000 : 1'000'000;
      events.push_back(Event{now_ + 1000, now_ + length - 1000, i, forward_, EventKind::kRange,
                             Phase::kForward, 0});
      events.push_back(Event{now_, now_ + length, i, 4, EventKind::kStep, Phase::kOther, 0});
      starts_[i] = now_;
      now_ += length;
      if ((i - first + 1) % per_drain == 0) Drain(&events);
    }
    Drain(&events);
  }
  // Steps of the given lengths, after those fed so far.
  void Lengths(int64_t first, const std::vector<TimestampNs>& lengths, int per_drain = 7) {
    std::vector<Event> events;
    for (size_t k = 0; k < lengths.size(); ++k) {
      const int64_t i = first + static_cast<int64_t>(k);
      events.push_back(Event{now_, now_ + lengths[k], i, 4, EventKind::kStep, Phase::kOther, 0});
      starts_[i] = now_;
      now_ += lengths[k];
      if ((k + 1) % per_drain == 0) Drain(&events);
    }
    Drain(&events);
  }
  void Drain(std::vector<Event>* events) {
    windows_->AddEvents(1234, events->data(), events->size(), [](uint16_t) { return 1234u; });
    events->clear();
  }
  // The analysis folded every step so far.
  void FoldAll(int64_t first, int64_t count) {
    for (int64_t i = first; i < first + count; ++i) windows_->StepFolded(i);
  }
  TimestampNs start_of(int64_t step) { return starts_[step]; }

 private:
  TraceWindows* windows_;
  NameId forward_ = InternName("forward");
  TimestampNs now_ = 1'000'000'000;
  std::map<int64_t, TimestampNs> starts_;
};

TEST(TraceWindowsTest, KeepsTheFirstSettledStepsAndTheSlowestAndNothingElse) {
  TempDir dir;
  auto writer = TraceWriter::Open(dir.path(), "trace.json", "windows", 1);
  ASSERT_TRUE(writer.ok()) << writer.status();
  TraceWindowOptions options;
  options.first_steps = 10;
  options.slowest_steps = 3;
  TraceWindows windows(writer->get(), options);
  Feeder feed(&windows);
  // Steps 0 and 1 are warmup (slow); steps 2, 3 and 4 are the first three
  // within 1.25x of each other: the first window is steps 2..11.
  feed.Steps(0, 2, {0, 1});
  feed.Steps(2, 998, {300, 500, 700, 900});
  feed.FoldAll(0, 1000);
  ASSERT_TRUE(windows.Flush(true, true).ok());

  const TraceWindows::Stats& stats = windows.stats();
  EXPECT_EQ(stats.first_window_step, 2);
  EXPECT_EQ(stats.first_window_steps, 10);
  EXPECT_EQ(stats.windows_written, 1);
  EXPECT_EQ(stats.windows_dropped, 0);
  ASSERT_EQ(stats.slowest.size(), 3u);  // ties broken by the earlier step staying
  EXPECT_EQ(stats.slowest[0].index, 300);
  EXPECT_EQ(stats.slowest[1].index, 500);
  EXPECT_EQ(stats.slowest[2].index, 700);
  EXPECT_DOUBLE_EQ(stats.slowest[0].duration_ms, 10.0);

  const Read read = ReadTrace(dir.File("trace.json"));
  std::set<int64_t> expected = {300, 500, 700};
  for (int64_t i = 2; i < 12; ++i) expected.insert(i);
  EXPECT_EQ(read.steps, expected);
  EXPECT_EQ(read.by_name.at("forward"), expected);
  EXPECT_EQ(stats.bytes, static_cast<uint64_t>(testing::ReadAll(dir.File("trace.json")).size()));
  // Held now: the three slowest steps' text, a few hundred bytes each.
  EXPECT_GT(windows.held_bytes(), 0u);
  EXPECT_LT(windows.held_bytes(), 3 * 1024u);
}

// A thread that exits while its last events wait in steps the windows have
// not placed yet keeps its name in trace.json once those steps are kept;
// a thread none of whose events were kept loses it.
TEST(TraceWindowsTest, AThreadThatExitsBeforeItsStepIsKeptKeepsItsName) {
  TempDir dir;
  auto writer = TraceWriter::Open(dir.path(), "trace.json", "windows", 1);
  ASSERT_TRUE(writer.ok()) << writer.status();
  TraceWindowOptions options;
  options.first_steps = 10;
  options.slowest_steps = 0;
  TraceWindows windows(writer->get(), options);
  Feeder feed(&windows);
  const auto tid_of = [](uint16_t) { return 77u; };
  const NameId load = InternName("load");
  feed.Steps(0, 5);  // the warm-up rule has not placed them yet
  (*writer)->NameThread(77, "worker/0");
  const Event in_step_3{feed.start_of(3) + 100, feed.start_of(3) + 200, 3, load,
                        EventKind::kRange,      Phase::kDataWait,       0};
  windows.AddEvents(77, &in_step_3, 1, tid_of);
  windows.ForgetThread(77);  // it exits: its ring is given back
  feed.Steps(5, 495);
  (*writer)->NameThread(88, "worker/1");
  const Event in_step_499{feed.start_of(499) + 100, feed.start_of(499) + 200, 499, load,
                          EventKind::kRange,        Phase::kDataWait,         0};
  windows.AddEvents(88, &in_step_499, 1, tid_of);
  windows.ForgetThread(88);
  feed.FoldAll(0, 500);
  ASSERT_TRUE(windows.Flush(true, true).ok());
  EXPECT_EQ(windows.stats().first_window_step, 0);
  const Read read = ReadTrace(dir.File("trace.json"));
  EXPECT_EQ(read.by_name.at("load"), std::set<int64_t>{3}) << "step 499 is in no window";
  const std::string trace = testing::ReadAll(dir.File("trace.json"));
  EXPECT_NE(trace.find("\"worker/0\""), std::string::npos) << "its event in step 3 is kept";
  EXPECT_EQ(trace.find("\"worker/1\""), std::string::npos) << "none of its events is kept";
}

// The report's warm-up and the trace's first steady window come from one
// rule: over runs of every shape (noisy, drifting, slow starts, never
// settling, short, longer than the rule's limit), the window starts at the
// step where SummarizeSteps, the report's reading of the same steps, ends
// the warm-up.
TEST(TraceWindowsTest, TheFirstWindowStartsWhereTheReportsWarmupEnds) {
  std::mt19937_64 random(7);
  for (int run = 0; run < 60; ++run) {
    const int shape = run % 6;
    int64_t n = 40 + static_cast<int64_t>(random() % 200);
    if (shape == 4) n = 2 + run % 9;
    if (shape == 5) n = 200;
    std::vector<TimestampNs> lengths;
    for (int64_t i = 0; i < n; ++i) {
      double ms = 1.0;
      if (shape == 0) ms = 1.0 + 0.5 * std::uniform_real_distribution<>(0, 1)(random);  // noise
      if (shape == 1) ms = i < 30 ? 1.4 : 1.0;                                          // a drift
      if (shape == 2) ms = i < 5 ? 9.0 : 1.0 + 0.1 * (i % 3);         // five equally slow first
      if (shape == 3) ms = i % 2 == 0 ? 1.0 : 4.0;                    // never settles
      if (shape == 5) ms = i < 130 ? (i % 2 == 0 ? 1.0 : 4.0) : 1.0;  // past the limit
      const bool exact = shape == 2 || shape == 5;
      if (!exact && std::uniform_int_distribution<>(0, 20)(random) == 0) ms *= 6;  // a stall
      lengths.push_back(static_cast<TimestampNs>(ms * 1e6));
    }
    TempDir dir;
    auto writer = TraceWriter::Open(dir.path(), "trace.json", "windows", 1);
    ASSERT_TRUE(writer.ok());
    TraceWindowOptions options;
    options.first_steps = 5;
    options.slowest_steps = 0;
    TraceWindows windows(writer->get(), options);
    Feeder feed(&windows);
    feed.Lengths(0, lengths, 1 + run % 9);
    feed.FoldAll(0, n);
    ASSERT_TRUE(windows.Flush(true, true).ok());

    std::vector<analysis::StepSpan> spans;
    for (int64_t i = 0; i < n; ++i) {
      spans.push_back({feed.start_of(i), feed.start_of(i) + lengths[i], i, 1});
    }
    const analysis::StepStats report = analysis::SummarizeSteps(spans, -1);
    SCOPED_TRACE(
        fmt::format("run {} (shape {}, {} steps): warm-up {}", run, shape, n, report.warmup_steps));
    EXPECT_EQ(windows.stats().first_window_step, report.warmup_steps);
    const std::set<int64_t> kept = ReadTrace(dir.File("trace.json")).steps;
    ASSERT_FALSE(kept.empty());
    EXPECT_EQ(*kept.begin(), report.warmup_steps);
    if (shape == 2) {
      EXPECT_EQ(report.warmup_steps, 5);
    }
    if (shape == 5) {
      EXPECT_EQ(report.warmup_steps, analysis::WarmupRule::kLatest);
    }
  }
}

// Ranges tagged with step indices that no StepScope ends hold at most 16
// open steps: the one opened longest ago is dropped for a new one, and the
// steps that do end are all kept though their indices are smaller (before,
// the smallest index went, and a new step below 16 orphans was refused).
// The open ones are counted as their fate changes, not looked for among
// every held step at each new step: with every step traced thousands are
// held.
TEST(TraceWindowsTest, StepsThatNeverEndHoldAtMostSixteenOpen) {
  TempDir dir;
  auto writer = TraceWriter::Open(dir.path(), "trace.json", "windows", 1);
  ASSERT_TRUE(writer.ok()) << writer.status();
  TraceWindowOptions options;
  options.warmup_steps = 0;
  options.first_steps = 0;
  options.slowest_steps = 0;
  options.active = 1;  // every step that ends is kept
  TraceWindows windows(writer->get(), options);
  Feeder feed(&windows);
  const NameId name = InternName("orphan");
  for (int64_t k = 0; k < 200; ++k) {
    // A range of step 10^6 + k, which never ends, then a real step.
    Event orphan{1, 2, 1'000'000 + k, name, EventKind::kRange, Phase::kForward, 0};
    windows.AddEvents(1234, &orphan, 1, [](uint16_t) { return 1234u; });
    feed.Steps(k, 1);
  }
  feed.FoldAll(0, 200);
  ASSERT_TRUE(windows.Flush(true, true).ok());
  const Read read = ReadTrace(dir.File("trace.json"));
  EXPECT_EQ(read.steps.size(), 200u);
  EXPECT_EQ(read.by_name.count("orphan"), 0u);
  // What is held at the end: the open orphans' raw events, 16 at most.
  EXPECT_LE(windows.held_bytes(), 16 * sizeof(std::pair<uint32_t, Event>));
}

TEST(TraceWindowsTest, ARunThatNeverSettlesKeepsItsLastSteps) {
  TempDir dir;
  auto writer = TraceWriter::Open(dir.path(), "trace.json", "windows", 1);
  ASSERT_TRUE(writer.ok());
  TraceWindowOptions options;
  options.slowest_steps = 0;
  TraceWindows windows(writer->get(), options);
  Feeder feed(&windows);
  feed.Steps(0, 2);  // two steps: the rule needs three
  ASSERT_TRUE(windows.Flush(true, true).ok());
  EXPECT_EQ(ReadTrace(dir.File("trace.json")).steps, (std::set<int64_t>{0, 1}));
  EXPECT_EQ(windows.stats().first_window_step, 0);
}

TEST(TraceWindowsTest, ScheduleKeepsTheActiveStepsOfEachCycleLikeTorchProfilerSchedule) {
  TempDir dir;
  auto writer = TraceWriter::Open(dir.path(), "trace.json", "windows", 1);
  ASSERT_TRUE(writer.ok());
  TraceWindowOptions options;
  options.first_steps = 0;
  options.slowest_steps = 0;
  options.warmup_steps = 0;
  options.skip_first = 10;
  options.wait = 4;
  options.warmup = 1;
  options.active = 2;
  options.repeat = 3;
  TraceWindows windows(writer->get(), options);
  Feeder feed(&windows);
  feed.Steps(0, 100);
  // Not written until the analysis folded two steps past a window's last.
  ASSERT_TRUE(windows.Flush(true, false).ok());
  ASSERT_TRUE(windows.AwaitPublished().ok());
  EXPECT_TRUE(ReadTrace(dir.File("trace.json")).steps.empty());
  feed.FoldAll(0, 100);
  ASSERT_TRUE(windows.Flush(true, false).ok());
  ASSERT_TRUE(windows.AwaitPublished().ok());
  EXPECT_EQ(ReadTrace(dir.File("trace.json")).steps, (std::set<int64_t>{15, 16, 22, 23, 29, 30}));
  EXPECT_EQ(windows.stats().windows_written, 3);
  ASSERT_TRUE(windows.Flush(true, true).ok());
  EXPECT_EQ(ReadTrace(dir.File("trace.json")).steps, (std::set<int64_t>{15, 16, 22, 23, 29, 30}));
}

// While the run goes on, trace.json is republished on the writer's thread
// (the drain must not copy a body of up to 256 MiB).
// What it publishes is the body as it was when asked, whatever is appended
// meanwhile; a failure comes back from the next call.
TEST(TraceWriterTest, ABackgroundPublishCopiesTheBodyAsItWasAndReportsItsErrors) {
  TempDir dir;
  auto writer = TraceWriter::Open(dir.path(), "trace.json", "soon", 1);
  ASSERT_TRUE(writer.ok()) << writer.status();
  TraceWriter& w = **writer;
  auto event = [](std::string_view name) {
    return fmt::format(
        ",\n{{\"ph\":\"X\",\"name\":\"{}\",\"pid\":1,\"tid\":1,\"ts\":1,"
        "\"dur\":1}}",
        name);
  };
  // A body of 8 MiB, so that the copy takes a while.
  std::string big;
  while (big.size() < (8u << 20)) big += event("early");
  ASSERT_TRUE(w.AppendToBody(big).ok());
  const std::string held = event("held");
  ASSERT_TRUE(w.PublishSoon({held}).ok());
  ASSERT_TRUE(w.AppendToBody(event("late")).ok());
  ASSERT_TRUE(w.AwaitPublished().ok());
  std::string text = testing::ReadAll(dir.File("trace.json"));
  EXPECT_NE(text.find("\"early\""), std::string::npos);
  EXPECT_NE(text.find("\"held\""), std::string::npos);
  EXPECT_EQ(text.find("\"late\""), std::string::npos) << "appended after the request";
  EXPECT_EQ(w.published_bytes(), text.size());
  EXPECT_GT(ReadTrace(dir.File("trace.json")).events, 8u << 10);
  ASSERT_TRUE(w.PublishSoon({}).ok());
  ASSERT_TRUE(w.AwaitPublished().ok());
  text = testing::ReadAll(dir.File("trace.json"));
  EXPECT_NE(text.find("\"late\""), std::string::npos);
  EXPECT_EQ(text.find("\"held\""), std::string::npos);
  // The folder gone: the background publish cannot create its temporary.
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    std::filesystem::remove(entry.path());
  }
  ASSERT_TRUE(std::filesystem::remove(dir.path()));
  ASSERT_TRUE(w.PublishSoon({}).ok()) << "the request is made; its fate comes later";
  const absl::Status failed = w.AwaitPublished();
  EXPECT_EQ(failed.code(), absl::StatusCode::kNotFound) << failed;
  EXPECT_NE(failed.message().find("creating " + dir.path() + "/.trace.json.tmp.1"),
            std::string::npos)
      << failed;
  EXPECT_TRUE(w.AwaitPublished().ok()) << "an error is returned once";
  std::filesystem::create_directories(dir.path());
  ASSERT_TRUE(w.Publish(true).ok());
  EXPECT_EQ(w.PublishSoon({}).code(), absl::StatusCode::kFailedPrecondition)
      << "nothing is published after the final publish";
  EXPECT_TRUE(w.AwaitPublished().ok()) << "and nothing is waited for";
}

TEST(TraceWindowsTest, AWindowOverTheBudgetIsLeftOutWholeAndCounted) {
  TempDir dir;
  auto writer = TraceWriter::Open(dir.path(), "trace.json", "windows", 1);
  ASSERT_TRUE(writer.ok());
  TraceWindowOptions options;
  options.warmup_steps = 0;
  options.first_steps = 10;  // about 3 KB
  options.active = 1000;     // then one window of 1000 steps: far over the budget
  options.skip_first = 10;
  options.repeat = 1;
  options.slowest_steps = 0;
  options.budget_bytes = 16 << 10;
  TraceWindows windows(writer->get(), options);
  Feeder feed(&windows);
  feed.Steps(0, 1200);
  EXPECT_LE(windows.held_bytes(), options.budget_bytes);
  feed.FoldAll(0, 1200);
  ASSERT_TRUE(windows.Flush(true, true).ok());
  const Read read = ReadTrace(dir.File("trace.json"));
  std::set<int64_t> first;
  for (int64_t i = 0; i < 10; ++i) first.insert(i);
  EXPECT_EQ(read.steps, first) << "the big window is not written, not even in part";
  EXPECT_EQ(windows.stats().windows_written, 1);
  EXPECT_EQ(windows.stats().windows_dropped, 1);
  EXPECT_LE(windows.stats().bytes, options.budget_bytes);
}

TEST(TraceWindowsTest, DeviceWorkGoesWithItsLaunchingStepOrByTime) {
  TempDir dir;
  auto writer = TraceWriter::Open(dir.path(), "trace.json", "windows", 1);
  ASSERT_TRUE(writer.ok());
  TraceWindowOptions options;
  options.warmup_steps = 0;
  options.first_steps = 2;
  options.slowest_steps = 1;
  TraceWindows windows(writer->get(), options);
  Feeder feed(&windows);
  feed.Steps(0, 10, {6});  // kept: 0, 1 (first window) and 6 (slowest)
  ground::Timeline device;
  const uint32_t stream = device.AddTrack({ground::TrackKind::kDeviceStream, 0, 7, "stream 7"});
  auto kernel = [&](int64_t step, TimestampNs start, const char* name) {
    ground::Interval i;
    i.start_ns = start;
    i.end_ns = start + 500'000;
    i.step = step;
    i.kind = ground::IntervalKind::kKernel;
    i.track = stream;
    i.name = device.Intern(name);
    device.Add(i);
  };
  kernel(1, feed.start_of(1) + 900'000, "k_step1");  // ends in step 2: still step 1's
  kernel(6, feed.start_of(6) + 100, "k_step6");
  kernel(3, feed.start_of(3) + 100, "k_step3");         // a step not kept
  kernel(-1, feed.start_of(6) + 200'000, "k_by_time");  // launch not found: placed by time
  // A launch from LibTorch's autograd thread, which trainscope never saw:
  // its track takes the thread's OS name (cupti::RecordConverter).
  const uint32_t autograd =
      device.AddTrack({ground::TrackKind::kHostThread, 1, 5555, "pt_autograd_0"});
  ground::Interval call;
  call.start_ns = feed.start_of(6) + 50;
  call.end_ns = call.start_ns + 30;
  call.kind = ground::IntervalKind::kRuntimeCall;
  call.track = autograd;
  call.name = device.Intern("cudaLaunchKernel");
  device.Add(call);
  windows.AddDevice(device);
  feed.FoldAll(0, 10);
  ASSERT_TRUE(windows.Flush(true, true).ok());
  const std::string text = testing::ReadAll(dir.File("trace.json"));
  EXPECT_NE(text.find("k_step1"), std::string::npos);
  EXPECT_NE(text.find("k_step6"), std::string::npos);
  EXPECT_NE(text.find("k_by_time"), std::string::npos);
  EXPECT_EQ(text.find("k_step3"), std::string::npos);
  EXPECT_NE(text.find("\"stream 7\""), std::string::npos) << "the stream is named";
  EXPECT_NE(text.find("\"name\":\"thread_name\",\"pid\":1,\"tid\":5555,\"args\":{\"name\":"
                      "\"pt_autograd_0\"}"),
            std::string::npos)
      << "the autograd thread is named:\n"
      << text;
  EXPECT_EQ(ReadTrace(dir.File("trace.json")).steps, (std::set<int64_t>{0, 1, 6}));
}

TEST(TraceWindowsTest, ARunWithoutStepsKeepsItsStartupUpToTheBudget) {
  TempDir dir;
  auto writer = TraceWriter::Open(dir.path(), "trace.json", "windows", 1);
  ASSERT_TRUE(writer.ok());
  TraceWindowOptions options;
  options.budget_bytes = 64 << 10;
  TraceWindows windows(writer->get(), options);
  const NameId name = InternName("load");
  std::vector<Event> events;
  for (int i = 0; i < 10000; ++i) {
    events.push_back(
        Event{i * 1000, i * 1000 + 500, -1, name, EventKind::kRange, Phase::kOther, 0});
  }
  windows.AddEvents(1, events.data(), events.size(), [](uint16_t) { return 1u; });
  ASSERT_TRUE(windows.Flush(true, true).ok());
  const Read read = ReadTrace(dir.File("trace.json"));
  EXPECT_GT(read.events, 100u);
  EXPECT_LT(read.events, 10000u);
  EXPECT_LE(windows.stats().bytes, options.budget_bytes);
  EXPECT_EQ(windows.stats().windows_dropped, 1) << "the startup window was cut";
}

// Through a Session: a long run's trace.json is the same size as a short
// run's, and holds the first steady window and the slowest steps.
TEST(TraceWindowsSessionTest, TraceSizeDoesNotGrowWithTheRun) {
  std::vector<uint64_t> sizes;
  for (int64_t steps : {300, 6000}) {
    TempDir dir;
    Options options;
    options.output_dir = dir.path();
    options.sinks = Sink::kTraceJson | Sink::kReportJson;
    options.warmup_steps = 5;
    options.flush_interval_ms = 5;
    options.fold_delay_ms = 20;
    options.trace_checkpoint_interval_ms = 50;
    auto session = Session::Start(options);
    ASSERT_TRUE(session.ok()) << session.status();
    const std::set<int64_t> slow = {100, 200, 250, 280, 290};
    for (int64_t i = 0; i < steps; ++i) {
      StepScope step(*session, i, Samples(8));
      TRAINSCOPE_PHASE(kForward);
      if (slow.count(i) != 0) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
    auto report = session->Finish();
    ASSERT_TRUE(report.ok()) << report.status();
    const Read read = ReadTrace(dir.File("trace.json"));
    std::set<int64_t> expected = slow;
    for (int64_t i = 5; i < 25; ++i) expected.insert(i);
    EXPECT_EQ(read.steps, expected) << steps << " steps";
    EXPECT_EQ(read.by_name.at("forward"), expected);
    EXPECT_EQ(report->trace.first_window_step, 5);
    EXPECT_EQ(report->trace.first_window_steps, 20);
    ASSERT_EQ(report->trace.slowest.size(), 5u);
    EXPECT_GE(report->trace.slowest.back().duration_ms, 30.0);
    const std::string text = testing::ReadAll(dir.File("trace.json"));
    EXPECT_EQ(report->trace.bytes, static_cast<int64_t>(text.size()));
    sizes.push_back(text.size());
    const auto reread = exporter::ReadReportFile(dir.File("report.json"));
    ASSERT_TRUE(reread.ok()) << reread.status();
    EXPECT_EQ(reread->trace.slowest.size(), 5u);
    EXPECT_EQ(reread->trace.first_window_step, 5);
  }
  // The same windows; only the numbers in them differ in length.
  EXPECT_LT(sizes[1], sizes[0] + sizes[0] / 10);
}

}  // namespace
}  // namespace trainscope
