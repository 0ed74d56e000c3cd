// `trainscope tune`: experiments built from the user's own command. See
// tune.h; the co-load processes and the knee are at the end.
#include "sdk/tuning/tune.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "fmt/format.h"
#include "sdk/export/report_json.h"
#include "sdk/ground/files.h"
#include "sdk/ground/json_fields.h"
#include "sdk/ground/json_writer.h"
#include "sdk/tuning/objectives.h"
#include "sdk/tuning/statistics.h"

namespace trainscope::tuning {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

absl::Status Bad(const TuneOptions& o, const std::string& what) {
  return absl::InvalidArgumentError(fmt::format("tune {}: {}", o.subcommand, what));
}

bool IdentifierChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

std::string Braced(const std::string& name) { return "{" + name + "}"; }

// argv[0] as execvp would find it: itself when it has a '/', else the
// first PATH entry holding it. "" when none does.
std::string FindProgram(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    const std::string candidate =
        (dir.empty() ? std::string(".") : std::string(dir)) + "/" + program;
    struct stat st = {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;  // as execvp chooses: the first executable file
    }
  }
  return "";
}

// The spec's defaults that every subcommand shares.
ExperimentSpec BaseSpec(const TuneOptions& o) {
  ExperimentSpec spec;
  spec.command = o.command;
  spec.trial_timeout_s = o.trial_timeout_s;
  spec.threshold = o.threshold;
  spec.seed = o.seed;
  return spec;
}

// The repeats: the user's, or the fewest that can accept among `variants`
// (at least `floor`).
int Repeats(const TuneOptions& o, size_t variants, int floor) {
  if (o.repeats > 0) return o.repeats;
  return std::max(floor, MinimumRepeats(static_cast<int>(variants) - 1, VerdictOptions().alpha));
}

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : i + 1 < names.size() ? ", " : " and ") + Braced(names[i]);
  }
  return out;
}

}  // namespace

std::vector<std::string> Placeholders(const std::vector<std::string>& command) {
  std::vector<std::string> found;
  for (const std::string& arg : command) {
    for (size_t open = arg.find('{'); open != std::string::npos; open = arg.find('{', open + 1)) {
      size_t end = open + 1;
      while (end < arg.size() && IdentifierChar(arg[end])) ++end;
      if (end == open + 1 || end >= arg.size() || arg[end] != '}') continue;
      std::string name = arg.substr(open + 1, end - open - 1);
      if (name[0] >= '0' && name[0] <= '9') continue;
      if (std::find(found.begin(), found.end(), name) == found.end()) found.push_back(name);
    }
  }
  return found;
}

absl::Status CheckCommand(const TuneOptions& o, const std::vector<std::string>& required,
                          const std::vector<std::string>& optional) {
  std::vector<std::string> known = required;
  known.insert(known.end(), optional.begin(), optional.end());
  known.emplace_back("out");
  known.emplace_back("repeat");
  if (o.command.empty() || o.command[0].empty()) {
    return Bad(o, fmt::format("no command: give the program to tune after --, with {} where it "
                              "takes the value (trainscope tune {} [flags] -- ./train {}=...)",
                              Join(required), o.subcommand,
                              required.empty() ? "--flag" : "--" + required[0]));
  }
  const std::vector<std::string> found = Placeholders(o.command);
  for (const std::string& name : found) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return Bad(o, fmt::format("the command has {}, which is not a placeholder of tune {} "
                                "(it knows {})",
                                Braced(name), o.subcommand, Join(known)));
    }
  }
  for (const std::string& name : required) {
    if (std::find(found.begin(), found.end(), name) == found.end()) {
      return Bad(o, fmt::format("the command has no {}: put it where your program takes that "
                                "value (for example --{}={}); each trial gets its own",
                                Braced(name), name, Braced(name)));
    }
  }
  const std::string program = FindProgram(o.command[0]);
  struct stat st = {};
  if (program.empty() || stat(program.c_str(), &st) != 0) {
    return Bad(o, fmt::format("{}: no such program{}", o.command[0],
                              o.command[0].find('/') == std::string::npos ? " on PATH" : ""));
  }
  if (S_ISDIR(st.st_mode) || access(program.c_str(), X_OK) != 0) {
    return Bad(o, fmt::format("{}: not an executable program", o.command[0]));
  }
  return absl::OkStatus();
}

// ---- amp -------------------------------------------------------------

