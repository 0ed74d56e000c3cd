// Tuning experiments: run an unchanged, trainscope-instrumented program as
// a baseline and variants, each trial a fresh process, interleaved in
// randomised blocks, and decide with verdict.h whether a variant reaches
// the required result sooner beyond the noise. `trainscope experiment run
// SPEC.json` is the command; docs/experiments.md the guide.
//
// SPEC (JSON; unknown keys are an error naming the key):
//   {"hypothesis": "bf16 autocast reaches eval_mse 0.1 sooner",
//    "command": ["build/bin/train_mlp", "--out={out}"],
//    "variants": [{"name": "fp32", "args": ["--amp=off"]},
//                 {"name": "bf16", "args": ["--amp=bf16"], "env": {"K": "V"}},
//                 {"name": "w4", "values": {"workers": "4"}}],
//    "repeats": 5, "objective": "time_to_target", "threshold": 0.02,
//    "trial_timeout_s": 600, "seed": 1, "sequential": false, "min_repeats": 3,
//    "level": 0.95, "resamples": 10000,
//    "rollback": {"failure_rate": 0, "p99_step_time": 0.05,
//                 "resource_hours_per_accepted": 0.02, "peak_memory": 0.1},
//    "curve": {"file": "loss.jsonl", "value": "loss", "window_steps": 10,
//              "widen": 0.5, "floor": 0.01, "max_outside": 0.2},
//    "notes": {"lr_rule": "linear (Goyal et al. 2017)"}}
// A variant's "values" fill placeholders of its own in the command and
// args ("{workers}" above; TrialArgv).
// `{out}` in the command or a variant's args becomes the trial's output
// directory, which the engine also passes as TRAINSCOPE_OUTPUT_DIR (Session
// honours it); `{repeat}` becomes the trial's round, from 0, the same for
// every variant (a seed: repeat k of each variant sees the same seed). The
// first variant is the baseline. With "curve", each trial's training curve
// is checked against the baseline's noise band (curves.h), and a variant
// whose curve leaves it is rolled back even when it is faster.
// Objectives (the table in objectives.h): time_to_target (report
// acceptance.time_to_target_s; lower is better), steady_samples_per_s
// (higher), median_step_ms (lower), and for serving runs latency_p50_ms,
// latency_p90_ms, latency_p99_ms (report serving, Session::RecordLatency;
// lower). "notes" are strings recorded with the spec (a rule the variants
// follow, its sources); they change nothing in how the experiment runs.
//
// A trial fails (MLPerf's rule: infinite time to target) when it exits
// non-zero, is killed by a signal or the per-trial timeout, writes no
// readable report, says in its report that it ran out of memory, or does
// not reach its quality target. A program that records no quality target
// under the time_to_target objective, or (with a curve check) writes no
// curve file, stops the experiment after its first such trial
// (RunExperiment's error says which call is missing).
//
// Memory: O(variants x repeats) trial records; a trial's steps file is
// streamed through a quantile sketch (its p99 step time), never held; with
// a curve check, O(variants x repeats x steps / curve.window_steps) window
// means while the verdict is made.
#ifndef TRAINSCOPE_SDK_TUNING_EXPERIMENT_H_
#define TRAINSCOPE_SDK_TUNING_EXPERIMENT_H_

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "sdk/tuning/curves.h"
#include "sdk/tuning/objectives.h"
#include "sdk/tuning/verdict.h"

namespace trainscope::tuning {

struct VariantSpec {
  std::string name;
  std::vector<std::string> args;                         // appended to the command
  std::vector<std::pair<std::string, std::string>> env;  // added to the environment
  // Placeholders of this variant: {"workers", "4"} puts 4 for every
  // "{workers}" in the command and the args (`trainscope tune` builds its
  // variants so). Names are identifiers; "out" and "repeat" are the
  // engine's own.
  std::vector<std::pair<std::string, std::string>> values;
};

struct ExperimentSpec {
  std::string hypothesis;
  std::vector<std::string> command;
  std::vector<VariantSpec> variants;  // [0] is the baseline
  int repeats = 5;                    // per variant (the budget when sequential)
  // Its name, direction and unit are the table's (objectives.h).
  ObjectiveId objective = ObjectiveId::kTimeToTarget;
  double threshold = 0.02;
  double trial_timeout_s = 600;
  uint64_t seed = 1;
  bool sequential = false;
  int min_repeats = 3;
  double level = 0.95;
  int resamples = 10000;
  RollbackLimits rollback;
  CurveSpec curve;                                         // curve.file "" = no curve check
  std::vector<std::pair<std::string, std::string>> notes;  // recorded, not interpreted

