// analyze_bench: how fast `trainscope analyze` is, as ratios against
// baselines measured in the same run (never as timed assertions). It
// reports PASS/MISS and always exits 0. docs/analyze-performance.md has the
// figures of a reference machine and what they mean.
//
// 1. Gap analysis of a synthetic timeline: 10^7 kernels on 4 device streams
//    (random durations and gaps), with steps and host phase ranges.
//      BM_sort_baseline      std::sort by start of the same records, in the
//                            order they were generated (the 4 streams
//                            randomly interleaved, as a trace lists them).
//      BM_gap_analyze        GapAnalyzer::Analyze over the steps' window.
//      BM_hta_breakdown      ComputeHtaBreakdown.
//    Goal: >= 20 M records/s on one core, for each analysis.
// 2. `trainscope analyze` throughput on the real traces (../shared/data/
//    kineto/*.json.gz), each also inflated to a plain .json in a temp dir:
//      BM_read_plain/T       read() the plain file into memory (baseline).
//      BM_inflate_gz/T       zlib-inflate the .gz to memory (baseline).
//      BM_analyze_plain/T    ImportTrace + ComputeHtaBreakdown + GapAnalyzer
//      BM_analyze_gz/T       the same on the .gz; the inflate share is
//                            ReadStats::inflate_s / ImportedTrace::parse_s.
//    Goal: >= 500 MB/s (10^6 bytes of uncompressed JSON) for plain .json.
// 3. Holistic Trace Analysis on the same traces, as a subprocess:
//      BM_hta/T              python3: TraceAnalysis(trace_dir) +
//                            get_temporal_breakdown() + get_idle_time_breakdown();
//                            the script also times its own phases.
//      BM_cli_gz/T           build/bin/trainscope analyze --format=json T.gz
//    Goal: HTA / ours >= 50x, in-process (HTA's load + breakdowns against
//    BM_analyze_gz) and whole-process (BM_hta against BM_cli_gz).
// 4. Memory on a big trace (>= 200 MB plain JSON: the largest shared trace's
//    events repeated with ts, correlation ids and ProfilerStep numbers
//    shifted so the copies do not overlap; written streaming):
//      BM_big_cli            trainscope analyze --format=json BIG.json as a
//                            child: peak RSS (wait4's ru_maxrss).
//      BM_big_inprocess      the same analysis in-process (MB/s at scale,
//                            and the kept device events).
//      BM_floor_cli          trainscope analyze on the smallest trace: the
//                            RSS a run needs whatever the trace.
//      BM_hta_big            HTA on BIG.json (skipped when the file is over
//                            300 MB, HTA would need over 8 GB, or 300 s pass).
//    Goal: peak RSS / file size <= 0.5.
//
// One core: the benchmark thread is pinned to one CPU, and the children it
// starts (trainscope, python3) inherit that mask. Medians are over every
// timed iteration of a benchmark (real time; CPU time is printed beside it:
// real > 1.1 x CPU marks preemption by another process).
//
// Flags (besides Google Benchmark's, e.g. --benchmark_filter=analyze):
//   --analyze_bench_records=N     synthetic records (default 10000000)
//   --analyze_bench_launches      also one runtime call per synthetic kernel
//                                 (HTA's launch matching; 2N records)
//   --analyze_bench_repetitions=N repetitions of the in-process benchmarks (3)
//   --analyze_bench_hta_repetitions=N  of each HTA run (1)
//   --analyze_bench_big_mb=N      size of the big trace (200)
//   --analyze_bench_data=DIR      the traces (default: the shared folder's)
//   --analyze_bench_python=PATH   the Python with HTA (default python3, or
//                                 $TRAINSCOPE_HTA_PYTHON)
//   --analyze_bench_no_hta        skip every HTA run
//   --analyze_bench_no_hta_big    skip HTA on the big trace (~30 s)
//   --analyze_bench_keep_tmp      keep the temp dir (its path is printed)
//   --analyze_bench_no_pin        do not pin to one CPU
// (--analyze_bench_exec_child is internal: the small middle process through
// which children are started, so that their ru_maxrss is their own; see
// RunChild.)
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "benchmark/benchmark.h"
#include "sdk/analysis/gap_analyzer.h"
#include "sdk/analysis/hta_breakdown.h"
#include "sdk/analysis/trace_analysis.h"
#include "sdk/ground/timeline.h"
#include "sdk/kineto/trace_import.h"

extern char** environ;

ABSL_FLAG(int64_t, analyze_bench_records, 10'000'000, "synthetic records");
ABSL_FLAG(bool, analyze_bench_launches, false, "also one runtime call per synthetic kernel");
ABSL_FLAG(int, analyze_bench_repetitions, 3, "repetitions of the in-process benchmarks");
ABSL_FLAG(int, analyze_bench_hta_repetitions, 1, "repetitions of each HTA run");
ABSL_FLAG(int64_t, analyze_bench_big_mb, 200, "size of the big trace, MB");
ABSL_FLAG(std::string, analyze_bench_data, "",
          "the traces (default: $TRAINSCOPE_KINETO_DATA, else the shared folder's)");
ABSL_FLAG(std::string, analyze_bench_python, "",
          "the Python with HTA (default: python3, or $TRAINSCOPE_HTA_PYTHON)");
ABSL_FLAG(bool, analyze_bench_no_hta, false, "skip every HTA run");
ABSL_FLAG(bool, analyze_bench_no_hta_big, false, "skip HTA on the big trace (~30 s)");
ABSL_FLAG(bool, analyze_bench_keep_tmp, false, "keep the temp dir (its path is printed)");
ABSL_FLAG(bool, analyze_bench_no_pin, false, "do not pin to one CPU");

namespace {

namespace fs = std::filesystem;
using trainscope::Phase;
using trainscope::TimestampNs;
using trainscope::analysis::ComputeHtaBreakdown;
using trainscope::analysis::GapAnalyzer;
using trainscope::analysis::HtaBreakdown;
using trainscope::analysis::HtaTraceFacts;
using trainscope::analysis::IdleBreakdown;
using trainscope::ground::Interval;
using trainscope::ground::IntervalKind;
using trainscope::ground::Timeline;
using trainscope::ground::Track;
using trainscope::ground::TrackKind;

// Goals.
constexpr double kGapGoalRecordsPerS = 20e6;
constexpr double kPlainGoalMBps = 500;
constexpr double kHtaGoalRatio = 50;
constexpr double kRssGoalRatio = 0.5;

// ---- options ----------------------------------------------------------------

struct Options {
  int64_t records = 10'000'000;
  bool launches = false;
  int repetitions = 3;
  int hta_repetitions = 1;
  int64_t big_mb = 200;
  std::string data_dir;
  std::string python;
  bool hta = true;
  bool hta_big = true;
  bool keep_tmp = false;
  bool pin = true;
};
Options& Opt() {
  static Options options;
  return options;
}

// ---- environment --------------------------------------------------------------

struct Env {
  std::string tmp;         // our temp dir
  std::string self;        // this program
  std::string cli;         // build/bin/trainscope, "" if absent
  std::string python;      // the resolved interpreter with HTA, "" if none
  std::string hta_script;  // path of the HTA driver script
  std::string hta_skip_reason;
  int cpu = -1;  // the CPU we are pinned to, -1 if not pinned
  std::string cpu_model;
  int cpus = 0;
  cpu_set_t all_cpus;  // the mask before pinning
};
Env& E() {
  static Env env;
  return env;
}

double NowS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double ThreadCpuS() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

uint64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

double MemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double value = 0;
  std::string unit;
  while (in >> key >> value >> unit) {
    if (key == "MemAvailable:") return value * 1024;
  }
  return 0;
}

// ---- results ------------------------------------------------------------------

struct Sample {
  double wall_s = 0;
  double cpu_s = 0;
};
struct Result {
  std::vector<Sample> samples;
  std::map<std::string, std::vector<double>> extra;  // per-sample figures
  std::string note;                                  // why it was skipped, etc.
};
std::map<std::string, Result>& Results() {
  static std::map<std::string, Result> results;
  return results;
}

double Median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

const Result* Find(const std::string& name) {
  auto it = Results().find(name);
  return it == Results().end() || it->second.samples.empty() ? nullptr : &it->second;
}
double WallS(const std::string& name) {
  const Result* r = Find(name);
  if (r == nullptr) return NAN;
  std::vector<double> v;
  for (const Sample& s : r->samples) v.push_back(s.wall_s);
  return Median(v);
}
double BestWallS(const std::string& name) {
  const Result* r = Find(name);
  if (r == nullptr) return NAN;
  double best = INFINITY;
  for (const Sample& s : r->samples) best = std::min(best, s.wall_s);
  return best;
}
double CpuS(const std::string& name) {
  const Result* r = Find(name);
  if (r == nullptr) return NAN;
  std::vector<double> v;
  for (const Sample& s : r->samples) v.push_back(s.cpu_s);
  return Median(v);
}
double Extra(const std::string& name, const std::string& key) {
  const Result* r = Find(name);
  if (r == nullptr) return NAN;
  auto it = r->extra.find(key);
  return it == r->extra.end() ? NAN : Median(it->second);
}