absl::StatusOr<ExperimentSpec> AmpSpec(const TuneOptions& o, const AmpOptions& amp) {
  if (absl::Status s = CheckCommand(o, {"precision"}, {}); !s.ok()) return s;
  if (amp.precisions.empty()) return Bad(o, "--precisions: give at least one precision to try");
  ExperimentSpec spec = BaseSpec(o);
  spec.variants.push_back({amp.baseline, {}, {}, {{"precision", amp.baseline}}});
  for (const std::string& p : amp.precisions) {
    if (p.empty() || p.find_first_of(" /{}") != std::string::npos) {
      return Bad(o, fmt::format("--precisions: \"{}\" is not a name", p));
    }
    std::string name = p == amp.baseline ? p + "-aa" : p;
    for (const VariantSpec& v : spec.variants) {
      if (v.name == name) return Bad(o, fmt::format("--precisions: {} is named twice", p));
    }
    spec.variants.push_back({name, {}, {}, {{"precision", p}}});
  }
  spec.hypothesis =
      fmt::format("{} reach{} the quality target sooner than {}, with {} loss curve",
                  absl::StrJoin(amp.precisions, " or "), amp.precisions.size() > 1 ? "" : "es",
                  amp.baseline, amp.precisions.size() > 1 ? "the same" : "the same");
  spec.objective = ObjectiveId::kTimeToTarget;
  spec.repeats = Repeats(o, spec.variants.size(), 5);
  spec.curve.file = "loss.jsonl";  // Session::RecordLoss's
  spec.curve.value = "loss";
  spec.curve.window_steps = amp.curve_window;
  spec.notes = {{"baseline", amp.baseline},
                {"curve", "Session::RecordLoss's loss.jsonl against the baseline seeds' band"},
                {"seed", "{repeat}: repeat k of every precision sees seed k"}};
  if (absl::Status s = CheckSpec(spec, "tune amp"); !s.ok()) return s;
  return spec;
}

// ---- batch -----------------------------------------------------------

double ScaledLr(const BatchOptions& b, int64_t size) {
  const double ratio = static_cast<double>(size) / static_cast<double>(b.base_batch);
  if (b.lr_rule == "linear") return b.base_lr * ratio;
  if (b.lr_rule == "sqrt") return b.base_lr * std::sqrt(ratio);
  return b.base_lr;
}

namespace {

const char* LrRuleSource(const std::string& rule) {
  if (rule == "linear") {
    return "Goyal et al. 2017, Accurate, Large Minibatch SGD (arXiv:1706.02677): lr x k for a "
           "k times larger batch, with warmup; for SGD";
  }
  if (rule == "sqrt") {
    return "Krizhevsky 2014, One weird trick (arXiv:1404.5997); Malladi et al. 2022, On the SDEs "
           "and Scaling Rules for Adaptive Gradient Algorithms (arXiv:2205.10287): lr x sqrt(k) "
           "for Adam";
  }
  return "the learning rate is kept: the batch size alone changes";
}

std::string Number(double v) { return fmt::format("{:g}", v); }

int64_t CapMb(const BatchOptions& b) {
  return static_cast<int64_t>(static_cast<double>(b.budget_mb) * (1 - b.margin));
}

// One probe of `size`: fits, does not (out of memory, timed out), or an
// error for any other failure.
absl::StatusOr<BatchProbe> Probe(const TuneOptions& o, const BatchOptions& b, int64_t size,
                                 const std::string& dir, const std::atomic<bool>* stop) {
  if (absl::Status s = ground::EnsureWritableDirectory(dir); !s.ok()) return s;
  unlink((dir + "/report.json").c_str());  // an earlier run's must not answer for this one
  VariantSpec v{"probe", b.probe_args, {}, {{"batch", std::to_string(size)}}};
  v.values.emplace_back("lr", Number(ScaledLr(b, size)));
  v.values.emplace_back("memory_mb", std::to_string(CapMb(b)));
  ExperimentSpec spec;
  spec.command = o.command;
  const std::vector<std::string> argv = TrialArgv(spec, v, dir, 0);
  const ProcessExit exit = RunLogged(argv, {{"TRAINSCOPE_OUTPUT_DIR", dir}}, dir + "/trial.log",
                                     o.trial_timeout_s, stop);
  BatchProbe probe;
  probe.batch = size;
  if (exit.stopped) return absl::CancelledError("stopped");
  if (!exit.error.empty()) return absl::FailedPreconditionError(exit.error);
  if (exit.timed_out) {
    probe.why =
        fmt::format("took over {:g} s (--trial_timeout_s): counted as too big", o.trial_timeout_s);
    return probe;
  }
  absl::StatusOr<Report> report = exporter::ReadReportFile(dir + "/report.json");
  if (report.ok() && report->failure && report->failure->kind == "out_of_memory") {
    probe.why = "out of memory: " + report->failure->message;
    return probe;
  }
  if (exit.code == 0 && report.ok()) {
    probe.fits = true;
    probe.why = "fits";
    return probe;
  }
  return absl::FailedPreconditionError(fmt::format(
      "the probe of batch {} failed without an out-of-memory record ({}{}), so it says nothing "
      "of the size: see {}/trial.log; a program that runs out of memory should say so with "
      "Session::RecordOutOfMemory (trainscope::libtorch::CatchOutOfMemory)",
      size,
      exit.code > 128 ? fmt::format("killed by signal {}", exit.code - 128)
                      : fmt::format("exit code {}", exit.code),
      report.ok() ? "" : ", no report", dir));
}

}  // namespace

