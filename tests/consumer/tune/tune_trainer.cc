// tune_trainer: a LibTorch training program written for the `trainscope
// tune` tests and not for the samples: its own model (a two-layer MLP that
// learns a fixed random "teacher" network), its own flag names, and a
// dataset whose decoding costs a known CPU time per batch. It is built
// against the installed package only (find_package(trainscope COMPONENTS
// torch)) and keeps the trial contract of docs/experiments.md:
//
//   --precision=fp32|bf16|fp16|bf16-buggy  autocast (bf16-buggy: bf16 with a
//                                          numerical bug: every gradient
//                                          tripled, as by a loss summed
//                                          where it should be averaged; it
//                                          trains faster, and differently)
//   --batch-size=N --learning-rate=X       SGD with momentum
//   --num-workers=W --prefetch-depth=P     LibTorch's DataLoader
//   --pin-memory=0|1                       (trainscope::libtorch::
//                                          MakeDataLoader); W = 0 decodes
//                                          on the training thread
//   --decode-ms=D                          CPU time to decode one batch
//   --compute-ms=C                         CPU time added to each step
//   --mem-limit-mb=M                       LimitMemory (0: none); out of
//                                          memory is recorded and exits 3
//   --max-steps=N --eval-every=K --target-mse=X --seed=S --hidden=H
//
// It stops at the quality target (eval MSE <= X) or after N steps.
#include <time.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "trainscope/torch/amp.h"
#include "trainscope/torch/data.h"
#include "trainscope/torch/device.h"
#include "trainscope/torch/loader.h"
#include "trainscope/trainscope.h"

namespace {

struct Flags {
  std::string precision = "fp32", device = "cpu";
  int64_t batch_size = 64, workers = 0, prefetch = 2, max_steps = 400, eval_every = 10, seed = 0,
          hidden = 64, mem_limit_mb = 0, pin_memory = 0;
  double learning_rate = 0.05, decode_ms = 0, compute_ms = 0, target_mse = 0.05;
};

double ThreadCpuMs() {
  timespec t = {};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

// Burns `ms` of this thread's CPU time: the known cost of a decode.
void BurnCpu(double ms) {
  const double until = ThreadCpuMs() + ms;
  volatile uint64_t x = 1;
  while (ThreadCpuMs() < until) {
    for (int i = 0; i < 1000; ++i) x = x * 6364136223846793005u + 1;
  }
}

bool Parse(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos) return false;
    const std::string key = arg.substr(2, eq - 2), value = arg.substr(eq + 1);
    char* end = nullptr;
    const double n = std::strtod(value.c_str(), &end);
    const bool number = !value.empty() && *end == '\0';
    if (key == "precision") {
      f->precision = value;
    } else if (key == "device") {
      f->device = value;
    } else if (!number) {
      return false;
    } else if (key == "batch-size") {
      f->batch_size = static_cast<int64_t>(n);
    } else if (key == "learning-rate") {
      f->learning_rate = n;
    } else if (key == "num-workers") {
      f->workers = static_cast<int64_t>(n);
    } else if (key == "pin-memory") {
      f->pin_memory = static_cast<int64_t>(n);
    } else if (key == "prefetch-depth") {
      f->prefetch = static_cast<int64_t>(n);
    } else if (key == "decode-ms") {
      f->decode_ms = n;
    } else if (key == "compute-ms") {
      f->compute_ms = n;
    } else if (key == "mem-limit-mb") {
      f->mem_limit_mb = static_cast<int64_t>(n);
    } else if (key == "max-steps") {
      f->max_steps = static_cast<int64_t>(n);
    } else if (key == "eval-every") {
      f->eval_every = static_cast<int64_t>(n);
    } else if (key == "target-mse") {
      f->target_mse = n;
    } else if (key == "seed") {
      f->seed = static_cast<int64_t>(n);
    } else if (key == "hidden") {
      f->hidden = static_cast<int64_t>(n);
    } else {
      return false;
    }
  }
  return f->batch_size > 0 && f->workers >= 0 && f->prefetch > 0 && f->eval_every > 0 &&
         (f->pin_memory == 0 || f->pin_memory == 1);
}

