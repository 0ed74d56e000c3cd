// tune_batch: which batch size reaches the required result soonest, and at
// what cost? An experiment on trainscope's engine (docs/experiments.md).
//
//   tune_batch                 # probe, then rank sizes by time to target
//   tune_batch --lr_rule=sqrt  # the learning rate follows the batch (none, linear, sqrt)
//   tune_batch --serve         # serving: latency percentiles per maximum batch
//
// Training (the default), in two parts:
// 1. The probe finds the largest batch that fits: each probe is a fresh
//    train_mlp process that runs whole steps at peak memory (forward,
//    backward, the optimizer's first step, which allocates its state, and an
//    evaluation), under a memory cap of (1 - --margin) x the budget
//    (train_mlp --memory_budget_mb: on CUDA the caching allocator's
//    fraction of --budget_mb or the device's memory, on CPU a budget for
//    tensor memory, --budget_mb). A batch that does not fit ends its process
//    with c10::OutOfMemoryError, exit code 4: the search goes on. Powers of
//    two from --min_batch until one fails, then a binary search between the
//    last that fit and the first that did not, to an eighth of the former.
//    Nothing leaks between probes: each one is a new process.
// 2. The experiment: powers of two from --base_batch that fit (at most
//    --sizes of them), each a variant of train_mlp with its learning rate
//    set by --lr_rule, every trial a fresh process stopping at the target,
//    in randomised blocks. The sizes are ranked by time to target and then
//    by resource-hours per accepted result, never by samples/s.
//
// Serving (--serve): for each maximum batch in --serve_sizes, trials of this
// program (--serve_trial) answer requests that arrive as a Poisson process
// at --rate a second, batched up to the maximum, and record each request's
// latency from its scheduled arrival (so a late server is not hidden) with
// Session::RecordLatency; the engine compares p99 latency, and the table
// gives p50/p90/p99 beside requests/s.
//
// Ctrl-C stops it: experiment.json keeps the trials so far, marked
// incomplete. Exit status: 0 when complete, 1 on an error, 130 when stopped.
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "samples/common/harness.h"
#include "sdk/tuning/experiment.h"
#include "trainscope/torch/device.h"
#include "trainscope/trainscope.h"

ABSL_FLAG(std::string, out, "out/tune_batch", "where experiment.json, probes and trials go");
ABSL_FLAG(std::string, device, "auto", "auto, cpu or cuda");
ABSL_FLAG(int64_t, budget_mb, 0,
          "the memory a batch may use, in MiB: on CPU a budget for tensor memory (0: 64), on "
          "CUDA at most the device's memory (0: all of it)");
ABSL_FLAG(double, margin, 0.1, "safety margin: probes run under (1 - margin) x the budget");
ABSL_FLAG(int64_t, min_batch, 64, "the first batch size probed");
ABSL_FLAG(int64_t, max_batch, 1 << 20, "the probe stops doubling here");
ABSL_FLAG(int64_t, base_batch, 256, "the baseline batch size of the experiment");
ABSL_FLAG(int, sizes, 3, "batch sizes compared: powers of two from --base_batch that fit");
ABSL_FLAG(std::string, lr_rule, "none",
          "how the learning rate follows the batch size: none, linear (lr x B/base) or sqrt "
          "(lr x sqrt(B/base))");