// Records one timed iteration and tells Google Benchmark its time.
void Record(benchmark::State& state, const std::string& name, Sample sample,
            std::map<std::string, double> extra = {}) {
  Result& r = Results()[name];
  r.samples.push_back(sample);
  for (const auto& [k, v] : extra) r.extra[k].push_back(v);
  state.SetIterationTime(std::max(sample.wall_s, 1e-9));
}

const char* PassMiss(bool pass) { return pass ? "PASS" : "MISS"; }

// ---- child processes ----------------------------------------------------------

struct Child {
  bool started = false;
  bool timed_out = false;
  int status = -1;  // wait status
  double wall_s = 0;
  double cpu_s = 0;          // user + sys of the child (and its reaped children)
  double max_rss_bytes = 0;  // ru_maxrss
  bool ok() const { return started && !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0; }
};

// Runs argv with stdout and stderr sent to files, in its own process group,
// killing that group after timeout_s.
//
// The child is started through a fresh exec of this program
// (--analyze_bench_exec_child, see ExecChildMain) that forks the command
// and reports its wall time and rusage: Linux's exec records the old
// address space's peak RSS in the new image's ru_maxrss, so a command
// started straight from this (large) process would report at least this
// process's RSS. The middle process is a few MB, below any command's own
// peak. posix_spawn (vfork-like in glibc) does not copy this process's page
// tables, so a big parent does not slow the start either.
Child RunChild(const std::vector<std::string>& argv, const std::string& out_path,
               const std::string& err_path, double timeout_s) {
  Child child;
  const std::string report = out_path + ".rusage";
  std::remove(report.c_str());
  std::vector<std::string> full = {E().self, "--analyze_bench_exec_child", report};
  full.insert(full.end(), argv.begin(), argv.end());
  std::vector<char*> args;
  for (const std::string& a : full) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);

  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  pid_t pid = -1;
  bool killed = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return done; })) {
      if (pid > 0) {
        kill(-pid, SIGKILL);  // the group of the child we started
        killed = true;
      }
    }
  });
  int rc;
  {
    std::lock_guard<std::mutex> lock(mu);
    rc = posix_spawn(&pid, args[0], &actions, &attr, args.data(), environ);
  }
  if (rc == 0) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    std::ifstream in(report);
    std::string key;
    double value;
    while (in >> key >> value) {
      if (key == "started") child.started = value != 0;
      if (key == "status") child.status = static_cast<int>(value);
      if (key == "wall_s") child.wall_s = value;
      if (key == "cpu_s") child.cpu_s = value;
      if (key == "maxrss_kb") child.max_rss_bytes = value * 1024;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    child.timed_out = killed;
  }
  cv.notify_all();
  watchdog.join();
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return child;
}

// The middle process of RunChild: analyze_bench --analyze_bench_exec_child
// REPORT COMMAND...: runs COMMAND, writes its wait status, wall time, CPU
// time and peak RSS to REPORT, and exits 0.
int ExecChildMain(int argc, char** argv) {
  if (argc < 4) return 2;
  const char* report = argv[2];
  const double t0 = NowS();
  const pid_t pid = fork();
  if (pid == 0) {
    execvp(argv[3], argv + 3);
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  if (pid > 0) {
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
    }
  }
  const double wall = NowS() - t0;
  FILE* f = std::fopen(report, "w");
  if (f == nullptr) return 2;
  std::fprintf(f, "started %d\nstatus %d\nwall_s %.9f\ncpu_s %.6f\nmaxrss_kb %ld\n",
               pid > 0 ? 1 : 0, status, wall,
               ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
                   ru.ru_stime.tv_usec * 1e-6,
               ru.ru_maxrss);
  std::fclose(f);
  return 0;
}

// The last non-empty line of a file (a Python traceback's error line).
std::string Tail(const std::string& path) {
  std::string text = ReadText(path);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
    text.pop_back();
  }
  const size_t nl = text.rfind('\n');
  std::string line = nl == std::string::npos ? text : text.substr(nl + 1);
  if (line.size() > 200) line.resize(200);
  return line.empty() ? "no output" : line;
}

// ---- part 1: the synthetic timeline ---------------------------------------------

struct Synthetic {
  Timeline timeline;                // sorted, as ImportTrace leaves it
  std::vector<Interval> generated;  // the same records in generation order
  HtaTraceFacts facts;
  TimestampNs window_start = 0, window_end = 0;
  int64_t kernels = 0, launches = 0, steps = 0, host_ranges = 0;
  double build_s = 0;
  HtaBreakdown hta;  // last results, for a sanity line
  IdleBreakdown idle;
};

struct Rng {
  uint64_t s = 0x9E3779B97F4A7C15ull;
  uint64_t operator()() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 2685821657736338717ull;
  }
};

Synthetic* BuildSynthetic(int64_t n, bool with_launches) {
  const double t0 = NowS();
  auto* syn = new Synthetic;
  Timeline& tl = syn->timeline;
  constexpr std::array<int64_t, 4> kStreams = {7, 20, 24, 28};
  std::array<uint32_t, 4> tracks{};
  for (size_t s = 0; s < kStreams.size(); ++s) {
    tracks[s] = tl.AddTrack(
        {TrackKind::kDeviceStream, 0, kStreams[s], "GPU 0 stream " + std::to_string(kStreams[s])});
  }
  const uint32_t host = tl.AddTrack({TrackKind::kHostThread, 4515, 4515, "thread 4515"});
  // Kernel names of a real trace, with HTA's other classes among them.
  std::vector<uint32_t> names;
  for (const char* name :
       {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
        "ampere_sgemm_128x64_tn", "ampere_sgemm_64x32_sliced1x4_nn",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>",
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>",
        "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>",
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "Memcpy DtoD (Device -> Device)",
        "Memset (Device)",
        "void at::native::unrolled_elementwise_kernel<at::native::MulFunctor<float>>",
        "void at::native::(anonymous namespace)::softmax_warp_forward<float, float, 10>",
        "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3"}) {
    names.push_back(tl.Intern(name));
  }
  const uint32_t launch_name = tl.Intern("cudaLaunchKernel");
  const uint32_t step_name = tl.Intern("ProfilerStep#0");
  std::array<uint32_t, 6> phase_names{};
  constexpr std::array<Phase, 6> kPhases = {Phase::kDataWait, Phase::kHostToDevice, Phase::kForward,
                                            Phase::kBackward, Phase::kOptimizer,    Phase::kSync};
  constexpr std::array<double, 7> kPhaseCuts = {0, 0.05, 0.08, 0.40, 0.80, 0.90, 0.99};
  for (size_t p = 0; p < kPhases.size(); ++p) {
    phase_names[p] = tl.Intern(std::string(trainscope::PhaseName(kPhases[p])));
  }

  const int64_t per_step = std::max<int64_t>(1, n / 1000);
  syn->generated.reserve(static_cast<size_t>(n * (with_launches ? 2 : 1) + n / per_step * 8 + 16));
  auto add = [&](const Interval& i) {
    tl.Add(i);
    syn->generated.push_back(i);
  };
  constexpr TimestampNs kBase = 1'683'564'901'540'885'000;
  std::array<TimestampNs, 4> clock;
  clock.fill(kBase);
  TimestampNs step_start = kBase;
  int64_t step = 0;
  Rng rng;
  for (int64_t i = 0; i < n; ++i) {
    const size_t s = rng() % kStreams.size();
    const uint64_t r = rng();
    const uint64_t bucket = r % 100;
    const uint64_t x = r >> 8;
    TimestampNs gap;
    if (bucket < 70) {
      gap = 1'000 + static_cast<TimestampNs>(x % 4'000);  // 1-5 us
    } else if (bucket < 90) {
      gap = 5'000 + static_cast<TimestampNs>(x % 25'000);  // 5-30 us
    } else if (bucket < 99) {
      gap = 30'000 + static_cast<TimestampNs>(x % 170'000);  // 30-200 us
    } else {
      gap = 1'000'000 + static_cast<TimestampNs>(x % 4'000'000);  // 1-5 ms
    }
    const auto d = static_cast<TimestampNs>((r >> 40) % 1000);
    const TimestampNs dur = 2'000 + d * d / 5;  // 2-202 us, mostly short
    Interval k;
    k.start_ns = clock[s] + gap;
    k.end_ns = k.start_ns + dur;
    clock[s] = k.end_ns;
    k.step = step;
    k.value = i;  // correlation id
    k.name = names[(r >> 20) % names.size()];
    k.track = tracks[s];
    k.kind = IntervalKind::kKernel;
    add(k);
    ++syn->kernels;
    if (with_launches) {
      Interval call;
      const auto latency = static_cast<TimestampNs>(2'000 + (r >> 24) % 60'000);
      call.start_ns = k.start_ns - latency;
      call.end_ns = call.start_ns + 3'000;
      call.step = step;
      call.value = i;
      call.name = launch_name;
      call.track = host;
      call.kind = IntervalKind::kRuntimeCall;
      add(call);
      ++syn->launches;
    }
    if ((i + 1) % per_step == 0 || i + 1 == n) {
      const TimestampNs step_end = *std::max_element(clock.begin(), clock.end());
      const TimestampNs span = step_end - step_start;
      Interval st;
      st.start_ns = step_start;
      st.end_ns = step_start + static_cast<TimestampNs>(span * kPhaseCuts.back());
      st.step = step;
      st.value = 32;
      st.name = step_name;
      st.track = host;
      st.kind = IntervalKind::kStep;
      add(st);
      ++syn->steps;
      for (size_t p = 0; p < kPhases.size(); ++p) {
        Interval h;
        h.start_ns = step_start + static_cast<TimestampNs>(span * kPhaseCuts[p]);
        h.end_ns = step_start + static_cast<TimestampNs>(span * kPhaseCuts[p + 1]);
        h.step = step;
        h.name = phase_names[p];
        h.track = host;
        h.kind = IntervalKind::kHostRange;
        h.phase = kPhases[p];
        add(h);
        ++syn->host_ranges;
      }
      syn->facts.last_step_start_ns = step_start;
      syn->window_end = st.end_ns;
      step_start = step_end;
      ++step;
    }
  }
  syn->window_start = kBase;
  // Without launches there is nothing for HTA's iteration cut to keep, so
  // the facts say "no ProfilerStep annotations" (every row is kept).
  syn->facts.profiler_steps = with_launches ? syn->steps : 0;
  tl.Sort();
  syn->build_s = NowS() - t0;
  return syn;
}

