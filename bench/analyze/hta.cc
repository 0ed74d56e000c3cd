// analyze_bench, Part 3: Holistic Trace Analysis on the same traces, and the CLI. See
// analyze_bench.h.
#include <fcntl.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "bench/analyze/analyze_bench.h"

namespace trainscope::analyze_bench {

extern const char kHtaScript[] =
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
              bool all_cpus) {
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

}  // namespace trainscope::analyze_bench