ABSL_FLAG(double, base_lr, 0.003, "the learning rate at --base_batch");
ABSL_FLAG(int, hidden, 256, "train_mlp's --hidden");
ABSL_FLAG(double, target_mse, 0.1, "the required result: held-out MSE at most this");
ABSL_FLAG(int64_t, max_steps, 400, "a trial that has not met the target by then fails");
ABSL_FLAG(int, repeats, 5, "trials per size at most (sequential stopping from 3)");
ABSL_FLAG(double, trial_timeout_s, 120, "a trial that runs longer is a failure");
ABSL_FLAG(std::string, train_mlp, "", "the training program (default: train_mlp beside this one)");
ABSL_FLAG(bool, serve, false, "serving mode: latency percentiles per maximum batch");
ABSL_FLAG(double, rate, 4000, "--serve: requests a second (Poisson arrivals)");
ABSL_FLAG(double, serve_seconds, 2, "--serve: how long requests arrive, per trial");
ABSL_FLAG(std::string, serve_sizes, "1,8,64", "--serve: the maximum batch sizes compared");
ABSL_FLAG(int, serve_hidden, 1024,
          "--serve: the served MLP's width (1024: one request alone takes a good part of the "
          "gap between arrivals at 4000/s on one core)");
ABSL_FLAG(bool, serve_trial, false, "internal: run one serving trial (set by --serve)");
ABSL_FLAG(int64_t, serve_max_batch, 1, "internal: --serve_trial's maximum batch");
ABSL_FLAG(int64_t, seed, 0, "internal: --serve_trial's arrival seed");

namespace {

namespace tuning = trainscope::tuning;

constexpr int kExitOutOfMemory = 4;  // train_mlp's exit code for c10::OutOfMemoryError

using trainscope::samples::BesideMe;
using trainscope::samples::g_stop;

std::string Fixed(double v, int digits) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, v);
  return text;
}

double Median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// ---- serving trial --------------------------------------------------------

// Requests arrive at Poisson times; the server takes up to max_batch of
// those that have arrived, runs the model on them as one batch, and records
// each one's latency from its scheduled arrival.
int ServeTrial() {
  torch::set_num_threads(1);
  const int64_t max_batch = absl::GetFlag(FLAGS_serve_max_batch);
  const double rate = absl::GetFlag(FLAGS_rate);
  const double seconds = absl::GetFlag(FLAGS_serve_seconds);
  const int hidden = absl::GetFlag(FLAGS_serve_hidden);
  trainscope::Options options;
  options.output_dir = absl::GetFlag(FLAGS_out);
  options.run_name = "tune_batch.serve";
  options.config = {{"max_batch", std::to_string(max_batch)},
                    {"rate", Fixed(rate, 1)},
                    {"serve_seconds", Fixed(seconds, 3)},
                    {"hidden", std::to_string(hidden)},
                    {"seed", std::to_string(absl::GetFlag(FLAGS_seed))}};
  absl::StatusOr<trainscope::Session> session = trainscope::Session::Start(options);
  if (!session.ok()) {
    std::fprintf(stderr, "tune_batch: %s\n", session.status().ToString().c_str());
    return 1;
  }
  torch::manual_seed(1);
  torch::nn::Sequential model(torch::nn::Linear(32, hidden), torch::nn::ReLU(),
                              torch::nn::Linear(hidden, hidden), torch::nn::ReLU(),
                              torch::nn::Linear(hidden, 1));
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor inputs = torch::randn({max_batch, 32});
  model->forward(inputs);  // warm the allocator and kernels before the clock starts

  std::mt19937_64 rng(static_cast<uint64_t>(absl::GetFlag(FLAGS_seed)) * 7919 + 17);
  std::exponential_distribution<double> gap(rate);
  std::vector<double> arrivals;  // seconds from the start; O(rate x seconds)
  for (double t = gap(rng); t < seconds; t += gap(rng)) arrivals.push_back(t);
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  auto now_s = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  size_t next = 0;  // the first request not yet answered
  for (int64_t batch_index = 0; next < arrivals.size(); ++batch_index) {
    double now = now_s();
    if (arrivals[next] > now) {
      std::this_thread::sleep_for(std::chrono::duration<double>(arrivals[next] - now));
      now = now_s();
    }
    size_t end = next;
    while (end < arrivals.size() && arrivals[end] <= now &&
           static_cast<int64_t>(end - next) < max_batch) {
      ++end;
    }
    if (end == next) continue;
    const auto n = static_cast<int64_t>(end - next);
    {
      trainscope::StepScope step(*session, trainscope::StepIndex(batch_index),
                                 trainscope::Samples(n));
      TRAINSCOPE_PHASE(kForward);
      model->forward(inputs.narrow(0, 0, n)).sum().item<float>();  // the answer is read
    }
    const double done = now_s();
    for (size_t r = next; r < end; ++r) (void)session->RecordLatency(done - arrivals[r]);
    next = end;
  }
  absl::StatusOr<trainscope::Report> report = session->Finish();
  if (!report.ok()) {
    std::fprintf(stderr, "tune_batch: %s\n", report.status().ToString().c_str());
    return 1;
  }
  return 0;
}

