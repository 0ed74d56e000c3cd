// `trainscope analyze`: the GPU idle-gap analysis of a trace (Kineto or
// trainscope's own), with HTA's two breakdowns beside it; or of a folder of
// per-rank traces, analysed in parallel. See commands.h.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "absl/flags/flag.h"
#include "fmt/format.h"
#include "sdk/cli/commands.h"
#include "sdk/export/analysis_report.h"
#include "sdk/ground/cpus.h"
#include "sdk/kineto/trace_import.h"

ABSL_FLAG(int, jobs, 0, "analyze DIR: traces analysed at once (0: one per available core)");
ABSL_FLAG(int, threads, 0,
          "analyze: threads that parse one trace (0: the available cores, shared out between "
          "the jobs of analyze DIR; 1: none besides the main one)");

namespace trainscope::cli {
namespace {

absl::StatusOr<exporter::AnalyzedTrace> AnalyzeFile(const std::string& path, int threads) {
  absl::StatusOr<kineto::ImportedTrace> trace = kineto::ImportTrace(path, threads);
  if (!trace.ok()) return trace.status();
  exporter::AnalyzedTrace out;
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
  return out;
}

bool IsTraceFile(const std::filesystem::path& path) {
  const std::string name = path.filename().string();
  auto ends = [&name](std::string_view suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends(".json") || ends(".json.gz");
}

// Analyses every trace in `dir` on `jobs` threads: each worker holds one
// trace's device events at a time, so memory is bounded per worker.
int AnalyzeDirectory(const std::string& dir, const std::string& format) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    // A trainscope output folder also holds report.json: not a trace.
    if (entry.is_regular_file() && IsTraceFile(entry.path()) &&
        entry.path().filename() != "report.json") {
      files.push_back(entry.path().string());
    }
  }
  if (ec) {
    std::fprintf(stderr, "trainscope analyze: %s: %s\n", dir.c_str(), ec.message().c_str());
    return kExitBadInput;
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "trainscope analyze: %s: no .json or .json.gz traces\n", dir.c_str());
    return kExitBadInput;
  }
  int jobs = absl::GetFlag(FLAGS_jobs);
  if (jobs <= 0) jobs = ground::AvailableCpus();
  jobs = std::min<int>(jobs, static_cast<int>(files.size()));
  int threads = absl::GetFlag(FLAGS_threads);
  if (threads == 0) threads = std::max(1, ground::AvailableCpus() / jobs);
  std::vector<absl::StatusOr<exporter::AnalyzedTrace>> results(files.size(),
                                                              absl::UnknownError("not run"));
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < jobs; ++w) {
    workers.emplace_back([&] {
      for (size_t i = next++; i < files.size(); i = next++) results[i] = AnalyzeFile(files[i], threads);
    });
  }
  for (std::thread& t : workers) t.join();
  std::vector<exporter::AnalyzedTrace> ranks;
  int failed = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    if (!results[i].ok()) {
      std::fprintf(stderr, "trainscope analyze: %s\n",
                   std::string(results[i].status().message()).c_str());
      ++failed;
      continue;
    }
    ranks.push_back(std::move(*results[i]));
  }
  std::stable_sort(ranks.begin(), ranks.end(),
                   [](const auto& a, const auto& b) { return a.rank < b.rank; });
  const std::string text =
      format == "json" ? exporter::RanksToJson(ranks) : exporter::RanksToText(ranks);
  std::fputs(text.c_str(), stdout);
  return failed == 0 ? kExitOk : kExitBadInput;
}

}  // namespace

int RunAnalyze(const std::vector<std::string>& args, const std::string& format) {
  if (args.size() != 1) {
    std::fprintf(stderr,
                 "usage: trainscope analyze [--format=text|json] TRACE.json[.gz] | DIR\n");
    return kExitUsage;
  }
  if (format != "text" && format != "json") {
    std::fprintf(stderr, "trainscope analyze: --format=%s: expected 'text' or 'json'\n",
                 format.c_str());
    return kExitUsage;
  }
  if (absl::GetFlag(FLAGS_threads) < 0) {
    std::fprintf(stderr, "trainscope analyze: --threads=%d: expected 0 (all cores) or more\n",
                 absl::GetFlag(FLAGS_threads));
    return kExitUsage;
  }
  if (std::filesystem::is_directory(args[0])) return AnalyzeDirectory(args[0], format);
  absl::StatusOr<exporter::AnalyzedTrace> trace =
      AnalyzeFile(args[0], absl::GetFlag(FLAGS_threads));
  if (!trace.ok()) {
    std::fprintf(stderr, "trainscope analyze: %s\n", std::string(trace.status().message()).c_str());
    return kExitBadInput;
  }
  const std::string text =
      format == "json" ? exporter::AnalysisToJson(*trace) : exporter::AnalysisToText(*trace);
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

}  // namespace trainscope::cli
