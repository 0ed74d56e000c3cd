// `trainscope experiment run SPEC.json`: a tuning experiment (sdk/tuning).
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "sdk/cli/commands.h"
#include "sdk/ground/files.h"
#include "sdk/tuning/experiment.h"

ABSL_FLAG(std::string, output, "",
          "where the output goes (also -o FILE). experiment run: experiment.json by default; "
          "the trials' outputs go beside it, in FILE without .json + \"-trials\". html: "
          "report.html beside report.json by default");

ABSL_FLAG(bool, resume, false,
          "experiment run: continue the interrupted experiment in --output (same spec) where it "
          "stopped");

namespace trainscope::cli {
namespace {

std::atomic<bool> g_stop{false};

extern "C" void OnStopSignal(int) { g_stop.store(true); }

}  // namespace

int RunExperimentCommand(const std::vector<std::string>& args) {
  if (args.size() != 2 || args[0] != "run") {
    std::fprintf(stderr,
                 "usage: trainscope experiment run SPEC.json [-o experiment.json] [--resume]\n");
    return kExitUsage;
  }
  absl::StatusOr<std::string> text = ground::ReadFileToString(args[1]);
  if (!text.ok()) {
    std::fprintf(stderr, "trainscope: %s\n", std::string(text.status().message()).c_str());
    return kExitBadInput;
  }
  absl::StatusOr<tuning::ExperimentSpec> spec = tuning::ParseSpec(*text, args[1]);
  if (!spec.ok()) {
    std::fprintf(stderr, "trainscope: %s\n", std::string(spec.status().message()).c_str());
    return kExitBadInput;
  }
  // Ctrl-C or SIGTERM: the running trial is killed and not counted, what
  // was measured is written, marked incomplete.
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  tuning::RunOptions options;
  options.output = absl::GetFlag(FLAGS_output);
  if (options.output.empty()) options.output = "experiment.json";
  options.stop = &g_stop;
  if (absl::GetFlag(FLAGS_resume)) {
    absl::StatusOr<std::vector<tuning::Trial>> done =
        tuning::ReadExperimentTrials(options.output, *spec);
    if (!done.ok()) {
      std::fprintf(stderr, "trainscope: --resume: %s\n",
                   std::string(done.status().message()).c_str());
      return kExitBadInput;
    }
    std::fprintf(stderr, "resuming %s: %zu trials done\n", options.output.c_str(), done->size());
    options.done = *std::move(done);
  }
  absl::StatusOr<tuning::ExperimentResult> result = tuning::RunExperiment(*spec, options);
  if (!result.ok()) {
    std::fprintf(stderr, "trainscope: %s\n", std::string(result.status().message()).c_str());
    return kExitBadInput;
  }
  std::fprintf(stderr, "experiment: %s\n", options.output.c_str());
  return result->complete ? kExitOk : 130;
}

}  // namespace trainscope::cli