// ---- the probe ------------------------------------------------------------

struct Probe {
  int64_t batch = 0;
  bool fits = false;
};

// Whether one batch size fits: a fresh train_mlp runs two steps and an
// evaluation under the cap. Returns nullopt (with a message) when the probe
// failed for another reason than memory.
std::optional<bool> Fits(const std::string& program, int64_t batch, int64_t cap_mb,
                         const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    std::fprintf(stderr, "tune_batch: cannot create %s: %s\n", dir.c_str(),
                 error.message().c_str());
    return std::nullopt;
  }
  const std::vector<std::string> argv = {program,
                                         "--out=" + dir,
                                         "--batch_size=" + std::to_string(batch),
                                         "--hidden=" + std::to_string(absl::GetFlag(FLAGS_hidden)),
                                         "--steps=2",
                                         "--eval_every=1",
                                         "--memory_budget_mb=" + std::to_string(cap_mb)};
  const tuning::ProcessExit exit = tuning::RunLogged(argv, {}, dir + "/probe.log",
                                                     absl::GetFlag(FLAGS_trial_timeout_s), &g_stop);
  if (exit.stopped) return std::nullopt;  // Ctrl-C
  if (exit.timed_out) {                   // too slow to be of use, whatever its memory
    std::fprintf(stderr, "  probe batch %7lld: took over --trial_timeout_s, counted as too big\n",
                 static_cast<long long>(batch));
    return false;
  }
  if (exit.error.empty() && exit.code == 0) return true;
  if (exit.error.empty() && exit.code == kExitOutOfMemory) return false;
  std::fprintf(
      stderr, "tune_batch: probe of batch %lld failed (%s; %s/probe.log)\n",
      static_cast<long long>(batch),
      exit.error.empty() ? ("exit code " + std::to_string(exit.code)).c_str() : exit.error.c_str(),
      dir.c_str());
  return std::nullopt;
}

// Powers of two from min_batch until one does not fit, then a binary search
// to an eighth of the largest power that fit. Returns the largest batch that
// fit (0: none did), or nullopt when a probe failed otherwise.
std::optional<int64_t> LargestBatch(const std::string& program, int64_t cap_mb,
                                    const std::string& dir, std::vector<Probe>* probes) {
  auto probe = [&](int64_t batch) -> std::optional<bool> {
    std::optional<bool> fits = Fits(program, batch, cap_mb, dir + "/b" + std::to_string(batch));
    if (fits) {
      probes->push_back({batch, *fits});
      std::fprintf(stderr, "  probe batch %7lld: %s\n", static_cast<long long>(batch),
                   *fits ? "fits" : "out of memory (c10::OutOfMemoryError), going on");
    }
    return fits;
  };
  int64_t fit = 0, no_fit = 0;
  const int64_t max_batch = absl::GetFlag(FLAGS_max_batch);
  for (int64_t b = absl::GetFlag(FLAGS_min_batch); b <= max_batch;
       b = b > max_batch / 2 ? max_batch + 1 : b * 2) {
    if (g_stop.load()) return std::nullopt;
    std::optional<bool> fits = probe(b);
    if (!fits) return std::nullopt;
    if (!*fits) {
      no_fit = b;
      break;
    }
    fit = b;
  }
  if (fit == 0 || no_fit == 0) return fit;
  const int64_t resolution = std::max<int64_t>(1, fit / 8);
  while (no_fit - fit > resolution) {
    if (g_stop.load()) return std::nullopt;
    const int64_t middle = fit + (no_fit - fit) / 2;
    std::optional<bool> fits = probe(middle);
    if (!fits) return std::nullopt;
    (*fits ? fit : no_fit) = middle;
  }
  return fit;
}