absl::StatusOr<int64_t> ProbeLargestBatch(const TuneOptions& o, const BatchOptions& b,
                                          const std::string& dir, std::vector<BatchProbe>* probes,
                                          const std::atomic<bool>* stop) {
  auto probe = [&](int64_t size) -> absl::StatusOr<bool> {
    absl::StatusOr<BatchProbe> p = Probe(o, b, size, dir + "/b" + std::to_string(size), stop);
    if (!p.ok()) return p.status();
    probes->push_back(*p);
    std::fprintf(stderr, "  probe batch %7lld: %s\n", static_cast<long long>(size),
                 p->fits ? "fits" : (p->why + ", going on").c_str());
    return p->fits;
  };
  int64_t fit = 0, no_fit = 0;
  for (int64_t size = b.min_batch;;) {
    absl::StatusOr<bool> fits = probe(size);
    if (!fits.ok()) return fits.status();
    if (!*fits) {
      no_fit = size;
      break;
    }
    fit = size;
    if (size >= b.max_batch) break;
    size = size > b.max_batch / 2 ? b.max_batch : size * 2;  // max_batch itself, last
  }
  if (fit == 0 || no_fit == 0) return fit;
  const int64_t resolution = std::max<int64_t>(1, fit / 8);
  while (no_fit - fit > resolution) {
    const int64_t middle = fit + (no_fit - fit) / 2;
    absl::StatusOr<bool> fits = probe(middle);
    if (!fits.ok()) return fits.status();
    (*fits ? fit : no_fit) = middle;
  }
  return fit;
}

absl::StatusOr<ExperimentSpec> BatchSpec(const TuneOptions& o, const BatchOptions& b,
                                         int64_t largest, const std::vector<BatchProbe>& probes) {
  ExperimentSpec spec = BaseSpec(o);
  if (b.serve) {
    for (int64_t n : b.serve_sizes) {
      spec.variants.push_back({"max" + std::to_string(n),
                               {},
                               {},
                               {{"batch", std::to_string(n)},
                                {"lr", Number(ScaledLr(b, n))},
                                {"memory_mb", std::to_string(CapMb(b))}}});
    }
    spec.objective = ObjectiveId::kLatencyP99Ms;
    spec.hypothesis = "batching requests up to a larger maximum lowers the p99 latency";
    spec.notes = {{"batch", "{batch}: the largest batch of requests the server forms"}};
  } else {
    std::string sizes_note;
    for (int64_t size = b.base_batch, n = 0; size <= largest && n < b.sizes; size *= 2, ++n) {
      const std::string lr = Number(ScaledLr(b, size));
      spec.variants.push_back(
          {"b" + std::to_string(size),
           {},
           {},
           {{"batch", std::to_string(size)}, {"lr", lr}, {"memory_mb", std::to_string(CapMb(b))}}});
      sizes_note += fmt::format("{}{} at lr {}", sizes_note.empty() ? "" : ", ", size, lr);
    }
    if (spec.variants.size() < 2) {
      return Bad(o, fmt::format("only {} of the sizes from --base_batch={} fits (the largest "
                                "that fits is {}): nothing to compare",
                                spec.variants.size(), b.base_batch, largest));
    }
    std::string probe_note;
    for (const BatchProbe& p : probes) {
      probe_note += fmt::format("{}{} {}", probe_note.empty() ? "" : ", ", p.batch,
                                p.fits ? "fits" : "does not fit");
    }
    const char* lr_phrase = b.lr_rule == "linear" ? "the learning rate scaled linearly"
                            : b.lr_rule == "sqrt" ? "the learning rate scaled by the square root"
                                                  : "the same learning rate";
    spec.hypothesis =
        fmt::format("a larger batch, with {}, reaches the quality target sooner than batch {}",
                    lr_phrase, b.base_batch);
    spec.objective = ObjectiveId::kTimeToTarget;
    spec.notes = {{"lr_rule", b.lr_rule},
                  {"lr_rule_source", LrRuleSource(b.lr_rule)},
                  {"base_batch", std::to_string(b.base_batch)},
                  {"base_lr", Number(b.base_lr)},
                  {"sizes", sizes_note},
                  {"memory_budget_mb", std::to_string(b.budget_mb)},
                  {"margin", Number(b.margin)},
                  {"probes", probe_note},
                  {"largest_batch_that_fits", std::to_string(largest)}};
  }
  spec.sequential = true;
  spec.repeats = Repeats(o, spec.variants.size(), 5);
  spec.min_repeats = std::min(3, spec.repeats);
  if (absl::Status s = CheckSpec(spec, "tune batch"); !s.ok()) return s;
  return spec;
}

