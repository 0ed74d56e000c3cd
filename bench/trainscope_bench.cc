// trainscope_bench: the speed targets of the recorder, checked as ratios
// against baselines measured in the same run (never as timed assertions).
//
// Every benchmark runs several repetitions, randomly interleaved with the
// repetitions of the others; the summary printed at the end uses the median
// real time per iteration of each, and divides medians of the same run (the
// CPU-time ratio is printed beside it: on a busy machine real time includes
// preemption). The program always exits 0: it reports PASS/MISS, it does not
// judge. Run it with `make -C build bench` or build/bin/trainscope_bench
// (Google Benchmark flags such as --benchmark_filter work; the summary then
// prints "n/a" for what did not run).
//
// Baselines (no session):
//   BM_loop_overhead        an empty iteration of the benchmark loop.
//   BM_one_clock_read       one trainscope::NowNs() (CLOCK_MONOTONIC, vDSO).
//   BM_two_clock_reads      two NowNs(): what any recorded range must pay.
//   BM_clock_monotonic_raw  one clock_gettime(CLOCK_MONOTONIC_RAW).
//   BM_rdtsc / BM_rdtscp    one raw __rdtsc() / __rdtscp() (docs/clock.md).
//   BM_two_rdtsc_reads      two __rdtsc(): what a recorded range pays at the
//                           least where scopes read the TSC (Options::clock
//                           kAuto on a machine with an invariant TSC).
//
// Targets:
//   BM_recorded_phase_scope  PhaseScope begin+end with a Session recording,
//                            Options::nvtx = true and no NVTX tool attached.
//                            Targets: median <= 1.5 x BM_two_clock_reads,
//                            and <= 1.5 x BM_two_rdtsc_reads when the
//                            session's clock is the TSC (said in the summary).
//   BM_disabled_phase_scope  PhaseScope with no active session.
//                            Target: <= 2 ns; also shown / BM_one_clock_read.
//
// Also measured (ratio to BM_two_clock_reads, no target):
//   BM_recorded_range_macro  TRAINSCOPE_RANGE("bench_range") recorded.
//   BM_recorded_step_scope   StepScope recorded (NVTX step range, step index).
//   BM_recorded_async_range  AsyncRange::Begin + End on the same thread.
//   BM_disabled_range_macro  TRAINSCOPE_RANGE with no session.
//
// Diagnostics (where a recorded scope's time goes):
//   BM_recorded_phase_scope_shared_cpu  BM_recorded_phase_scope with the
//                             drainer free to run on the benchmark's CPU (see
//                             "CPU placement" below).
//   BM_recorded_phase_scope_nvtx_off  the same scope with Options::nvtx=false.
//   BM_recorded_phase_scope_monotonic the same scope with Options::clock =
//                             kMonotonic (two CLOCK_MONOTONIC reads).
//   BM_nvtx_push_pop_no_tool  internal::NvtxPush + NvtxPop, no tool attached.
//   BM_ring_push_hot          ThreadBuffer::Push into a 256 KiB private ring
//                             (cache-resident), drained (no-op sink) every
//                             4096 events.
//   BM_ring_push_64mib        the same into a fresh 64 MiB ring (the size the
//                             recorded benchmarks use: stores stream to DRAM).
//
// Recorded benchmarks start a fresh Session for every repetition (sinks =
// Sink::kNone, 64 MiB ring, 1 ms drain interval) and run a fixed number of
// iterations, so the ring never fills (the drop path is never what is
// measured) and Finish() keeps at most kRecordedIterations events (32 bytes
// each) in memory. The events recorded and dropped are checked and printed,
// with the CPU time the drainer spent per event during the loops.
//
// Flags: Google Benchmark's (--benchmark_filter=..., --benchmark_repetitions
// is overridden per benchmark), and --trainscope_no_pin (see below).
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"
#include "trainscope/clock.h"
#include "trainscope/phase.h"
#include "trainscope/recorder.h"
#include "trainscope/scope.h"
#include "trainscope/session.h"
#include "trainscope/torch/loader.h"
#include "trainscope/types.h"