double ScaledLr(const std::string& rule, int64_t batch) {
  const double ratio =
      static_cast<double>(batch) / static_cast<double>(absl::GetFlag(FLAGS_base_batch));
  const double lr = absl::GetFlag(FLAGS_base_lr);
  if (rule == "linear") return lr * ratio;
  if (rule == "sqrt") return lr * std::sqrt(ratio);
  return lr;
}

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

// ---- the ranking table ----------------------------------------------------

struct Row {
  std::string name;
  int trials = 0, failed = 0;
  double median = NAN;                                // the objective over successful trials
  double rh_per_accepted = NAN;                       // resource-hours of all trials / successes
  double p50 = NAN, p90 = NAN, p99 = NAN, rps = NAN;  // serving medians
  double samples_per_s = NAN;                         // training: steady, median
};

std::vector<Row> Rows(const tuning::ExperimentSpec& spec, const tuning::ExperimentResult& result) {
  std::vector<Row> rows(spec.variants.size());
  std::vector<std::vector<double>> objective(rows.size()), p50(rows.size()), p90(rows.size()),
      p99(rows.size()), rps(rows.size()), sps(rows.size());
  std::vector<double> hours(rows.size(), 0);
  for (size_t v = 0; v < rows.size(); ++v) rows[v].name = spec.variants[v].name;
  for (const tuning::Trial& t : result.trials) {
    const auto v = static_cast<size_t>(t.variant);
    ++rows[v].trials;
    hours[v] += t.resource_hours.value_or(0);
    if (t.failed) {  // MLPerf's rule, as the verdict reads it: an infinite time
      ++rows[v].failed;
      objective[v].push_back(INFINITY);
      continue;
    }
    const std::optional<double> value = spec.objective == "time_to_target"   ? t.time_to_target_s
                                        : spec.objective == "latency_p99_ms" ? t.latency_p99_ms
                                                                             : std::nullopt;
    if (value) objective[v].push_back(*value);
    if (t.latency_p50_ms) p50[v].push_back(*t.latency_p50_ms);
    if (t.latency_p90_ms) p90[v].push_back(*t.latency_p90_ms);
    if (t.latency_p99_ms) p99[v].push_back(*t.latency_p99_ms);
    if (t.requests_per_s) rps[v].push_back(*t.requests_per_s);
    if (t.steady_samples_per_s) sps[v].push_back(*t.steady_samples_per_s);
  }
  for (size_t v = 0; v < rows.size(); ++v) {
    rows[v].median = Median(objective[v]);
    const int accepted = rows[v].trials - rows[v].failed;
    rows[v].rh_per_accepted = accepted > 0 ? hours[v] / accepted : INFINITY;
    rows[v].p50 = Median(p50[v]);
    rows[v].p90 = Median(p90[v]);
    rows[v].p99 = Median(p99[v]);
    rows[v].rps = Median(rps[v]);
    rows[v].samples_per_s = Median(sps[v]);
  }
  // Best first: the objective (a size that never reached the target last),
  // then resource-hours per accepted result.
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    const double x = std::isnan(a.median) ? INFINITY : a.median;  // NaN: no trial
    const double y = std::isnan(b.median) ? INFINITY : b.median;
    if (x != y) return x < y;
    return a.rh_per_accepted < b.rh_per_accepted;
  });
  return rows;
}