namespace {

double MedianOf(const std::vector<Trial>& trials, int variant,
                const std::function<std::optional<double>(const Trial&)>& field, bool failed_too,
                double failed_value) {
  std::vector<double> values;
  for (const Trial& t : trials) {
    if (t.variant != variant) continue;
    if (t.failed) {
      if (failed_too) values.push_back(failed_value);
      continue;
    }
    if (std::optional<double> v = field(t)) values.push_back(*v);
  }
  return Median(values);  // NaN for none
}

}  // namespace

std::string BatchTable(const ExperimentSpec& spec, const ExperimentResult& result) {
  struct Row {
    std::string name;
    int trials = 0, failed = 0;
    double median = NAN, rh_per_accepted = NAN, samples_per_s = NAN;
    double p50 = NAN, p90 = NAN, p99 = NAN, rps = NAN;
  };
  const bool serving = ObjectiveInfo(spec.objective).serving;
  std::vector<Row> rows(spec.variants.size());
  for (size_t v = 0; v < rows.size(); ++v) {
    Row& r = rows[v];
    const int vi = static_cast<int>(v);
    r.name = spec.variants[v].name;
    double hours = 0;
    for (const Trial& t : result.trials) {
      if (t.variant != vi) continue;
      ++r.trials;
      r.failed += t.failed;
      hours += t.resource_hours.value_or(0);
    }
    // MLPerf's rule, as the verdict reads it: a failed trial is infinite.
    r.median = MedianOf(
        result.trials, vi, [&](const Trial& t) { return ObjectiveValue(spec.objective, t); }, true,
        kInf);
    r.rh_per_accepted = r.trials > r.failed ? hours / (r.trials - r.failed) : kInf;
    r.samples_per_s = MedianOf(
        result.trials, vi, [](const Trial& t) { return t.steady_samples_per_s; }, false, 0);
    r.p50 = MedianOf(
        result.trials, vi, [](const Trial& t) { return t.latency_p50_ms; }, false, 0);
    r.p90 = MedianOf(
        result.trials, vi, [](const Trial& t) { return t.latency_p90_ms; }, false, 0);
    r.p99 = MedianOf(
        result.trials, vi, [](const Trial& t) { return t.latency_p99_ms; }, false, 0);
    r.rps = MedianOf(
        result.trials, vi, [](const Trial& t) { return t.requests_per_s; }, false, 0);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    const double x = std::isnan(a.median) ? kInf : a.median;  // NaN: no trial
    const double y = std::isnan(b.median) ? kInf : b.median;
    if (x != y) return x < y;
    return a.rh_per_accepted < b.rh_per_accepted;
  });
  std::string out;
  if (serving) {
    out +=
        "\nlatency per maximum batch (medians over trials), ranked by p99:\n"
        "  variant    p50 ms   p90 ms   p99 ms   requests/s  failures\n";
    for (const Row& r : rows) {
      out += fmt::format("  {:<9} {:7.2f}  {:7.2f}  {:7.2f}  {:11.1f}  {} of {}\n", r.name, r.p50,
                         r.p90, r.p99, r.rps, r.failed, r.trials);
    }
    return out;
  }
  out +=
      "\nranked by time to target, then resource-hours per accepted result (samples/s is not "
      "the ranking):\n"
      "  rank  variant   time to target (median)  failures  resource-hours/accepted  "
      "samples/s\n";
  int rank = 1;
  for (const Row& r : rows) {
    out += fmt::format(
        "  {:4d}  {:<8}  {:>23}  {:>4} of {}  {:>23}  {:9.0f}\n", rank++, r.name,
        std::isfinite(r.median) ? fmt::format("{:.3f} s", r.median) : "never", r.failed, r.trials,
        std::isfinite(r.rh_per_accepted) ? fmt::format("{:.3g}", r.rh_per_accepted) : "-",
        r.samples_per_s);
  }
  return out;
}

