// `trainscope html`. See commands.h.
#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "sdk/cli/commands.h"
#include "sdk/export/steps_file.h"
#include "sdk/ground/files.h"
#include "sdk/html/page.h"
#include "sdk/html/run_page.h"

ABSL_DECLARE_FLAG(std::string, output);  // experiment_command.cc

namespace trainscope::cli {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

int RunHtml(const std::vector<std::string>& args) {
  if (args.size() != 1) {
    std::fprintf(stderr, "usage: trainscope html RUN_DIR|REPORT.json [-o REPORT.html]\n");
    return kExitUsage;
  }
  if (!html::HaveChartJs()) {
    std::fprintf(stderr,
                 "trainscope html: this trainscope was built without Chart.js: install "
                 "Debian's libjs-chart.js and rebuild\n");
    return kExitUsage;
  }
  const std::string& input = args[0];
  std::string report = input;
  std::string output;
  if (IsDirectory(input)) {
    report = input + "/report.json";
    output = input + "/report.html";
  } else {
    const size_t slash = input.rfind('/');
    const std::string base = slash == std::string::npos ? input : input.substr(slash + 1);
    if (base.rfind("report", 0) != 0 || base.size() < 5 ||
        base.compare(base.size() - 5, 5, ".json") != 0) {
      std::fprintf(stderr,
                   "trainscope html: %s: not a run's report.json or its directory (pages of "
                   "PyTorch-profiler traces, rank folders and experiment.json are not built "
                   "yet; docs/html-report.md)\n",
                   input.c_str());
      return kExitUsage;
    }
    // report.json -> report.html, report-rank3.json -> report-rank3.html:
    // ranks side by side get pages of their own.
    output = input.substr(0, input.size() - 5) + ".html";
  }
  if (const std::string chosen = absl::GetFlag(FLAGS_output); !chosen.empty()) output = chosen;
  absl::StatusOr<std::string> page = html::RunPage(report, exporter::StepsFileForReport(report));
  if (!page.ok()) {
    std::fprintf(stderr, "trainscope html: %s\n", std::string(page.status().message()).c_str());
    return kExitBadInput;
  }
  if (absl::Status status = ground::WriteFileAtomically(output, *page); !status.ok()) {
    std::fprintf(stderr, "trainscope html: %s\n", std::string(status.message()).c_str());
    return kExitBadInput;
  }
  std::printf("trainscope html: wrote %s (%.1f KB)\n", output.c_str(), page->size() / 1024.0);
  return kExitOk;
}

}  // namespace trainscope::cli
