// The experiment engine: trials in fresh processes, in randomised blocks,
// assessed from their reports. See experiment.h. The spec is parsed in
// experiment_spec.cc, experiment.json written and read in
// experiment_json.cc, the preset made in preset.cc.
#include "sdk/tuning/experiment.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <thread>

#include "fmt/format.h"
#include "sdk/analysis/quantile_sketch.h"
#include "sdk/export/report_json.h"
#include "sdk/export/steps_file.h"
#include "sdk/ground/files.h"
#include "sdk/tuning/gpu_covariates.h"
#include "sdk/tuning/objectives.h"
#include "sdk/tuning/statistics.h"

extern char** environ;

namespace trainscope::tuning {
namespace {

std::string TrialsDir(const RunOptions& options) {
  if (!options.trials_dir.empty()) return options.trials_dir;
  return OutputStem(options.output) + "-trials";
}

// The randomised blocks: round r runs every variant once, in an order
// drawn from the seed.
std::vector<int> RoundOrder(const ExperimentSpec& spec, int round) {
  std::vector<int> order(spec.variants.size());
  std::iota(order.begin(), order.end(), 0);
  std::seed_seq seeds{static_cast<uint32_t>(spec.seed), static_cast<uint32_t>(spec.seed >> 32),
                      static_cast<uint32_t>(round)};
  std::mt19937_64 rng(seeds);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

std::optional<double> ReadCpuMhz() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  double sum = 0;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.rfind("cpu MHz", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    sum += std::strtod(line.c_str() + colon + 1, nullptr);
    ++n;
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

std::optional<double> ReadLoad() {
  std::ifstream in("/proc/loadavg");
  double load = 0;
  if (in >> load) return load;
  return std::nullopt;
}

}  // namespace

ProcessExit RunLogged(const std::vector<std::string>& argv,
                      const std::vector<std::pair<std::string, std::string>>& env,
                      const std::string& log, double timeout_s, const std::atomic<bool>* stop,
                      const std::function<void()>& sample) {
  ProcessExit exit;
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('='));
    const bool replaced =
        std::any_of(env.begin(), env.end(), [&](const auto& kv) { return kv.first == name; });
    if (!replaced) env_strings.emplace_back(entry);
  }
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (std::string& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);
  const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    exit.error = fmt::format("cannot create {}: {}", log, std::strerror(errno));
    return exit;
  }
  const auto started = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    exit.error = fmt::format("fork failed: {}", std::strerror(errno));
    return exit;
  }
  if (pid == 0) {
    setpgid(0, 0);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    execvpe(args[0], args.data(), envp.data());
    const std::string message =
        fmt::format("trainscope experiment: cannot run {}: {}\n", args[0], std::strerror(errno));
    (void)!write(STDERR_FILENO, message.data(), message.size());
    _exit(127);
  }
  close(log_fd);
  setpgid(pid, pid);  // also here: no race with the kill below
  int status = 0;
  struct rusage usage = {};
  double next_sample = 0;
  while (true) {
    const pid_t done = wait4(pid, &status, WNOHANG, &usage);
    if (done == pid) break;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (sample && elapsed >= next_sample) {
      sample();
      next_sample = elapsed + 0.5;
    }
    const bool stopping = stop != nullptr && stop->load();
    if (elapsed > timeout_s || stopping) {
      exit.timed_out = !stopping;
      exit.stopped = stopping;
      kill(-pid, SIGKILL);
      wait4(pid, &status, 0, &usage);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  exit.code = WIFEXITED(status) ? WEXITSTATUS(status)
                                : (WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 255);
  exit.cpu_s = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
               static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  return exit;
}

namespace {

// The p99 step time of a steps file, streamed (constant memory).
std::optional<double> StepP99(const std::string& steps_path) {
  std::ifstream in(steps_path);
  if (!in) return std::nullopt;
  analysis::QuantileSketch sketch;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    absl::StatusOr<Report::Step> row = exporter::ParseStepRow(line, steps_path);
    if (row.ok()) sketch.Add(row->duration_ms);
  }
  if (sketch.count() == 0) return std::nullopt;
  return sketch.Percentile(99);
}

// Replaces every `placeholder` in `arg` with `value`.
void Substitute(std::string* arg, std::string_view placeholder, const std::string& value) {
  for (size_t at = arg->find(placeholder); at != std::string::npos;
       at = arg->find(placeholder, at + value.size())) {
    arg->replace(at, placeholder.size(), value);
  }
}

}  // namespace