Synthetic& GetSynthetic() {
  static Synthetic* syn = BuildSynthetic(Opt().records, Opt().launches);
  return *syn;
}

void BM_sort_baseline(benchmark::State& state) {
  Synthetic& syn = GetSynthetic();
  std::vector<Interval> work;
  for (auto _ : state) {
    work = syn.generated;  // not timed
    const double w0 = NowS(), c0 = ThreadCpuS();
    std::sort(work.begin(), work.end(),
              [](const Interval& a, const Interval& b) { return a.start_ns < b.start_ns; });
    const Sample s{NowS() - w0, ThreadCpuS() - c0};
    benchmark::DoNotOptimize(work.data());
    Record(state, "BM_sort_baseline", s);
  }
  state.counters["Mrec/s"] =
      static_cast<double>(syn.generated.size()) / WallS("BM_sort_baseline") / 1e6;
}

void BM_gap_analyze(benchmark::State& state) {
  Synthetic& syn = GetSynthetic();
  for (auto _ : state) {
    const double w0 = NowS(), c0 = ThreadCpuS();
    syn.idle = GapAnalyzer::Analyze(syn.timeline, syn.window_start, syn.window_end);
    const Sample s{NowS() - w0, ThreadCpuS() - c0};
    benchmark::DoNotOptimize(syn.idle.idle_ns);
    Record(state, "BM_gap_analyze", s);
  }
  state.counters["Mrec/s"] =
      static_cast<double>(syn.timeline.size()) / WallS("BM_gap_analyze") / 1e6;
}

void BM_hta_breakdown(benchmark::State& state) {
  Synthetic& syn = GetSynthetic();
  for (auto _ : state) {
    const double w0 = NowS(), c0 = ThreadCpuS();
    syn.hta = ComputeHtaBreakdown(syn.timeline, syn.facts);
    const Sample s{NowS() - w0, ThreadCpuS() - c0};
    benchmark::DoNotOptimize(syn.hta.rows);
    Record(state, "BM_hta_breakdown", s);
  }
  state.counters["Mrec/s"] =
      static_cast<double>(syn.timeline.size()) / WallS("BM_hta_breakdown") / 1e6;
}

// ---- part 2: the real traces ------------------------------------------------------

struct TraceFiles {
  std::string name;     // "rank0_queue"
  std::string gz;       // the shared .json.gz
  std::string plain;    // our inflated copy
  std::string hta_dir;  // a dir holding only a copy of the .gz
  uint64_t gz_bytes = 0;
  uint64_t plain_bytes = 0;
};
std::vector<TraceFiles>& Traces() {
  static std::vector<TraceFiles> traces;
  return traces;
}

// Inflates `gz` into `out`; returns the uncompressed size, or 0 on error.
uint64_t Inflate(const std::string& gz, const std::string& out) {
  gzFile in = gzopen(gz.c_str(), "rb");
  if (in == nullptr) return 0;
  FILE* f = std::fopen(out.c_str(), "wb");
  if (f == nullptr) {
    gzclose(in);
    return 0;
  }
  std::vector<char> buf(1 << 20);
  uint64_t total = 0;
  int n;
  while ((n = gzread(in, buf.data(), static_cast<unsigned>(buf.size()))) > 0) {
    std::fwrite(buf.data(), 1, static_cast<size_t>(n), f);
    total += static_cast<uint64_t>(n);
  }
  gzclose(in);
  std::fclose(f);
  return n < 0 ? 0 : total;
}

// The analysis `trainscope analyze` runs, plus the gap analysis.
struct AnalyzeFigures {
  double import_s = 0, hta_s = 0, gap_s = 0;
  double bytes = 0, inflate_s = 0, parse_s = 0;
  double intervals = 0, device = 0;
  double idle_us = 0, kernel_us = 0;
  double threads = 1;
  bool ok = false;
  std::string error;
};

// threads: ImportTrace's and AnalyzeTimeline's (1: this thread only; 0:
// every CPU it may use).
AnalyzeFigures AnalyzeFile(const std::string& path, int threads) {
  AnalyzeFigures f;
  const double t0 = NowS();
  absl::StatusOr<trainscope::kineto::ImportedTrace> trace =
      trainscope::kineto::ImportTrace(path, threads);
  const double t1 = NowS();
  if (!trace.ok()) {
    f.error = std::string(trace.status().message());
    return f;
  }
  f.import_s = t1 - t0;
  if (threads != 1) {
    // As `trainscope analyze` does with every CPU: HTA's breakdowns on a
    // second thread while this one does the gap analysis (and the steps).
    const trainscope::analysis::TraceAnalysis analysis =
        trainscope::analysis::AnalyzeTimeline(trace->timeline, trace->hta, threads);
    benchmark::DoNotOptimize(analysis.idle.idle_ns);
    f.hta_s = NowS() - t1;  // both analyses, overlapped
    f.idle_us = analysis.hta.temporal.idle_us;
    f.kernel_us = analysis.hta.temporal.kernel_us;
  } else {
    const HtaBreakdown hta = ComputeHtaBreakdown(trace->timeline, trace->hta);
    const double t2 = NowS();
    // The window of `trainscope summary`: the steps, else the whole timeline.
    TimestampNs start = 0, end = 0;
    bool any = false, steps = false;
    for (const Interval& i : trace->timeline.intervals()) {
      if (i.kind == IntervalKind::kStep) {
        if (!steps) start = i.start_ns, end = i.end_ns;
        steps = true;
        start = std::min(start, i.start_ns);
        end = std::max(end, i.end_ns);
      } else if (!steps) {
        if (!any) start = i.start_ns, end = i.end_ns;
        start = std::min(start, i.start_ns);
        end = std::max(end, i.end_ns);
      }
      any = true;
    }
    const IdleBreakdown idle = GapAnalyzer::Analyze(trace->timeline, start, end);
    benchmark::DoNotOptimize(idle.idle_ns);
    f.hta_s = t2 - t1;
    f.gap_s = NowS() - t2;
    f.idle_us = hta.temporal.idle_us;
    f.kernel_us = hta.temporal.kernel_us;
  }
  f.bytes = static_cast<double>(trace->read.bytes);
  f.inflate_s = trace->read.inflate_s;
  f.parse_s = trace->parse_s;
  f.threads = trace->read.threads;
  f.intervals = static_cast<double>(trace->timeline.size());
  f.device =
      static_cast<double>(trace->kernels + trace->memcpys + trace->memsets + trace->sync_calls);
  f.ok = true;
  return f;
}

// While it lives, this thread (and what it starts) may run on every CPU
// the benchmark had before Pin().
class Unpinned {
 public:
  Unpinned() {
    pinned_ = pthread_getaffinity_np(pthread_self(), sizeof(saved_), &saved_) == 0 &&
              pthread_setaffinity_np(pthread_self(), sizeof(E().all_cpus), &E().all_cpus) == 0;
  }
  ~Unpinned() {
    if (pinned_) pthread_setaffinity_np(pthread_self(), sizeof(saved_), &saved_);
  }

 private:
  cpu_set_t saved_;
  bool pinned_ = false;
};

