// bench/analyze/analyze_bench.h: what the parts of analyze_bench share
// (main.cc says what it measures and how to run it). One file per part:
//   common.cc      options, the environment, results, child processes
//   synthetic.cc   1. gap analysis of a synthetic timeline
//   traces.cc      2. `trainscope analyze` on the real traces
//   hta.cc         3. Holistic Trace Analysis on them, and the CLI
//   big_trace.cc   4. memory on a big trace
//   summary.cc     every figure against its goal
//   main.cc        flags, setup, registration
#ifndef TRAINSCOPE_BENCH_ANALYZE_ANALYZE_BENCH_H_
#define TRAINSCOPE_BENCH_ANALYZE_ANALYZE_BENCH_H_

#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "sdk/analysis/gap_analyzer.h"
#include "sdk/analysis/hta_breakdown.h"
#include "sdk/ground/timeline.h"

namespace trainscope::analyze_bench {

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
inline constexpr double kGapGoalRecordsPerS = 20e6;
inline constexpr double kPlainGoalMBps = 500;
inline constexpr double kHtaGoalRatio = 50;
inline constexpr double kRssGoalRatio = 0.5;

// ---- options and environment (common.cc) ---------------------------------------

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
// The options main() parsed.
Options& Opt();

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
Env& E();

double NowS();                                  // steady clock, seconds
double ThreadCpuS();                            // this thread's CPU time, seconds
std::string ReadText(const std::string& path);  // "" when unreadable
uint64_t FileSize(const std::string& path);     // 0 when absent
double MemAvailableBytes();                     // /proc/meminfo's MemAvailable

// ---- results (common.cc) ---------------------------------------------------------

struct Sample {
  double wall_s = 0;
  double cpu_s = 0;
};

struct Result {
  std::vector<Sample> samples;
  std::map<std::string, std::vector<double>> extra;  // per-sample figures
  std::string note;                                  // why it was skipped, etc.
};

// Every benchmark's results by name ("BM_hta/rank0_queue").
std::map<std::string, Result>& Results();
double Median(std::vector<double> v);  // NAN when empty
// The results of `name`, nullptr when it has no sample.
const Result* Find(const std::string& name);
// Medians (BestWallS: the least) of `name`'s samples; NAN when none.
double WallS(const std::string& name);
double BestWallS(const std::string& name);
double CpuS(const std::string& name);
double Extra(const std::string& name, const std::string& key);
// Records one timed iteration and tells Google Benchmark its time.
void Record(benchmark::State& state, const std::string& name, Sample sample,
            std::map<std::string, double> extra = {});
const char* PassMiss(bool pass);

// ---- child processes (common.cc) ---------------------------------------------------

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
// killing that group after timeout_s; its ru_maxrss is its own (see
// common.cc).
Child RunChild(const std::vector<std::string>& argv, const std::string& out_path,
               const std::string& err_path, double timeout_s);
// The middle process of RunChild (--analyze_bench_exec_child).
int ExecChildMain(int argc, char** argv);
// The last non-empty line of a file (a Python traceback's error line).
std::string Tail(const std::string& path);

// ---- 1. the synthetic timeline (synthetic.cc) ---------------------------------------

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
Synthetic& GetSynthetic();  // built on first use
void BM_sort_baseline(benchmark::State& state);
void BM_gap_analyze(benchmark::State& state);
void BM_hta_breakdown(benchmark::State& state);

// ---- 2. the real traces (traces.cc) -------------------------------------------------

struct TraceFiles {
  std::string name;     // "rank0_queue"
  std::string gz;       // the shared .json.gz
  std::string plain;    // our inflated copy
  std::string hta_dir;  // a dir holding only a copy of the .gz
  uint64_t gz_bytes = 0;
  uint64_t plain_bytes = 0;
};
std::vector<TraceFiles>& Traces();
// Inflates `gz` into `out`; returns the uncompressed size, or 0 on error.
uint64_t Inflate(const std::string& gz, const std::string& out);

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

// ImportTrace + the analyses of `path`, timed. threads: ImportTrace's and
// AnalyzeTimeline's (1: this thread only; 0: every CPU, the benchmark
// thread unpinned meanwhile).
void AnalyzeBench(benchmark::State& state, const std::string& name, const std::string& path,
                  int threads = 1);
void BM_read_plain(benchmark::State& state, const TraceFiles* t);
void BM_inflate_gz(benchmark::State& state, const TraceFiles* t);
void BM_analyze_plain(benchmark::State& state, const TraceFiles* t);
void BM_analyze_gz(benchmark::State& state, const TraceFiles* t);
void BM_analyze_gz_all(benchmark::State& state, const TraceFiles* t);
void BM_analyze_plain_all(benchmark::State& state, const TraceFiles* t);

// ---- 3. HTA and the CLI (hta.cc) -------------------------------------------------------

// The HTA driver script main() writes to E().hta_script.
extern const char kHtaScript[];
// Runs HTA on `dir`; records wall/cpu/RSS and the script's own timings.
void RunHta(benchmark::State& state, const std::string& name, const std::string& dir,
            double timeout_s);
// `trainscope analyze --format=json trace` as a child; all_cpus: it may
// run on every CPU (else it inherits the pin).
void CliBench(benchmark::State& state, const std::string& name, const std::string& trace,
              bool all_cpus = false);
void BM_hta(benchmark::State& state, const TraceFiles* t);
void BM_cli_gz(benchmark::State& state, const TraceFiles* t);
void BM_cli_gz_all(benchmark::State& state, const TraceFiles* t);

// ---- 4. the big trace (big_trace.cc) ------------------------------------------------------

struct BigTrace {
  std::string path;
  uint64_t bytes = 0;
  int copies = 0;
  std::string source;
  double write_s = 0;
  std::string error;
};
const TraceFiles* Largest();
const TraceFiles* Smallest();
const BigTrace& GetBig();  // written on first use
void BM_big_cli(benchmark::State& state);
void BM_floor_cli(benchmark::State& state);
void BM_big_html(benchmark::State& state);
void BM_big_inprocess(benchmark::State& state);
void BM_hta_big(benchmark::State& state);

// ---- the summary (summary.cc) ------------------------------------------------------------

// Prints every figure against its goal, PASS or MISS.
void PrintSummary();

}  // namespace trainscope::analyze_bench

#endif  // TRAINSCOPE_BENCH_ANALYZE_ANALYZE_BENCH_H_
