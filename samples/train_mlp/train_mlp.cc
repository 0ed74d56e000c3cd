// train_mlp: a LibTorch MLP on a synthetic regression task, instrumented
// end to end with trainscope. The main job of the README.
//
//   train_mlp --steps=200 --batch_size=64 --loader_delay_ms=5 --out=out/train_mlp
//
// Prints the trainscope summary and writes out/train_mlp/{trace.json,report.json}.
// --loader_delay_ms simulates a slow input pipeline (decode, storage): the
// report's idle share rises with it, and its top cause becomes data_wait.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "trainscope/torch/torch.h"
#include "trainscope/trainscope.h"

ABSL_FLAG(int64_t, steps, 200, "training steps to run");
ABSL_FLAG(int64_t, batch_size, 64, "samples per step");
ABSL_FLAG(int64_t, loader_delay_ms, 0, "simulated input-pipeline latency per batch, in ms");
ABSL_FLAG(std::string, out, "out/train_mlp", "output directory for trace.json and report.json");
ABSL_FLAG(int64_t, hidden, 256, "width of the two hidden layers");
ABSL_FLAG(double, lr, 0.003, "Adam learning rate");
ABSL_FLAG(int64_t, seed, 1, "seed of the synthetic data and the model");
ABSL_FLAG(int64_t, warmup_steps, -1, "steps the report treats as warmup (-1: automatic rule)");
ABSL_FLAG(double, target_mse, 0.1, "acceptance: the held-out MSE the run must reach");
ABSL_FLAG(int64_t, sync_every, 10, "read the loss on the host every N steps (a sync point)");
ABSL_FLAG(bool, device_timeline, true,
          "collect the CUDA device timeline with CUPTI (when a GPU and driver are present)");
ABSL_FLAG(int, threads, 1,
          "LibTorch intra-op threads (0: LibTorch's default). One is fastest for this small "
          "model, and avoids OpenMP spinning when the machine is shared");

namespace {

constexpr int64_t kFeatures = 32;

// A synthetic regression set made in-process: y = x·w + 0.1·noise.
struct SyntheticData {
  torch::Tensor x, y, eval_x, eval_y;
};

SyntheticData MakeData(int64_t samples, int64_t seed) {
  torch::manual_seed(seed);
  const torch::Tensor w = torch::randn({kFeatures, 1});
  SyntheticData data;
  data.x = torch::randn({samples, kFeatures});
  data.y = data.x.matmul(w) + 0.1 * torch::randn({samples, 1});
  data.eval_x = torch::randn({1024, kFeatures});
  data.eval_y = data.eval_x.matmul(w);
  return data;
}

// Hands out batches in order, taking `delay` per batch like a slow pipeline.
class SlowLoader {
 public:
  SlowLoader(const SyntheticData& data, int64_t batch_size, std::chrono::milliseconds delay)
      : data_(data), batch_size_(batch_size), delay_(delay) {}

  std::pair<torch::Tensor, torch::Tensor> Next() {
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    const int64_t n = data_.x.size(0);
    const int64_t start = (cursor_ * batch_size_) % (n - batch_size_ + 1);
    ++cursor_;
    return {data_.x.narrow(0, start, batch_size_), data_.y.narrow(0, start, batch_size_)};
  }

 private:
  const SyntheticData& data_;
  int64_t batch_size_;
  std::chrono::milliseconds delay_;
  int64_t cursor_ = 0;
};

torch::nn::Sequential MakeModel(int64_t hidden) {
  return torch::nn::Sequential(torch::nn::Linear(kFeatures, hidden), torch::nn::ReLU(),
                               torch::nn::Linear(hidden, hidden), torch::nn::ReLU(),
                               torch::nn::Linear(hidden, 1));
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "train_mlp: an instrumented LibTorch training loop.\n"
      "usage: train_mlp [--steps=N] [--batch_size=N] [--loader_delay_ms=MS] [--out=DIR]");
  absl::ParseCommandLine(argc, argv);
  const int64_t steps = absl::GetFlag(FLAGS_steps);
  const int64_t batch_size = absl::GetFlag(FLAGS_batch_size);
  const int64_t delay_ms = absl::GetFlag(FLAGS_loader_delay_ms);
  if (steps <= 0 || batch_size <= 0 || delay_ms < 0 || absl::GetFlag(FLAGS_hidden) <= 0 ||
      absl::GetFlag(FLAGS_sync_every) <= 0) {
    std::fprintf(stderr,
                 "train_mlp: --steps, --batch_size, --hidden and --sync_every must be positive "
                 "and --loader_delay_ms not negative\n");
    return 2;
  }

