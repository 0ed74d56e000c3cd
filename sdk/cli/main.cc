// The `trainscope` command-line tool: a thin shell over the SDK's analyses.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
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
    "  experiment run SPEC   a tuning experiment: a baseline and variants of one\n"
    "                        command, fresh processes in randomised blocks, time to\n"
    "                        the required result compared beyond the noise\n"
    "                        (-o experiment.json; docs/experiments.md)\n"
    "  compare A B           two runs side by side (report.json files, or\n"
    "                        directories of runs: with repeats on both sides, a\n"
    "                        verdict by the experiment's rules), or two\n"
    "                        experiment.json files variant by variant\n"
    "  html RUN_DIR          the run as one self-contained HTML page (report.html\n"
    "                        beside report.json, or -o FILE): baseline record,\n"
    "                        per-step phases, idle by cause, idle gaps\n"
    "  html RANKS_DIR        a distributed run's per-rank reports as one page\n"
    "                        (ranks.html): the straggler, compute and sync\n"
    "  html EXPERIMENT.json  an experiment as one page: verdict, intervals,\n"
    "                        trials\n"
    "  html TRACE.json[.gz]  a PyTorch-profiler trace (or ours) as one page:\n"
    "                        analyze's figures, HTA's breakdowns drawn\n"
    "                        (TRACE.html; TRACE.json.gz.html for a .json.gz)\n"
    "  tune amp|batch|loader [flags] -- COMMAND\n"
    "                        tune your own program: fp32 against mixed precision\n"
    "                        ({precision}), the batch size ({batch}, {lr}), the\n"
    "                        loader's workers and prefetch ({workers}, {prefetch}):\n"
    "                        experiment.json, a Polyaxon preset, a verdict beyond\n"
    "                        the noise (docs/experiments.md)\n"
    "\n"
    "Exit codes: 0 ok, 1 bad input file, 2 bad usage.\n"
    "Run 'trainscope --help' for the flags.";

// Appends `text` to `out` wrapped at 80 columns, each line indented by
// `indent` spaces (the first continues `out`'s last line at `column`).
void AppendWrapped(const std::string& text, size_t indent, size_t column, std::string* out) {
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(' ', at);
    if (end == std::string::npos) end = text.size();
    const size_t word = end - at;
    if (column > indent && column + 1 + word > 80) {
      out->append("\n").append(indent, ' ');
      column = indent;
    } else if (column > indent) {
      out->push_back(' ');
      ++column;
    }
    out->append(text, at, word);
    column += word;
    at = end + 1;
  }
  out->push_back('\n');
}

// The help: the usage above, then this tool's flags (the help strings of
// the ABSL_FLAGs under sdk/cli/, sorted by name) and the common ones.
std::string Help() {
  std::string help = kUsage;
  help.resize(help.rfind('\n') + 1);  // without "Run 'trainscope --help'..."
  help += "\nflags:\n";
  std::vector<std::pair<std::string, std::string>> flags;  // "--name=VALUE", its help
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->Filename().find("sdk/cli/") == std::string::npos) continue;
    std::string value = "VALUE";
    if (flag->IsOfType<int>() || flag->IsOfType<int64_t>()) value = "N";
    if (name == "format") value = "text|json";
    flags.emplace_back("--" + std::string(name) + "=" + value,
                       flag->Help() + " (default: " + flag->DefaultValue() + ")");
  }
  std::sort(flags.begin(), flags.end());
  flags.emplace_back("--help, -h", "print this help and exit");
  flags.emplace_back("--version", "print the version and exit");
  for (const auto& [name, text] : flags) {
    help += "  " + name;
    size_t column = 2 + name.size();
    if (column < 24) {
      help.append(24 - column, ' ');
      column = 24;
    } else {
      help += "\n" + std::string(24, ' ');
      column = 24;
    }
    AppendWrapped(text, 24, column, &help);
  }
  return help;
}

// True if the command line asks for help (before a "--"): absl's own
// --help prints the usage message after "trainscope: " and the flags under
// the paths of their source files, and exits 1.
bool WantsHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strcmp(a, "--") == 0) return false;
    for (const char* h : {"--help", "-help", "-h", "--helpfull", "-helpfull", "--helpshort",
                          "-helpshort", "--helppackage", "--helpon"}) {
      const size_t n = std::strlen(h);
      if (std::strncmp(a, h, n) == 0 && (a[n] == '\0' || a[n] == '=')) return true;
    }
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (WantsHelp(argc, argv)) {
    std::fputs(Help().c_str(), stdout);
    return 0;
  }
  absl::SetProgramUsageMessage(kUsage);
  absl::FlagsUsageConfig config;
  config.version_string = [] { return std::string("trainscope " TRAINSCOPE_VERSION_STRING "\n"); };
  config.contains_help_flags = [](absl::string_view path) {
    return path.find("sdk/cli/") != absl::string_view::npos;
  };
  absl::SetFlagsUsageConfig(config);
  // What follows "--" is a program to run (`trainscope tune`), never read
  // as trainscope's flags. "-o FILE" before it is --output=FILE.
  int dashes = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      dashes = i;
      break;
    }
  }
  const std::vector<std::string> after_dashes(argv + std::min(dashes + 1, argc), argv + argc);
  // `tune` without "--": its program's flags would be read as ours.
  std::vector<std::string> words;  // the arguments that are not flags
  for (int i = 1; i < dashes; ++i) {
    if (argv[i][0] != '-') words.emplace_back(argv[i]);
  }
  if (dashes == argc && !words.empty() && words[0] == "tune") {
    std::fprintf(stderr,
                 "trainscope: tune%s: put the program to tune after -- (trainscope tune "
                 "amp|batch|loader [flags] -- COMMAND [ARGS...])\n",
                 words.size() > 1 ? (" " + words[1]).c_str() : "");
    return trainscope::cli::kExitUsage;
  }
  std::vector<std::string> rewritten;
  for (int i = 0; i < dashes; ++i) {
    if (std::strcmp(argv[i], "-o") == 0 && i + 1 < dashes) {
      rewritten.push_back(std::string("--output=") + argv[++i]);
    } else {
      rewritten.emplace_back(argv[i]);
    }
  }
  std::vector<char*> rewritten_argv;
  for (std::string& a : rewritten) rewritten_argv.push_back(a.data());
  std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(rewritten_argv.size()), rewritten_argv.data());
  if (positional.size() < 2) {
    std::fprintf(stderr, "%s\n", kUsage);
    return trainscope::cli::kExitUsage;
  }
  const std::string command = positional[1];
  const std::vector<std::string> args(positional.begin() + 2, positional.end());
  if (command != "tune" && dashes < argc) {
    std::fprintf(stderr, "trainscope %s: takes no command after --\n", command.c_str());
    return trainscope::cli::kExitUsage;
  }
  if (command == "summary") return trainscope::cli::RunSummary(args);
  if (command == "analyze") return trainscope::cli::RunAnalyze(args, absl::GetFlag(FLAGS_format));
  if (command == "ranks") return trainscope::cli::RunRanks(args, absl::GetFlag(FLAGS_format));
  if (command == "experiment") return trainscope::cli::RunExperimentCommand(args);
  if (command == "compare") return trainscope::cli::RunCompare(args);
  if (command == "html") return trainscope::cli::RunHtml(args);
  if (command == "tune") return trainscope::cli::RunTune(args, after_dashes, dashes < argc);
  std::fprintf(stderr, "trainscope: unknown command '%s'\n\n%s\n", command.c_str(), kUsage);
  return trainscope::cli::kExitUsage;
}
