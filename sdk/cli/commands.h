// sdk/cli/commands.h: the subcommands of the `trainscope` tool.
//
// Each takes its positional arguments (after the subcommand name) and
// returns the process exit code: 0 success, 1 bad input (the message names
// the file and what is wrong), 2 bad usage.
#ifndef TRAINSCOPE_SDK_CLI_COMMANDS_H_
#define TRAINSCOPE_SDK_CLI_COMMANDS_H_

#include <string>
#include <vector>

namespace trainscope::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitBadInput = 1;
inline constexpr int kExitUsage = 2;

// `trainscope summary REPORT.json`: prints the run summary again.
int RunSummary(const std::vector<std::string>& args);

// `trainscope analyze TRACE`: the gap analysis of a trace; `format` is
// "text" or "json".
int RunAnalyze(const std::vector<std::string>& args, const std::string& format);
// `trainscope ranks DIR`: the straggler report of the per-rank reports in DIR.
int RunRanks(const std::vector<std::string>& args, const std::string& format);
// `trainscope experiment run SPEC.json`: runs a tuning experiment; 130 when
// interrupted (experiment.json then marked incomplete).
int RunExperimentCommand(const std::vector<std::string>& args);

// `trainscope compare A B`: two reports (files, or directories of runs:
// with repeats on both sides the experiment's rules give a verdict), or two
// experiment.json files (variant by variant, and their environments).
int RunCompare(const std::vector<std::string>& args);

// `trainscope html RUN_DIR|RANKS_DIR|REPORT.json|EXPERIMENT.json|
// TRACE.json[.gz] [-o PAGE.html]`: the run's report, a distributed run's
// ranks, an experiment, or a trace's analysis (`trainscope analyze`'s), as
// one self-contained HTML page
// (default: beside the input, X.json -> X.html: report.html,
// report-rank3.html, trace.html; X.json.gz -> X.json.gz.html, so that a
// trace and its compressed copy never share a page; DIR/report.html,
// DIR/ranks.html).
int RunHtml(const std::vector<std::string>& args);

// `trainscope tune amp|batch|loader [flags] -- COMMAND`: an experiment on
// the user's own program, whose placeholders each trial fills (`command`,
// what followed "--"; `has_command`: a "--" was given). 2 for bad input,
// nothing run (or, for a program that breaks the trial contract, after
// its first trial); 130 when interrupted (--resume finishes it).
int RunTune(const std::vector<std::string>& args, const std::vector<std::string>& command,
            bool has_command);

}  // namespace trainscope::cli

#endif  // TRAINSCOPE_SDK_CLI_COMMANDS_H_