// ---- loader ----------------------------------------------------------

absl::StatusOr<ExperimentSpec> LoaderSpec(const TuneOptions& o, const LoaderOptions& l) {
  if (absl::Status s = CheckCommand(o, {"workers"}, {"prefetch", "pin"}); !s.ok()) return s;
  const std::vector<std::string> found = Placeholders(o.command);
  const bool with_prefetch = std::find(found.begin(), found.end(), "prefetch") != found.end();
  const bool with_pin = std::find(found.begin(), found.end(), "pin") != found.end();
  if (l.workers.empty()) return Bad(o, "--workers: give the worker counts to try");
  if (with_prefetch && l.prefetch.empty()) return Bad(o, "--prefetch: give the depths to try");
  if (with_pin && l.pin.empty()) return Bad(o, "--pin: give 0, 1 or 0,1");
  for (int w : l.workers) {
    if (w < 0) return Bad(o, fmt::format("--workers: {} is negative", w));
  }
  for (int p : l.prefetch) {
    if (p < 1) return Bad(o, fmt::format("--prefetch: {} is below 1", p));
  }
  for (int p : l.pin) {
    if (p != 0 && p != 1) return Bad(o, fmt::format("--pin: {} is not 0 (off) or 1 (on)", p));
  }
  // The loader's objectives: the time to the target, or the throughput.
  const Objective* objective = FindObjective(l.objective);
  if (objective == nullptr || (objective->id != ObjectiveId::kTimeToTarget &&
                               objective->id != ObjectiveId::kSteadySamplesPerS)) {
    return Bad(o, fmt::format("--objective={}: expected {} or {}", l.objective,
                              ObjectiveInfo(ObjectiveId::kTimeToTarget).name,
                              ObjectiveInfo(ObjectiveId::kSteadySamplesPerS).name));
  }
  std::vector<int> workers = l.workers, prefetch = with_prefetch ? l.prefetch : std::vector<int>{0},
                   pin = with_pin ? l.pin : std::vector<int>{0};
  for (std::vector<int>* list : {&workers, &prefetch, &pin}) {
    std::sort(list->begin(), list->end());
    list->erase(std::unique(list->begin(), list->end()), list->end());
  }
  ExperimentSpec spec = BaseSpec(o);
  for (int w : workers) {
    for (int p : prefetch) {
      for (int pinned : pin) {
        VariantSpec v;
        v.name = with_prefetch ? fmt::format("w{}p{}", w, p) : fmt::format("w{}", w);
        if (pinned == 1 && pin.size() > 1) v.name += "-pin";
        v.values.emplace_back("workers", std::to_string(w));
        if (with_prefetch) v.values.emplace_back("prefetch", std::to_string(p));
        if (with_pin) v.values.emplace_back("pin", std::to_string(pinned));
        spec.variants.push_back(std::move(v));
      }
    }
  }
  if (spec.variants.size() < 2) return Bad(o, "--workers/--prefetch: give two settings or more");
  spec.objective = objective->id;
  spec.hypothesis =
      fmt::format("more loader workers{}{} {} than {}, up to a knee past which they do not pay",
                  with_prefetch ? " or a deeper prefetch" : "",
                  with_pin && pin.size() > 1 ? " or pinned batches" : "",
                  objective->id == ObjectiveId::kTimeToTarget ? "reach the quality target sooner"
                                                              : "give a higher steady throughput",
                  spec.variants[0].name);
  spec.repeats = Repeats(o, spec.variants.size(), 4);
  // Workers make single steps jitter (a batch a moment late) while the
  // throughput doubles, and hold batches in memory by design: the tail and
  // the memory are not rollbacks here; --max_rss_mb bounds the memory.
  spec.rollback.p99_step_time = 10;
  spec.rollback.peak_memory = 10;
  spec.notes = {{"knee",
                 "the fewest workers (then the shallowest prefetch) within the threshold "
                 "of the best setting"},
                {"rollback",
                 "p99 step time and peak memory are not rollbacks (workers add "
                 "jitter and hold batches by design); --max_rss_mb bounds memory"}};
  if (absl::Status s = CheckSpec(spec, "tune loader"); !s.ok()) return s;
  return spec;
}