// threads as for AnalyzeFile; with 0 the benchmark thread is unpinned
// meanwhile. The CPU time printed is then the calling thread's only.
void AnalyzeBench(benchmark::State& state, const std::string& name, const std::string& path,
                  int threads = 1) {
  for (auto _ : state) {
    std::optional<Unpinned> unpinned;
    if (threads == 0) unpinned.emplace();
    const double c0 = ThreadCpuS();
    const AnalyzeFigures f = AnalyzeFile(path, threads);
    const double cpu = ThreadCpuS() - c0;
    if (!f.ok) {
      state.SkipWithError(f.error.c_str());
      break;
    }
    const double wall = f.import_s + f.hta_s + f.gap_s;
    Record(state, name, {wall, cpu},
           {{"bytes", f.bytes},
            {"inflate_s", f.inflate_s},
            {"parse_s", f.parse_s},
            {"import_s", f.import_s},
            {"hta_s", f.hta_s},
            {"gap_s", f.gap_s},
            {"intervals", f.intervals},
            {"device", f.device},
            {"inflate_share", f.parse_s > 0 ? f.inflate_s / f.parse_s : 0},
            {"idle_us", f.idle_us},
            {"kernel_us", f.kernel_us},
            {"threads", f.threads}});
  }
  state.counters["MB/s"] = Extra(name, "bytes") / WallS(name) / 1e6;
}

void BM_read_plain(benchmark::State& state, const TraceFiles* t) {
  const std::string name = "BM_read_plain/" + t->name;
  std::vector<char> buf(t->plain_bytes + 1, 1);  // pages touched before timing
  for (auto _ : state) {
    const double w0 = NowS(), c0 = ThreadCpuS();
    const int fd = open(t->plain.c_str(), O_RDONLY | O_CLOEXEC);
    size_t got = 0;
    ssize_t n;
    while (fd >= 0 && (n = read(fd, buf.data() + got, buf.size() - got)) > 0)
      got += static_cast<size_t>(n);
    if (fd >= 0) close(fd);
    const Sample s{NowS() - w0, ThreadCpuS() - c0};
    benchmark::DoNotOptimize(buf.data());
    Record(state, name, s, {{"bytes", static_cast<double>(got)}});
  }
  state.counters["MB/s"] = Extra(name, "bytes") / WallS(name) / 1e6;
}

// Inflates as TraceReader does: gzread with a 1 MiB zlib buffer into 4 MiB.
void BM_inflate_gz(benchmark::State& state, const TraceFiles* t) {
  const std::string name = "BM_inflate_gz/" + t->name;
  std::vector<char> buf(4 << 20, 1);
  for (auto _ : state) {
    const double w0 = NowS(), c0 = ThreadCpuS();
    gzFile in = gzopen(t->gz.c_str(), "rb");
    uint64_t total = 0;
    int n = 0;
    if (in != nullptr) {
      gzbuffer(in, 1 << 20);
      while ((n = gzread(in, buf.data(), static_cast<unsigned>(buf.size()))) > 0) {
        total += static_cast<uint64_t>(n);
      }
      gzclose(in);
    }
    const Sample s{NowS() - w0, ThreadCpuS() - c0};
    benchmark::DoNotOptimize(buf.data());
    Record(state, name, s, {{"bytes", static_cast<double>(total)}});
  }
  state.counters["MB/s"] = Extra(name, "bytes") / WallS(name) / 1e6;
}

void BM_analyze_plain(benchmark::State& state, const TraceFiles* t) {
  AnalyzeBench(state, "BM_analyze_plain/" + t->name, t->plain);
}
void BM_analyze_gz(benchmark::State& state, const TraceFiles* t) {
  AnalyzeBench(state, "BM_analyze_gz/" + t->name, t->gz);
}
// The same, on every CPU: what a user's `trainscope analyze` does.
void BM_analyze_gz_all(benchmark::State& state, const TraceFiles* t) {
  AnalyzeBench(state, "BM_analyze_gz_all/" + t->name, t->gz, 0);
}
void BM_analyze_plain_all(benchmark::State& state, const TraceFiles* t) {
  AnalyzeBench(state, "BM_analyze_plain_all/" + t->name, t->plain, 0);
}

// ---- part 3: HTA ------------------------------------------------------------------

constexpr char kHtaScript[] =
    R"PY(# analyze_bench's HTA driver: argv[1] a dir with one trace, argv[2] the
# file to write "key value" lines to.
import sys, time
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
t1 = time.perf_counter()
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
t2 = time.perf_counter()
temporal = analyzer.get_temporal_breakdown(visualize=False)
# get_idle_time_breakdown defaults to ranks=[0]; a rank-1 trace needs its own.
idle = analyzer.get_idle_time_breakdown(ranks=sorted(analyzer.t.traces.keys()),
                                        visualize=False)
t3 = time.perf_counter()
row = temporal.iloc[0]
with open(sys.argv[2], "w") as out:
    out.write("import_s %.6f\nload_s %.6f\nbreakdown_s %.6f\n" % (t1 - t0, t2 - t1, t3 - t2))
    out.write("idle_us %.3f\nkernel_us %.3f\n" % (row["idle_time(us)"], row["kernel_time(us)"]))
)PY";

std::map<std::string, double> ReadKeyValues(const std::string& path) {
  std::map<std::string, double> kv;
  std::ifstream in(path);
  std::string key;
  double value;
  while (in >> key >> value) kv[key] = value;
  return kv;
}

// Runs HTA on `dir`; records wall/cpu/RSS and the script's own timings.
void RunHta(benchmark::State& state, const std::string& name, const std::string& dir,
            double timeout_s) {
  for (auto _ : state) {
    const std::string result = E().tmp + "/hta_result.txt";
    std::remove(result.c_str());
    const Child c = RunChild({E().python, E().hta_script, dir, result}, E().tmp + "/hta.out",
                             E().tmp + "/hta.err", timeout_s);
    if (c.timed_out) {
      Results()[name].note =
          "timed out after " + std::to_string(static_cast<int>(timeout_s)) + " s";
      state.SkipWithError(Results()[name].note.c_str());
      break;
    }
    std::map<std::string, double> kv = ReadKeyValues(result);
    if (!c.ok() || kv.count("load_s") == 0) {
      Results()[name].note = "HTA failed: " + Tail(E().tmp + "/hta.err");
      state.SkipWithError(Results()[name].note.c_str());
      break;
    }
    kv["rss_bytes"] = c.max_rss_bytes;
    kv["analysis_s"] = kv["load_s"] + kv["breakdown_s"];
    Record(state, name, {c.wall_s, c.cpu_s}, kv);
  }
  state.counters["child_cpu_s"] = CpuS(name);
  state.counters["rss_MB"] = Extra(name, "rss_bytes") / 1e6;
}

void BM_hta(benchmark::State& state, const TraceFiles* t) {
  RunHta(state, "BM_hta/" + t->name, t->hta_dir, 300);
}

// all_cpus: the child may run on every CPU (else it inherits the pin).
void CliBench(benchmark::State& state, const std::string& name, const std::string& trace,
              bool all_cpus = false) {
  for (auto _ : state) {
    std::optional<Unpinned> unpinned;
    if (all_cpus) unpinned.emplace();
    const Child c = RunChild({E().cli, "analyze", "--format=json", trace}, E().tmp + "/cli.out",
                             E().tmp + "/cli.err", 300);
    if (!c.ok()) {
      Results()[name].note = "trainscope analyze failed: " + Tail(E().tmp + "/cli.err");
      state.SkipWithError(Results()[name].note.c_str());
      break;
    }
    Record(state, name, {c.wall_s, c.cpu_s}, {{"rss_bytes", c.max_rss_bytes}});
  }
  state.counters["child_cpu_s"] = CpuS(name);
  state.counters["rss_MB"] = Extra(name, "rss_bytes") / 1e6;
}

void BM_cli_gz(benchmark::State& state, const TraceFiles* t) {
  CliBench(state, "BM_cli_gz/" + t->name, t->gz);
}
void BM_cli_gz_all(benchmark::State& state, const TraceFiles* t) {
  CliBench(state, "BM_cli_gz_all/" + t->name, t->gz, true);
}

// ---- part 4: the big trace ----------------------------------------------------------

// Calls on_scalar(depth, key1, key2, token) for every scalar value of one
// event object (numbers, strings with their quotes, true/false/null):
// key1 is the member name at depth 1, key2 the one at depth 2 (inside e.g.
// "args"). Returns nothing; the callback sees offsets via token.data().
template <class F>
void WalkEvent(std::string_view e, F&& on_scalar) {
  int depth = 0;
  std::array<std::string_view, 3> keys{};
  size_t i = 0;
  const size_t n = e.size();
  while (i < n) {
    const char c = e[i];
    if (c == '"') {
      size_t j = i + 1;
      while (j < n && e[j] != '"') j += e[j] == '\\' ? 2 : 1;
      const std::string_view token = e.substr(i, j + 1 - i);
      size_t k = j + 1;
      while (k < n && (e[k] == ' ' || e[k] == '\n' || e[k] == '\r' || e[k] == '\t')) ++k;
      if (k < n && e[k] == ':') {
        if (depth >= 1 && depth <= 2) keys[depth] = token.substr(1, token.size() - 2);
      } else {
        on_scalar(depth, keys[1], depth >= 2 ? keys[2] : std::string_view(), token);
      }
      i = j + 1;
    } else if (c == '{' || c == '[') {
      ++depth;
      if (depth <= 2) keys[depth] = {};
      ++i;
    } else if (c == '}' || c == ']') {
      --depth;
      ++i;
    } else if (c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n') {
      size_t j = i;
      while (j < n && e[j] != ',' && e[j] != '}' && e[j] != ']' && e[j] != ' ' && e[j] != '\n' &&
             e[j] != '\r' && e[j] != '\t') {
        ++j;
      }
      on_scalar(depth, keys[1], depth >= 2 ? keys[2] : std::string_view(), e.substr(i, j - i));
      i = j;
    } else {
      ++i;
    }
  }
}

