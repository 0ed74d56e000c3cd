// `trainscope tune amp|batch|loader [flags] -- COMMAND`: the guide's tuning
// decisions as experiments on the user's own program (sdk/tuning/tune.h).
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "fmt/format.h"
#include "sdk/cli/commands.h"
#include "sdk/ground/cuda_devices.h"
#include "sdk/ground/files.h"
#include "sdk/tuning/experiment.h"
#include "sdk/tuning/tune.h"

ABSL_DECLARE_FLAG(std::string, output);  // experiment_command.cc
ABSL_DECLARE_FLAG(bool, resume);         // experiment_command.cc

ABSL_FLAG(int, repeats, 0,
          "tune: trials per setting (0: the fewest with which the rank test can accept, at "
          "least 5 for amp and batch, 4 for loader)");
ABSL_FLAG(double, trial_timeout_s, 600, "tune: a trial that runs longer is killed and fails");
ABSL_FLAG(double, threshold, 0.02, "tune: the practical difference, relative (0.02: 2%)");
ABSL_FLAG(int64_t, seed, 1, "tune: the blocks' orders and the bootstrap's resamples");
ABSL_FLAG(std::string, precisions, "",
          "tune amp: the {precision} values to try against --baseline (default: bf16, and fp16 "
          "first where a CUDA device is seen); the baseline's own value makes an A/A variant");
ABSL_FLAG(std::string, baseline, "fp32", "tune amp: the {precision} of the baseline");
ABSL_FLAG(int64_t, curve_window, 10, "tune amp: steps per window of the loss-curve check");
ABSL_FLAG(int64_t, base_batch, 256, "tune batch: the baseline {batch}");
ABSL_FLAG(double, base_lr, 0.001, "tune batch: {lr} at --base_batch");
ABSL_FLAG(std::string, lr_rule, "none",
          "tune batch: how {lr} follows the batch: none, linear (lr x B/base) or sqrt");
ABSL_FLAG(int, sizes, 3, "tune batch: powers of two from --base_batch that fit, compared");
ABSL_FLAG(int64_t, min_batch, 64, "tune batch: the probe's first {batch}");
ABSL_FLAG(int64_t, max_batch, 1 << 20, "tune batch: the probe stops doubling here");
ABSL_FLAG(int64_t, budget_mb, 0,
          "tune batch: the memory a batch may use, MiB, passed less --margin as {memory_mb} (0: "
          "none; the program's own device decides)");
ABSL_FLAG(double, margin, 0.1, "tune batch: probes run under (1 - margin) x --budget_mb");
ABSL_FLAG(std::string, probe_args, "",
          "tune batch: arguments added to each probe's command, split at spaces (e.g. "
          "\"--steps=3\": a probe needs a few whole steps, not the whole run)");
ABSL_FLAG(bool, serve, false,
          "tune batch: serving; {batch} is the largest batch of requests, compared by p99 "
          "latency (Session::RecordLatency)");
ABSL_FLAG(std::string, serve_sizes, "1,8,64", "tune batch --serve: the {batch} values compared");
ABSL_FLAG(std::string, workers, "0,1,2,4", "tune loader: the {workers} values swept");
ABSL_FLAG(std::string, prefetch, "2",
          "tune loader: the {prefetch} values swept (when the command has {prefetch})");
ABSL_FLAG(std::string, pin, "",
          "tune loader: the {pin} values swept, 0 (off) and 1 (on), when the command has {pin}; "
          "default 0,1 where a CUDA device is present, else 0 (pinning speeds only copies to a "
          "device)");
ABSL_FLAG(std::string, objective, "time_to_target",
          "tune loader: time_to_target or steady_samples_per_s");
ABSL_FLAG(std::string, coload, "",
          "tune loader: cpu=N,io=M: the sweep again with N busy processes and M processes "
          "writing and reading a scratch file on this machine, to see whether the knee moves "
          "when the host is shared");
