// The `trainscope` command-line tool: a thin shell over the SDK's analyses.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "sdk/cli/commands.h"
#include "trainscope/version.h"

ABSL_DECLARE_FLAG(std::string, format);

namespace {

constexpr char kUsage[] =
    "trainscope: where accelerator time goes in a training run.\n"
    "\n"
    "usage: trainscope <command> [flags] [args]\n"
    "\n"
    "commands:\n"
    "  summary REPORT.json   print the run summary of a report.json again\n"
    "                        (--format=text|json)\n"
    "  analyze TRACE         GPU idle-gap analysis of a PyTorch-profiler (Kineto)\n"
    "                        trace or a trainscope trace.json (.json or .json.gz),\n"
    "                        with HTA's temporal and idle-time breakdowns\n"
    "                        (--format=text|json); a big trace is parsed on\n"
    "                        every available core (--threads=N)\n"
    "  analyze DIR           the same for every trace in DIR (one per rank), in\n"
    "                        parallel (--jobs=N), with a cross-rank summary\n"
    "  ranks DIR             straggler report of a distributed run from its\n"
    "                        per-rank reports: the slowest rank, its lag, the\n"
    "                        sync wait it causes, missing ranks (--format=text|json)\n"
    "\n"
    "Exit codes: 0 ok, 1 bad input file, 2 bad usage.\n"
    "Run 'trainscope --help' for the flags.";

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  absl::FlagsUsageConfig config;
  config.version_string = [] { return std::string("trainscope " TRAINSCOPE_VERSION_STRING "\n"); };
  config.contains_help_flags = [](absl::string_view path) {
    return path.find("sdk/cli/") != absl::string_view::npos;
  };
  absl::SetFlagsUsageConfig(config);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() < 2) {
    std::fprintf(stderr, "%s\n", kUsage);
    return trainscope::cli::kExitUsage;
  }
  const std::string command = positional[1];
  const std::vector<std::string> args(positional.begin() + 2, positional.end());
  if (command == "summary") return trainscope::cli::RunSummary(args);
  if (command == "analyze") return trainscope::cli::RunAnalyze(args, absl::GetFlag(FLAGS_format));
  if (command == "ranks") return trainscope::cli::RunRanks(args, absl::GetFlag(FLAGS_format));
  std::fprintf(stderr, "trainscope: unknown command '%s'\n\n%s\n", command.c_str(), kUsage);
  return trainscope::cli::kExitUsage;
}