std::vector<std::string> TrialArgv(const ExperimentSpec& spec, const VariantSpec& variant,
                                   const std::string& out, int repeat) {
  std::vector<std::string> argv = spec.command;
  argv.insert(argv.end(), variant.args.begin(), variant.args.end());
  for (std::string& a : argv) {
    for (const auto& [name, value] : variant.values) Substitute(&a, "{" + name + "}", value);
    Substitute(&a, "{out}", out);
    Substitute(&a, "{repeat}", std::to_string(repeat));
  }
  return argv;
}

namespace {

constexpr char kNoQualityTarget[] =
    "no quality target recorded (Session::SetQualityTarget before the first "
    "Session::RecordQuality)";

// Reads the trial's report and decides whether it failed.
void Assess(const ExperimentSpec& spec, const ProcessExit& exit, Trial* t) {
  t->exit_code = exit.code;
  t->timed_out = exit.timed_out;
  t->cpu_s = exit.cpu_s;
  const std::string report_path = t->output_dir + "/report.json";
  absl::StatusOr<Report> report = exporter::ReadReportFile(report_path);
  if (report.ok()) {
    const Report& r = *report;
    t->time_to_target_s = r.acceptance.time_to_target_s;
    if (r.throughput.steady_steps > 0) {
      t->steady_samples_per_s = r.throughput.steady_samples_per_s;
      t->median_step_ms = r.throughput.median_step_ms;
    }
    t->idle_share = r.idle.share;
    t->idle_top_cause = r.idle.top_cause;
    for (const PhaseStat& p : r.phases) {
      if (p.phase == "data_wait") t->data_wait_share = p.share_of_steps;
    }
    if (!t->data_wait_share && r.throughput.steady_steps > 0) t->data_wait_share = 0;
    t->resource_hours = r.resource_hours;
    if (r.memory.peak_bytes >= 0) t->peak_memory_bytes = static_cast<double>(r.memory.peak_bytes);
    if (r.serving) {
      t->latency_p50_ms = r.serving->p50_ms;
      t->latency_p90_ms = r.serving->p90_ms;
      t->latency_p99_ms = r.serving->p99_ms;
      t->requests_per_s = r.serving->requests_per_s;
    }
    t->p99_step_ms = StepP99(exporter::StepsFileForReport(report_path));
    t->out_of_memory = r.failure && r.failure->kind == "out_of_memory";
  }
  if (!exit.error.empty()) {
    t->failure = exit.error;
  } else if (t->out_of_memory) {
    t->failure = fmt::format("out of memory: {}", report->failure->message);
  } else if (exit.timed_out) {
    t->failure = fmt::format("timed out after {:g} s", spec.trial_timeout_s);
  } else if (exit.code != 0) {
    t->failure = exit.code > 128 ? fmt::format("killed by signal {}", exit.code - 128)
                                 : fmt::format("exit code {}", exit.code);
  } else if (!report.ok()) {
    t->failure = fmt::format("no readable report: {}", std::string(report.status().message()));
  } else if (report->acceptance.passed == false ||
             (spec.objective == ObjectiveId::kTimeToTarget && !t->time_to_target_s)) {
    t->failure = !report->acceptance.target
                     ? std::string(kNoQualityTarget)
                     : fmt::format("did not reach {} {} {:g}", report->acceptance.metric,
                                   report->acceptance.higher_is_better ? ">=" : "<=",
                                   report->acceptance.target.value_or(NAN));
  } else if (!ObjectiveValue(spec.objective, *t)) {
    t->failure = fmt::format("the report has no {}", ObjectiveInfo(spec.objective).name);
  }
  t->failed = !t->failure.empty();
}

std::string Seconds(double s) {
  if (s >= 3600)
    return fmt::format("{}h{:02d}m", static_cast<int>(s / 3600),
                       static_cast<int>(std::fmod(s, 3600) / 60));
  if (s >= 60)
    return fmt::format("{}m{:02d}s", static_cast<int>(s / 60), static_cast<int>(std::fmod(s, 60)));
  return fmt::format("{:.1f}s", s);
}

}  // namespace