namespace {

using trainscope::Phase;

// Iterations per repetition of a recorded benchmark: ~30 ms at ~60 ns, and
// 16 MiB of events kept by Finish() (the ring holds 2 Mi events).
constexpr benchmark::IterationCount kRecordedIterations = 1 << 19;
constexpr int kRepetitions = 9;
// Minimum time per repetition of the unrecorded benchmarks.
constexpr double kMinTimeS = 0.05;

// ---- CPU placement ----------------------------------------------------------
//
// The Session's drainer thread wakes every flush interval and copies the
// ring out. When no core is idle (another process busy on the other core of
// a 2-core machine) the scheduler runs it on the benchmark's core, preempting
// the loop, and the recorded benchmarks' real time then includes the drain.
// By default, when the process may use two CPUs or more, the benchmark thread
// is pinned to one CPU and every Session is started while the thread is
// allowed only the others, so that its drainer (which inherits the mask)
// never shares the benchmark's CPU. BM_recorded_phase_scope_shared_cpu keeps
// the unpinned placement to show what the drain costs when it does.
// --trainscope_no_pin turns pinning off for the whole run.

struct Placement {
  bool pinned = false;
  int bench_cpu = -1;
  cpu_set_t all;     // the process's mask at start
  cpu_set_t bench;   // {bench_cpu}
  cpu_set_t others;  // all minus bench_cpu
};
Placement& GetPlacement() {
  static Placement placement;
  return placement;
}

void SetupPlacement(bool pin) {
  Placement& p = GetPlacement();
  CPU_ZERO(&p.all);
  if (sched_getaffinity(0, sizeof(p.all), &p.all) != 0) return;
  if (!pin || CPU_COUNT(&p.all) < 2) return;
  for (int cpu = CPU_SETSIZE - 1; cpu >= 0; --cpu) {
    if (CPU_ISSET(cpu, &p.all)) {
      p.bench_cpu = cpu;
      break;
    }
  }
  CPU_ZERO(&p.bench);
  CPU_SET(p.bench_cpu, &p.bench);
  p.others = p.all;
  CPU_CLR(p.bench_cpu, &p.others);
  p.pinned = pthread_setaffinity_np(pthread_self(), sizeof(p.bench), &p.bench) == 0;
}

// ---- sessions for the recorded benchmarks ---------------------------------

struct Tally {
  int64_t sessions = 0;
  int64_t iterations = 0;  // events the loops should have recorded
  int64_t recorded = 0;
  int64_t dropped = 0;
  double drainer_cpu_ns = 0;  // CPU time of the other threads during the loops
  bool nvtx_on = true;        // NVTX was on in every session that wanted it
  std::string clock;          // report.events.clock of the last session
};
std::map<std::string, Tally>& Tallies() {
  static std::map<std::string, Tally> tallies;
  return tallies;
}

int64_t CpuNs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// One Session per repetition of a recorded benchmark: Sink::kNone, a 64 MiB
// ring (2 Mi events, more than a repetition records) and a 1 ms drain
// interval. Usage: RecordedSession rs(state, name, nvtx); if (!rs.ok())
// return; ... the loop ...; rs.Finish();
class RecordedSession {
 public:
  enum class Drainer { kOtherCpus, kAnyCpu };

  RecordedSession(benchmark::State& state, const char* name, bool nvtx,
                  Drainer drainer = Drainer::kOtherCpus, int events_per_iteration = 1,
                  int extra_events = 0,
                  trainscope::Options::Clock clock = trainscope::Options::Clock::kAuto)
      : state_(state),
        name_(name),
        nvtx_(nvtx),
        events_per_iteration_(events_per_iteration),
        extra_events_(extra_events) {
    trainscope::Options options;
    options.run_name = "trainscope_bench";
    options.sinks = trainscope::Sink::kNone;
    options.nvtx = nvtx;
    options.clock = clock;
    options.buffer_bytes_per_thread = trainscope::Bytes(uint64_t{64} << 20);
    options.flush_interval_ms = 1;
    options.trace_checkpoint_interval_ms = 60 * 1000;
    // Filled so that Start() does not run `git rev-parse` every repetition.
    options.code_version = "bench";
    options.data_version = "bench";
    options.container_image = "bench";
    // The drainer thread inherits the mask this thread has during Start().
    const Placement& p = GetPlacement();
    const cpu_set_t* mask = nullptr;
    if (p.pinned) mask = drainer == Drainer::kOtherCpus ? &p.others : &p.all;
    if (mask != nullptr) pthread_setaffinity_np(pthread_self(), sizeof(*mask), mask);
    absl::StatusOr<trainscope::Session> session = trainscope::Session::Start(options);
    if (p.pinned) pthread_setaffinity_np(pthread_self(), sizeof(p.bench), &p.bench);
    if (!session.ok()) {
      state.SkipWithError(std::string(session.status().message()).c_str());
      return;
    }
    session_.emplace(std::move(*session));
    // Register this thread now (one allocation of the ring), not in the loop.
    if (trainscope::ActiveBuffer() == nullptr) {
      state.SkipWithError("the thread did not register with the session");
      session_.reset();
      return;
    }
    nvtx_on_ = trainscope::internal::NvtxOn();
    process_cpu0_ = CpuNs(CLOCK_PROCESS_CPUTIME_ID);
    thread_cpu0_ = CpuNs(CLOCK_THREAD_CPUTIME_ID);
  }

