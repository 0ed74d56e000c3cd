// `trainscope analyze`: the GPU idle-gap analysis of a trace (Kineto or
// trainscope's own), with HTA's two breakdowns beside it; or of a folder of
// per-rank traces, analysed in parallel. See commands.h.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "absl/flags/flag.h"
#include "sdk/analyze/analysis_report.h"
#include "sdk/cli/commands.h"
#include "sdk/ground/cpus.h"

ABSL_FLAG(int, jobs, 0, "analyze DIR: traces analysed at once (0: one per available core)");
ABSL_FLAG(int, threads, 0,
          "analyze: threads that parse one trace (0: the available cores, shared out between "
          "the jobs of analyze DIR; 1: none besides the main one)");

namespace trainscope::cli {
namespace {

// Analyses every trace in `dir` on `jobs` threads (analyze::AnalyzeFiles:
// each holds one trace's device events at a time).
int AnalyzeDirectory(const std::string& dir, const std::string& format) {
  absl::StatusOr<std::vector<std::string>> files = analyze::TraceFiles(dir);
  if (!files.ok()) {
    std::fprintf(stderr, "trainscope analyze: %s\n", std::string(files.status().message()).c_str());
    return kExitBadInput;
  }
  int jobs = absl::GetFlag(FLAGS_jobs);
  if (jobs <= 0) jobs = ground::AvailableCpus();
  jobs = std::min<int>(jobs, static_cast<int>(files->size()));
  int threads = absl::GetFlag(FLAGS_threads);
  if (threads == 0) threads = std::max(1, ground::AvailableCpus() / jobs);
  std::vector<absl::StatusOr<analyze::AnalyzedTrace>> results =
      analyze::AnalyzeFiles(*files, jobs, threads);
  std::vector<analyze::AnalyzedTrace> ranks;
  int failed = 0;
  for (size_t i = 0; i < files->size(); ++i) {
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
      format == "json" ? analyze::RanksToJson(ranks) : analyze::RanksToText(ranks);
  std::fputs(text.c_str(), stdout);
  return failed == 0 ? kExitOk : kExitBadInput;
}

}  // namespace

int RunAnalyze(const std::vector<std::string>& args, const std::string& format) {
  if (args.size() != 1) {
    std::fprintf(stderr, "usage: trainscope analyze [--format=text|json] TRACE.json[.gz] | DIR\n");
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
  std::error_code ec;
  if (std::filesystem::is_directory(args[0], ec)) return AnalyzeDirectory(args[0], format);
  absl::StatusOr<analyze::AnalyzedTrace> trace =
      analyze::AnalyzeFile(args[0], absl::GetFlag(FLAGS_threads));
  if (!trace.ok()) {
    std::fprintf(stderr, "trainscope analyze: %s\n", std::string(trace.status().message()).c_str());
    return kExitBadInput;
  }
  const std::string text =
      format == "json" ? analyze::AnalysisToJson(*trace) : analyze::AnalysisToText(*trace);
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

}  // namespace trainscope::cli