void PrintTraining(const std::vector<Row>& rows) {
  std::fprintf(stderr,
               "\nranked by time to target, then resource-hours per accepted result "
               "(samples/s is not the ranking):\n"
               "  rank  variant   time to target (median)  failures  resource-hours/accepted  "
               "samples/s\n");
  int rank = 1;
  for (const Row& r : rows) {
    std::fprintf(stderr, "  %4d  %-8s  %23s  %4d of %d  %23s  %9.0f\n", rank++, r.name.c_str(),
                 !std::isfinite(r.median) ? "never" : (Fixed(r.median, 3) + " s").c_str(), r.failed,
                 r.trials,
                 std::isinf(r.rh_per_accepted) ? "-" : absl::StrCat(r.rh_per_accepted).c_str(),
                 r.samples_per_s);
  }
}

void PrintServing(const std::vector<Row>& rows) {
  std::fprintf(stderr,
               "\nlatency per maximum batch (medians over trials), ranked by p99:\n"
               "  variant   p50 ms   p90 ms   p99 ms   requests/s  failures\n");
  for (const Row& r : rows) {
    std::fprintf(stderr, "  %-8s %7.2f  %7.2f  %7.2f  %11.1f  %d of %d\n", r.name.c_str(), r.p50,
                 r.p90, r.p99, r.rps, r.failed, r.trials);
  }
}

