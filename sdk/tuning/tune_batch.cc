// `trainscope tune batch`: the probe for the largest batch that fits, the
// sizes' experiment and its table. See tune.h.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "sdk/export/report_json.h"
#include "sdk/ground/files.h"
#include "sdk/tuning/objectives.h"
#include "sdk/tuning/tune.h"
#include "sdk/tuning/tune_parts.h"

namespace trainscope::tuning {

using tune_parts::Bad;
using tune_parts::BaseSpec;
using tune_parts::kInf;
using tune_parts::MedianOf;
using tune_parts::Repeats;

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

}  // namespace trainscope::tuning
