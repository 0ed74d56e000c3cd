// tune_bench: the experiment engine's own cost per trial, beside a trial's
// run time. A `trainscope tune amp` of 2 settings x 5 repeats whose trials
// are as long as a 10 s trial's outputs make them (10,000 steps: the report,
// steps.jsonl, loss.jsonl, with the curve check on) but run in no time (a
// `cp` of the prepared outputs), so the wall time per trial is the engine's:
// the spawn, the report and steps file read, the curve check, the verdict
// (bootstrap and rank test) and experiment.json written after every trial.
// Broken down: the spawn alone (RunLogged of /bin/true, whose wait polls
// every 10 ms) and report.json's read alone, measured in the same run.
//
//   tune_bench [--steps=10000] [--repeats=5]
//
// Not a test: it prints the figures and PASS/MISS against the goal (the
// engine's overhead per trial <= 1% of a 10 s trial) and exits 0.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "sdk/export/report_json.h"
#include "sdk/tuning/experiment.h"
#include "sdk/tuning/statistics.h"
#include "trainscope/trainscope.h"

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A run of `steps` steps with its loss curve, written into `dir`.
bool Prepare(const std::string& dir, int steps) {
  trainscope::Options options;
  options.output_dir = dir;
  options.run_name = "tune_bench";
  options.sinks = trainscope::Sink::kReportJson;
  options.device_timeline = false;
  auto session = trainscope::Session::Start(options);
  if (!session.ok()) return false;
  session->SetQualityTarget("score", 1, /*higher_is_better=*/true);
  for (int i = 0; i < steps; ++i) {
    trainscope::StepScope step(*session, trainscope::StepIndex(i), trainscope::Samples(64));
    { TRAINSCOPE_PHASE(kForward); }
    (void)session->RecordLoss(i, 1.0 / (1 + i));
  }
  (void)session->RecordQuality("score", 1);
  return session->Finish().ok();
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 10000, repeats = 5;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--steps=", 8) == 0) steps = std::atoi(argv[i] + 8);
    if (std::strncmp(argv[i], "--repeats=", 10) == 0) repeats = std::atoi(argv[i] + 10);
  }
  char pattern[] = "/tmp/tune-bench-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return 1;
  const std::string root = pattern;
  const std::string prepared = root + "/prepared";
  if (!Prepare(prepared, steps)) {
    std::fprintf(stderr, "tune_bench: could not write the prepared run\n");
    return 1;
  }
  namespace tuning = trainscope::tuning;

  // The spawn alone: RunLogged of /bin/true, median of 20.
  std::vector<double> spawn;
  for (int i = 0; i < 20; ++i) {
    const auto t = Clock::now();
    tuning::RunLogged({"/bin/true"}, {}, root + "/true.log", 60);
    spawn.push_back(Since(t));
  }
  // report.json read alone, median of 10.
  std::vector<double> read;
  for (int i = 0; i < 10; ++i) {
    const auto t = Clock::now();
    (void)trainscope::exporter::ReadReportFile(prepared + "/report.json");
    read.push_back(Since(t));
  }

  tuning::ExperimentSpec spec;
  spec.hypothesis = "the engine's overhead";
  spec.command = {"/bin/sh", "-c", "cp -r " + prepared + "/. {out}/ && exit 0",
                  "--precision={precision}"};
  spec.variants = {{"fp32", {}, {}, {{"precision", "fp32"}}},
                   {"bf16", {}, {}, {{"precision", "bf16"}}}};
  spec.repeats = std::max(repeats, 4);
  spec.curve.file = "loss.jsonl";
  spec.curve.window_steps = 10;
  tuning::RunOptions options;
  options.output = root + "/experiment.json";
  options.progress = nullptr;
  const auto t = Clock::now();
  absl::StatusOr<tuning::ExperimentResult> result = tuning::RunExperiment(spec, options);
  const double total = Since(t);
  if (!result.ok()) {
    std::fprintf(stderr, "tune_bench: %s\n", result.status().ToString().c_str());
    return 1;
  }
  const auto trials = static_cast<double>(result->trials.size());
  double child = 0;  // what the trials' own processes took (the cp)
  for (const tuning::Trial& trial : result->trials) child += trial.wall_s;
  const double per_trial = total / trials;
  const double share = per_trial / 10.0;
  std::printf(
      "tune_bench: %g trials of %d steps each (report, steps.jsonl, loss.jsonl; curve "
      "check on)\n",
      trials, steps);
  std::printf("  spawn alone (RunLogged of /bin/true, median; it polls every 10 ms) %8.2f ms\n",
              1e3 * tuning::Median(spawn));
  std::printf("  report.json read alone (median)                  %8.2f ms\n",
              1e3 * tuning::Median(read));
  std::printf("  a trial's process, spawn to exit (cp, mean)       %8.2f ms\n",
              1e3 * child / trials);
  std::printf("  engine per trial, all in (wall / trials)          %8.2f ms\n", 1e3 * per_trial);
  std::printf("engine overhead per trial / a 10 s trial <= 1%%  %.3f%%  %s\n", 100 * share,
              share <= 0.01 ? "PASS" : "MISS");
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
  return 0;
}
