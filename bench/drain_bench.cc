// drain_bench: does the drain keep up with the scopes?
//
// 1. Capacity. A thread records 4 x 10^6 events (10 a step: the step and 9
//    phases) as fast as it can, into a ring large enough that nothing drops.
//    The drain's rate is the events over the CPU time every other thread of
//    the process spent from Start to the end of Finish (the drainer, and
//    Finish's last drain and outputs). Printed beside the producer's rate,
//    for draining and folding alone (goal: >= 10 M events per CPU
//    second), and with every output on (report.json, steps.jsonl,
//    trace.json: held to the same goal here, a stricter reading).
//    Then trace.json alone and report.json with steps.jsonl alone, printed
//    as nanoseconds an event for each.
// 2. Sustained. Default options (a 1 MiB ring, the adaptive drain interval),
//    the producer paced at 2 M events/s for 5 s. Goal: nothing dropped.
//    Then the same with every step traced (trace_schedule active = 1), for
//    information: every event is formatted into trace.json (about 260 MB/s)
//    until its 256 MiB budget is full, about the first 2 s; what drops does
//    so then, about as much in a 3 s run as in a 20 s one.
//
// Not a test: it prints PASS/MISS and exits 0. Each figure is the median of
// --runs runs (3).
//
//   drain_bench OUT_DIR [--runs=3] [--events=4000000] [--rate=2000000] [--seconds=5]
//               [--only=none|trace|rows|all|sustained]
//
// --only measures the capacity with those outputs alone and stops (for a
// profiler: `perf record -t` on the tscope-drain thread).
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "trainscope/trainscope.h"

ABSL_FLAG(int, runs, 3, "repetitions of each measurement (the median is printed)");
ABSL_FLAG(int64_t, events, 4000000, "events per capacity run");
ABSL_FLAG(double, rate, 2e6, "the sustained run's events per second");
ABSL_FLAG(double, seconds, 5, "the sustained run's length");
ABSL_FLAG(std::string, only, "",
          "none|trace|rows|all: the capacity with those outputs alone; sustained: the "
          "sustained run alone; empty: everything");

