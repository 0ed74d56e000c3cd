// analyze_bench: how fast `trainscope analyze` is, as ratios against
// baselines measured in the same run (never as timed assertions). It
// reports PASS/MISS and always exits 0. docs/analyze-performance.md has the
// figures of a reference machine and what they mean. This file holds the
// flags, the setup and the registration; analyze_bench.h lists the parts.
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
//      BM_big_html           trainscope html BIG.json: the trace's page, its
//                            size and its time against BM_big_cli's.
//      BM_hta_big            HTA on BIG.json (skipped when the file is over
//                            300 MB, HTA would need over 8 GB, or 300 s pass).
//    Goals: peak RSS / file size <= 0.5; the page <= 5 MB, written in at
//    most 1.25x analyze's time.
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
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/analyze/analyze_bench.h"

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

namespace trainscope::analyze_bench {
namespace {

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
      in_process(benchmark::RegisterBenchmark("BM_big_html", BM_big_html)->Iterations(1));
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

int Main(int argc, char** argv) {
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

}  // namespace trainscope::analyze_bench

int main(int argc, char** argv) { return trainscope::analyze_bench::Main(argc, argv); }
