// serve_mlp: an MLP answering requests, batched up to a maximum: the
// serving side of `trainscope tune batch --serve` (docs/experiments.md).
// Requests arrive as a Poisson process at --rate a second for
// --serve_seconds; the server takes up to --max_batch of those that have
// arrived, answers them as one batch, and records each request's latency
// from its scheduled arrival (so a late server is not hidden) with
// Session::RecordLatency: report.serving gets p50/p90/p99 and the rate.
//
//   trainscope tune batch --serve --serve_sizes=1,8,64 --
//       build/bin/serve_mlp --max_batch={batch} --seed={repeat} --out={out}
//
// Memory: the arrival times, O(rate x serve_seconds).
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "trainscope/trainscope.h"

ABSL_FLAG(std::string, out, "out/serve_mlp", "where report.json goes");
ABSL_FLAG(int64_t, max_batch, 1, "the largest batch of requests answered at once");
ABSL_FLAG(double, rate, 4000, "requests a second (Poisson arrivals)");
ABSL_FLAG(double, serve_seconds, 2, "how long requests arrive");
ABSL_FLAG(int, hidden, 1024,
          "the MLP's width (1024: one request alone takes a good part of the gap between "
          "arrivals at 4000/s on one core)");
ABSL_FLAG(int64_t, seed, 0, "the arrivals' seed");

namespace {

std::string Fixed(double v, int digits) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, v);
  return text;
}

// Requests arrive at Poisson times; the server takes up to max_batch of
// those that have arrived, runs the model on them as one batch, and records
// each one's latency from its scheduled arrival.
int Serve() {
  torch::set_num_threads(1);
  const int64_t max_batch = absl::GetFlag(FLAGS_max_batch);
  const double rate = absl::GetFlag(FLAGS_rate);
  const double seconds = absl::GetFlag(FLAGS_serve_seconds);
  const int hidden = absl::GetFlag(FLAGS_hidden);
  trainscope::Options options;
  options.output_dir = absl::GetFlag(FLAGS_out);
  options.run_name = "serve_mlp";
  options.config = {{"max_batch", std::to_string(max_batch)},
                    {"rate", Fixed(rate, 1)},
                    {"serve_seconds", Fixed(seconds, 3)},
                    {"hidden", std::to_string(hidden)},
                    {"seed", std::to_string(absl::GetFlag(FLAGS_seed))}};
  absl::StatusOr<trainscope::Session> session = trainscope::Session::Start(options);
  if (!session.ok()) {
    std::fprintf(stderr, "serve_mlp: %s\n", session.status().ToString().c_str());
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
    std::fprintf(stderr, "serve_mlp: %s\n", report.status().ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "serve_mlp: answers Poisson requests in batches, recording each latency.\n"
      "usage: serve_mlp [--max_batch=1] [--rate=4000] [--serve_seconds=2] [--out=DIR]");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_max_batch) < 1 || !(absl::GetFlag(FLAGS_rate) > 0) ||
      !(absl::GetFlag(FLAGS_serve_seconds) > 0) || absl::GetFlag(FLAGS_hidden) < 1) {
    std::fprintf(stderr,
                 "serve_mlp: need --max_batch >= 1, --rate > 0, --serve_seconds > 0 and --hidden "
                 ">= 1\n");
    return 2;
  }
  return Serve();
}
