// `trainscope html`. See commands.h.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "sdk/analyze/analysis_report.h"
#include "sdk/analyze/analyze.h"
#include "sdk/cli/commands.h"
#include "sdk/export/rank_files.h"
#include "sdk/export/report_json.h"
#include "sdk/export/steps_file.h"
#include "sdk/ground/files.h"
#include "sdk/html/experiment_page.h"
#include "sdk/html/page.h"
#include "sdk/html/ranks_page.h"
#include "sdk/html/run_page.h"
#include "sdk/html/trace_page.h"
#include "sdk/tuning/experiment.h"

ABSL_DECLARE_FLAG(std::string, output);  // experiment_command.cc

namespace trainscope::cli {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool EndsWith(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// An experiment.json (whatever its name: `experiment run -o loader.json`)
// has a top-level "hypothesis" early: first as trainscope writes it, after
// the environment (a few KB) with its keys sorted. A trace's first 64 KB
// hold traceEvents or its metadata.
bool LooksLikeExperiment(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  std::string head(64 << 10, '\0');
  head.resize(std::fread(head.data(), 1, head.size(), f));
  std::fclose(f);
  return head.find("\"hypothesis\"") != std::string::npos &&
         head.find("\"traceEvents\"") == std::string::npos;
}

// A distributed run's directory: per-rank reports (report-rank<R>.json), or
// a directory per rank, more than one (one is a run's, one level down).
bool IsRanksDirectory(const std::string& dir) {
  std::error_code error;
  const std::vector<std::string> reports = exporter::FindRankReports(dir, &error);
  if (reports.size() > 1) return true;
  return reports.size() == 1 && reports[0].find("/report-rank") != std::string::npos;
}

// What `input` names, and the page's path beside it: X.json -> X.html,
// X.json.gz -> X.json.gz.html, DIR -> DIR/report.html or DIR/ranks.html.
enum class InputKind { kRun, kRanks, kTrace, kExperiment, kUnknown };
struct Input {
  InputKind kind = InputKind::kUnknown;
  std::string path;    // the report or the trace
  std::string output;  // the page
};

Input Classify(const std::string& input) {
  if (IsDirectory(input)) {
    // A run's directory, or a distributed run's with a report per rank.
    const std::string report = input + "/report.json";
    struct stat st;
    if (stat(report.c_str(), &st) != 0 && IsRanksDirectory(input)) {
      return {InputKind::kRanks, input, input + "/ranks.html"};
    }
    // Without report.json the reader's error names it.
    return {InputKind::kRun, report, input + "/report.html"};
  }
  const size_t slash = input.rfind('/');
  const std::string base = slash == std::string::npos ? input : input.substr(slash + 1);
  // report.json -> report.html, report-rank3.json -> report-rank3.html:
  // ranks side by side get pages of their own.
  if (base.rfind("report", 0) == 0 && EndsWith(base, ".json")) {
    return {InputKind::kRun, input, input.substr(0, input.size() - 5) + ".html"};
  }
  if (EndsWith(base, ".json")) {
    const std::string page = input.substr(0, input.size() - 5) + ".html";
    return {LooksLikeExperiment(input) ? InputKind::kExperiment : InputKind::kTrace, input, page};
  }
  // trace.json.gz -> trace.json.gz.html: not trace.html, which is
  // trace.json's page, so that a trace and its compressed copy side by side
  // never write over each other's page.
  if (EndsWith(base, ".json.gz")) return {InputKind::kTrace, input, input + ".html"};
  return {InputKind::kUnknown, input, ""};
}

// The timeline of the run whose report is `report`, from the trace beside
// it: analysis::TimelineViewToJson's, or "" with `note` saying why there is
// none (no trace, or one that does not read: warned about on stderr).
std::string RunTimeline(const Report& report, const std::string& trace_path,
                        const std::string& steps_path, std::string* note) {
  struct stat st;
  if (stat(trace_path.c_str(), &st) != 0) {
    const int error = errno;
    *note = error == ENOENT ? "No timeline: " + trace_path +
                                  " does not exist (the run was recorded without "
                                  "Sink::kTraceJson)."
                            : "No timeline: " + trace_path + ": " + std::strerror(error);
    return "";
  }
  // Steps after the report's warm-up, where the trace keeps some: from the
  // index of the steps file's row just past it (rows in start order).
  analysis::TimelineViewOptions options;
  const int64_t warmup = report.timing.warmup_steps;
  int64_t row = 0;
  (void)exporter::ForEachStepRow(steps_path, [&](const Report::Step& step) {
    if (row++ < warmup) return true;
    options.steady_from_step = step.index;
    return false;
  });
  absl::StatusOr<analysis::TimelineView> view = analyze::ReadTimelineView(trace_path, 0, options);
  if (view.ok() && !view->empty()) return analysis::TimelineViewToJson(*view);
  *note = "No timeline: " +
          (view.ok() ? trace_path + " holds no intervals." : std::string(view.status().message()));
  std::fprintf(stderr, "trainscope html: warning: %s\n", note->c_str());
  return "";
}

// The page of the run whose report is at `report_path`. The timeline comes
// from the run's trace; a run without one (or with one that does not read)
// still gets its page, saying why.
absl::StatusOr<std::string> RunPageOf(const std::string& report_path) {
  const std::string trace_path = exporter::TraceFileForReport(report_path);
  const std::string steps_path = exporter::StepsFileForReport(report_path);
  // The report first: a page needs it, and the timeline its warm-up.
  absl::StatusOr<Report> report = exporter::ReadReportFile(report_path);
  if (!report.ok()) return report.status();
  std::string note;
  const std::string timeline = RunTimeline(*report, trace_path, steps_path, &note);
  return html::RunPage(report_path, steps_path, timeline, note);
}

// The page of an experiment, read and checked as `trainscope compare` reads
// it, then drawn.
absl::StatusOr<std::string> ExperimentPageOf(const std::string& path) {
  absl::StatusOr<tuning::ExperimentRecord> record = tuning::ReadExperiment(path);
  if (!record.ok()) return record.status();
  absl::StatusOr<std::string> text = ground::ReadFileToString(path);
  if (!text.ok()) return text.status();
  return html::ExperimentPage(path, *text);
}

// The page of a trace: the same analysis as `trainscope analyze
// --format=json`, on every core, and the timeline cut from the same read.
absl::StatusOr<std::string> TracePageOf(const std::string& path) {
  const analysis::TimelineViewOptions view;
  absl::StatusOr<analyze::AnalyzedTrace> trace = analyze::AnalyzeFile(path, 0, &view);
  if (!trace.ok()) return trace.status();
  return html::TracePage(
      path, analyze::AnalysisToJson(*trace),
      trace->view.empty() ? std::string() : analysis::TimelineViewToJson(trace->view));
}

// The page of a classified input (not kUnknown).
absl::StatusOr<std::string> PageOf(const Input& input) {
  if (input.kind == InputKind::kRun) return RunPageOf(input.path);
  if (input.kind == InputKind::kRanks) return html::RanksPage(input.path);
  if (input.kind == InputKind::kExperiment) return ExperimentPageOf(input.path);
  return TracePageOf(input.path);
}

}  // namespace

int RunHtml(const std::vector<std::string>& args) {
  if (args.size() != 1) {
    std::fprintf(stderr,
                 "usage: trainscope html RUN_DIR|RANKS_DIR|REPORT.json|EXPERIMENT.json|"
                 "TRACE.json[.gz] [-o PAGE.html]\n"
                 "  the page goes beside the input unless -o names it: DIR/report.html,\n"
                 "  DIR/ranks.html, X.json -> X.html, X.json.gz -> X.json.gz.html\n");
    return kExitUsage;
  }
  if (!html::HaveChartJs()) {
    std::fprintf(stderr,
                 "trainscope html: this trainscope was built without Chart.js: install "
                 "Debian's libjs-chart.js and rebuild\n");
    return kExitUsage;
  }
  Input input = Classify(args[0]);
  if (input.kind == InputKind::kUnknown) {
    std::fprintf(stderr,
                 "trainscope html: %s: not a run's or a distributed run's directory, nor a "
                 "report.json, experiment.json or trace.json[.gz] (docs/html-report.md)\n",
                 input.path.c_str());
    return kExitUsage;
  }
  if (const std::string chosen = absl::GetFlag(FLAGS_output); !chosen.empty()) {
    input.output = chosen;
  }
  const absl::StatusOr<std::string> page = PageOf(input);
  if (!page.ok()) {
    std::fprintf(stderr, "trainscope html: %s\n", std::string(page.status().message()).c_str());
    return kExitBadInput;
  }
  if (absl::Status status = ground::WriteFileAtomically(input.output, *page); !status.ok()) {
    std::fprintf(stderr, "trainscope html: %s\n", std::string(status.message()).c_str());
    return kExitBadInput;
  }
  std::printf("trainscope html: wrote %s (%.1f KB)\n", input.output.c_str(), page->size() / 1024.0);
  return kExitOk;
}

}  // namespace trainscope::cli