LoaderKnee FindKnee(const ExperimentSpec& spec, const ExperimentResult& result,
                    const LoaderOptions& l) {
  LoaderKnee k;
  const bool lower = spec.lower_is_better();
  const double worst = lower ? kInf : 0;
  for (size_t v = 0; v < spec.variants.size(); ++v) {
    const VariantSpec& vs = spec.variants[v];
    LoaderRow r;
    r.variant = vs.name;
    for (const auto& [name, value] : vs.values) {
      int n = 0;
      if (!absl::SimpleAtoi(value, &n)) continue;
      if (name == "workers") r.workers = n;
      if (name == "prefetch") r.prefetch = n;
      if (name == "pin") r.pin = n == 1;
    }
    const int vi = static_cast<int>(v);
    for (const Trial& t : result.trials) {
      if (t.variant != vi) continue;
      ++r.trials;
      r.failures += t.failed;
    }
    r.objective = MedianOf(
        result.trials, vi, [&](const Trial& t) { return ObjectiveValue(spec.objective, t); }, true,
        worst);
    r.data_wait_share = MedianOf(
        result.trials, vi, [](const Trial& t) { return t.data_wait_share; }, false, 0);
    r.cpu_s = MedianOf(
        result.trials, vi, [](const Trial& t) { return t.cpu_s; }, false, 0);
    const double peak = MedianOf(
        result.trials, vi, [](const Trial& t) { return t.peak_memory_bytes; }, false, 0);
    r.peak_rss_mb = std::isnan(peak) ? 0 : peak / (1 << 20);
    if (v == 0) {
      r.accepted = true;  // the baseline is always a candidate
    } else if (v - 1 < result.verdict.comparisons.size()) {
      const Comparison& c = result.verdict.comparisons[v - 1];
      const bool clear = c.clears_threshold && c.p_adjusted < VerdictOptions().alpha;
      r.accepted = clear && c.rollbacks.empty();
      const double gain = lower ? 1 - c.ratio : c.ratio - 1;
      const double width = c.ci_high - c.ci_low;
      if (c.failures > 0 && c.failures > k.rows[0].failures) {
        r.rejected = fmt::format("more failures ({} of {})", c.failures, c.trials);
      } else if (l.max_rss_mb > 0 && r.peak_rss_mb > static_cast<double>(l.max_rss_mb)) {
        r.rejected =
            fmt::format("peak memory {:.0f} MiB past --max_rss_mb={}", r.peak_rss_mb, l.max_rss_mb);
      } else if (clear && width > gain) {
        r.rejected = fmt::format("unstable: its interval ({:.3f} to {:.3f}) is wider than its gain",
                                 c.ci_low, c.ci_high);
      } else if (!c.rollbacks.empty()) {
        r.rejected = c.rollbacks.front();
      } else if (!r.accepted) {
        r.rejected = "no gain beyond the noise";
      }
    }
    k.rows.push_back(r);
  }
  auto better = [&](double a, double b) { return lower ? a < b : a > b; };
  for (size_t i = 1; i < k.rows.size(); ++i) {
    if (k.rows[i].rejected.empty() &&
        better(k.rows[i].objective, k.rows[static_cast<size_t>(k.best)].objective)) {
      k.best = static_cast<int>(i);
    }
  }
  const double best = k.rows[static_cast<size_t>(k.best)].objective;
  const double bound = lower ? best * (1 + spec.threshold) : best * (1 - spec.threshold);
  for (size_t i = 0; i < k.rows.size(); ++i) {  // the spec's order is the least first
    const LoaderRow& r = k.rows[i];
    if (!r.rejected.empty()) continue;
    if (lower ? r.objective <= bound : r.objective >= bound) {
      k.knee = static_cast<int>(i);
      break;
    }
  }
  const LoaderRow& knee = k.rows[static_cast<size_t>(k.knee)];
  const LoaderRow& base = k.rows[0];
  const double gain = lower ? base.objective / knee.objective : knee.objective / base.objective;
  if (k.knee == 0) {
    k.reason = fmt::format(
        "the knee is {}: no setting gains beyond the noise and the {:g}% "
        "threshold; more workers cost CPU and memory for nothing here",
        base.variant, 100 * spec.threshold);
  } else {
    k.reason =
        fmt::format("the knee is {}: {:.2f}x {}'s {}, within {:g}% of the best ({}){}",
                    knee.variant, gain, base.variant, lower ? "speed to target" : "throughput",
                    100 * spec.threshold, k.rows[static_cast<size_t>(k.best)].variant,
                    k.best != k.knee ? "; the larger settings add CPU and memory, not speed" : "");
  }
  return k;
}