namespace {

// User and kernel CPU seconds of the process (RUSAGE_SELF) or this thread.
struct Usage {
  double user = 0, sys = 0;
};
Usage UsageOf(int who) {
  rusage r;
  getrusage(who, &r);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return {s(r.ru_utime), s(r.ru_stime)};
}

double CpuSeconds(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

trainscope::Options BaseOptions(const std::string& dir) {
  trainscope::Options options;
  options.output_dir = dir;
  options.run_name = "drain_bench";
  options.sinks = trainscope::Sink::kReportJson | trainscope::Sink::kTraceJson;
  options.summary_stream = nullptr;
  options.nvtx = false;
  options.device_timeline = false;
  options.code_version = options.data_version = options.container_image = "bench";
  return options;
}

// Ten events: a step and its nine phases.
inline void OneStep(trainscope::Session& session, int64_t step) {
  trainscope::StepScope scope(session, trainscope::StepIndex(step), trainscope::Samples(32));
  for (int p = 0; p < 9; ++p) trainscope::PhaseScope phase(static_cast<trainscope::Phase>(p));
}

struct Capacity {
  double producer_mev_s = 0;
  double drain_mev_cpu_s = 0;
  double kernel_share = 0;  // of the drain's CPU time, the kernel's (page cache, writes)
  long long recorded = 0, dropped = 0;
};

Capacity MeasureCapacity(const std::string& dir, long long events, trainscope::Sink sinks) {
  trainscope::Options options = BaseOptions(dir);
  options.sinks = sinks;
  options.buffer_bytes_per_thread = trainscope::Bytes(uint64_t{256} << 20);
  const Usage self0 = UsageOf(RUSAGE_SELF);
  const double process0 = CpuSeconds(CLOCK_PROCESS_CPUTIME_ID);
  const double thread0 = CpuSeconds(CLOCK_THREAD_CPUTIME_ID);
  auto session = trainscope::Session::Start(options);
  if (!session.ok()) {
    std::fprintf(stderr, "drain_bench: %s\n", session.status().ToString().c_str());
    std::exit(1);
  }
  const double loop_thread0 = CpuSeconds(CLOCK_THREAD_CPUTIME_ID);
  const Usage loop0 = UsageOf(RUSAGE_THREAD);
  const auto begin = std::chrono::steady_clock::now();
  for (int64_t step = 0; step * 10 < events; ++step) OneStep(*session, step);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  const double loop_thread = CpuSeconds(CLOCK_THREAD_CPUTIME_ID) - loop_thread0;
  const Usage loop1 = UsageOf(RUSAGE_THREAD);
  auto report = session->Finish();
  if (!report.ok()) {
    std::fprintf(stderr, "drain_bench: %s\n", report.status().ToString().c_str());
    std::exit(1);
  }
  const double process = CpuSeconds(CLOCK_PROCESS_CPUTIME_ID) - process0;
  const Usage self1 = UsageOf(RUSAGE_SELF);
  const double thread_total = CpuSeconds(CLOCK_THREAD_CPUTIME_ID) - thread0;
  // Everything but the producer's loop: other threads, Start and Finish.
  const double drain_cpu = process - thread_total + (thread_total - loop_thread);
  Capacity c;
  c.recorded = report->events.recorded;
  c.dropped = report->events.dropped;
  c.producer_mev_s = static_cast<double>(events) / wall / 1e6;
  c.drain_mev_cpu_s = static_cast<double>(c.recorded) / drain_cpu / 1e6;
  const double drain_sys = (self1.sys - self0.sys) - (loop1.sys - loop0.sys);
  const double drain_all = drain_sys + (self1.user - self0.user) - (loop1.user - loop0.user);
  c.kernel_share = drain_all > 0 ? std::max(0.0, drain_sys) / drain_all : 0;
  return c;
}

struct Sustained {
  long long recorded = 0, dropped = 0;
  double achieved_mev_s = 0;
};

Sustained MeasureSustained(const std::string& dir, double rate, double seconds,
                           bool every_step_traced) {
  trainscope::Options options = BaseOptions(dir);
  if (every_step_traced) options.trace_schedule.active = 1;
  auto session = trainscope::Session::Start(options);
  if (!session.ok()) {
    std::fprintf(stderr, "drain_bench: %s\n", session.status().ToString().c_str());
    std::exit(1);
  }
  // One step before the clock starts: the thread's first scope registers it
  // (a new ring, and the ring of two sessions ago freed: 256 MiB from the
  // capacity runs, 25 ms). Paced from before it, the producer would then
  // catch up at its full speed, which is a burst, not a sustained rate.
  OneStep(*session, 0);
  using Clock = std::chrono::steady_clock;
  const auto begin = Clock::now();
  long long recorded = 0;
  const auto total = static_cast<long long>(rate * seconds);
  for (int64_t step = 1; recorded < total; ++step) {
    OneStep(*session, step);
    recorded += 10;
    if ((step & 15) == 0) {  // pace in bursts of 160 events at most
      const auto due = begin + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(recorded / rate));
      while (Clock::now() < due) {
      }
    }
  }
  const double wall = std::chrono::duration<double>(Clock::now() - begin).count();
  auto report = session->Finish();
  if (!report.ok()) {
    std::fprintf(stderr, "drain_bench: %s\n", report.status().ToString().c_str());
    std::exit(1);
  }
  Sustained s;
  s.recorded = report->events.recorded;
  s.dropped = report->events.dropped;
  s.achieved_mev_s = static_cast<double>(recorded) / wall / 1e6;
  return s;
}

template <typename T, typename Key>
T Median(std::vector<T> runs, Key key) {
  std::sort(runs.begin(), runs.end(), [&](const T& a, const T& b) { return key(a) < key(b); });
  return runs[runs.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "drain_bench OUT_DIR [--runs=3] [--events=N] [--rate=EV_PER_S] [--seconds=S] "
      "[--only=none|trace|rows|all|sustained]");
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  // One folder, and not a flag misread as one (a run writes hundreds of MB
  // into it).
  if (positional.size() != 2 || positional[1][0] == '-') {
    std::fprintf(stderr, "usage: %s\n", absl::ProgramUsageMessage().data());
    return 2;
  }
  const std::string dir = positional[1];
  const int runs = std::max(1, absl::GetFlag(FLAGS_runs));
  const long long events = absl::GetFlag(FLAGS_events);
  const double rate = absl::GetFlag(FLAGS_rate), seconds = absl::GetFlag(FLAGS_seconds);
  const std::string only = absl::GetFlag(FLAGS_only);
  auto capacity_with = [&](trainscope::Sink sinks) {
    std::vector<Capacity> capacity;
    for (int r = 0; r < runs; ++r) {
      capacity.push_back(MeasureCapacity(dir + "/capacity", events, sinks));
    }
    return Median(capacity, [](const Capacity& x) { return x.drain_mev_cpu_s; });
  };
  if (only == "sustained") {
    for (bool traced : {false, true}) {
      const Sustained s = MeasureSustained(dir + "/sustained", rate, seconds, traced);
      std::printf(
          "sustained%s: %.2f M events/s for %.0f s, 1 MiB ring: %lld recorded, %lld dropped\n",
          traced ? ", every step traced" : "", s.achieved_mev_s, seconds, s.recorded, s.dropped);
    }
    return 0;
  }
  if (!only.empty()) {
    const trainscope::Sink sinks =
        only == "none"    ? trainscope::Sink::kNone
        : only == "trace" ? trainscope::Sink::kTraceJson
        : only == "rows"  ? trainscope::Sink::kReportJson
                          : trainscope::Sink::kReportJson | trainscope::Sink::kTraceJson;
    const Capacity c = capacity_with(sinks);
    std::printf("drain capacity (%s): %.2f M events per CPU second (%.0f ns an event)\n",
                only.c_str(), c.drain_mev_cpu_s, 1e3 / c.drain_mev_cpu_s);
    return 0;
  }
  const Capacity fold = capacity_with(trainscope::Sink::kNone);
  std::printf(
      "drain capacity: producer %.1f M events/s, draining and folding %.2f M events per CPU "
      "second (goal >= 10): %s  [%lld recorded, %lld dropped; median of %d]\n",
      fold.producer_mev_s, fold.drain_mev_cpu_s, fold.drain_mev_cpu_s >= 10 ? "PASS" : "MISS",
      fold.recorded, fold.dropped, runs);
  const Capacity c = capacity_with(trainscope::Sink::kReportJson | trainscope::Sink::kTraceJson);
  std::printf(
      "  with every output: producer %.1f M events/s, drain %.2f M events per CPU second (goal "
      ">= 10): %s  [%lld recorded, %lld dropped; %.0f%% of it in the kernel; median of %d]\n",
      c.producer_mev_s, c.drain_mev_cpu_s, c.drain_mev_cpu_s >= 10 ? "PASS" : "MISS", c.recorded,
      c.dropped, 100 * c.kernel_share, runs);
  // Where the drain's time goes: the same with fewer outputs, as ns an event.
  const Capacity trace = capacity_with(trainscope::Sink::kTraceJson);
  const Capacity rows = capacity_with(trainscope::Sink::kReportJson);
  auto ns = [](const Capacity& x) { return 1e3 / x.drain_mev_cpu_s; };
  auto kernel_ns = [&](const Capacity& x) { return ns(x) * x.kernel_share; };
  std::printf(
      "  by output: draining and folding %.0f ns an event (%.0f in the kernel); trace.json "
      "windows +%.0f ns (%+.0f kernel); report.json and steps.jsonl +%.0f ns (%+.0f kernel); "
      "all %.0f ns (%.0f kernel)\n",
      ns(fold), kernel_ns(fold), ns(trace) - ns(fold), kernel_ns(trace) - kernel_ns(fold),
      ns(rows) - ns(fold), kernel_ns(rows) - kernel_ns(fold), ns(c), kernel_ns(c));
  for (bool traced : {false, true}) {
    std::vector<Sustained> sustained;
    for (int r = 0; r < runs; ++r)
      sustained.push_back(MeasureSustained(dir + "/sustained", rate, seconds, traced));
    const Sustained s = Median(sustained, [](const Sustained& x) { return x.dropped; });
    if (traced) {  // no goal: every event is formatted until the budget is full
      std::printf(
          "sustained, every step traced: %.2f M events/s for %.0f s, 1 MiB ring: %lld recorded, "
          "%lld dropped (while the 256 MiB trace budget fills; not a goal)  [median of %d]\n",
          s.achieved_mev_s, seconds, s.recorded, s.dropped, runs);
    } else {
      std::printf(
          "sustained: %.2f M events/s for %.0f s, 1 MiB ring: %lld recorded, %lld dropped "
          "(goal 0): %s  [median of %d]\n",
          s.achieved_mev_s, seconds, s.recorded, s.dropped, s.dropped == 0 ? "PASS" : "MISS", runs);
    }
  }
  return 0;
}