int RunSpec(const tuning::ExperimentSpec& spec, bool serving) {
  tuning::RunOptions options;
  options.output = absl::GetFlag(FLAGS_out) + "/experiment.json";
  options.trials_dir = absl::GetFlag(FLAGS_out) + "/trials";
  options.stop = &g_stop;
  std::fprintf(stderr, "tune_batch: %s\n  %zu variants x up to %d repeats, trials in %s\n",
               spec.hypothesis.c_str(), spec.variants.size(), spec.repeats,
               options.trials_dir.c_str());
  absl::StatusOr<tuning::ExperimentResult> result = tuning::RunExperiment(spec, options);
  if (!result.ok()) {
    std::fprintf(stderr, "tune_batch: %s\n", result.status().ToString().c_str());
    return 1;
  }
  const std::vector<Row> rows = Rows(spec, *result);
  serving ? PrintServing(rows) : PrintTraining(rows);
  std::fprintf(stderr, "wrote %s\n", options.output.c_str());
  return result->complete ? 0 : 130;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "tune_batch: the largest batch that fits, then batch sizes ranked by time to target.\n"
      "usage: tune_batch [--budget_mb=MB] [--lr_rule=none|linear|sqrt] [--sizes=3] [--out=DIR]\n"
      "       tune_batch --serve [--rate=2000] [--serve_sizes=1,8,64]");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_serve_trial)) return ServeTrial();

  trainscope::samples::StopOnSignals();

  const std::string out = absl::GetFlag(FLAGS_out);
  tuning::ExperimentSpec spec;
  spec.repeats = absl::GetFlag(FLAGS_repeats);
  spec.sequential = true;
  spec.min_repeats = std::min(3, spec.repeats);
  spec.trial_timeout_s = absl::GetFlag(FLAGS_trial_timeout_s);
  if (spec.repeats < 2) {
    std::fprintf(stderr, "tune_batch: --repeats must be at least 2\n");
    return 2;
  }

  if (absl::GetFlag(FLAGS_serve)) {
    std::vector<int64_t> sizes;
    for (absl::string_view part : absl::StrSplit(absl::GetFlag(FLAGS_serve_sizes), ',')) {
      int64_t n = 0;
      if (!absl::SimpleAtoi(part, &n) || n < 1) {
        std::fprintf(stderr, "tune_batch: --serve_sizes: \"%s\" is not a positive integer\n",
                     std::string(part).c_str());
        return 2;
      }
      sizes.push_back(n);
    }
    if (sizes.size() < 2 || absl::GetFlag(FLAGS_rate) <= 0 ||
        absl::GetFlag(FLAGS_serve_seconds) <= 0) {
      std::fprintf(stderr,
                   "tune_batch: --serve needs two --serve_sizes or more and a positive --rate "
                   "and --serve_seconds\n");
      return 2;
    }
    const std::string rate = Fixed(absl::GetFlag(FLAGS_rate), 0);
    spec.hypothesis = "batching requests up to a larger maximum lowers p99 latency at " + rate +
                      " requests/s (Poisson arrivals)";
    spec.command = {BesideMe("tune_batch"),
                    "--serve_trial",
                    "--out={out}",
                    "--seed={repeat}",
                    "--rate=" + rate,
                    "--serve_seconds=" + Fixed(absl::GetFlag(FLAGS_serve_seconds), 3),
                    "--serve_hidden=" + std::to_string(absl::GetFlag(FLAGS_serve_hidden))};
    for (int64_t n : sizes) {
      spec.variants.push_back(
          {"max" + std::to_string(n), {"--serve_max_batch=" + std::to_string(n)}, {}, {}});
    }
    spec.objective = "latency_p99_ms";
    spec.notes = {{"arrivals", "Poisson at " + rate + " requests/s, seed = the trial's round"},
                  {"latency", "from each request's scheduled arrival to its batch's answer"}};
    return RunSpec(spec, /*serving=*/true);
  }

  // Training: the probe, then the experiment.
  std::string device = absl::GetFlag(FLAGS_device);
  if (device == "auto") device = torch::cuda::is_available() ? "cuda" : "cpu";
  if (device != "cpu" && device != "cuda") {
    std::fprintf(stderr, "tune_batch: --device=%s: expected auto, cpu or cuda\n", device.c_str());
    return 2;
  }
  if (device == "cuda" && !torch::cuda::is_available()) {
    std::fprintf(stderr, "tune_batch: --device=cuda: no CUDA device is available\n");
    return 2;
  }
  // train_mlp trains on the GPU when it sees one: --device=cpu hides them
  // from every probe and trial.
  const bool hide_gpus = device == "cpu" && torch::cuda::is_available();
  if (hide_gpus) setenv("CUDA_VISIBLE_DEVICES", "", 1);
  const std::string rule = absl::GetFlag(FLAGS_lr_rule);
  if (rule != "none" && rule != "linear" && rule != "sqrt") {
    std::fprintf(stderr, "tune_batch: --lr_rule=%s: expected none, linear or sqrt\n", rule.c_str());
    return 2;
  }
  const double margin = absl::GetFlag(FLAGS_margin);
  if (margin < 0 || margin >= 1 || absl::GetFlag(FLAGS_min_batch) < 1 ||
      absl::GetFlag(FLAGS_base_batch) < 1 || absl::GetFlag(FLAGS_sizes) < 2 ||
      absl::GetFlag(FLAGS_max_steps) < 1 || absl::GetFlag(FLAGS_budget_mb) < 0 ||
      absl::GetFlag(FLAGS_base_lr) <= 0) {
    std::fprintf(stderr,
                 "tune_batch: need 0 <= --margin < 1, --min_batch, --base_batch and --max_steps "
                 ">= 1, --sizes >= 2, --budget_mb >= 0 and --base_lr > 0\n");
    return 2;
  }
  const std::string program = absl::GetFlag(FLAGS_train_mlp).empty()
                                  ? BesideMe("train_mlp")
                                  : absl::GetFlag(FLAGS_train_mlp);
  if (access(program.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "tune_batch: %s: not an executable (--train_mlp)\n", program.c_str());
    return 2;
  }
  int64_t budget_mb = absl::GetFlag(FLAGS_budget_mb);
  if (budget_mb == 0) {
    budget_mb =
        device == "cpu" ? 64 : trainscope::libtorch::DeviceMemoryBytes(torch::Device(device)) >> 20;
  }
  const auto cap_mb = static_cast<int64_t>(static_cast<double>(budget_mb) * (1 - margin));
  if (cap_mb < 1) {
    std::fprintf(stderr, "tune_batch: --budget_mb=%lld less the margin leaves under 1 MiB\n",
                 static_cast<long long>(budget_mb));
    return 2;
  }
  std::fprintf(stderr,
               "tune_batch: the largest batch of train_mlp --hidden=%d that fits %lld MiB on %s "
               "(budget %lld MiB less a %.0f%% margin)\n",
               absl::GetFlag(FLAGS_hidden), static_cast<long long>(cap_mb), device.c_str(),
               static_cast<long long>(budget_mb), margin * 100);
  std::vector<Probe> probes;
  const std::optional<int64_t> largest = LargestBatch(program, cap_mb, out + "/probes", &probes);
  if (!largest) return g_stop.load() ? 130 : 1;
  if (*largest < absl::GetFlag(FLAGS_base_batch)) {
    std::fprintf(stderr, "tune_batch: the base batch %lld does not fit (largest %lld)\n",
                 static_cast<long long>(absl::GetFlag(FLAGS_base_batch)),
                 static_cast<long long>(*largest));
    return 1;
  }
  std::fprintf(stderr, "  largest batch that fits: %lld\n", static_cast<long long>(*largest));

  char target[32];
  std::snprintf(target, sizeof(target), "%g", absl::GetFlag(FLAGS_target_mse));
  const char* lr_phrase = rule == "linear" ? "the learning rate scaled linearly"
                          : rule == "sqrt" ? "the learning rate scaled by the square root"
                                           : "the same learning rate";
  spec.hypothesis = std::string("a larger batch, with ") + lr_phrase + ", reaches eval_mse " +
                    target + " on " + device + " sooner than batch " +
                    std::to_string(absl::GetFlag(FLAGS_base_batch));
  spec.command = {program,
                  "--out={out}",
                  "--seed={repeat}",
                  "--steps=" + std::to_string(absl::GetFlag(FLAGS_max_steps)),
                  "--hidden=" + std::to_string(absl::GetFlag(FLAGS_hidden)),
                  "--eval_every=10",
                  "--stop_at_target",
                  std::string("--target_mse=") + target};
  std::string sizes_note;
  for (int64_t b = absl::GetFlag(FLAGS_base_batch), n = 0;
       b <= *largest && n < absl::GetFlag(FLAGS_sizes); b *= 2, ++n) {
    const double lr = ScaledLr(rule, b);
    std::vector<std::pair<std::string, std::string>> env;
    if (hide_gpus) env.emplace_back("CUDA_VISIBLE_DEVICES", "");
    spec.variants.push_back({"b" + std::to_string(b),
                             {"--batch_size=" + std::to_string(b), "--lr=" + absl::StrCat(lr)},
                             env,
                             {}});
    absl::StrAppend(&sizes_note, sizes_note.empty() ? "" : ", ", b, " at lr ", lr);
  }
  if (spec.variants.size() < 2) {
    std::fprintf(stderr, "tune_batch: only the base batch fits: nothing to compare\n");
    return 1;
  }
  std::string probe_note;
  for (const Probe& p : probes) {
    absl::StrAppend(&probe_note, probe_note.empty() ? "" : ", ", p.batch,
                    p.fits ? " fits" : " out of memory");
  }
  spec.notes = {{"lr_rule", rule},
                {"lr_rule_source", LrRuleSource(rule)},
                {"base_batch", std::to_string(absl::GetFlag(FLAGS_base_batch))},
                {"base_lr", absl::StrCat(absl::GetFlag(FLAGS_base_lr))},
                {"sizes", sizes_note},
                {"memory_budget_mb", std::to_string(budget_mb)},
                {"margin", absl::StrCat(margin)},
                {"probes", probe_note},
                {"largest_batch_that_fits", std::to_string(*largest)}};
  return RunSpec(spec, /*serving=*/false);
}