std::string LoaderTable(const ExperimentSpec& spec, const LoaderKnee& k) {
  // A rate's unit heads its column; a time's name does, with its unit in
  // each cell.
  const Objective& objective = ObjectiveInfo(spec.objective);
  const bool rate = !objective.lower_is_better;
  std::string out = fmt::format("\n  {:<8} {:>16} {:>10} {:>8} {:>9} {:>9}  {}\n", "setting",
                                rate ? objective.unit : objective.label, "input wait", "CPU s",
                                "peak MiB", "failures", "");
  for (size_t i = 0; i < k.rows.size(); ++i) {
    const LoaderRow& r = k.rows[i];
    std::string note = static_cast<int>(i) == k.knee ? "<- knee" : "";
    if (static_cast<int>(i) == k.best && k.best != k.knee) note = "best";
    if (!r.rejected.empty()) note = "rejected: " + r.rejected;
    const std::string value = !std::isfinite(r.objective) || r.objective == 0
                                  ? std::string("never")
                                  : (rate ? fmt::format("{:.{}f}", r.objective, objective.decimals)
                                          : ObjectiveText(spec.objective, r.objective));
    out += fmt::format("  {:<8} {:>16} {:>9.1f}% {:>8.2f} {:>9.1f} {:>5} of {}  {}\n", r.variant,
                       value, 100 * r.data_wait_share, r.cpu_s, r.peak_rss_mb, r.failures, r.trials,
                       note);
  }
  out += "\n" + k.reason + "\n";
  return out;
}

std::string CoLoadVerdict(const LoaderKnee& quiet, const LoaderKnee& loaded,
                          ObjectiveId objective) {
  const bool lower = ObjectiveInfo(objective).lower_is_better;
  // The gain is what the best setting adds over the baseline, in the
  // objective's units (samples/s, or seconds to target saved): on a shared
  // host extra workers take their CPU from the other jobs, so the ratio to
  // a baseline that suffers too can even grow while the work won shrinks.
  auto added = [&](const LoaderKnee& k) {
    const double base = k.rows[0].objective;
    const double best = k.rows[static_cast<size_t>(k.best)].objective;
    return lower ? base - best : best - base;
  };
  auto ratio = [&](const LoaderKnee& k) {
    const double base = k.rows[0].objective;
    const double best = k.rows[static_cast<size_t>(k.best)].objective;
    return lower ? base / best : best / base;
  };
  const std::string unit = std::string(" ") + ObjectiveInfo(objective).unit;
  const std::string& q = quiet.rows[static_cast<size_t>(quiet.knee)].variant;
  const std::string& c = loaded.rows[static_cast<size_t>(loaded.knee)].variant;
  const double aq = added(quiet), ac = added(loaded);
  if (!std::isfinite(aq) || !std::isfinite(ac)) {
    return fmt::format("{}; no gain to compare: a baseline never reached its result",
                       q == c ? fmt::format("the knee stays at {} under co-load", q)
                              : fmt::format("the knee moved from {} to {} under co-load", q, c));
  }
  const std::string moved = q == c
                                ? fmt::format("the knee stays at {} under co-load", q)
                                : fmt::format("the knee moved from {} to {} under co-load", q, c);
  const std::string numbers = fmt::format(
      "{:+.4g}{} quiet, {:+.4g}{} co-loaded; {:.2f}x and {:.2f}x each sweep's own "
      "baseline",
      aq, unit, ac, unit, ratio(quiet), ratio(loaded));
  const std::string gains =
      ac < aq ? fmt::format(
                    "the best gain shrank by {:.0f}% ({}): a gain measured on a quiet "
                    "host does not hold when other jobs share it",
                    aq > 0 ? 100 * (1 - ac / aq) : 0.0, numbers)
              : fmt::format("the best gain held ({})", numbers);
  return moved + "; " + gains;
}

namespace {

// A loader row's fields in "<output>-knee.json", named once.
template <typename R, typename V>
void DescribeLoaderRow(R& r, V& v) {
  using ground::json_fields::kRequired;
  v.Field("variant", r.variant, kRequired);
  v.Field("workers", r.workers, kRequired);
  v.Field("prefetch", r.prefetch, kRequired);
  v.Field("pin", r.pin, kRequired);
  v.Field("trials", r.trials, kRequired);
  v.Field("failures", r.failures, kRequired);
  v.Field("objective", r.objective, kRequired);  // null: never reached the result
  v.Field("data_wait_share", r.data_wait_share, kRequired);
  v.Field("cpu_s", r.cpu_s, kRequired);
  v.Field("peak_rss_mb", r.peak_rss_mb, kRequired);
  v.Field("accepted", r.accepted, kRequired);
  v.Field("rejected", r.rejected, kRequired);
}

}  // namespace

