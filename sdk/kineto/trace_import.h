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

#include <optional>
#include <string>

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

}  // namespace trainscope::kineto

#endif  // TRAINSCOPE_SDK_KINETO_TRACE_IMPORT_H_