VerdictOptions VerdictOptionsOf(const ExperimentSpec& spec) {
  VerdictOptions o;
  o.lower_is_better = spec.lower_is_better();
  o.threshold = spec.threshold;
  o.level = spec.level;
  o.resamples = spec.resamples;
  o.seed = spec.seed;
  o.rollback = spec.rollback;
  const Objective& objective = ObjectiveInfo(spec.objective);
  o.objective_name = objective.label;
  // A request latency's tail is the requests' p99, not the batches' (a
  // larger batch takes longer by design).
  if (objective.serving) o.tail_name = "the p99 latency";
  return o;
}

std::vector<VariantOutcomes> Outcomes(const ExperimentSpec& spec,
                                      const std::vector<Trial>& trials) {
  const bool serving = ObjectiveInfo(spec.objective).serving;
  std::vector<VariantOutcomes> out;
  for (const VariantSpec& v : spec.variants) out.push_back({v.name, {}, {}});
  for (const Trial& t : trials) {
    TrialOutcome o;
    o.failed = t.failed;
    o.objective = ObjectiveValue(spec.objective, t).value_or(0);
    o.p99_step_ms = (serving ? t.latency_p99_ms : t.p99_step_ms).value_or(NAN);
    o.resource_hours = t.resource_hours.value_or(NAN);
    o.peak_memory_bytes = t.peak_memory_bytes.value_or(NAN);
    out[static_cast<size_t>(t.variant)].trials.push_back(o);
  }
  return out;
}

std::vector<CurveCheck> CheckTrialCurves(const ExperimentSpec& spec, std::vector<Trial>* trials,
                                         std::vector<VariantOutcomes>* outcomes,
                                         CurveCache* cache) {
  if (spec.curve.file.empty()) return {};
  std::vector<std::vector<TrialCurve>> curves(spec.variants.size());
  for (Trial& t : *trials) {
    std::optional<TrialCurve> read;
    auto cached = cache != nullptr ? cache->find(t.output_dir) : CurveCache::iterator();
    if (cache != nullptr && cached != cache->end()) {
      read = cached->second;
    } else {
      absl::StatusOr<TrialCurve> curve =
          ReadCurve(t.output_dir + "/" + spec.curve.file, spec.curve);
      if (curve.ok()) read = *std::move(curve);
      if (cache != nullptr) cache->emplace(t.output_dir, read);
    }
    if (!read) {
      t.curve_points = -1;
      continue;
    }
    t.curve_points = read->points;
    t.curve_nonfinite = read->nonfinite;
    t.curve_skipped = read->skipped;
    curves[static_cast<size_t>(t.variant)].push_back(*std::move(read));
  }
  std::vector<std::string> names;
  for (const VariantSpec& v : spec.variants) names.push_back(v.name);
  std::vector<CurveCheck> checks = CheckCurves(names, curves, spec.curve);
  for (size_t v = 0; v < checks.size() && v < outcomes->size(); ++v) {
    if (checks[v].flagged) (*outcomes)[v].vetoes.push_back(checks[v].phrase);
  }
  return checks;
}

