// analyze_bench, Part 2: `trainscope analyze` on the real traces. See analyze_bench.h.
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "bench/analyze/analyze_bench.h"
#include "sdk/analysis/trace_analysis.h"
#include "sdk/kineto/trace_import.h"

namespace trainscope::analyze_bench {

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

// threads as for AnalyzeFile; with 0 the benchmark thread is unpinned
// meanwhile. The CPU time printed is then the calling thread's only.
void AnalyzeBench(benchmark::State& state, const std::string& name, const std::string& path,
                  int threads) {
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

}  // namespace trainscope::analyze_bench