std::string KneeJson(const ExperimentSpec& spec, const LoaderKnee& quiet, const LoaderKnee* loaded,
                     const std::string& verdict) {
  ground::JsonWriter j(ground::JsonWriter::kPretty);
  ground::json_fields::Writer writer(&j);
  auto knee = [&](const LoaderKnee& k) {
    j.BeginObject();
    j.Key("knee").String(k.rows[static_cast<size_t>(k.knee)].variant);
    j.Key("best").String(k.rows[static_cast<size_t>(k.best)].variant);
    j.Key("reason").String(k.reason);
    writer.Array("settings", k.rows, [&](const LoaderRow& r) { DescribeLoaderRow(r, writer); });
    j.EndObject();
  };
  j.BeginObject();
  j.Key("objective").String(ObjectiveInfo(spec.objective).name);
  j.Key("threshold").Number(spec.threshold);
  j.Key("quiet");
  knee(quiet);
  j.Key("coload");
  if (loaded != nullptr) {
    knee(*loaded);
  } else {
    j.Null();
  }
  j.Key("verdict").String(verdict);
  j.EndObject();
  return j.Take() + "\n";
}

// ---- co-load ---------------------------------------------------------

absl::StatusOr<CoLoad> ParseCoLoad(std::string_view text) {
  CoLoad load;
  if (text.empty()) return load;
  for (absl::string_view part : absl::StrSplit(absl::string_view(text.data(), text.size()), ',')) {
    const size_t eq = part.find('=');
    int n = 0;
    if (eq == absl::string_view::npos || !absl::SimpleAtoi(part.substr(eq + 1), &n) || n < 0 ||
        n > 256) {
      return absl::InvalidArgumentError(fmt::format(
          "--coload: \"{}\": expected cpu=N or io=M (N, M from 0 to 256)", std::string(part)));
    }
    const absl::string_view key = part.substr(0, eq);
    if (key == "cpu") {
      load.cpu = n;
    } else if (key == "io") {
      load.io = n;
    } else {
      return absl::InvalidArgumentError(
          fmt::format("--coload: \"{}\": expected cpu=N or io=M", std::string(part)));
    }
  }
  return load;
}

namespace {

[[noreturn]] void BusyLoop() {
  volatile uint64_t x = 0;
  for (;;) x = x * 6364136223846793005u + 1;
}

// Writes 4 MiB, syncs, reads it back; again, until killed. Only
// async-signal-safe calls after fork.
[[noreturn]] void IoLoop(const char* path, char* buffer, size_t size) {
  for (;;) {
    const int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) _exit(1);
    for (size_t done = 0; done < size;) {
      const ssize_t n = write(fd, buffer + done, size - done);
      if (n <= 0) _exit(1);
      done += static_cast<size_t>(n);
    }
    fsync(fd);
    lseek(fd, 0, SEEK_SET);
    while (read(fd, buffer, size) > 0) {
    }
    close(fd);
  }
}

}  // namespace

CoLoadProcesses::CoLoadProcesses(const CoLoad& load, const std::string& scratch_dir) {
  if (!load.any()) return;
  if (absl::Status s = ground::EnsureWritableDirectory(scratch_dir); !s.ok()) {
    status_ = s;
    return;
  }
  scratch_ = scratch_dir;
  constexpr size_t kIoBytes = 4 << 20;
  std::vector<std::string> paths;
  for (int i = 0; i < load.io; ++i) paths.push_back(fmt::format("{}/coload-io-{}", scratch_dir, i));
  std::vector<char> buffer(load.io > 0 ? kIoBytes : 0, 'x');  // before fork: no malloc after
  const pid_t parent = getpid();
  for (int i = 0; i < load.cpu + load.io; ++i) {
    const pid_t pid = fork();
    if (pid < 0) {
      status_ = ground::ErrnoStatus(errno, "--coload: fork");
      return;
    }
    if (pid == 0) {
      // Never outlive the sweep: killed with trainscope, whatever kills it.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(0);
      setpgid(0, 0);
      if (i < load.cpu) BusyLoop();
      IoLoop(paths[static_cast<size_t>(i - load.cpu)].c_str(), buffer.data(), buffer.size());
    }
    pids_.push_back(pid);
  }
}

CoLoadProcesses::~CoLoadProcesses() {
  for (pid_t pid : pids_) kill(pid, SIGKILL);
  for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
  for (size_t i = 0; !scratch_.empty(); ++i) {
    if (unlink(fmt::format("{}/coload-io-{}", scratch_, i).c_str()) != 0) break;
  }
}

}  // namespace trainscope::tuning