namespace {

// What every stage of a run reads.
struct RunContext {
  const ExperimentSpec& spec;
  const RunOptions& options;
  const GpuCovariates& gpu;
  std::string trials_dir;
  VerdictOptions verdict;
  std::chrono::steady_clock::time_point started;
};

// The record so far: the trials' curves checked, the verdict on them, the
// baseline's environment and the preset, written to OUTPUT. Errors: the
// write's, naming OUTPUT.
absl::Status WriteRecord(const RunContext& run, CurveCache* curves, ExperimentResult* result) {
  std::vector<VariantOutcomes> outcomes = Outcomes(run.spec, result->trials);
  result->curves = CheckTrialCurves(run.spec, &result->trials, &outcomes, curves);
  result->verdict = Decide(outcomes, run.verdict);
  if (!result->baseline) result->baseline = WorkloadOf(result->trials, 0);
  result->preset = MakePreset(run.spec, result->trials, result->verdict);
  return ground::WriteFileAtomically(run.options.output, ExperimentJson(run.spec, *result));
}

// Runs the trial `order` of `variant` in `round` in its own directory,
// with the covariates sampled, and assesses it. Empty when `stop`
// interrupted it (it is not counted). Errors: its directory cannot be
// made (naming it).
absl::StatusOr<std::optional<Trial>> RunTrial(const RunContext& run, int round, int variant,
                                              int order) {
  const ExperimentSpec& spec = run.spec;
  Trial t;
  t.order = order;
  t.round = round;
  t.variant = variant;
  const VariantSpec& v = spec.variants[static_cast<size_t>(variant)];
  t.output_dir = fmt::format("{}/{:03d}-{}", run.trials_dir, t.order, v.name);
  if (absl::Status s = ground::EnsureWritableDirectory(t.output_dir); !s.ok()) return s;
  // A directory an earlier experiment left (the same -o, no --resume):
  // its outputs must not stand in for this trial's.
  for (const std::string& stale :
       {std::string("report.json"), std::string("steps.jsonl"), spec.curve.file}) {
    if (!stale.empty()) unlink((t.output_dir + "/" + stale).c_str());
  }
  const std::vector<std::string> argv = TrialArgv(spec, v, t.output_dir, round);
  std::vector<std::pair<std::string, std::string>> env = v.env;
  env.emplace_back("TRAINSCOPE_OUTPUT_DIR", t.output_dir);
  t.cpu_mhz = ReadCpuMhz();
  t.load_1m = ReadLoad();
  GpuTrialSample gpu_sample;
  std::function<void()> sample_gpu;
  if (run.gpu.available()) sample_gpu = [&] { run.gpu.Sample(&gpu_sample); };
  const auto trial_start = std::chrono::steady_clock::now();
  const ProcessExit exit = RunLogged(argv, env, t.output_dir + "/trial.log", spec.trial_timeout_s,
                                     run.options.stop, sample_gpu);
  if (gpu_sample.samples > 0) {
    t.gpu_sm_clock_mhz_min = gpu_sample.sm_clock_mhz_min;
    t.gpu_temperature_c_max = gpu_sample.temperature_c_max;
    t.gpu_clock_events = ClockEventReasonNames(gpu_sample.reasons);
  }
  t.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - trial_start).count();
  if (exit.stopped) return std::optional<Trial>();
  Assess(spec, exit, &t);
  return std::optional<Trial>(std::move(t));
}

// A program that breaks the trial contract, said after its first trial
// (which is not recorded: a --resume after the fix runs it again):
// FailedPrecondition saying which call is missing; OK when it keeps it.
absl::Status BrokenContract(const ExperimentSpec& spec, const Trial& t) {
  if (!t.failed && !spec.curve.file.empty() &&
      access((t.output_dir + "/" + spec.curve.file).c_str(), F_OK) != 0) {
    return absl::FailedPreconditionError(fmt::format(
        "{} ran, and wrote no {}: the curve check needs the training curve, so the program "
        "must call Session::RecordLoss(step, loss) at each step (docs/experiments.md, \"The "
        "trial contract\"; its log: {}/trial.log)",
        t.output_dir, spec.curve.file, t.output_dir));
  }
  if (t.failure == kNoQualityTarget) {
    // Every trial would fail the same way: say so now, not after all.
    return absl::FailedPreconditionError(fmt::format(
        "{} ran, and its report has no quality target, so no trial can reach one: the "
        "program must call Session::SetQualityTarget(metric, target, higher_is_better) and "
        "then Session::RecordQuality(metric, value) at each evaluation (docs/experiments.md, "
        "\"The trial contract\"; its log: {}/trial.log)",
        t.output_dir, t.output_dir));
  }
  return absl::OkStatus();
}