bool IsIdKey(int depth, std::string_view k1, std::string_view k2) {
  return (depth == 1 && k1 == "id") ||
         (depth == 2 && k1 == "args" && (k2 == "correlation" || k2 == "External id"));
}

struct BigTrace {
  std::string path;
  uint64_t bytes = 0;
  int copies = 0;
  std::string source;
  double write_s = 0;
  std::string error;
};

// The events of a trace's traceEvents array, and the text around it.
bool SplitEvents(std::string_view text, std::string_view* head,
                 std::vector<std::string_view>* events, std::string_view* tail) {
  const size_t key = text.find("\"traceEvents\"");
  if (key == std::string_view::npos) return false;
  const size_t open = text.find('[', key);
  if (open == std::string_view::npos) return false;
  *head = text.substr(0, open + 1);
  size_t i = open + 1;
  while (i < text.size()) {
    const char c = text[i];
    if (c == ']') {
      *tail = text.substr(i);
      return true;
    }
    if (c != '{') {
      ++i;
      continue;
    }
    int depth = 0;
    size_t j = i;
    for (; j < text.size(); ++j) {
      const char d = text[j];
      if (d == '"') {
        for (++j; j < text.size() && text[j] != '"'; j += text[j] == '\\' ? 2 : 1) {
        }
      } else if (d == '{' || d == '[') {
        ++depth;
      } else if (d == '}' || d == ']') {
        if (--depth == 0) break;
      }
    }
    if (j >= text.size()) return false;
    events->push_back(text.substr(i, j + 1 - i));
    i = j + 1;
  }
  return false;
}

// Writes >= target_bytes of JSON: the events of `source` (a plain .json)
// repeated, copy k shifted by k x (the trace's span + 1 ms) in ts, by k x
// (max id + 1) in flow ids, correlation and External id, and by k x (the
// number of steps) in ProfilerStep#N; metadata events ("ph": "M") only once.
BigTrace WriteBigTrace(const std::string& source, const std::string& out_path, uint64_t target) {
  BigTrace big;
  big.path = out_path;
  big.source = source;
  const double t0 = NowS();
  const std::string text = ReadText(source);
  std::string_view head, tail;
  std::vector<std::string_view> events;
  if (!SplitEvents(text, &head, &events, &tail)) {
    big.error = "cannot find the traceEvents array of " + source;
    return big;
  }
  // Pass 1: the span, the largest id, the step numbers.
  double min_ts = INFINITY, max_end = -INFINITY;
  int64_t max_id = 0, min_step = INT64_MAX, max_step = INT64_MIN;
  std::vector<bool> metadata(events.size(), false);
  constexpr std::string_view kStep = "\"ProfilerStep#";
  for (size_t e = 0; e < events.size(); ++e) {
    double ts = NAN, dur = 0;
    WalkEvent(events[e], [&](int depth, std::string_view k1, std::string_view k2,
                             std::string_view token) {
      if (depth == 1 && k1 == "ts") ts = std::strtod(std::string(token).c_str(), nullptr);
      if (depth == 1 && k1 == "dur") dur = std::strtod(std::string(token).c_str(), nullptr);
      if (depth == 1 && k1 == "ph" && token == "\"M\"") metadata[e] = true;
      if (IsIdKey(depth, k1, k2)) {
        max_id = std::max<int64_t>(max_id, std::strtoll(std::string(token).c_str(), nullptr, 10));
      }
      if (depth == 1 && k1 == "name" && token.substr(0, kStep.size()) == kStep) {
        const int64_t s =
            std::strtoll(std::string(token.substr(kStep.size())).c_str(), nullptr, 10);
        min_step = std::min(min_step, s);
        max_step = std::max(max_step, s);
      }
    });
    if (!std::isnan(ts)) {
      min_ts = std::min(min_ts, ts);
      max_end = std::max(max_end, ts + dur);
    }
  }
  const auto span_us = static_cast<int64_t>(std::ceil(max_end - min_ts)) + 1000;
  const int64_t id_span = max_id + 1;
  const int64_t step_span = max_step >= min_step ? max_step - min_step + 1 : 0;

  FILE* f = std::fopen(out_path.c_str(), "wb");
  if (f == nullptr) {
    big.error = "cannot write " + out_path;
    return big;
  }
  std::string buf;
  buf.reserve(8 << 20);
  uint64_t written = 0;
  auto put = [&](std::string_view s) {
    buf.append(s);
    if (buf.size() >= (4 << 20)) {
      std::fwrite(buf.data(), 1, buf.size(), f);
      written += buf.size();
      buf.clear();
    }
  };
  put(head);
  bool first = true;
  int copies = 0;
  char number[64];
  while (written + buf.size() < target) {
    const int64_t k = copies++;
    for (size_t e = 0; e < events.size(); ++e) {
      if (k > 0 && metadata[e]) continue;
      put(first ? "\n  " : ",\n  ");
      first = false;
      if (k == 0) {
        put(events[e]);
        continue;
      }
      const std::string_view ev = events[e];
      size_t last = 0;
      WalkEvent(
          ev, [&](int depth, std::string_view k1, std::string_view k2, std::string_view token) {
            const size_t at = static_cast<size_t>(token.data() - ev.data());
            int len = -1;
            if (depth == 1 && k1 == "ts") {
              if (token.find_first_of(".eE") != std::string_view::npos) {
                len = std::snprintf(number, sizeof(number), "%.3f",
                                    std::strtod(std::string(token).c_str(), nullptr) +
                                        static_cast<double>(k * span_us));
              } else {
                len = std::snprintf(
                    number, sizeof(number), "%lld",
                    static_cast<long long>(std::strtoll(std::string(token).c_str(), nullptr, 10) +
                                           k * span_us));
              }
            } else if (IsIdKey(depth, k1, k2) &&
                       token.find_first_of(".eE\"") == std::string_view::npos) {
              len = std::snprintf(
                  number, sizeof(number), "%lld",
                  static_cast<long long>(std::strtoll(std::string(token).c_str(), nullptr, 10) +
                                         k * id_span));
            } else if (depth == 1 && k1 == "name" && token.substr(0, kStep.size()) == kStep) {
              const int64_t s =
                  std::strtoll(std::string(token.substr(kStep.size())).c_str(), nullptr, 10);
              len = std::snprintf(number, sizeof(number), "\"ProfilerStep#%lld\"",
                                  static_cast<long long>(s + k * step_span));
            }
            if (len < 0) return;
            put(ev.substr(last, at - last));
            put(std::string_view(number, static_cast<size_t>(len)));
            last = at + token.size();
          });
      put(ev.substr(last));
    }
  }
  put("\n  ");
  put(tail);
  std::fwrite(buf.data(), 1, buf.size(), f);
  written += buf.size();
  std::fclose(f);
  big.bytes = written;
  big.copies = copies;
  big.write_s = NowS() - t0;
  return big;
}

const TraceFiles* Largest() {
  const TraceFiles* best = nullptr;
  for (const TraceFiles& t : Traces()) {
    if (best == nullptr || t.plain_bytes > best->plain_bytes) best = &t;
  }
  return best;
}
const TraceFiles* Smallest() {
  const TraceFiles* best = nullptr;
  for (const TraceFiles& t : Traces()) {
    if (best == nullptr || t.plain_bytes < best->plain_bytes) best = &t;
  }
  return best;
}

const BigTrace& GetBig() {
  static BigTrace big = [] {
    fs::create_directories(E().tmp + "/big");
    const TraceFiles* source = Largest();
    return WriteBigTrace(source->plain, E().tmp + "/big/BIG.json",
                         static_cast<uint64_t>(Opt().big_mb) * 1000 * 1000);
  }();
  return big;
}

void BM_big_cli(benchmark::State& state) {
  const BigTrace& big = GetBig();
  if (!big.error.empty()) {
    state.SkipWithError(big.error.c_str());
    return;
  }
  CliBench(state, "BM_big_cli", big.path);
}

void BM_floor_cli(benchmark::State& state) { CliBench(state, "BM_floor_cli", Smallest()->plain); }

void BM_big_inprocess(benchmark::State& state) {
  const BigTrace& big = GetBig();
  if (!big.error.empty()) {
    state.SkipWithError(big.error.c_str());
    return;
  }
  AnalyzeBench(state, "BM_big_inprocess", big.path);
}