  if (absl::GetFlag(FLAGS_threads) > 0) torch::set_num_threads(absl::GetFlag(FLAGS_threads));

  trainscope::Options options;
  options.output_dir = absl::GetFlag(FLAGS_out);
  options.run_name = "train_mlp";
  options.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
  options.device_timeline = absl::GetFlag(FLAGS_device_timeline);
  options.data_version = "synthetic-regression-v1 (seed " +
                         std::to_string(absl::GetFlag(FLAGS_seed)) + ")";
  options.config = {{"steps", std::to_string(steps)},
                    {"batch_size", std::to_string(batch_size)},
                    {"loader_delay_ms", std::to_string(delay_ms)},
                    {"hidden", std::to_string(absl::GetFlag(FLAGS_hidden))},
                    {"lr", std::to_string(absl::GetFlag(FLAGS_lr))},
                    {"threads", std::to_string(absl::GetFlag(FLAGS_threads))}};
  absl::StatusOr<trainscope::Session> session = trainscope::Session::Start(options);
  if (!session.ok()) {
    std::fprintf(stderr, "train_mlp: %s\n", session.status().ToString().c_str());
    return 1;
  }
  trainscope::torch::DescribeTorch(*session);

  const torch::Device device =
      torch::cuda::is_available() ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  const SyntheticData data = MakeData(batch_size * 64, absl::GetFlag(FLAGS_seed));
  SlowLoader loader(data, batch_size, std::chrono::milliseconds(delay_ms));
  torch::nn::Sequential model = MakeModel(absl::GetFlag(FLAGS_hidden));
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(absl::GetFlag(FLAGS_lr)));

  double last_loss = 0;
  for (int64_t i = 0; i < steps; ++i) {
    trainscope::StepScope step(*session, i, trainscope::Samples(batch_size));
    std::pair<torch::Tensor, torch::Tensor> batch;
    {
      TRAINSCOPE_PHASE(kDataWait);
      batch = loader.Next();
    }
    {
      TRAINSCOPE_PHASE(kHostToDevice);
      batch.first = batch.first.to(device, /*non_blocking=*/true);
      batch.second = batch.second.to(device, /*non_blocking=*/true);
    }
    torch::Tensor loss;
    {
      TRAINSCOPE_PHASE(kForward);
      loss = torch::mse_loss(model->forward(batch.first), batch.second);
    }
    {
      TRAINSCOPE_PHASE(kBackward);
      optimizer.zero_grad();
      loss.backward();
    }
    {
      TRAINSCOPE_PHASE(kOptimizer);
      optimizer.step();
    }
    if ((i + 1) % absl::GetFlag(FLAGS_sync_every) == 0 || i + 1 == steps) {
      TRAINSCOPE_PHASE(kSync);
      last_loss = loss.item<double>();
    }
  }

  if (device.is_cuda()) {
    TRAINSCOPE_PHASE(kSync);
    torch::cuda::synchronize();  // the last kernels complete before CUPTI flushes
  }
  double eval_mse = 0;
  {
    TRAINSCOPE_PHASE(kEval);
    torch::NoGradGuard no_grad;
    eval_mse = torch::mse_loss(model->forward(data.eval_x.to(device)), data.eval_y.to(device))
                   .item<double>();
  }
  session->SetConfig("final_train_loss", std::to_string(last_loss));
  session->SetAcceptance("eval_mse", absl::GetFlag(FLAGS_target_mse), eval_mse,
                         /*higher_is_better=*/false);
  absl::StatusOr<trainscope::Report> report = session->Finish();
  if (!report.ok()) {
    std::fprintf(stderr, "train_mlp: %s\n", report.status().ToString().c_str());
    return 1;
  }
  return 0;
}