ABSL_FLAG(int64_t, max_rss_mb, 0,
          "tune loader: a setting whose peak memory passes this (MiB) is rejected (0: none)");

namespace trainscope::cli {
namespace {

std::atomic<bool> g_tune_stop{false};
extern "C" void OnTuneStop(int) { g_tune_stop.store(true); }

constexpr char kTuneUsage[] =
    "usage: trainscope tune amp|batch|loader [flags] -- COMMAND [ARGS...]\n"
    "  amp     fp32 against mixed precision: the command takes {precision}\n"
    "  batch   the largest batch that fits, then sizes by time to target: {batch}, {lr},\n"
    "          {memory_mb} (--serve: p99 latency per maximum {batch})\n"
    "  loader  loader workers, prefetch depth and pinning, to the knee: {workers},\n"
    "          {prefetch}, {pin}\n"
    "{out} is the trial's output directory (also TRAINSCOPE_OUTPUT_DIR), {repeat} its round\n"
    "(a seed). docs/experiments.md, \"Tuning your own program\".";

int Usage(const std::string& why) {
  std::fprintf(stderr, "trainscope: %s\n%s\n", why.c_str(), kTuneUsage);
  return kExitUsage;
}

// One line for bad input, nothing run: exit 2.
int BadInput(const absl::Status& status) {
  std::fprintf(stderr, "trainscope: %s\n", std::string(status.message()).c_str());
  return kExitUsage;
}

absl::StatusOr<std::vector<int64_t>> Numbers(const std::string& flag, const std::string& text) {
  std::vector<int64_t> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(part, &n)) {
      return absl::InvalidArgumentError(
          fmt::format("--{}: \"{}\" is not a whole number", flag, std::string(part)));
    }
    out.push_back(n);
  }
  return out;
}

// Runs `spec` into `output` (resuming it when asked), printing the
// engine's progress. Bad input (a contract the program does not keep) is
// exit 2; an error writing is 1.
struct Ran {
  int exit = kExitOk;
  std::optional<tuning::ExperimentResult> result;
};
Ran Run(const tuning::ExperimentSpec& spec, const std::string& output) {
  Ran ran;
  tuning::RunOptions options;
  options.output = output;
  options.stop = &g_tune_stop;
  if (absl::GetFlag(FLAGS_resume) && ground::ReadFileToString(output).ok()) {
    absl::StatusOr<std::vector<tuning::Trial>> done = tuning::ReadExperimentTrials(output, spec);
    if (!done.ok()) {
      ran.exit = BadInput(done.status());
      return ran;
    }
    std::fprintf(stderr, "resuming %s: %zu trials done\n", output.c_str(), done->size());
    options.done = *std::move(done);
  }
  std::fprintf(stderr, "tune: %s\n  %zu settings x %s%d repeats, trials in %s-trials\n",
               spec.hypothesis.c_str(), spec.variants.size(), spec.sequential ? "up to " : "",
               spec.repeats, tuning::OutputStem(output).c_str());
  absl::StatusOr<tuning::ExperimentResult> result = tuning::RunExperiment(spec, options);
  if (!result.ok()) {
    const absl::StatusCode code = result.status().code();
    if (code == absl::StatusCode::kInvalidArgument ||
        code == absl::StatusCode::kFailedPrecondition) {
      ran.exit = BadInput(result.status());
    } else {
      std::fprintf(stderr, "trainscope: %s\n", std::string(result.status().message()).c_str());
      ran.exit = kExitBadInput;
    }
    return ran;
  }
  ran.result = *std::move(result);
  ran.exit = ran.result->complete ? kExitOk : 130;
  return ran;
}

