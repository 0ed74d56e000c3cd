// tests/kineto_testing.h: the shared PyTorch-profiler traces and small
// trace events, for the tests of the kineto reader, the HTA breakdown and
// `trainscope analyze`.
#ifndef TRAINSCOPE_TESTS_KINETO_TESTING_H_
#define TRAINSCOPE_TESTS_KINETO_TESTING_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "sdk/analysis/hta_breakdown.h"
#include "sdk/kineto/trace_import.h"
#include "tests/test_util.h"

namespace trainscope::testing {

using analysis::ComputeHtaBreakdown;
using analysis::HtaBreakdown;

// A trace of ../shared/data/kineto (TRAINSCOPE_SHARED_KINETO_DIR).
inline std::string SharedTrace(const std::string& name) {
  return std::string(TRAINSCOPE_SHARED_KINETO_DIR) + "/" + name;
}

inline bool Near(double got, double want) {
  return std::fabs(got - want) <= std::max(1.0, 0.005 * std::fabs(want));
}

inline std::map<std::pair<int64_t, std::string>, double> IdleRows(const HtaBreakdown& hta) {
  std::map<std::pair<int64_t, std::string>, double> rows;
  for (const auto& r : hta.idle_by_stream) rows[{r.stream, r.category}] = r.idle_us;
  return rows;
}

// HTA's breakdowns of the trace at `path`.
inline HtaBreakdown Analyze(const std::string& path) {
  absl::StatusOr<kineto::ImportedTrace> trace = kineto::ImportTrace(path);
  EXPECT_TRUE(trace.ok()) << trace.status();
  if (!trace.ok()) return {};
  return ComputeHtaBreakdown(trace->timeline, trace->hta);
}

// A trace of `events` written to dir/name (rank 3).
inline std::string WriteTrace(const TempDir& dir, const std::string& name,
                              const std::vector<std::string>& events) {
  std::string json =
      "{\"schemaVersion\": 1, \"distributedInfo\": {\"rank\": 3},\n \"traceEvents\": [\n";
  for (size_t i = 0; i < events.size(); ++i) json += (i ? ",\n" : "") + events[i];
  json += "\n]}\n";
  testing::WriteAll(dir.File(name), json);
  return dir.File(name);
}

inline std::string Kernel(const std::string& name, double ts, double dur, int stream, int corr,
                          const std::string& cat = "kernel") {
  return fmt::format(R"({{"ph": "X", "cat": "{}", "name": "{}", "pid": 0, "tid": {}, "ts": {}, )"
                     R"("dur": {}, "args": {{"stream": {}, "correlation": {}, "device": 0}}}})",
                     cat, name, stream, ts, dur, stream, corr);
}
inline std::string Launch(double ts, int corr) {
  return fmt::format(R"({{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, )"
                     R"("tid": 9, "ts": {}, "dur": 1, "args": {{"correlation": {}}}}})",
                     ts, corr);
}
// `entries` small objects {"n": i}, each written like an element of
// traceEvents (after `between`): a list inside an element that a guessed
// element start can fall into.
inline std::string ElementLikeObjects(int entries, const std::string& between = ",\n  ") {
  std::string out;
  for (int n = 0; n < entries; ++n) out += fmt::format("{}{{\"n\": {}}}", n ? between : "", n);
  return out;
}
inline std::string Step(int n, double ts, double dur) {
  return fmt::format(R"({{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{}", )"
                     R"("pid": 9, "tid": 9, "ts": {}, "dur": {}}})",
                     n, ts, dur);
}

}  // namespace trainscope::testing

#endif  // TRAINSCOPE_TESTS_KINETO_TESTING_H_