  bool ok() const { return session_.has_value(); }
  trainscope::Session& session() { return *session_; }

  void Finish() {
    const int64_t others_cpu = (CpuNs(CLOCK_PROCESS_CPUTIME_ID) - process_cpu0_) -
                               (CpuNs(CLOCK_THREAD_CPUTIME_ID) - thread_cpu0_);
    absl::StatusOr<trainscope::Report> report = session_->Finish();
    if (!report.ok()) {
      state_.SkipWithError(std::string(report.status().message()).c_str());
      return;
    }
    Tally& tally = Tallies()[name_];
    tally.sessions += 1;
    tally.iterations += state_.iterations() * events_per_iteration_ + extra_events_;
    tally.recorded += report->events.recorded;
    tally.dropped += report->events.dropped;
    tally.drainer_cpu_ns += static_cast<double>(others_cpu);
    tally.clock = report->events.clock;
    if (nvtx_ && !nvtx_on_) tally.nvtx_on = false;
    state_.counters["dropped"] = static_cast<double>(report->events.dropped);
  }

 private:
  benchmark::State& state_;
  const char* name_;
  bool nvtx_;
  int events_per_iteration_;
  int extra_events_;
  bool nvtx_on_ = false;
  std::optional<trainscope::Session> session_;
  int64_t process_cpu0_ = 0;
  int64_t thread_cpu0_ = 0;
};

// ---- baselines -------------------------------------------------------------

void BM_loop_overhead(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::ClobberMemory();
  }
}

void BM_one_clock_read(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(trainscope::NowNs());
  }
}

void BM_two_clock_reads(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(trainscope::NowNs());
    benchmark::DoNotOptimize(trainscope::NowNs());
  }
}

void BM_clock_monotonic_raw(benchmark::State& state) {
  for (auto _ : state) {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    benchmark::DoNotOptimize(ts);
  }
}

void BM_rdtsc(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(__rdtsc());
  }
}

void BM_two_rdtsc_reads(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(__rdtsc());
    benchmark::DoNotOptimize(__rdtsc());
  }
}

void BM_rdtscp(benchmark::State& state) {
  for (auto _ : state) {
    unsigned int aux;
    benchmark::DoNotOptimize(__rdtscp(&aux));
    benchmark::DoNotOptimize(aux);
  }
}

// ---- recorded scopes -------------------------------------------------------

void BM_recorded_phase_scope(benchmark::State& state) {
  RecordedSession rs(state, "BM_recorded_phase_scope", /*nvtx=*/true);
  if (!rs.ok()) return;
  for (auto _ : state) {
    trainscope::PhaseScope scope(Phase::kForward);
  }
  rs.Finish();
}

void BM_recorded_phase_scope_monotonic(benchmark::State& state) {
  RecordedSession rs(state, "BM_recorded_phase_scope_monotonic", /*nvtx=*/true,
                     RecordedSession::Drainer::kOtherCpus, 1, 0,
                     trainscope::Options::Clock::kMonotonic);
  if (!rs.ok()) return;
  for (auto _ : state) {
    trainscope::PhaseScope scope(Phase::kForward);
  }
  rs.Finish();
}

