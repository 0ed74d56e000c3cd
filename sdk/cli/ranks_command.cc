// `trainscope ranks DIR`. See commands.h.
#include <cstdio>
#include <string>

#include "sdk/cli/commands.h"
#include "trainscope/ranks.h"

namespace trainscope::cli {

int RunRanks(const std::vector<std::string>& args, const std::string& format) {
  if (args.size() != 1) {
    std::fprintf(stderr, "usage: trainscope ranks [--format=text|json] DIR\n");
    return kExitUsage;
  }
  if (format != "text" && format != "json") {
    std::fprintf(stderr, "trainscope ranks: --format=%s: expected 'text' or 'json'\n",
                 format.c_str());
    return kExitUsage;
  }
  absl::StatusOr<std::string> report =
      RanksReport(args[0], format == "json" ? RanksFormat::kJson : RanksFormat::kText);
  if (!report.ok()) {
    std::fprintf(stderr, "trainscope ranks: %s\n", std::string(report.status().message()).c_str());
    return kExitBadInput;
  }
  std::fputs(report->c_str(), stdout);
  return kExitOk;
}

}  // namespace trainscope::cli