// The preset beside experiment.json, and the closing lines.
int Finish(const std::string& output, const Ran& ran) {
  if (!ran.result) return ran.exit;
  const std::string preset = tuning::OutputStem(output) + ".polyaxon.yaml";
  if (absl::Status s = ground::WriteFileAtomically(preset, ran.result->preset.polyaxon); !s.ok()) {
    std::fprintf(stderr, "trainscope: %s\n", std::string(s.message()).c_str());
    return kExitBadInput;
  }
  std::fprintf(stderr, "wrote %s and %s (trainscope html %s draws it)\n", output.c_str(),
               preset.c_str(), output.c_str());
  if (ran.exit == 130) {
    std::fprintf(stderr,
                 "interrupted: trainscope tune ... --resume (the same flags and "
                 "command) finishes it\n");
  }
  return ran.exit;
}

// The flags every subcommand takes, into `o`. Errors: InvalidArgument
// for a value out of range.
absl::Status ReadCommonFlags(tuning::TuneOptions* o) {
  o->repeats = absl::GetFlag(FLAGS_repeats);
  o->trial_timeout_s = absl::GetFlag(FLAGS_trial_timeout_s);
  o->threshold = absl::GetFlag(FLAGS_threshold);
  o->seed = static_cast<uint64_t>(absl::GetFlag(FLAGS_seed));
  if (o->repeats < 0 || !(o->trial_timeout_s > 0) || !(o->threshold >= 0 && o->threshold < 1)) {
    return absl::InvalidArgumentError(
        "tune: --repeats must be >= 0, --trial_timeout_s > 0 and --threshold from 0 to 1");
  }
  return absl::OkStatus();
}

// experiment.json's path (-o, else tune-<subcommand>/experiment.json),
// its directory made. Errors: the directory cannot be written.
absl::StatusOr<std::string> OutputPath(const tuning::TuneOptions& o) {
  std::string output = absl::GetFlag(FLAGS_output);
  if (output.empty()) output = "tune-" + o.subcommand + "/experiment.json";
  const std::string dir = output.find('/') == std::string::npos
                              ? std::string(".")
                              : output.substr(0, output.rfind('/'));
  if (absl::Status s = ground::EnsureWritableDirectory(dir); !s.ok()) return s;
  return output;
}