void BM_recorded_phase_scope_shared_cpu(benchmark::State& state) {
  RecordedSession rs(state, "BM_recorded_phase_scope_shared_cpu", /*nvtx=*/true,
                     RecordedSession::Drainer::kAnyCpu);
  if (!rs.ok()) return;
  for (auto _ : state) {
    trainscope::PhaseScope scope(Phase::kForward);
  }
  rs.Finish();
}

void BM_recorded_phase_scope_nvtx_off(benchmark::State& state) {
  RecordedSession rs(state, "BM_recorded_phase_scope_nvtx_off", /*nvtx=*/false);
  if (!rs.ok()) return;
  for (auto _ : state) {
    trainscope::PhaseScope scope(Phase::kForward);
  }
  rs.Finish();
}

void BM_recorded_range_macro(benchmark::State& state) {
  RecordedSession rs(state, "BM_recorded_range_macro", /*nvtx=*/true);
  if (!rs.ok()) return;
  for (auto _ : state) {
    TRAINSCOPE_RANGE("bench_range");
  }
  rs.Finish();
}

void BM_recorded_step_scope(benchmark::State& state) {
  RecordedSession rs(state, "BM_recorded_step_scope", /*nvtx=*/true);
  if (!rs.ok()) return;
  int64_t index = 0;
  for (auto _ : state) {
    trainscope::StepScope step(rs.session(), index++, trainscope::Samples(32));
  }
  rs.Finish();
}

void BM_recorded_async_range(benchmark::State& state) {
  RecordedSession rs(state, "BM_recorded_async_range", /*nvtx=*/true);
  if (!rs.ok()) return;
  for (auto _ : state) {
    trainscope::AsyncRange range = trainscope::AsyncRange::Begin(Phase::kHostToDevice);
    range.End();
  }
  rs.Finish();
}

// ---- the loader wrapper (trainscope/torch/loader.h; needs no LibTorch) ------

// More batches than a recorded repetition takes: no epoch ends inside one.
std::vector<int64_t>& LoaderBatches() {
  static std::vector<int64_t> batches(kRecordedIterations + 2, 1);
  return batches;
}

// The baseline: a bare iterator over the batches.
void BM_bare_iterator(benchmark::State& state) {
  std::vector<int64_t>& batches = LoaderBatches();
  auto it = batches.begin();
  int64_t sum = 0;
  for (auto _ : state) {
    if (++it == batches.end()) it = batches.begin();
    sum += *it;
    benchmark::DoNotOptimize(sum);
  }
}

// The same iterator through InstrumentedLoader, recording: each advance is a
// kDataWait range and a loader.batch counter (two events; begin() adds two).
void BM_instrumented_loader(benchmark::State& state) {
  RecordedSession rs(state, "BM_instrumented_loader", /*nvtx=*/true,
                     RecordedSession::Drainer::kOtherCpus, /*events_per_iteration=*/2,
                     /*extra_events=*/2);
  if (!rs.ok()) return;
  std::vector<int64_t>& batches = LoaderBatches();
  auto loader = trainscope::libtorch::Instrument(batches);
  auto it = loader.begin();
  int64_t sum = 0;
  for (auto _ : state) {
    ++it;
    sum += *it;
    benchmark::DoNotOptimize(sum);
  }
  rs.Finish();
}

// ---- disabled scopes (no session) -----------------------------------------

void BM_disabled_phase_scope(benchmark::State& state) {
  if (trainscope::Recording()) {
    state.SkipWithError("a session is active");
    return;
  }
  for (auto _ : state) {
    trainscope::PhaseScope scope(Phase::kForward);
  }
}

void BM_disabled_range_macro(benchmark::State& state) {
  if (trainscope::Recording()) {
    state.SkipWithError("a session is active");
    return;
  }
  for (auto _ : state) {
    TRAINSCOPE_RANGE("bench_range");
  }
}

// ---- diagnostics -----------------------------------------------------------

void BM_nvtx_push_pop_no_tool(benchmark::State& state) {
  for (auto _ : state) {
    trainscope::internal::NvtxPush(static_cast<trainscope::NameId>(Phase::kForward),
                                   Phase::kForward, 7);
    trainscope::internal::NvtxPop();
  }
}

