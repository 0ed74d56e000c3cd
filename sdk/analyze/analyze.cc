// `trainscope analyze` as a library. See analyze.h.
#include "sdk/analyze/analyze.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "fmt/format.h"

namespace trainscope::analyze {
namespace {

bool IsTraceFile(const std::filesystem::path& path) {
  const std::string name = path.filename().string();
  return absl::EndsWith(name, ".json") || absl::EndsWith(name, ".json.gz");
}

}  // namespace

absl::StatusOr<AnalyzedTrace> AnalyzeFile(const std::string& path, int threads,
                                          const analysis::TimelineViewOptions* view) {
  absl::StatusOr<kineto::ImportedTrace> trace = kineto::ImportTrace(path, threads);
  if (!trace.ok()) return trace.status();
  AnalyzedTrace out;
  out.path = trace->path;
  out.rank = trace->rank.value_or(0);
  out.read = trace->read;
  out.kernels = trace->kernels;
  out.memcpys = trace->memcpys;
  out.memsets = trace->memsets;
  out.runtime_calls = trace->runtime_calls;
  out.sync_calls = trace->sync_calls;
  out.steps = trace->steps;
  out.parse_s = trace->parse_s;
  out.facts = trace->hta;
  out.analysis = analysis::AnalyzeTimeline(trace->timeline, trace->hta, threads);
  if (view != nullptr) out.view = analysis::CutTimelineView(trace->timeline, *view);
  // Without device work the gaps are measured against trainscope's phases;
  // a trace with neither would read as 100% idle, which says nothing. The
  // error says what the trace holds instead (a second read, on this path
  // only): range-profiler events, device work in categories not read, or
  // none (ProfilerActivity.CUDA off).
  if (!out.has_device_work() && trace->host_ranges == 0) {
    absl::StatusOr<kineto::TraceSurvey> survey = kineto::SurveyTrace(trace->path);
    if (!survey.ok()) return survey.status();
    return absl::FailedPreconditionError(
        kineto::NothingToAnalyse(out.path, *survey, out.read.events));
  }
  return out;
}

absl::StatusOr<analysis::TimelineView> ReadTimelineView(
    const std::string& path, int threads, const analysis::TimelineViewOptions& options) {
  absl::StatusOr<kineto::ImportedTrace> trace = kineto::ImportTrace(path, threads);
  if (!trace.ok()) return trace.status();
  return analysis::CutTimelineView(trace->timeline, options);
}

absl::StatusOr<std::vector<std::string>> TraceFiles(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  // increment(ec), not ++: an entry that cannot be read is an error
  // returned, not a filesystem_error thrown.
  std::filesystem::directory_iterator it(dir, ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::error_code type_ec;
    // A trainscope output folder also holds report.json: not a trace.
    if (it->is_regular_file(type_ec) && IsTraceFile(it->path()) &&
        it->path().filename() != "report.json") {
      files.push_back(it->path().string());
    }
  }
  if (ec) return absl::InvalidArgumentError(fmt::format("{}: {}", dir, ec.message()));
  if (files.empty()) {
    return absl::InvalidArgumentError(fmt::format("{}: no .json or .json.gz traces", dir));
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<absl::StatusOr<AnalyzedTrace>> AnalyzeFiles(const std::vector<std::string>& files,
                                                        int jobs, int threads) {
  std::vector<absl::StatusOr<AnalyzedTrace>> results(files.size(), absl::UnknownError("not run"));
  jobs = std::clamp<int>(jobs, 1, std::max<int>(1, static_cast<int>(files.size())));
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < jobs; ++w) {
    workers.emplace_back([&] {
      for (size_t i = next++; i < files.size(); i = next++)
        results[i] = AnalyzeFile(files[i], threads);
    });
  }
  for (std::thread& t : workers) t.join();
  return results;
}

}  // namespace trainscope::analyze