// SIGINT and SIGTERM stop the trials (g_tune_stop): a record is left that
// --resume finishes.
void StopOnSignals() {
  struct sigaction action = {};
  action.sa_handler = OnTuneStop;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

// ---- amp -------------------------------------------------------------

int TuneAmp(const tuning::TuneOptions& o, const std::string& output) {
  tuning::AmpOptions amp;
  amp.baseline = absl::GetFlag(FLAGS_baseline);
  amp.curve_window = absl::GetFlag(FLAGS_curve_window);
  std::string precisions = absl::GetFlag(FLAGS_precisions);
  if (precisions.empty()) {
    precisions = ground::ProbeCudaDevices().count > 0 ? "fp16,bf16" : "bf16";
  }
  amp.precisions = absl::StrSplit(precisions, ',', absl::SkipWhitespace());
  if (amp.curve_window < 1) {
    return BadInput(absl::InvalidArgumentError("tune amp: --curve_window must be >= 1"));
  }
  absl::StatusOr<tuning::ExperimentSpec> spec = tuning::AmpSpec(o, amp);
  if (!spec.ok()) return BadInput(spec.status());
  return Finish(output, Run(*spec, output));
}

// ---- batch -----------------------------------------------------------

// The batch flags, checked with the command before any probe runs (the
// experiment's spec as it would be if every size fit: its repeats and
// flags are refused now). Errors: InvalidArgument naming the flag.
absl::StatusOr<tuning::BatchOptions> BatchFlags(const tuning::TuneOptions& o) {
  tuning::BatchOptions b;
  b.min_batch = absl::GetFlag(FLAGS_min_batch);
  b.max_batch = absl::GetFlag(FLAGS_max_batch);
  b.base_batch = absl::GetFlag(FLAGS_base_batch);
  b.sizes = absl::GetFlag(FLAGS_sizes);
  b.lr_rule = absl::GetFlag(FLAGS_lr_rule);
  b.base_lr = absl::GetFlag(FLAGS_base_lr);
  b.budget_mb = absl::GetFlag(FLAGS_budget_mb);
  b.margin = absl::GetFlag(FLAGS_margin);
  b.serve = absl::GetFlag(FLAGS_serve);
  b.probe_args = absl::StrSplit(absl::GetFlag(FLAGS_probe_args), ' ', absl::SkipWhitespace());
  if (b.lr_rule != "none" && b.lr_rule != "linear" && b.lr_rule != "sqrt") {
    return absl::InvalidArgumentError(
        fmt::format("tune batch: --lr_rule={}: expected none, linear or sqrt", b.lr_rule));
  }
  if (b.min_batch < 1 || b.max_batch < b.min_batch || b.base_batch < 1 || b.sizes < 2 ||
      !(b.base_lr > 0) || b.budget_mb < 0 || !(b.margin >= 0 && b.margin < 1)) {
    return absl::InvalidArgumentError(
        "tune batch: need --min_batch >= 1, --max_batch >= --min_batch, --base_batch >= 1, "
        "--sizes >= 2, --base_lr > 0, --budget_mb >= 0 and 0 <= --margin < 1");
  }
  std::vector<std::string> required = {"batch"};
  if (b.lr_rule != "none") required.emplace_back("lr");
  std::vector<std::string> optional = {"lr", "memory_mb"};
  if (absl::Status s = tuning::CheckCommand(o, required, optional); !s.ok()) return s;
  if (!b.serve) {
    absl::StatusOr<tuning::ExperimentSpec> would_be =
        tuning::BatchSpec(o, b, b.base_batch << std::min(b.sizes - 1, 20), {});
    if (!would_be.ok()) return would_be.status();
  }
  return b;
}

// --serve_sizes, into b.serve_sizes. Errors: InvalidArgument.
absl::Status ReadServeSizes(tuning::BatchOptions* b) {
  absl::StatusOr<std::vector<int64_t>> sizes =
      Numbers("serve_sizes", absl::GetFlag(FLAGS_serve_sizes));
  if (!sizes.ok()) return sizes.status();
  b->serve_sizes = *sizes;
  for (int64_t n : b->serve_sizes) {
    if (n < 1) return absl::InvalidArgumentError("tune batch: --serve_sizes below 1");
  }
  return absl::OkStatus();
}

// The largest batch that fits: what the first run's probe found when
// resuming `output`, else the probe's answer now (each probe in
// `probes`). Errors: the record's, the probe's (Cancelled when stopped).
absl::StatusOr<int64_t> LargestBatch(const tuning::TuneOptions& o, const tuning::BatchOptions& b,
                                     const std::string& output,
                                     std::vector<tuning::BatchProbe>* probes) {
  int64_t largest = 0;
  if (absl::GetFlag(FLAGS_resume) && ground::ReadFileToString(output).ok()) {
    absl::StatusOr<tuning::ExperimentRecord> record = tuning::ReadExperiment(output);
    if (!record.ok()) return record.status();
    for (const auto& [key, value] : record->spec.notes) {
      if (key == "largest_batch_that_fits") (void)absl::SimpleAtoi(value, &largest);
    }
    std::fprintf(stderr, "resuming: the probe of %s found %lld\n", output.c_str(),
                 static_cast<long long>(largest));
    return largest;
  }
  std::fprintf(stderr, "tune batch: the largest {batch} that fits%s\n",
               b.budget_mb > 0 ? fmt::format(" {} MiB ({} MiB budget less a {:g}% margin)",
                                             static_cast<int64_t>(b.budget_mb * (1 - b.margin)),
                                             b.budget_mb, 100 * b.margin)
                                     .c_str()
                               : "");
  absl::StatusOr<int64_t> found =
      tuning::ProbeLargestBatch(o, b, tuning::OutputStem(output) + "-probes", probes, &g_tune_stop);
  if (!found.ok()) return found.status();
  std::fprintf(stderr, "  largest batch that fits: %lld\n", static_cast<long long>(*found));
  return found;
}

int TuneBatch(const tuning::TuneOptions& o, const std::string& output) {
  absl::StatusOr<tuning::BatchOptions> b = BatchFlags(o);
  if (!b.ok()) return BadInput(b.status());
  int64_t largest = 0;
  std::vector<tuning::BatchProbe> probes;
  if (b->serve) {
    if (absl::Status s = ReadServeSizes(&*b); !s.ok()) return BadInput(s);
  } else {
    absl::StatusOr<int64_t> found = LargestBatch(o, *b, output, &probes);
    if (!found.ok()) {
      if (found.status().code() == absl::StatusCode::kCancelled) return 130;
      return BadInput(found.status());
    }
    largest = *found;
  }
  absl::StatusOr<tuning::ExperimentSpec> spec = tuning::BatchSpec(o, *b, largest, probes);
  if (!spec.ok()) return BadInput(spec.status());
  if (!b->serve && absl::GetFlag(FLAGS_resume) && ground::ReadFileToString(output).ok()) {
    // The probes' note as recorded, so that the spec reads the same.
    absl::StatusOr<tuning::ExperimentRecord> record = tuning::ReadExperiment(output);
    if (record.ok()) spec->notes = record->spec.notes;
  }
  const Ran ran = Run(*spec, output);
  if (ran.result) std::fputs(tuning::BatchTable(*spec, *ran.result).c_str(), stderr);
  return Finish(output, ran);
}

// ---- loader ----------------------------------------------------------

// The loader flags. {pin} defaults to 0,1 where a CUDA device is and 0
// elsewhere (said when the command has {pin}). Errors: InvalidArgument
// naming the flag.
absl::StatusOr<tuning::LoaderOptions> LoaderFlags(const tuning::TuneOptions& o) {
  tuning::LoaderOptions l;
  absl::StatusOr<std::vector<int64_t>> workers = Numbers("workers", absl::GetFlag(FLAGS_workers));
  if (!workers.ok()) return workers.status();
  absl::StatusOr<std::vector<int64_t>> prefetch =
      Numbers("prefetch", absl::GetFlag(FLAGS_prefetch));
  if (!prefetch.ok()) return prefetch.status();
  l.workers.assign(workers->begin(), workers->end());
  l.prefetch.assign(prefetch->begin(), prefetch->end());
  std::string pin = absl::GetFlag(FLAGS_pin);
  if (pin.empty()) {
    const ground::CudaDevices cuda = ground::ProbeCudaDevices();
    pin = cuda.count > 0 ? "0,1" : "0";
    const std::vector<std::string> found = tuning::Placeholders(o.command);
    if (cuda.count == 0 && std::find(found.begin(), found.end(), "pin") != found.end()) {
      std::fprintf(stderr,
                   "tune loader: {pin} stays 0: pinned memory speeds only copies to a CUDA "
                   "device, and this machine has none (%s); --pin=0,1 sweeps it anyway\n",
                   cuda.status.c_str());
    }
  }
  absl::StatusOr<std::vector<int64_t>> pins = Numbers("pin", pin);
  if (!pins.ok()) return pins.status();
  l.pin.assign(pins->begin(), pins->end());
  l.objective = absl::GetFlag(FLAGS_objective);
  l.max_rss_mb = absl::GetFlag(FLAGS_max_rss_mb);
  return l;
}

// Writes the knee's JSON. Errors are said here: exit 1.
int WriteKnee(const std::string& path, const std::string& json) {
  if (absl::Status s = ground::WriteFileAtomically(path, json); !s.ok()) {
    std::fprintf(stderr, "trainscope: %s\n", std::string(s.message()).c_str());
    return kExitBadInput;
  }
  return kExitOk;
}

// The sweep again beside `coload`'s processes, into "<stem>-coload.json",
// and the verdict on the knee's move, into the knee's JSON.
int TuneUnderCoLoad(const tuning::ExperimentSpec& spec, const tuning::LoaderOptions& l,
                    const tuning::CoLoad& coload, const tuning::LoaderKnee& quiet_knee,
                    const std::string& output) {
  const std::string loaded_output = tuning::OutputStem(output) + "-coload.json";
  std::fprintf(stderr, "\nthe same sweep with %d busy processes and %d I/O processes beside it\n",
               coload.cpu, coload.io);
  tuning::ExperimentSpec loaded_spec = spec;
  loaded_spec.hypothesis += fmt::format(" (co-loaded: cpu={}, io={})", coload.cpu, coload.io);
  Ran loaded;
  {
    tuning::CoLoadProcesses processes(coload, tuning::OutputStem(output) + "-scratch");
    if (!processes.status().ok()) return BadInput(processes.status());
    loaded = Run(loaded_spec, loaded_output);
  }
  if (!loaded.result) return loaded.exit;
  const tuning::LoaderKnee loaded_knee = tuning::FindKnee(loaded_spec, *loaded.result, l);
  std::fputs(tuning::LoaderTable(loaded_spec, loaded_knee).c_str(), stderr);
  const int exit = Finish(loaded_output, loaded);
  if (exit != kExitOk) return exit;  // no verdict from a sweep cut short
  const std::string verdict = tuning::CoLoadVerdict(quiet_knee, loaded_knee, spec.objective);
  std::fprintf(stderr, "\nco-load: %s\n", verdict.c_str());
  const int written = WriteKnee(tuning::OutputStem(output) + "-knee.json",
                                tuning::KneeJson(spec, quiet_knee, &loaded_knee, verdict));
  return written != kExitOk ? written : exit;
}

int TuneLoader(const tuning::TuneOptions& o, const std::string& output) {
  absl::StatusOr<tuning::LoaderOptions> l = LoaderFlags(o);
  if (!l.ok()) return BadInput(l.status());
  absl::StatusOr<tuning::CoLoad> coload = tuning::ParseCoLoad(absl::GetFlag(FLAGS_coload));
  if (!coload.ok()) return BadInput(coload.status());
  absl::StatusOr<tuning::ExperimentSpec> spec = tuning::LoaderSpec(o, *l);
  if (!spec.ok()) return BadInput(spec.status());
  const Ran quiet = Run(*spec, output);
  if (!quiet.result) return quiet.exit;
  const tuning::LoaderKnee quiet_knee = tuning::FindKnee(*spec, *quiet.result, *l);
  std::fputs(tuning::LoaderTable(*spec, quiet_knee).c_str(), stderr);
  const int exit = Finish(output, quiet);
  if (exit != kExitOk) return exit;
  const int written = WriteKnee(tuning::OutputStem(output) + "-knee.json",
                                tuning::KneeJson(*spec, quiet_knee, nullptr, ""));
  if (written != kExitOk) return written;
  if (!coload->any()) return exit;
  return TuneUnderCoLoad(*spec, *l, *coload, quiet_knee, output);
}

}  // namespace

int RunTune(const std::vector<std::string>& args, const std::vector<std::string>& command,
            bool has_command) {
  if (args.size() != 1) return Usage("tune: name one of amp, batch or loader");
  tuning::TuneOptions o;
  o.subcommand = args[0];
  if (o.subcommand != "amp" && o.subcommand != "batch" && o.subcommand != "loader") {
    return Usage("tune " + o.subcommand + ": expected amp, batch or loader");
  }
  if (!has_command) {
    return Usage("tune " + o.subcommand + ": put the program to tune after --");
  }
  o.command = command;
  if (absl::Status s = ReadCommonFlags(&o); !s.ok()) return BadInput(s);
  absl::StatusOr<std::string> output = OutputPath(o);
  if (!output.ok()) return BadInput(output.status());
  StopOnSignals();
  if (o.subcommand == "amp") return TuneAmp(o, *output);
  if (o.subcommand == "batch") return TuneBatch(o, *output);
  return TuneLoader(o, *output);
}

}  // namespace trainscope::cli