void RingPush(benchmark::State& state, size_t capacity) {
  trainscope::ThreadBuffer ring(capacity, 0, 0);
  const size_t drain_every = ring.capacity() / 2;
  size_t pushed = 0;
  trainscope::TimestampNs t = 0;
  for (auto _ : state) {
    ring.Push(trainscope::Event{t, t + 1, 3, 2, trainscope::EventKind::kRange, Phase::kForward, 0});
    t += 2;
    if (++pushed == drain_every) {
      pushed = 0;
      ring.Drain([](const trainscope::Event*, size_t) {});
    }
  }
  state.counters["dropped"] = static_cast<double>(ring.dropped());
}

void BM_ring_push_hot(benchmark::State& state) { RingPush(state, 8192); }
void BM_ring_push_64mib(benchmark::State& state) {
  RingPush(state, (size_t{64} << 20) / sizeof(trainscope::Event));
}

// ---- registration ----------------------------------------------------------

#define TS_UNRECORDED(fn)            \
  BENCHMARK(fn)                      \
      ->Unit(benchmark::kNanosecond) \
      ->MinTime(kMinTimeS)           \
      ->Repetitions(kRepetitions)    \
      ->ReportAggregatesOnly(true)
#define TS_RECORDED(fn)                 \
  BENCHMARK(fn)                         \
      ->Unit(benchmark::kNanosecond)    \
      ->Iterations(kRecordedIterations) \
      ->Repetitions(kRepetitions)       \
      ->ReportAggregatesOnly(true)

TS_UNRECORDED(BM_loop_overhead);
TS_UNRECORDED(BM_bare_iterator);
TS_RECORDED(BM_instrumented_loader);
TS_UNRECORDED(BM_one_clock_read);
TS_UNRECORDED(BM_two_clock_reads);
TS_UNRECORDED(BM_clock_monotonic_raw);
TS_UNRECORDED(BM_rdtsc);
TS_UNRECORDED(BM_two_rdtsc_reads);
TS_UNRECORDED(BM_rdtscp);
TS_RECORDED(BM_recorded_phase_scope);
TS_RECORDED(BM_recorded_phase_scope_shared_cpu);
TS_RECORDED(BM_recorded_phase_scope_nvtx_off);
TS_RECORDED(BM_recorded_phase_scope_monotonic);
TS_RECORDED(BM_recorded_range_macro);
TS_RECORDED(BM_recorded_step_scope);
TS_RECORDED(BM_recorded_async_range);
TS_UNRECORDED(BM_disabled_phase_scope);
TS_UNRECORDED(BM_disabled_range_macro);
TS_UNRECORDED(BM_nvtx_push_pop_no_tool);
TS_UNRECORDED(BM_ring_push_hot);
TS_RECORDED(BM_ring_push_64mib);

// ---- the summary -----------------------------------------------------------

// The console reporter, also keeping the medians of real and CPU time per
// iteration (ns) and the coefficient of variation of real time of every
// benchmark.
class MedianReporter : public benchmark::ConsoleReporter {
 public:
  using ConsoleReporter::ConsoleReporter;

  struct Figures {
    double real_ns = 0;
    double cpu_ns = 0;
    std::optional<double> cv;  // a fraction
  };

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.error_occurred) continue;
      const std::string& name = run.run_name.function_name;
      if (run.run_type == Run::RT_Aggregate) {
        if (run.aggregate_name == "median") {
          figures_[name].real_ns = run.GetAdjustedRealTime();
          figures_[name].cpu_ns = run.GetAdjustedCPUTime();
        }
        // Percentages are stored as a fraction in the accumulated time.
        if (run.aggregate_name == "cv") figures_[name].cv = run.real_accumulated_time;
      } else if (run.repetitions <= 1) {
        figures_[name].real_ns = run.GetAdjustedRealTime();
        figures_[name].cpu_ns = run.GetAdjustedCPUTime();
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }

  bool empty() const { return figures_.empty(); }
  const Figures* Get(const std::string& name) const {
    auto it = figures_.find(name);
    return it == figures_.end() ? nullptr : &it->second;
  }
  std::optional<double> Median(const std::string& name) const {
    const Figures* f = Get(name);
    if (f == nullptr) return std::nullopt;
    return f->real_ns;
  }

 private:
  std::map<std::string, Figures> figures_;
};

