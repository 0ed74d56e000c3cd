// sdk/kineto/trace_import.h: a PyTorch-profiler (Kineto) trace, or one of
// trainscope's own trace.json files, as a Timeline.
//
//   absl::StatusOr<ImportedTrace> trace = ImportTrace("rank0.json.gz");
//   if (trace.ok()) Analyze(trace->timeline);
//
// Kept: device activity (cat kernel, gpu_memcpy, gpu_memset) and CUDA
// synchronisations (cat cuda_sync, which Kineto puts on the stream waited
// on) on one track per (device, stream); CUDA runtime and driver calls (cat
// cuda_runtime, cuda_driver) on host-thread tracks, with their correlation
// ids; ProfilerStep#N annotations as steps; and
// trainscope's own phase ranges (cat trainscope). Everything else (CPU ops,
// Python frames, flows, metadata) is counted and dropped, so memory follows
// the device events, not the file.
#ifndef TRAINSCOPE_SDK_KINETO_TRACE_IMPORT_H_
#define TRAINSCOPE_SDK_KINETO_TRACE_IMPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sdk/analysis/hta_breakdown.h"
#include "sdk/ground/timeline.h"
#include "sdk/kineto/trace_reader.h"

namespace trainscope::kineto {

struct ImportedTrace {
  std::string path;
  ground::Timeline timeline;    // sorted
  std::optional<int64_t> rank;  // distributedInfo.rank
  ReadStats read;
  int64_t kernels = 0, memcpys = 0, memsets = 0, runtime_calls = 0, sync_calls = 0, steps = 0,
          host_ranges = 0, skipped = 0;
  // Facts Holistic Trace Analysis' rules need (sdk/analysis/hta_breakdown.h).
  analysis::HtaTraceFacts hta;
  double parse_s = 0;  // wall time of the read and conversion
};

// Reads `path` (.json or .json.gz) with up to `threads` threads (0: the CPUs
// this thread may run on; see TraceReader::set_max_threads). Errors as
// TraceReader::Read.
absl::StatusOr<ImportedTrace> ImportTrace(const std::string& path, int threads = 0);

// What a trace holds, by category, for the error that says why there is
// nothing to analyse in it: a second, serial read of the file, for that
// error only.
struct TraceSurvey {
  struct Category {
    std::string name;  // as written ("" for events without one)
    int64_t events = 0;
    int64_t device = 0;  // of them, with args.stream >= 0 and args.correlation >= 0
  };
  std::vector<Category> categories;  // in order of first appearance, at most kMaxCategories
  int64_t other_events = 0;          // events in categories past the first kMaxCategories
  int64_t profiler_ranges = 0;       // "cuda_profiler_range" events (CUPTI's range profiler)
  static constexpr size_t kMaxCategories = 64;
};

// Reads `path` once more, counting its categories. Errors as
// TraceReader::Read. Memory: at most kMaxCategories entries.
absl::StatusOr<TraceSurvey> SurveyTrace(const std::string& path);

// Why a trace with no device work we read and no trainscope phases has
// nothing to analyse, in one sentence naming what it holds: CUPTI
// range-profiler events; device events (a stream and a correlation) only
// in categories this reader does not know, named; or no device event at
// all (a CPU-only trace, ProfilerActivity.CUDA off).
std::string NothingToAnalyse(const std::string& path, const TraceSurvey& survey,
                             uint64_t events_read);

}  // namespace trainscope::kineto

#endif  // TRAINSCOPE_SDK_KINETO_TRACE_IMPORT_H_