void BM_hta_big(benchmark::State& state) {
  const BigTrace& big = GetBig();
  if (!big.error.empty()) {
    state.SkipWithError(big.error.c_str());
    return;
  }
  // HTA's peak RSS per byte of JSON: measured on the largest trace when that
  // ran first, else 12 (about 9 on rank0_queue, with margin).
  double per_byte = 12;
  const TraceFiles* largest = Largest();
  const double measured = Extra("BM_hta/" + largest->name, "rss_bytes");
  if (!std::isnan(measured) && largest->plain_bytes > 0) {
    per_byte = 1.3 * measured / static_cast<double>(largest->plain_bytes);
  }
  const double predicted = per_byte * static_cast<double>(big.bytes);
  std::string why;
  if (big.bytes > 300'000'000) {
    why = "the file is over 300 MB";
  } else if (predicted > 8e9) {
    why = "HTA would need about " + std::to_string(static_cast<int>(predicted / 1e9)) + " GB";
  } else if (predicted > 0.7 * MemAvailableBytes()) {
    why = "not enough free memory";
  }
  if (!why.empty()) {
    Results()["BM_hta_big"].note = why;
    state.SkipWithError(("HTA on the big trace skipped: " + why).c_str());
    return;
  }
  RunHta(state, "BM_hta_big", E().tmp + "/big", 300);
}

// ---- the summary --------------------------------------------------------------------