std::string Clocksource() {
  std::ifstream file("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string name;
  if (!(file >> name)) return "unknown";
  return name;
}

// Prints the medians of `name`; returns true when its real time exceeds its
// CPU time by more than 10% (the thread was preempted: a busy machine).
bool PrintFigure(const MedianReporter& r, const char* name) {
  const MedianReporter::Figures* f = r.Get(name);
  if (f == nullptr) {
    printf("  %-34s n/a\n", name);
    return false;
  }
  const bool preempted = f->real_ns > 1.1 * f->cpu_ns;
  printf("  %-34s %8.2f ns  (cpu %8.2f ns, cv %5.1f%%)%s\n", name, f->real_ns, f->cpu_ns,
         f->cv ? *f->cv * 100 : 0.0, preempted ? "  preempted" : "");
  return preempted;
}

// Prints `name / base` and, when `target` > 0, PASS or MISS against it.
void PrintRatio(const MedianReporter& r, const char* name, const char* base, double target) {
  const std::optional<double> a = r.Median(name);
  const std::optional<double> b = r.Median(base);
  if (!a || !b || *b <= 0) {
    printf("ratio %s / %s = n/a\n", name, base);
    return;
  }
  const double ratio = *a / *b;
  const MedianReporter::Figures* fa = r.Get(name);
  const MedianReporter::Figures* fb = r.Get(base);
  const double cpu_ratio = fb->cpu_ns > 0 ? fa->cpu_ns / fb->cpu_ns : 0;
  if (target > 0) {
    printf("ratio %s / %s = %.2f (target <= %.1f) %s  [cpu-time ratio %.2f]\n", name, base, ratio,
           target, ratio <= target ? "PASS" : "MISS", cpu_ratio);
    if (fa->real_ns > 1.1 * fa->cpu_ns || fb->real_ns > 1.1 * fb->cpu_ns) {
      printf(
          "  (unreliable: a thread was preempted, so real time includes time off the CPU;\n"
          "   by CPU time the target is %s; rerun on a quiet machine)\n",
          cpu_ratio <= target ? "met" : "missed");
    }
  } else {
    printf("ratio %s / %s = %.2f  [cpu-time ratio %.2f]\n", name, base, ratio, cpu_ratio);
  }
}

void PrintSummary(const MedianReporter& r) {
  printf("\n==== trainscope_bench summary (medians of %d repetitions, same run) ====\n",
         kRepetitions);
  const char* injection = getenv("NVTX_INJECTION64_PATH");
  printf("clocksource: %s; NVTX tool attached: %s\n", Clocksource().c_str(),
         injection != nullptr && *injection != '\0' ? injection : "no");
  const Placement& placement = GetPlacement();
  if (placement.pinned) {
    printf("placement: benchmark thread on CPU %d, session drainers on the other %d CPU(s)\n",
           placement.bench_cpu, CPU_COUNT(&placement.others));
  } else {
    printf("placement: not pinned (%d CPU(s) allowed)\n", CPU_COUNT(&placement.all));
  }
  printf("median real time per iteration:\n");
  bool preempted = false;
  for (const char* name : {"BM_loop_overhead",
                           "BM_one_clock_read",
                           "BM_two_clock_reads",
                           "BM_clock_monotonic_raw",
                           "BM_rdtsc",
                           "BM_two_rdtsc_reads",
                           "BM_rdtscp",
                           "BM_recorded_phase_scope",
                           "BM_recorded_phase_scope_shared_cpu",
                           "BM_recorded_phase_scope_nvtx_off",
                           "BM_recorded_phase_scope_monotonic",
                           "BM_recorded_range_macro",
                           "BM_recorded_step_scope",
                           "BM_recorded_async_range",
                           "BM_disabled_phase_scope",
                           "BM_disabled_range_macro",
                           "BM_nvtx_push_pop_no_tool",
                           "BM_ring_push_hot",
                           "BM_ring_push_64mib",
                           "BM_bare_iterator",
                           "BM_instrumented_loader"}) {
    preempted = PrintFigure(r, name) || preempted;
  }
  if (preempted) {
    printf(
        "  note: real time > 1.1 x CPU time marks a thread that was preempted (another\n"
        "  process was using the cores); rerun on a quiet machine for firm figures.\n");
  }

  printf("events (all repetitions of each recorded benchmark):\n");
  for (const auto& [name, t] : Tallies()) {
    printf(
        "  %-34s sessions %lld, expected %lld, recorded %lld, dropped %lld, "
        "drainer %.1f ns/event%s%s\n",
        name.c_str(), static_cast<long long>(t.sessions), static_cast<long long>(t.iterations),
        static_cast<long long>(t.recorded), static_cast<long long>(t.dropped),
        t.iterations > 0 ? t.drainer_cpu_ns / static_cast<double>(t.iterations) : 0.0,
        t.recorded + t.dropped == t.iterations ? "" : "  (MISMATCH)",
        t.nvtx_on ? "" : "  (NVTX was off: NVTX not compiled in?)");
  }

  printf("targets:\n");
  PrintRatio(r, "BM_recorded_phase_scope", "BM_two_clock_reads", 1.5);
  {
    const std::string clock = Tallies()["BM_recorded_phase_scope"].clock;
    if (clock == "tsc") {
      PrintRatio(r, "BM_recorded_phase_scope", "BM_two_rdtsc_reads", 1.5);
    } else {
      printf(
          "ratio BM_recorded_phase_scope / BM_two_rdtsc_reads = n/a: the session's clock "
          "is %s\n",
          clock.empty() ? "unknown" : clock.c_str());
    }
  }
  if (const std::optional<double> disabled = r.Median("BM_disabled_phase_scope")) {
    printf("disabled_phase_scope = %.2f ns (target <= 2 ns) %s\n", *disabled,
           *disabled <= 2.0 ? "PASS" : "MISS");
  } else {
    printf("disabled_phase_scope = n/a\n");
  }
  PrintRatio(r, "BM_disabled_phase_scope", "BM_one_clock_read", 0);
  if (const auto wrapped = r.Median("BM_instrumented_loader"), bare = r.Median("BM_bare_iterator");
      wrapped && bare) {
    const double added = *wrapped - *bare;
    printf(
        "loader wrapper adds %.1f ns per batch over a bare iterator (%.1f vs %.1f ns; "
        "target <= 1000 ns) %s\n",
        added, *wrapped, *bare, added <= 1000 ? "PASS" : "MISS");
  } else {
    printf("loader wrapper = n/a\n");
  }
  printf("other ratios:\n");
  PrintRatio(r, "BM_recorded_range_macro", "BM_two_clock_reads", 0);
  PrintRatio(r, "BM_recorded_step_scope", "BM_two_clock_reads", 0);
  PrintRatio(r, "BM_recorded_async_range", "BM_two_clock_reads", 0);
  PrintRatio(r, "BM_recorded_phase_scope_shared_cpu", "BM_two_clock_reads", 0);
  PrintRatio(r, "BM_recorded_phase_scope_nvtx_off", "BM_two_clock_reads", 0);
  PrintRatio(r, "BM_recorded_phase_scope_nvtx_off", "BM_two_rdtsc_reads", 0);
  PrintRatio(r, "BM_recorded_phase_scope_monotonic", "BM_two_clock_reads", 0);
  PrintRatio(r, "BM_disabled_range_macro", "BM_one_clock_read", 0);
  PrintRatio(r, "BM_rdtsc", "BM_one_clock_read", 0);
  PrintRatio(r, "BM_rdtscp", "BM_one_clock_read", 0);
  PrintRatio(r, "BM_clock_monotonic_raw", "BM_one_clock_read", 0);
  fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  // Repetitions of different benchmarks run in random order by default, so
  // that a baseline and the scope it is compared with see the same machine
  // (load from other processes comes and goes). A later flag overrides this.
  std::vector<char*> args;
  char interleave[] = "--benchmark_enable_random_interleaving=true";
  bool pin = true;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--trainscope_no_pin") == 0) {
      pin = false;
      continue;
    }
    args.push_back(argv[i]);
    if (i == 0) args.push_back(interleave);
  }
  int count = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
  SetupPlacement(pin);
  MedianReporter reporter(isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_Color
                                                : benchmark::ConsoleReporter::OO_None);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  if (!reporter.empty()) PrintSummary(reporter);
  benchmark::Shutdown();
  return 0;
}