// The training data, a batch at a time (LibTorch's BatchDataset): the
// batch of examples [k x B, (k + 1) x B) is B rows of 16 normals drawn from
// batch k's own seed and the teacher's answers; decoding it costs
// decode_ms of CPU, on whichever thread makes it (a loader worker, or the
// training thread with no workers).
class DecodeDataset
    : public torch::data::datasets::BatchDataset<DecodeDataset, torch::data::Example<>> {
 public:
  DecodeDataset(torch::Tensor teacher, int64_t seed, size_t size, double decode_ms)
      : teacher_(std::move(teacher)), seed_(seed), size_(size), decode_ms_(decode_ms) {}
  torch::data::Example<> get_batch(c10::ArrayRef<size_t> indices) override {
    BurnCpu(decode_ms_);
    const uint64_t batch = indices.empty() ? 0 : indices[0] / indices.size();
    torch::Generator gen =
        at::detail::createCPUGenerator(static_cast<uint64_t>(seed_) * 1000003 + batch);
    torch::Tensor x = torch::randn({static_cast<int64_t>(indices.size()), 16}, gen);
    return {x, torch::tanh(x.matmul(teacher_))};
  }
  std::optional<size_t> size() const override { return size_; }

 private:
  torch::Tensor teacher_;
  int64_t seed_;
  size_t size_;
  double decode_ms_;
};

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  if (!Parse(argc, argv, &f)) {
    std::fprintf(stderr, "tune_trainer: bad flags (see the comment at the top of the source)\n");
    return 2;
  }
  const bool buggy = f.precision == "bf16-buggy";
  const bool autocast = f.precision != "fp32";
  const at::ScalarType dtype = f.precision == "fp16" ? at::kHalf : at::kBFloat16;
  if (!(f.precision == "fp32" || f.precision == "bf16" || f.precision == "fp16" || buggy)) {
    std::fprintf(stderr, "tune_trainer: --precision=%s: fp32, bf16, fp16 or bf16-buggy\n",
                 f.precision.c_str());
    return 2;
  }
  torch::set_num_threads(1);  // the step's compute on one core: the loader has the other
  const torch::Device device(f.device == "cuda" ? torch::kCUDA : torch::kCPU);

  trainscope::Options options;
  options.output_dir = "tune_trainer-out";  // TRAINSCOPE_OUTPUT_DIR wins
  options.run_name = "tune_trainer";
  options.sinks = trainscope::Sink::kReportJson;
  options.warmup_steps = 2;
  options.config = {{"precision", f.precision},
                    {"batch_size", std::to_string(f.batch_size)},
                    {"learning_rate", std::to_string(f.learning_rate)},
                    {"loader.workers", std::to_string(f.workers)},
                    {"loader.prefetch", std::to_string(f.prefetch)},
                    {"decode_ms", std::to_string(f.decode_ms)},
                    {"seed", std::to_string(f.seed)}};
  absl::StatusOr<trainscope::Session> session = trainscope::Session::Start(options);
  if (!session.ok()) {
    std::fprintf(stderr, "tune_trainer: %s\n", session.status().ToString().c_str());
    return 1;
  }
  if (f.mem_limit_mb > 0) {
    if (absl::Status s = trainscope::libtorch::LimitMemory(device, f.mem_limit_mb << 20); !s.ok()) {
      std::fprintf(stderr, "tune_trainer: %s\n", s.ToString().c_str());
      return 2;
    }
  }
  session->SetQualityTarget("eval_mse", f.target_mse, /*higher_is_better=*/false);

  int exit_code = 0;
  const absl::Status fits = trainscope::libtorch::CatchOutOfMemory(*session, [&] {
    // The data: a fixed teacher and a fixed start for the student; the
    // seed draws the batches.
    torch::manual_seed(12345);
    const torch::Tensor teacher = torch::randn({16, 1}) / 4;
    const torch::Tensor eval_x = torch::randn({512, 16});
    const torch::Tensor eval_y = torch::tanh(eval_x.matmul(teacher));
    torch::nn::Sequential model(torch::nn::Linear(16, f.hidden), torch::nn::ReLU(),
                                torch::nn::Linear(f.hidden, 1));
    model->to(device);
    torch::optim::SGD sgd(model->parameters(),
                          torch::optim::SGDOptions(f.learning_rate).momentum(0.9));
    // LibTorch's own loader, from the tuned settings: {workers},
    // {prefetch}, {pin}. One epoch is the run's max_steps batches, in order.
    trainscope::LoaderSettings settings;
    settings.workers = static_cast<int>(f.workers);
    settings.prefetch = static_cast<int>(f.prefetch);
    settings.pin_memory = f.pin_memory == 1;
    settings.batch_size = f.batch_size;
    auto loader = trainscope::libtorch::MakeDataLoader<torch::data::samplers::SequentialSampler>(
        *session,
        DecodeDataset(teacher, f.seed, static_cast<size_t>(f.max_steps * f.batch_size),
                      f.decode_ms),
        settings, device);
    if (!loader.ok()) {
      std::fprintf(stderr, "tune_trainer: %s\n", loader.status().ToString().c_str());
      exit_code = 2;
      return;
    }
    for (auto& [scope, batch] : trainscope::libtorch::Steps(*session, **loader)) {
      const int64_t step = scope.index();
      scope.set_samples(trainscope::Samples(batch.data.size(0)));
      torch::Tensor loss;
      {
        TRAINSCOPE_PHASE(kForward);
        BurnCpu(f.compute_ms);
        std::optional<trainscope::libtorch::AutocastGuard> cast;
        if (autocast) cast.emplace(device.type(), dtype);
        loss = torch::mse_loss(model->forward(batch.data.to(device)).to(torch::kFloat),
                               batch.target.to(device));
      }
      {
        TRAINSCOPE_PHASE(kBackward);
        sgd.zero_grad();
        loss.backward();
        if (buggy) {  // the injected bug: a loss summed over three where it should be averaged
          for (torch::Tensor& p : model->parameters()) p.mutable_grad().mul_(3);
        }
      }
      {
        TRAINSCOPE_PHASE(kOptimizer);
        sgd.step();
      }
      (void)session->RecordLoss(step, loss.item<double>());
      if ((step + 1) % f.eval_every == 0) {
        TRAINSCOPE_PHASE(kEval);
        torch::NoGradGuard no_grad;
        const double mse =
            torch::mse_loss(model->forward(eval_x.to(device)).to(torch::kFloat), eval_y.to(device))
                .item<double>();
        (void)session->RecordQuality("eval_mse", mse);
        if (mse <= f.target_mse) break;
      }
    }
  });
  if (!fits.ok()) {
    std::fprintf(stderr, "tune_trainer: out of memory: %s\n", std::string(fits.message()).c_str());
    exit_code = 3;
  }
  absl::StatusOr<trainscope::Report> report = session->Finish();
  if (!report.ok()) {
    std::fprintf(stderr, "tune_trainer: %s\n", report.status().ToString().c_str());
    return 1;
  }
  return exit_code;
}
