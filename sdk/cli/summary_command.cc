// `trainscope summary`. See commands.h.
#include <cstdio>

#include "absl/flags/flag.h"
#include "sdk/cli/commands.h"
#include "sdk/export/report_json.h"
#include "sdk/export/summary.h"

ABSL_FLAG(std::string, format, "text",
          "output format of summary, analyze and ranks: 'text' (summary: the table Finish() "
          "prints) or 'json' (summary: the report, validated and re-written; analyze, ranks: "
          "their JSON reports)");

namespace trainscope::cli {

int RunSummary(const std::vector<std::string>& args) {
  if (args.size() != 1) {
    std::fprintf(stderr, "usage: trainscope summary [--format=text|json] REPORT.json\n");
    return kExitUsage;
  }
  const std::string format = absl::GetFlag(FLAGS_format);
  if (format != "text" && format != "json") {
    std::fprintf(stderr, "trainscope summary: --format=%s: expected 'text' or 'json'\n",
                 format.c_str());
    return kExitUsage;
  }
  absl::StatusOr<Report> report = exporter::ReadReportFile(args[0]);
  if (!report.ok()) {
    std::fprintf(stderr, "trainscope summary: %s\n",
                 std::string(report.status().message()).c_str());
    return kExitBadInput;
  }
  const std::string text =
      format == "json" ? exporter::ReportToJson(*report) : exporter::FormatSummary(*report);
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

}  // namespace trainscope::cli