// The progress line of trial `t`, the `done`th of `planned`.
void PrintTrial(const RunContext& run, const Trial& t, int done, int planned) {
  const ExperimentSpec& spec = run.spec;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - run.started).count();
  const int here = done - static_cast<int>(run.options.done.size());  // run by this process
  std::string gpu_text;
  if (t.gpu_sm_clock_mhz_min || t.gpu_temperature_c_max) {
    gpu_text =
        fmt::format("  [GPU: SM clock min {:.0f} MHz, max {:.0f} C{}{}]",
                    t.gpu_sm_clock_mhz_min.value_or(NAN), t.gpu_temperature_c_max.value_or(NAN),
                    t.gpu_clock_events->empty() ? "" : ", ", *t.gpu_clock_events);
  }
  std::fprintf(run.options.progress, "trial %d of %d  %-12s %s  (%.1f s wall)  ~%s left%s\n", done,
               planned, spec.variants[static_cast<size_t>(t.variant)].name.c_str(),
               t.failed ? fmt::format("FAILED: {}", t.failure).c_str()
                        : ObjectiveText(spec.objective, ObjectiveValue(spec.objective, t)).c_str(),
               t.wall_s, Seconds(elapsed / here * (planned - done)).c_str(), gpu_text.c_str());
  std::fflush(run.options.progress);
}

// A sequential design's interim look after `round`: whether the answer is
// already clear (then it says so).
bool DecidedEarly(const RunContext& run, const std::vector<Trial>& trials, int round) {
  SequentialOptions sequential;
  sequential.min_repeats = run.spec.min_repeats;
  sequential.max_repeats = run.spec.repeats;
  if (ShouldContinue(Outcomes(run.spec, trials), run.verdict, sequential) !=
      Continue::kStopDecided) {
    return false;
  }
  if (run.options.progress != nullptr) {
    std::fprintf(run.options.progress, "sequential: the answer is clear after %d rounds\n",
                 round + 1);
  }
  return true;
}

// Runs the schedule's trials that are not done yet (options.done holds
// the first), in randomised blocks, writing the record after each.
// Returns whether `stop` ended it. Errors: BrokenContract's, after the
// record of the trials before it is written; a directory or OUTPUT that
// cannot be written.
absl::StatusOr<bool> RunSchedule(const RunContext& run, CurveCache* curves,
                                 ExperimentResult* result) {
  const ExperimentSpec& spec = run.spec;
  const RunOptions& options = run.options;
  const int planned = spec.repeats * static_cast<int>(spec.variants.size());
  size_t slot = 0;  // the schedule's position; resumed trials take the first
  for (int round = 0; round < spec.repeats; ++round) {
    bool ran = false;  // a trial of this round ran here, not only read back (--resume)
    for (int variant : RoundOrder(spec, round)) {
      if (slot++ < options.done.size()) continue;
      ran = true;
      if (options.stop != nullptr && options.stop->load()) return true;
      absl::StatusOr<std::optional<Trial>> t =
          RunTrial(run, round, variant, static_cast<int>(result->trials.size()));
      if (!t.ok()) return t.status();
      if (!t->has_value()) return true;  // stopped: the interrupted trial is not counted
      if (absl::Status broken = BrokenContract(spec, **t); !broken.ok()) {
        result->complete = false;
        if (absl::Status s = WriteRecord(run, curves, result); !s.ok()) return s;
        return broken;
      }
      result->trials.push_back(**t);
      if (options.progress != nullptr) {
        PrintTrial(run, **t, static_cast<int>(result->trials.size()), planned);
      }
      if (absl::Status s = WriteRecord(run, curves, result); !s.ok()) return s;
    }
    // Only after a round this process ran: the rounds read back hold
    // trials of later rounds too, and would be judged unbalanced.
    if (ran && spec.sequential && DecidedEarly(run, result->trials, round)) break;
  }
  return false;
}

}  // namespace

