// sdk/analyze/analyze.h: `trainscope analyze` as a library: a PyTorch
// profiler (Kineto) trace or trainscope's own trace.json, read (sdk/kineto)
// and analysed (sdk/analysis: idle gaps and their causes, HTA's breakdowns);
// a folder of per-rank traces analysed in parallel. analysis_report.h
// renders the results; the CLI only parses flags and prints.
#ifndef TRAINSCOPE_SDK_ANALYZE_ANALYZE_H_
#define TRAINSCOPE_SDK_ANALYZE_ANALYZE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sdk/analysis/timeline_view.h"
#include "sdk/analysis/trace_analysis.h"
#include "sdk/kineto/trace_import.h"

namespace trainscope::analyze {

// One analysed trace: where it came from and what was found.
struct AnalyzedTrace {
  std::string path;
  int64_t rank = 0;
  kineto::ReadStats read;
  int64_t kernels = 0, memcpys = 0, memsets = 0, runtime_calls = 0, sync_calls = 0, steps = 0;
  double parse_s = 0;
  analysis::HtaTraceFacts facts;
  analysis::TraceAnalysis analysis;
  // A few steps cut out for drawing, when AnalyzeFile was asked for them.
  analysis::TimelineView view;
  // Kernels, copies or sets: what HTA's breakdowns and the GPU idle
  // analysis measure. Without them the gaps are against trainscope's
  // compute phases and there is no HTA breakdown.
  bool has_device_work() const { return kernels + memcpys + memsets > 0; }
};

// Reads the trace at `path` (Kineto JSON or trainscope's trace.json,
// gzipped or not) with `threads` parsing threads (0: the available cores)
// and analyses it. Memory: the trace's device intervals and calls, not its
// host events. Errors: the reader's (the file and byte offset named);
// FailedPrecondition naming the file when it has neither device work nor
// trainscope phases (nothing to measure idle time against). With `view`,
// also cuts AnalyzedTrace::view from the trace (timeline_view.h), before
// its intervals are let go: no second read.
absl::StatusOr<AnalyzedTrace> AnalyzeFile(const std::string& path, int threads,
                                          const analysis::TimelineViewOptions* view = nullptr);

// A few steps of the trace at `path`, for drawing (timeline_view.h): read
// as AnalyzeFile reads it, then cut. Memory: as AnalyzeFile's. Errors: the
// reader's.
absl::StatusOr<analysis::TimelineView> ReadTimelineView(
    const std::string& path, int threads, const analysis::TimelineViewOptions& options = {});

// The traces (*.json, *.json.gz; not report.json) in `dir`, in name order.
// Errors: the folder unreadable, or no trace in it.
absl::StatusOr<std::vector<std::string>> TraceFiles(const std::string& dir);

// Analyses `files` on `jobs` threads at once, each trace with `threads`
// parsing threads; one result per file, in order. Memory: one trace's
// device events per job.
std::vector<absl::StatusOr<AnalyzedTrace>> AnalyzeFiles(const std::vector<std::string>& files,
                                                        int jobs, int threads);

}  // namespace trainscope::analyze

#endif  // TRAINSCOPE_SDK_ANALYZE_ANALYZE_H_