std::string Fmt(const char* format, double v) {
  if (std::isnan(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

struct Goal {
  std::string what;
  std::string figure;
  std::optional<bool> pass;  // nullopt: not measured
};

void PrintSummary() {
  std::vector<Goal> goals;
  printf("\n==== analyze_bench summary (medians of every timed iteration, same run) ====\n");
  printf(
      "machine: %s, %d CPU(s); %s\n", E().cpu_model.c_str(), E().cpus,
      E().cpu >= 0
          ? ("benchmark thread and its children pinned to CPU " + std::to_string(E().cpu)).c_str()
          : "not pinned");
  bool preempted = false;
  auto note_preempted = [&](const std::string& name) {
    const double w = WallS(name), c = CpuS(name);
    if (!std::isnan(w) && !std::isnan(c) && w > 1.1 * c) {
      preempted = true;
      return "  (preempted)";
    }
    return "";
  };

  // 1.
  printf("\n1. Gap analysis of a synthetic timeline\n");
  if (Find("BM_gap_analyze") || Find("BM_hta_breakdown") || Find("BM_sort_baseline")) {
    const Synthetic& syn = GetSynthetic();
    const double n = static_cast<double>(syn.timeline.size());
    printf(
        "   %lld records: %lld kernels on 4 streams, %lld runtime calls, %lld steps, "
        "%lld host ranges (built in %.1f s)\n",
        static_cast<long long>(syn.timeline.size()), static_cast<long long>(syn.kernels),
        static_cast<long long>(syn.launches), static_cast<long long>(syn.steps),
        static_cast<long long>(syn.host_ranges), syn.build_s);
    const double sort_s = WallS("BM_sort_baseline");
    printf("   %-28s %10s %12s %14s\n", "", "median", "M records/s", "x std::sort");
    for (const char* name : {"BM_sort_baseline", "BM_gap_analyze", "BM_hta_breakdown"}) {
      const double w = WallS(name);
      printf("   %-28s %8s ms %12s %14s%s\n", name, Fmt("%.1f", w * 1e3).c_str(),
             Fmt("%.2f", n / w / 1e6).c_str(), Fmt("%.2f", w / sort_s).c_str(),
             note_preempted(name));
    }
    const double both = WallS("BM_gap_analyze") + WallS("BM_hta_breakdown");
    printf("   %-28s %8s ms %12s %14s\n", "both analyses", Fmt("%.1f", both * 1e3).c_str(),
           Fmt("%.2f", n / both / 1e6).c_str(), Fmt("%.2f", both / sort_s).c_str());
    if (Find("BM_gap_analyze")) {
      printf("   sanity: gap analysis: idle %.3f%% of the window in %lld gaps\n",
             syn.idle.share * 100, static_cast<long long>(syn.idle.gaps));
    }
    if (Find("BM_hta_breakdown")) {
      printf("   sanity: HTA breakdown: %lld rows, idle %.0f us of %.0f us\n",
             static_cast<long long>(syn.hta.rows), syn.hta.temporal.idle_us,
             syn.hta.temporal.kernel_us);
    }
    for (const char* name : {"BM_gap_analyze", "BM_hta_breakdown"}) {
      const double rate = n / WallS(name);
      goals.push_back(
          {std::string(name) + " >= 20 M records/s (1 core)", Fmt("%.1f M records/s", rate / 1e6),
           std::isnan(rate) ? std::nullopt : std::optional<bool>(rate >= kGapGoalRecordsPerS)});
    }
  } else {
    printf("   not run\n");
  }

  // 2.
  printf(
      "\n2. trainscope analyze throughput (ImportTrace + ComputeHtaBreakdown + GapAnalyzer),\n"
      "   MB = 10^6 bytes of uncompressed JSON\n");
  printf("   %-16s %7s %8s %8s %8s %7s %8s %8s %7s %8s %7s\n", "trace", "MB", "read()", "plain",
         "plain", "x read", "zlib", ".gz", "x zlib", "inflate", "kept");
  printf("   %-16s %7s %8s %8s %8s %7s %8s %8s %7s %8s %7s\n", "", "", "MB/s", "MB/s", "best",
         "time", "MB/s", "MB/s", "time", "share", "events");
  double total_bytes = 0, total_plain = 0, total_plain_cpu = 0, total_plain_best = 0, total_gz = 0;
  for (const TraceFiles& t : Traces()) {
    const double mb = t.plain_bytes / 1e6;
    const double read = WallS("BM_read_plain/" + t.name);
    const double plain = WallS("BM_analyze_plain/" + t.name);
    const double plain_cpu = CpuS("BM_analyze_plain/" + t.name);
    const double plain_best = BestWallS("BM_analyze_plain/" + t.name);
    const double inflate = WallS("BM_inflate_gz/" + t.name);
    const double gz = WallS("BM_analyze_gz/" + t.name);
    if (std::isnan(read) && std::isnan(plain) && std::isnan(inflate) && std::isnan(gz)) continue;
    printf("   %-16s %7.2f %8s %8s %8s %7s %8s %8s %7s %8s %7s%s%s\n", t.name.c_str(), mb,
           Fmt("%.0f", mb / read).c_str(), Fmt("%.0f", mb / plain).c_str(),
           Fmt("%.0f", mb / plain_best).c_str(), Fmt("%.1f", plain / read).c_str(),
           Fmt("%.0f", mb / inflate).c_str(), Fmt("%.0f", mb / gz).c_str(),
           Fmt("%.2f", gz / inflate).c_str(),
           Fmt("%.0f%%", 100 * Extra("BM_analyze_gz/" + t.name, "inflate_share")).c_str(),
           Fmt("%.0f", Extra("BM_analyze_plain/" + t.name, "intervals")).c_str(),
           note_preempted("BM_analyze_plain/" + t.name), note_preempted("BM_analyze_gz/" + t.name));
    if (!std::isnan(plain) && !std::isnan(gz)) {
      total_bytes += mb;
      total_plain += plain;
      total_plain_cpu += plain_cpu;
      total_plain_best += plain_best;
      total_gz += gz;
    }
  }
  for (const TraceFiles& t : Traces()) {
    const double plain_all = WallS("BM_analyze_plain_all/" + t.name);
    const double gz_all = WallS("BM_analyze_gz_all/" + t.name);
    if (std::isnan(plain_all) && std::isnan(gz_all)) continue;
    const double mb = t.plain_bytes / 1e6;
    printf(
        "   %-16s on all %d CPUs (%.0f parsing threads): plain %s MB/s (%s x one core), "
        ".gz %s MB/s (%s x one core)\n",
        t.name.c_str(), E().cpus, Extra("BM_analyze_plain_all/" + t.name, "threads"),
        Fmt("%.0f", mb / plain_all).c_str(),
        Fmt("%.2f", WallS("BM_analyze_plain/" + t.name) / plain_all).c_str(),
        Fmt("%.0f", mb / gz_all).c_str(),
        Fmt("%.2f", WallS("BM_analyze_gz/" + t.name) / gz_all).c_str());
  }
  for (const TraceFiles& t : Traces()) {
    const std::string name = "BM_analyze_plain/" + t.name;
    if (!Find(name)) continue;
    printf("   %-16s plain: import %.0f%%, HTA breakdown %.0f%%, gap analysis %.0f%% of the time\n",
           t.name.c_str(), 100 * Extra(name, "import_s") / WallS(name),
           100 * Extra(name, "hta_s") / WallS(name), 100 * Extra(name, "gap_s") / WallS(name));
  }
  if (total_plain > 0) {
    const double rate = total_bytes / total_plain;
    printf(
        "   all traces: plain %.0f MB/s (by CPU time %.0f, best iterations %.0f), .gz %.0f MB/s\n",
        rate, total_bytes / total_plain_cpu, total_bytes / total_plain_best,
        total_bytes / total_gz);
    goals.push_back({"plain .json >= 500 MB/s (all traces, 1 core)", Fmt("%.0f MB/s", rate),
                     rate >= kPlainGoalMBps});
    if (const TraceFiles* big = Largest(); Find("BM_analyze_plain/" + big->name)) {
      const double r = big->plain_bytes / 1e6 / WallS("BM_analyze_plain/" + big->name);
      goals.push_back({"plain .json >= 500 MB/s (" + big->name + ")", Fmt("%.0f MB/s", r),
                       r >= kPlainGoalMBps});
    }
  }

  // 3.
  printf("\n3. Holistic Trace Analysis vs trainscope, same traces (.json.gz), same run\n");
  if (E().python.empty()) {
    printf("   HTA not installed: skipped (%s)\n", E().hta_skip_reason.c_str());
  } else {
    printf("   HTA: %s\n", E().python.c_str());
    printf("   %-16s %9s %9s %8s   %9s %9s %8s %9s %9s\n", "trace", "HTA load", "ours", "ratio",
           "HTA proc", "CLI proc", "ratio", "HTA RSS", "CLI RSS");
    printf("   %-16s %9s %9s %8s   %9s %9s %8s %9s %9s\n", "", "+bd (s)", "in-proc", "", "(s)",
           "(s)", "", "(MB)", "(MB)");
    for (const TraceFiles& t : Traces()) {
      const std::string hta = "BM_hta/" + t.name;
      const double hta_in = Extra(hta, "analysis_s");
      const double ours_in = WallS("BM_analyze_gz/" + t.name);
      const double hta_proc = WallS(hta);
      const double cli = WallS("BM_cli_gz/" + t.name);
      const bool failed = Results().count(hta) > 0 && !Results()[hta].note.empty();
      if (std::isnan(hta_in) && std::isnan(ours_in) && std::isnan(cli) && !failed) continue;
      printf("   %-16s %9s %9s %8s   %9s %9s %8s %9s %9s%s\n", t.name.c_str(),
             Fmt("%.3f", hta_in).c_str(), Fmt("%.4f", ours_in).c_str(),
             Fmt("%.0fx", hta_in / ours_in).c_str(), Fmt("%.3f", hta_proc).c_str(),
             Fmt("%.4f", cli).c_str(), Fmt("%.0fx", hta_proc / cli).c_str(),
             Fmt("%.0f", Extra(hta, "rss_bytes") / 1e6).c_str(),
             Fmt("%.1f", Extra("BM_cli_gz/" + t.name, "rss_bytes") / 1e6).c_str(),
             Results().count(hta) && !Results()[hta].note.empty()
                 ? ("  " + Results()[hta].note).c_str()
                 : "");
      if (!std::isnan(hta_in) && !std::isnan(ours_in)) {
        const double a = Extra(hta, "idle_us"), b = Extra("BM_analyze_gz/" + t.name, "idle_us");
        printf("   %-16s HTA idle %.0f us, ours %.0f us; HTA's import of pandas etc. %.2f s\n", "",
               a, b, Extra(hta, "import_s"));
        goals.push_back({"HTA/ours >= 50x in-process, " + t.name, Fmt("%.0fx", hta_in / ours_in),
                         hta_in / ours_in >= kHtaGoalRatio});
      }
      if (!std::isnan(hta_proc) && !std::isnan(cli)) {
        goals.push_back({"HTA/ours >= 50x whole process, " + t.name, Fmt("%.0fx", hta_proc / cli),
                         hta_proc / cli >= kHtaGoalRatio});
      }
    }
  }

  if (!E().python.empty()) {
    for (const TraceFiles& t : Traces()) {
      const std::string hta = "BM_hta/" + t.name;
      const double hta_in = Extra(hta, "analysis_s"), hta_proc = WallS(hta);
      const double ours_all = WallS("BM_analyze_gz_all/" + t.name);
      const double cli_all = WallS("BM_cli_gz_all/" + t.name);
      if (std::isnan(ours_all) && std::isnan(cli_all)) continue;
      printf(
          "   %-16s on all %d CPUs (HTA uses one): in-process %s s, %s; whole process %s s, %s\n",
          t.name.c_str(), E().cpus, Fmt("%.4f", ours_all).c_str(),
          Fmt("%.0fx", hta_in / ours_all).c_str(), Fmt("%.4f", cli_all).c_str(),
          Fmt("%.0fx", hta_proc / cli_all).c_str());
      const std::string cpus = " (" + std::to_string(E().cpus) + " CPUs)";
      if (!std::isnan(hta_in) && !std::isnan(ours_all)) {
        goals.push_back({"HTA/ours >= 50x in-process, " + t.name + cpus,
                         Fmt("%.0fx", hta_in / ours_all), hta_in / ours_all >= kHtaGoalRatio});
      }
      if (!std::isnan(hta_proc) && !std::isnan(cli_all)) {
        goals.push_back({"HTA/ours >= 50x whole process, " + t.name + cpus,
                         Fmt("%.0fx", hta_proc / cli_all), hta_proc / cli_all >= kHtaGoalRatio});
      }
    }
  }

  // 4.
  printf("\n4. Memory on a big trace\n");
  if (Find("BM_big_cli") || Find("BM_big_inprocess")) {
    const BigTrace& big = GetBig();
    const double rss = Extra("BM_big_cli", "rss_bytes");
    const double floor = Extra("BM_floor_cli", "rss_bytes");
    const double device = Extra("BM_big_inprocess", "device");
    const double intervals = Extra("BM_big_inprocess", "intervals");
    printf("   BIG.json: %.1f MB, %d copies of %s (written in %.1f s)\n", big.bytes / 1e6,
           big.copies, fs::path(big.source).filename().c_str(), big.write_s);
    printf(
        "   trainscope analyze: peak RSS %s MB in %s s (%s MB/s in-process); kept %s "
        "device events, %s intervals\n",
        Fmt("%.1f", rss / 1e6).c_str(), Fmt("%.2f", WallS("BM_big_cli")).c_str(),
        Fmt("%.0f", big.bytes / 1e6 / WallS("BM_big_inprocess")).c_str(),
        Fmt("%.0f", device).c_str(), Fmt("%.0f", intervals).c_str());
    printf(
        "   peak RSS / file size = %s; per kept device event %s bytes (%s above the %s MB a "
        "run on %s needs); per kept interval %s bytes\n",
        Fmt("%.3f", rss / big.bytes).c_str(), Fmt("%.0f", rss / device).c_str(),
        Fmt("%.0f", (rss - floor) / device).c_str(), Fmt("%.1f", floor / 1e6).c_str(),
        Smallest()->name.c_str(), Fmt("%.0f", rss / intervals).c_str());
    if (!std::isnan(rss)) {
      goals.push_back({"peak RSS / file size <= 0.5 (" + Fmt("%.0f", big.bytes / 1e6) + " MB)",
                       Fmt("%.3f", rss / big.bytes), rss / big.bytes <= kRssGoalRatio});
    }
    const double hta_rss = Extra("BM_hta_big", "rss_bytes");
    if (!std::isnan(hta_rss)) {
      printf(
          "   HTA: peak RSS %.0f MB (%.1fx the file, %.0fx ours), %.1f s (load + breakdowns "
          "%.1f s; %.0fx ours whole-process)\n",
          hta_rss / 1e6, hta_rss / big.bytes, hta_rss / rss, WallS("BM_hta_big"),
          Extra("BM_hta_big", "analysis_s"), WallS("BM_hta_big") / WallS("BM_big_cli"));
      printf("   HTA idle %.0f us, ours %.0f us (of %.0f us kernel time)\n",
             Extra("BM_hta_big", "idle_us"), Extra("BM_big_inprocess", "idle_us"),
             Extra("BM_big_inprocess", "kernel_us"));
    } else if (E().python.empty()) {
      printf("   HTA not installed: skipped\n");
    } else {
      const auto it = Results().find("BM_hta_big");
      printf("   HTA on the big trace: %s\n", it != Results().end() && !it->second.note.empty()
                                                  ? it->second.note.c_str()
                                                  : "not run");
    }
  } else {
    printf("   not run\n");
  }

  printf("\ngoals:\n");
  for (const Goal& g : goals) {
    printf("  %-56s %-22s %s\n", g.what.c_str(), g.figure.c_str(),
           g.pass ? PassMiss(*g.pass) : "n/a");
  }
  if (preempted) {
    printf(
        "note: real time > 1.1 x CPU time marks a thread that was preempted (another process\n"
        "was using the cores); rerun on a quiet machine for firm figures.\n");
  }
  fflush(stdout);
}

// ---- setup ------------------------------------------------------------------------

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

void Pin() {
  cpu_set_t all;
  CPU_ZERO(&all);
  E().cpus = 0;
  if (sched_getaffinity(0, sizeof(all), &all) != 0) return;
  E().cpus = CPU_COUNT(&all);
  E().all_cpus = all;
  if (!Opt().pin) return;
  for (int cpu = CPU_SETSIZE - 1; cpu >= 0; --cpu) {
    if (!CPU_ISSET(cpu, &all)) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0) E().cpu = cpu;
    return;
  }
}

// The interpreter (resolved through pyenv-style shims) that imports hta.
void FindHta() {
  if (!Opt().hta) {
    E().hta_skip_reason = "--analyze_bench_no_hta";
    return;
  }
  std::vector<std::string> candidates;
  if (!Opt().python.empty()) {
    candidates.push_back(Opt().python);
  } else {
    candidates.push_back("python3");
    if (const char* env = std::getenv("TRAINSCOPE_HTA_PYTHON"); env != nullptr && *env != '\0') {
      candidates.push_back(env);
    }
  }
  for (const std::string& python : candidates) {
    const std::string out = E().tmp + "/python.out";
    const Child c = RunChild({python, "-c", "import sys, hta; print(sys.executable)"}, out,
                             E().tmp + "/python.err", 60);
    if (!c.ok()) continue;
    std::string exe = ReadText(out);
    while (!exe.empty() && (exe.back() == '\n' || exe.back() == '\r')) exe.pop_back();
    E().python = exe.empty() ? python : exe;
    return;
  }
  E().hta_skip_reason = "cannot import hta with " + candidates.front();
}

void SetupTraces() {
  const std::string& dir = Opt().data_dir;
  std::error_code ec;
  std::vector<std::string> gzs;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string p = entry.path().string();
    if (p.size() > 8 && p.compare(p.size() - 8, 8, ".json.gz") == 0) gzs.push_back(p);
  }
  std::sort(gzs.begin(), gzs.end());
  for (const std::string& gz : gzs) {
    TraceFiles t;
    t.gz = gz;
    t.name = fs::path(gz).filename().string();
    t.name.resize(t.name.size() - 8);
    t.plain = E().tmp + "/plain/" + t.name + ".json";
    t.hta_dir = E().tmp + "/hta/" + t.name;
    fs::create_directories(E().tmp + "/plain");
    fs::create_directories(t.hta_dir);
    t.plain_bytes = Inflate(gz, t.plain);
    t.gz_bytes = FileSize(gz);
    if (t.plain_bytes == 0) {
      printf("analyze_bench: cannot inflate %s: skipped\n", gz.c_str());
      continue;
    }
    fs::copy_file(gz, t.hta_dir + "/" + fs::path(gz).filename().string(),
                  fs::copy_options::overwrite_existing, ec);
    Traces().push_back(t);
  }
}

// This program's path, and its directory (where build/bin/trainscope is).
std::string SelfExe(const char* argv0) {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return argv0;
  buf[n] = '\0';
  return buf;
}

void Register() {
  const Options& o = Opt();
  auto in_process = [&](benchmark::internal::Benchmark* b) {
    b->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Repetitions(o.repetitions)
        ->ReportAggregatesOnly(o.repetitions > 1);
  };
  if (o.records > 0) {
    for (auto [name, fn] : {std::pair{"BM_sort_baseline", &BM_sort_baseline},
                            std::pair{"BM_gap_analyze", &BM_gap_analyze},
                            std::pair{"BM_hta_breakdown", &BM_hta_breakdown}}) {
      in_process(benchmark::RegisterBenchmark(name, fn)->Iterations(1));
    }
  }
  for (const TraceFiles& t : Traces()) {
    const TraceFiles* tp = &t;
    in_process(benchmark::RegisterBenchmark(("BM_read_plain/" + t.name).c_str(), BM_read_plain, tp)
                   ->MinTime(0.1));
    in_process(benchmark::RegisterBenchmark(("BM_inflate_gz/" + t.name).c_str(), BM_inflate_gz, tp)
                   ->MinTime(0.2));
    in_process(
        benchmark::RegisterBenchmark(("BM_analyze_plain/" + t.name).c_str(), BM_analyze_plain, tp)
            ->MinTime(0.3));
    in_process(benchmark::RegisterBenchmark(("BM_analyze_gz/" + t.name).c_str(), BM_analyze_gz, tp)
                   ->MinTime(0.3));
    if (!E().cli.empty()) {
      in_process(benchmark::RegisterBenchmark(("BM_cli_gz/" + t.name).c_str(), BM_cli_gz, tp)
                     ->MinTime(0.2));
    }
    // Where the reader splits a trace between threads (8 MiB of events or
    // more) and there is more than one CPU: the same on every CPU.
    if (E().cpus > 1 && t.plain_bytes >= (8u << 20)) {
      in_process(benchmark::RegisterBenchmark(("BM_analyze_plain_all/" + t.name).c_str(),
                                              BM_analyze_plain_all, tp)
                     ->MinTime(0.3));
      in_process(benchmark::RegisterBenchmark(("BM_analyze_gz_all/" + t.name).c_str(),
                                              BM_analyze_gz_all, tp)
                     ->MinTime(0.3));
      if (!E().cli.empty()) {
        in_process(
            benchmark::RegisterBenchmark(("BM_cli_gz_all/" + t.name).c_str(), BM_cli_gz_all, tp)
                ->MinTime(0.2));
      }
    }
    if (!E().python.empty()) {
      benchmark::RegisterBenchmark(("BM_hta/" + t.name).c_str(), BM_hta, tp)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(1)
          ->Repetitions(o.hta_repetitions)
          ->ReportAggregatesOnly(o.hta_repetitions > 1);
    }
  }
  if (!Traces().empty() && o.big_mb > 0) {
    if (!E().cli.empty()) {
      in_process(benchmark::RegisterBenchmark("BM_big_cli", BM_big_cli)->Iterations(1));
      in_process(benchmark::RegisterBenchmark("BM_floor_cli", BM_floor_cli)->Iterations(1));
    }
    in_process(benchmark::RegisterBenchmark("BM_big_inprocess", BM_big_inprocess)->Iterations(1));
    if (!E().python.empty() && o.hta_big) {
      benchmark::RegisterBenchmark("BM_hta_big", BM_hta_big)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(1)
          ->Repetitions(1);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--analyze_bench_exec_child") == 0) {
    return ExecChildMain(argc, argv);
  }
  Options& o = Opt();
  if (const char* env = std::getenv("TRAINSCOPE_KINETO_DATA"); env != nullptr && *env != '\0') {
    o.data_dir = env;
  } else {
    o.data_dir = TRAINSCOPE_SHARED_KINETO_DIR;
  }
  // Google Benchmark takes its own flags first (random interleaving on
  // unless the command line says otherwise), then Abseil parses ours.
  std::vector<char*> args(argv, argv + argc);
  char interleave[] = "--benchmark_enable_random_interleaving=true";
  args.insert(args.begin() + 1, interleave);
  int count = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&count, args.data());
  absl::ParseCommandLine(count, args.data());
  o.records = absl::GetFlag(FLAGS_analyze_bench_records);
  o.launches = absl::GetFlag(FLAGS_analyze_bench_launches);
  o.repetitions = std::max(1, absl::GetFlag(FLAGS_analyze_bench_repetitions));
  o.hta_repetitions = std::max(1, absl::GetFlag(FLAGS_analyze_bench_hta_repetitions));
  o.big_mb = absl::GetFlag(FLAGS_analyze_bench_big_mb);
  if (!absl::GetFlag(FLAGS_analyze_bench_data).empty()) {
    o.data_dir = absl::GetFlag(FLAGS_analyze_bench_data);
  }
  o.python = absl::GetFlag(FLAGS_analyze_bench_python);
  o.hta = !absl::GetFlag(FLAGS_analyze_bench_no_hta);
  o.hta_big = !absl::GetFlag(FLAGS_analyze_bench_no_hta_big);
  o.keep_tmp = absl::GetFlag(FLAGS_analyze_bench_keep_tmp);
  o.pin = !absl::GetFlag(FLAGS_analyze_bench_no_pin);

  const char* tmpdir = std::getenv("TMPDIR");
  std::string templ =
      std::string(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp") + "/analyze_bench.XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) {
    std::fprintf(stderr, "analyze_bench: cannot create a temp dir from %s\n", templ.c_str());
    return 0;
  }
  E().tmp = templ;
  E().self = SelfExe(argv[0]);
  E().cpu_model = CpuModel();
  Pin();
  const std::string cli = fs::path(E().self).parent_path().string() + "/trainscope";
  if (access(cli.c_str(), X_OK) == 0) E().cli = cli;
  E().hta_script = E().tmp + "/hta_driver.py";
  std::ofstream(E().hta_script) << kHtaScript;
  FindHta();
  SetupTraces();
  printf("analyze_bench: temp dir %s; traces: %zu from %s; trainscope CLI: %s; HTA: %s\n",
         E().tmp.c_str(), Traces().size(), o.data_dir.c_str(),
         E().cli.empty() ? "not found (CLI runs skipped)" : E().cli.c_str(),
         E().python.empty() ? ("HTA not installed: skipped (" + E().hta_skip_reason + ")").c_str()
                            : E().python.c_str());
  fflush(stdout);
  Register();
  benchmark::RunSpecifiedBenchmarks();
  PrintSummary();
  benchmark::Shutdown();
  if (!o.keep_tmp) {
    std::error_code ec;
    fs::remove_all(E().tmp, ec);
  }
  return 0;
}