absl::StatusOr<ExperimentResult> RunExperiment(const ExperimentSpec& spec,
                                               const RunOptions& options) {
  if (absl::Status s = CheckSpec(spec, "the experiment's spec"); !s.ok()) return s;
  const std::string trials_dir = TrialsDir(options);
  if (absl::Status s = ground::EnsureWritableDirectory(trials_dir); !s.ok()) return s;
  const GpuCovariates gpu;
  ExperimentResult result;
  result.gpu_covariates = gpu.status();
  if (options.progress != nullptr) {
    std::fprintf(options.progress, "GPU covariates: %s\n", gpu.status().c_str());
  }
  const RunContext run{
      spec, options, gpu, trials_dir, VerdictOptionsOf(spec), std::chrono::steady_clock::now()};
  result.trials = options.done;
  std::sort(result.trials.begin(), result.trials.end(),
            [](const Trial& a, const Trial& b) { return a.order < b.order; });
  CurveCache curves;  // each finished trial's curve, read once
  absl::StatusOr<bool> stopped = RunSchedule(run, &curves, &result);
  if (!stopped.ok()) return stopped.status();
  result.complete = !*stopped;
  if (absl::Status s = WriteRecord(run, &curves, &result); !s.ok()) return s;
  if (options.progress != nullptr) {
    std::fputs(ExperimentTable(spec, result).c_str(), options.progress);
    std::fflush(options.progress);
  }
  return result;
}

std::string ExperimentTable(const ExperimentSpec& spec, const ExperimentResult& result) {
  const std::vector<VariantOutcomes> outcomes = Outcomes(spec, result.trials);
  std::string out = fmt::format("\n{:<14} {:>7} {:>16} {:>22} {:>9}  {}\n", "variant", "trials",
                                "median", "ratio [interval]", "failures", "verdict");
  for (size_t v = 0; v < outcomes.size(); ++v) {
    std::vector<double> ok;
    for (const Trial& t : result.trials) {
      if (t.variant == static_cast<int>(v) && !t.failed) {
        if (std::optional<double> value = ObjectiveValue(spec.objective, t)) ok.push_back(*value);
      }
    }
    const std::optional<double> median =
        ok.empty() ? std::nullopt : std::optional<double>(Median(ok));
    std::string ratio = "baseline", verdict = "";
    if (v > 0 && v - 1 < result.verdict.comparisons.size()) {
      const Comparison& c = result.verdict.comparisons[v - 1];
      ratio = fmt::format("{:.3f} [{:.3f}, {:.3f}]", c.ratio, c.ci_low, c.ci_high);
      verdict = c.accepted                                     ? "accepted"
                : (c.clears_threshold && !c.rollbacks.empty()) ? "rolled back"
                                                               : "not accepted";
    }
    int failures = 0;
    for (const TrialOutcome& t : outcomes[v].trials) failures += t.failed;
    out += fmt::format("{:<14} {:>7} {:>16} {:>22} {:>9}  {}\n", outcomes[v].name,
                       outcomes[v].trials.size(), ObjectiveText(spec.objective, median), ratio,
                       fmt::format("{}/{}", failures, outcomes[v].trials.size()), verdict);
  }
  if (!result.curves.empty()) {
    out += fmt::format(
        "\n{} curves (window {} steps; band: the {} trials' range, widened {:g}x):\n",
        spec.curve.value, spec.curve.window_steps, spec.variants[0].name, spec.curve.widen);
    for (const CurveCheck& c : result.curves) {
      const std::string where = &c == &result.curves.front()
                                    ? std::string("the band")
                                    : fmt::format("{} of {} windows outside{}", c.outside,
                                                  c.windows, c.flagged ? " - FLAGGED" : "");
      out += fmt::format("  {:<14} {} trials, {}; {} non-finite values, {} skipped steps\n",
                         c.variant, c.trials, where, c.nonfinite, c.skipped);
    }
  }
  out += fmt::format("\n{}{}\n",
                     result.complete ? "" : "INCOMPLETE (interrupted): ", result.verdict.reason);
  return out;
}

std::string OutputStem(const std::string& output) {
  const bool json = output.size() > 5 && output.compare(output.size() - 5, 5, ".json") == 0;
  return json ? output.substr(0, output.size() - 5) : output;
}

}  // namespace trainscope::tuning
