// Load: many threads recording at once while the rings are drained. Every
// event is either delivered or counted as dropped, and
// none is torn: each carries a check the reader verifies. Both run under
// ThreadSanitizer in .ci/run (the tsan suite).
//
// TRAINSCOPE_STRESS_SECONDS sets each test's length (default 10 for the
// session, 5 for the rings).
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fmt/format.h"
#include "sdk/export/steps_file.h"
#include "sdk/kineto/trace_reader.h"
#include "tests/test_util.h"
#include "trainscope/trainscope.h"

namespace trainscope {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kThreads = 32;

double StressSeconds(double fallback) {
  const char* text = std::getenv("TRAINSCOPE_STRESS_SECONDS");
  return text != nullptr && *text != '\0' ? std::atof(text) : fallback;
}

uint32_t OsTid() { return static_cast<uint32_t>(syscall(SYS_gettid)); }

// Every field of an Event derived from (thread, sequence number): an event
// put together from two pushes, or read while it was written, fails Check.
Event Checked(uint32_t thread, int64_t seq) {
  return Event{seq,
               seq * 3 + thread,
               seq ^ 0x5a5a5a5a,
               thread,
               EventKind::kRange,
               static_cast<Phase>(seq % 4),
               static_cast<uint16_t>(seq & 0xffff)};
}
bool Check(const Event& e, uint32_t thread) {
  const Event want = Checked(thread, e.start_ns);
  return e.value == thread && e.end_ns == want.end_ns && e.step == want.step &&
         e.kind == want.kind && e.phase == want.phase && e.aux == want.aux;
}

// 32 producers push into their own small rings as fast as they can while
// one consumer drains them all: each ring delivers its events whole and in
// order, and what it did not deliver it counted as dropped.
TEST(StressTest, ThirtyTwoRingsDeliverOrCountEveryEventAndTearNone) {
  const auto seconds = std::chrono::duration<double>(StressSeconds(5));
  std::vector<std::unique_ptr<ThreadBuffer>> rings;
  for (int t = 0; t < kThreads; ++t) {
    rings.push_back(std::make_unique<ThreadBuffer>(1024, 0, static_cast<uint16_t>(t)));
  }
  std::array<std::atomic<int64_t>, kThreads> produced{};
  std::atomic<int> running{kThreads};
  std::vector<std::thread> producers;
  // The clock starts once every producer runs (a late one would push nothing).
  std::atomic<int> ready{0};
  std::atomic<int64_t> stop_at_ns{0};
  auto now_ns = [] { return Clock::now().time_since_epoch().count(); };
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&, t] {
      ThreadBuffer& ring = *rings[static_cast<size_t>(t)];
      ready.fetch_add(1);
      while (stop_at_ns.load() == 0) std::this_thread::yield();
      int64_t seq = 0;
      do {
        for (int k = 0; k < 256; ++k) ring.Push(Checked(static_cast<uint32_t>(t), seq++));
        if ((seq & 4095) == 0) std::this_thread::yield();  // let the others in
      } while (now_ns() < stop_at_ns.load());
      produced[static_cast<size_t>(t)].store(seq);
      running.fetch_sub(1);
    });
  }
  while (ready.load() < kThreads) std::this_thread::yield();
  stop_at_ns = now_ns() + std::chrono::duration_cast<Clock::duration>(seconds).count();
  std::vector<int64_t> delivered(kThreads, 0), last(kThreads, -1);
  int64_t torn = 0, out_of_order = 0;
  auto drain_all = [&] {
    for (int t = 0; t < kThreads; ++t) {
      rings[static_cast<size_t>(t)]->Drain([&](Event* events, size_t n) {
        for (size_t i = 0; i < n; ++i) {
          const Event& e = events[i];
          if (!Check(e, static_cast<uint32_t>(t))) ++torn;
          if (e.start_ns <= last[t]) ++out_of_order;
          last[t] = e.start_ns;
        }
        delivered[t] += static_cast<int64_t>(n);
      });
    }
  };
  while (running.load() > 0) drain_all();
  for (std::thread& p : producers) p.join();
  drain_all();
  EXPECT_EQ(torn, 0);
  EXPECT_EQ(out_of_order, 0);
  int64_t total = 0, dropped = 0;
  for (int t = 0; t < kThreads; ++t) {
    SCOPED_TRACE(t);
    const auto ring_dropped = static_cast<int64_t>(rings[static_cast<size_t>(t)]->dropped());
    EXPECT_GT(delivered[t], 0);
    EXPECT_EQ(delivered[t] + ring_dropped, produced[static_cast<size_t>(t)].load());
    total += produced[static_cast<size_t>(t)].load();
    dropped += ring_dropped;
  }
  std::printf("stress: %d rings, %lld events in %.0f s, %lld dropped\n", kThreads,
              static_cast<long long>(total), seconds.count(), static_cast<long long>(dropped));
}

