// tune_amp: does mixed precision reach the required result sooner, without
// changing how the model trains? An experiment on trainscope's engine
// (docs/experiments.md): train_mlp in fp32 against bf16 autocast on the CPU,
// and against fp16 with GradScaler and bf16 on CUDA, each trial a fresh
// process, in randomised blocks; repeat k of every variant uses seed k.
//
//   tune_amp                          # writes out/tune_amp/experiment.json
//   tune_amp --inject_bug             # adds a variant with a gradient bug
//
// Besides time to target (eval_mse <= --target_mse), each trial writes its
// training loss per step (train_mlp --loss_curve) and the engine checks the
// curves: the fp32 seeds' spread is the noise band, and a variant whose
// curve leaves it is rolled back even when it is faster. Non-finite losses
// and skipped steps (GradScaler) are counted per trial. --inject_bug adds
// "bf16_bug", which silently zeroes the first layer's weight gradient
// (train_mlp --corrupt_grad): the harness must reject it.
//
// Ctrl-C stops it: experiment.json keeps the trials so far, marked
// incomplete. Exit status: 0 when complete, 1 on an error, 130 when stopped.
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "samples/common/harness.h"
#include "sdk/tuning/experiment.h"

ABSL_FLAG(std::string, out, "out/tune_amp", "where experiment.json and the trials go");
ABSL_FLAG(int, repeats, 5, "trials per variant");
ABSL_FLAG(int64_t, steps, 200, "training steps per trial (every trial runs them all)");
ABSL_FLAG(double, target_mse, 0.1, "the required result: held-out MSE at most this");
ABSL_FLAG(bool, inject_bug, false,
          "add the variant bf16_bug, which silently zeroes a gradient: it must be rejected");
ABSL_FLAG(std::string, device, "auto", "auto, cpu or cuda: the precisions compared follow it");
ABSL_FLAG(std::string, train_mlp, "",
          "the training program (default: train_mlp beside this program)");
ABSL_FLAG(double, trial_timeout_s, 120, "a trial that runs longer is a failure");

using trainscope::samples::BesideMe;
using trainscope::samples::g_stop;

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "tune_amp: fp32 against mixed precision, by time to target and loss curve.\n"
      "usage: tune_amp [--repeats=5] [--steps=200] [--inject_bug] [--out=DIR]");
  absl::ParseCommandLine(argc, argv);
  namespace tuning = trainscope::tuning;
  std::string device = absl::GetFlag(FLAGS_device);
  if (device == "auto") device = torch::cuda::is_available() ? "cuda" : "cpu";
  if (device != "cpu" && device != "cuda") {
    std::fprintf(stderr, "tune_amp: --device=%s: expected auto, cpu or cuda\n", device.c_str());
    return 2;
  }
  if (device == "cuda" && !torch::cuda::is_available()) {
    std::fprintf(stderr, "tune_amp: --device=cuda: no CUDA device is available\n");
    return 2;
  }
  const std::string program = absl::GetFlag(FLAGS_train_mlp).empty()
                                  ? BesideMe("train_mlp")
                                  : absl::GetFlag(FLAGS_train_mlp);
  if (access(program.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "tune_amp: %s: not an executable (--train_mlp)\n", program.c_str());
    return 2;
  }

  tuning::ExperimentSpec spec;
  char target[32];
  std::snprintf(target, sizeof(target), "%g", absl::GetFlag(FLAGS_target_mse));
  spec.hypothesis = std::string("mixed precision reaches eval_mse ") + target + " on " + device +
                    " sooner than fp32, with the same loss curve";
  // A model large enough for the precision to matter; one LibTorch thread
  // (train_mlp's default) keeps trials from competing for the cores.
  spec.command = {program,           "--out={out}",
                  "--seed={repeat}", "--steps=" + std::to_string(absl::GetFlag(FLAGS_steps)),
                  "--hidden=1024",   "--batch_size=256",
                  "--eval_every=10", std::string("--target_mse=") + target,
                  "--loss_curve"};
  spec.variants.push_back({"fp32", {"--amp=off"}, {}, {}});
  if (device == "cuda") spec.variants.push_back({"fp16", {"--amp=fp16"}, {}, {}});
  spec.variants.push_back({"bf16", {"--amp=bf16"}, {}, {}});
  if (absl::GetFlag(FLAGS_inject_bug)) {
    spec.variants.push_back({"bf16_bug", {"--amp=bf16", "--corrupt_grad"}, {}, {}});
  }
  spec.repeats = absl::GetFlag(FLAGS_repeats);
  spec.trial_timeout_s = absl::GetFlag(FLAGS_trial_timeout_s);
  spec.curve.file = "loss.jsonl";
  spec.curve.value = "loss";
  spec.curve.window_steps = 10;
  if (spec.repeats < 2) {
    std::fprintf(stderr, "tune_amp: --repeats must be at least 2 (the band needs two seeds)\n");
    return 2;
  }

  trainscope::samples::StopOnSignals();
  tuning::RunOptions options;
  options.output = absl::GetFlag(FLAGS_out) + "/experiment.json";
  options.trials_dir = absl::GetFlag(FLAGS_out) + "/trials";
  options.stop = &g_stop;
  std::fprintf(stderr, "tune_amp: %s\n  %zu variants x %d repeats on %s, trials in %s\n",
               spec.hypothesis.c_str(), spec.variants.size(), spec.repeats, device.c_str(),
               options.trials_dir.c_str());
  absl::StatusOr<tuning::ExperimentResult> result = tuning::RunExperiment(spec, options);
  if (!result.ok()) {
    std::fprintf(stderr, "tune_amp: %s\n", result.status().ToString().c_str());
    return 1;
  }
  std::fprintf(stderr, "wrote %s\n", options.output.c_str());
  return result->complete ? 0 : 130;
}