  bool lower_is_better() const { return ObjectiveInfo(objective).lower_is_better; }
};

// The trial's command line: spec.command, then the variant's args, each
// "{name}" of the variant's values replaced, "{out}" by `out` and
// "{repeat}" by `repeat` (a placeholder left unreplaced stays as written).
// The engine runs it; the preset keeps "{out}" (pass "{out}") and the first
// round's seed. Cost: O(length of the command line).
std::vector<std::string> TrialArgv(const ExperimentSpec& spec, const VariantSpec& variant,
                                   const std::string& out, int repeat);

// Parses and checks a spec. `where` names it in errors ("spec.json").
// Errors: InvalidArgument naming the key and what is wrong
// ("spec.json: variants[1].argz: unknown key"; "...: repeats: must be >= 1").
absl::StatusOr<ExperimentSpec> ParseSpec(std::string_view json, std::string_view where);

// Checks a spec made in code as ParseSpec checks a parsed one: a program
// and two variants or more, each number in its range, and enough repeats
// that the rank test can reach its level (statistics.h MinimumRepeats:
// with fewer, no variant could ever be accepted). RunExperiment calls it
// before any trial. Errors: InvalidArgument naming `where` and the key
// ("spec.json: repeats: 3 a variant can never be accepted: ... at least 4
// are needed"). Cost: O(repeats).
absl::Status CheckSpec(const ExperimentSpec& spec, std::string_view where);

// One trial. Optional metrics are empty when the report lacked them.
struct Trial {
  int order = 0;      // its place in the run order, from 0
  int round = 0;      // the randomised block it belongs to
  int variant = 0;    // index into spec.variants
  int exit_code = 0;  // 128 + N when killed by signal N
  bool timed_out = false;
  bool failed = false;
  std::string failure;  // why it failed, a phrase; "" if it did not
  // The program said it ran out of memory (its report's failure, from
  // Session::RecordOutOfMemory): what `trainscope tune batch`'s probe reads.
  bool out_of_memory = false;
  std::optional<double> time_to_target_s, steady_samples_per_s, median_step_ms, p99_step_ms,
      idle_share, resource_hours, peak_memory_bytes;
  // A serving run's request latencies (report serving) and their rate.
  std::optional<double> latency_p50_ms, latency_p90_ms, latency_p99_ms, requests_per_s;
  std::string idle_top_cause;
  // The share of step time spent waiting for input (the report's data_wait
  // phase), and the CPU seconds the trial's process used (user + system,
  // with the children it waited for): what the loader tuner weighs.
  std::optional<double> data_wait_share, cpu_s;
  double wall_s = 0;
  // Covariates that explain noise: the CPU's, read just before the trial
  // started; the GPUs' through NVML (gpu_covariates.h), sampled at its start
  // and every 0.5 s while it ran: the lowest SM clock, the highest
  // temperature, and the clock-event reasons seen (names, "" for none).
  // Empty when NVML is unavailable.
  std::optional<double> cpu_mhz, load_1m;
  std::optional<double> gpu_sm_clock_mhz_min, gpu_temperature_c_max;
  std::optional<std::string> gpu_clock_events;
  std::string output_dir;
  // Its training curve (spec.curve): lines read, -1 when none was readable;
  // non-finite values; skipped optimizer steps.
  int64_t curve_points = -1, curve_nonfinite = 0, curve_skipped = 0;
};

// Where a result was measured, from a trial's report.json: a preset that
// carries it says for which workload it holds (the guide: "a reusable
// preset should carry a known workload boundary").
struct Workload {
  std::string model;  // report run.name
  std::string code_version, data_version, host;
  std::string accelerator;
  int accelerator_count = 0;
  int world_size = 1;
  std::string cpu_model, os, container_image, trainscope_version;
  std::string batch_size;  // config "batch_size", "" if the program did not say
  std::string quality_metric;
  std::optional<double> quality_target;
  bool higher_is_better = false;
  std::vector<std::pair<std::string, std::string>> config;  // the report's, whole
};

// The configuration to keep, with the experiment that justified it: the
// accepted variant, or the baseline when none was.
struct Preset {
  std::string variant;
  bool changed = false;           // a variant was accepted over the baseline
  std::string justified_by;       // the verdict's reason
  std::vector<std::string> argv;  // command and args; {out} kept
  std::vector<std::pair<std::string, std::string>> env;
  std::optional<Workload> workload;  // empty if no trial of it succeeded
  std::string polyaxon;              // the same as a Polyaxon preset (YAML)
};

struct ExperimentResult {
  std::vector<Trial> trials;  // in run order
  Verdict verdict;
  bool complete = false;             // false: interrupted (or a resumable error)
  std::optional<Workload> baseline;  // the environment: the baseline's first successful trial
  Preset preset;
  std::vector<CurveCheck> curves;  // per variant when spec.curve is set
  std::string gpu_covariates;      // GpuCovariates::status() of this run
};

// The workload of variant `v`'s first successful trial, from its
// report.json; none when no trial of it succeeded or no report reads.
std::optional<Workload> WorkloadOf(const std::vector<Trial>& trials, int v);

// The preset for `verdict`, from the trials' reports.
Preset MakePreset(const ExperimentSpec& spec, const std::vector<Trial>& trials,
                  const Verdict& verdict);
// The Polyaxon preset fragment for `preset` (kind: operation, isPreset:
// true, runPatch.container command/args/env; {out} becomes
// {{ globals.run_outputs_path }}).
std::string PolyaxonPreset(const ExperimentSpec& spec, const Preset& preset);

// `output` without its ".json": the stem of the files beside it
// ("<stem>-trials/", and `trainscope tune`'s "<stem>-knee.json",
// "<stem>-coload.json"). Cost: a copy.
std::string OutputStem(const std::string& output);

struct RunOptions {
  std::string output = "experiment.json";
  std::string trials_dir;   // "" -> OutputStem(output) + "-trials"
  FILE* progress = stderr;  // a line per trial and the final table; nullptr: quiet
  // Checked between trials and while one runs (then it is killed): set it
  // from a SIGINT/SIGTERM handler.
  const std::atomic<bool>* stop = nullptr;
  // Trials of an interrupted run of the same spec (ReadExperimentTrials):
  // the schedule skips them and goes on where it stopped (--resume).
  std::vector<Trial> done;
};

// The trials recorded in an experiment.json written for `spec`, in run
// order. Errors: InvalidArgument naming `where` when it is not an
// experiment of this spec (another hypothesis, command or variants) or a
// field is malformed; the read error naming the path.
absl::StatusOr<std::vector<Trial>> ReadExperimentTrials(const std::string& path,
                                                        const ExperimentSpec& spec);

// An experiment.json read back whole (`trainscope compare`).
struct ExperimentRecord {
  // The spec as recorded: hypothesis, command, variants, objective, the
  // verdict's options and the curve check.
  ExperimentSpec spec;
  std::vector<Trial> trials;  // in run order
  std::optional<std::string> accepted;
  std::string reason;
  bool complete = false;
  // The environment (the baseline record), flattened: "accelerator",
  // "quality.target", "config.batch_size"; values as text.
  std::vector<std::pair<std::string, std::string>> environment;
};

// Reads an experiment.json. Errors: the read error naming the path;
// InvalidArgument naming the path and field when it is not an
// experiment.json of schema_version 1 or a field is malformed.
absl::StatusOr<ExperimentRecord> ReadExperiment(const std::string& path);

// How a process run by RunLogged ended.
struct ProcessExit {
  int code = 0;      // its exit status; 128 + N when killed by signal N
  double cpu_s = 0;  // user + system CPU seconds, with the children it waited for
  bool timed_out = false;
  bool stopped = false;  // killed because `stop` was set
  std::string error;     // it could not start (the log, fork): why; "" otherwise
};

// Runs argv (argv[0] looked up on PATH) with `env` added to this process's
// environment, stdin from /dev/null and stdout and stderr to `log`, in its
// own process group, and waits; kills the group at `timeout_s` or when
// `stop` is set. `sample` (if any) runs as it starts and every 0.5 s while it
// runs. How experiment trials run; harnesses use it for their own
// processes. Cost: a fork and a 10 ms polling wait.
ProcessExit RunLogged(const std::vector<std::string>& argv,
                      const std::vector<std::pair<std::string, std::string>>& env,
                      const std::string& log, double timeout_s,
                      const std::atomic<bool>* stop = nullptr,
                      const std::function<void()>& sample = nullptr);

// Runs the experiment and writes OUTPUT (also when stopped: marked
// incomplete). Errors: InvalidArgument from CheckSpec, before any trial;
// FailedPrecondition after the first trial whose report has no quality
// target when the objective is time_to_target (the program lacks
// Session::SetQualityTarget), or after the first successful trial without
// the spec's curve file (Session::RecordLoss); OUTPUT keeps the trials
// before it (not that one, which a --resume after the fix runs again),
// marked incomplete;
// the first trial's output directory or OUTPUT cannot be written (naming
// it). Otherwise a trial's own failure is never an error.
absl::StatusOr<ExperimentResult> RunExperiment(const ExperimentSpec& spec,
                                               const RunOptions& options);

// The trials' outcomes as the verdict reads them, per variant.
std::vector<VariantOutcomes> Outcomes(const ExperimentSpec& spec, const std::vector<Trial>& trials);

// Each trial's curve as read, by its output directory (nullopt: none
// readable), so that a run checking after every trial reads each file
// once. Memory: the window means, O(trials x steps / window_steps).
using CurveCache = std::unordered_map<std::string, std::optional<TrialCurve>>;

// Reads every trial's curve file (spec.curve), sets the trials' curve
// counts, checks the variants against the baseline's band and adds a veto
// to each flagged variant's outcomes. A trial without a readable curve is
// left out of the check (its curve_points stay -1). Cost: one pass over
// each curve file not yet in `cache` (when given; it keeps what was read).
std::vector<CurveCheck> CheckTrialCurves(const ExperimentSpec& spec, std::vector<Trial>* trials,
                                         std::vector<VariantOutcomes>* outcomes,
                                         CurveCache* cache = nullptr);
// The verdict's options from the spec.
VerdictOptions VerdictOptionsOf(const ExperimentSpec& spec);

// experiment.json (docs/experiments.md; schema_version 1).
std::string ExperimentJson(const ExperimentSpec& spec, const ExperimentResult& result);

// The table per variant and the reason, as printed at the end.
std::string ExperimentTable(const ExperimentSpec& spec, const ExperimentResult& result);

}  // namespace trainscope::tuning

#endif  // TRAINSCOPE_SDK_TUNING_EXPERIMENT_H_