// 32 threads record named phases through the public API for 10 s while the
// session drains, folds and writes, with rings small enough to overflow in
// bursts. The report accounts for every event (recorded + dropped =
// pushed), steps.jsonl and trace.json read back whole, and every range in
// the trace (the windows it keeps) sits on the thread whose name it
// carries: an event put together from two threads' would not.
TEST(StressTest, ThirtyTwoThreadsRecordWhileTheSessionDrainsAndWrites) {
  testing::TempDir dir;
  Options options = testing::QuietOptions(dir.path(), "stress");
  options.buffer_bytes_per_thread = Bytes{64 << 10};  // 2048 events
  options.warmup_steps = 0;
  auto session = Session::Start(options);
  ASSERT_TRUE(session.ok()) << session.status();
  // Thread t's ranges cycle through 8 names: t's name k is "stress/<t>/<k>".
  std::vector<std::array<NameId, 8>> names(kThreads);
  std::map<std::string, std::pair<int, int>> name_of;  // name -> (t, k)
  for (int t = 0; t < kThreads; ++t) {
    for (int k = 0; k < 8; ++k) {
      const std::string name = fmt::format("stress/{}/{}", t, k);
      names[static_cast<size_t>(t)][static_cast<size_t>(k)] = InternName(name);
      name_of[name] = {t, k};
    }
  }
  const auto seconds = std::chrono::duration<double>(StressSeconds(10));
  const auto stop_at = Clock::now() + seconds;
  std::atomic<bool> stop{false};
  std::array<std::atomic<int64_t>, kThreads> pushed{};
  std::array<std::atomic<uint32_t>, kThreads> tids{};
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      tids[static_cast<size_t>(t)].store(OsTid());
      const auto& mine = names[static_cast<size_t>(t)];
      int64_t seq = 0;
      for (int round = 0; !stop.load(std::memory_order_relaxed); ++round) {
        // Mostly paced (one range every 100 us), and now and then, on a few
        // threads, a burst of 5000 back to back: more than the ring holds.
        const int burst = (t % 8 == 0 && round % 2000 == 1999) ? 5000 : 1;
        for (int i = 0; i < burst; ++i) {
          PhaseScope scope(Phase::kForward, mine[static_cast<size_t>(seq % 8)]);
          ++seq;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      pushed[static_cast<size_t>(t)].store(seq);
    });
  }
  int64_t steps = 0;
  do {  // at least a few steps, however short the run
    StepScope step(*session, steps++);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  } while (Clock::now() < stop_at || steps < 3);
  stop = true;
  for (std::thread& w : workers) w.join();
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();

  int64_t ranges = 0;
  for (const auto& p : pushed) ranges += p.load();
  EXPECT_EQ(report->events.recorded + report->events.dropped, ranges + steps)
      << "recorded " << report->events.recorded << ", dropped " << report->events.dropped;
  EXPECT_GT(report->events.recorded, steps);

  // steps.jsonl: a whole line for every step the session folded.
  absl::StatusOr<std::vector<Report::Step>> rows = exporter::ReadStepsFile(dir.File("steps.jsonl"));
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_GT(rows->size(), 0u);
  for (size_t i = 1; i < rows->size(); ++i) EXPECT_GT((*rows)[i].index, (*rows)[i - 1].index);

  // trace.json: each stress range on its own thread's tid.
  std::map<uint32_t, int> thread_of_tid;
  for (int t = 0; t < kThreads; ++t) thread_of_tid[tids[static_cast<size_t>(t)].load()] = t;
  kineto::TraceReader reader;
  int64_t seen = 0, wrong_thread = 0;
  absl::Status read = reader.Read(dir.File("trace.json"), [&](const kineto::RawEvent& e) {
    auto it = name_of.find(std::string(e.name));
    if (it == name_of.end()) return;
    ++seen;
    const int t = it->second.first;
    auto owner = thread_of_tid.find(static_cast<uint32_t>(e.tid));
    if (owner == thread_of_tid.end() || owner->second != t) ++wrong_thread;
  });
  ASSERT_TRUE(read.ok()) << read;
  EXPECT_GT(seen, 0);
  EXPECT_EQ(wrong_thread, 0);
  std::printf(
      "stress: %d threads, %lld ranges and %lld steps in %.0f s: %lld recorded, %lld "
      "dropped; %lld stress ranges in trace.json\n",
      kThreads, static_cast<long long>(ranges), static_cast<long long>(steps), seconds.count(),
      static_cast<long long>(report->events.recorded),
      static_cast<long long>(report->events.dropped), static_cast<long long>(seen));
}

}  // namespace
}  // namespace trainscope
