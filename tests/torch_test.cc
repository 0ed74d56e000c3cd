// trainscope::libtorch on real LibTorch tensors, on CPU: AutocastGuard,
// GradScaler, the loader wrappers, the device prefetcher's pass-through and
// the per-step memory record.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <time.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>

#include "sdk/export/report_json.h"
#include "sdk/export/steps_file.h"
#include "tests/test_util.h"
#include "trainscope/checkpoint.h"
#include "trainscope/torch/amp.h"
#include "trainscope/torch/data.h"
#include "trainscope/torch/device.h"
#include "trainscope/torch/distributed.h"
#include "trainscope/torch/internal/collectives.h"
#include "trainscope/torch/internal/device_index.h"
#include "trainscope/torch/internal/device_timings.h"
#include "trainscope/torch/loader.h"
#include "trainscope/torch/state.h"
#include "trainscope/trainscope.h"

namespace trainscope {
namespace {

using testing::TempDir;

Options QuietOptions(const std::string& dir) {
  return trainscope::testing::QuietOptions(dir, "torch-test");
}

using trainscope::testing::FindCounter;
using trainscope::testing::FindPhase;

TEST(AutocastGuardTest, CpuBf16InsideRestoredOutsideAndNested) {
  const ::torch::Tensor a = ::torch::randn({8, 8});
  EXPECT_EQ(::torch::mm(a, a).scalar_type(), ::torch::kFloat);
  {
    libtorch::AutocastGuard bf16(::torch::kCPU, ::torch::kBFloat16);
    EXPECT_TRUE(at::autocast::is_autocast_enabled(::torch::kCPU));
    EXPECT_EQ(::torch::mm(a, a).scalar_type(), ::torch::kBFloat16);
    {
      libtorch::AutocastGuard off(::torch::kCPU, ::torch::kBFloat16, /*enabled=*/false);
      EXPECT_EQ(::torch::mm(a, a).scalar_type(), ::torch::kFloat);
    }
    EXPECT_EQ(::torch::mm(a, a).scalar_type(), ::torch::kBFloat16);
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(::torch::kCPU));
  EXPECT_EQ(::torch::mm(a, a).scalar_type(), ::torch::kFloat);
}

// A one-layer model whose backward gives a known gradient, and a way to
// poison it.
struct Tiny {
  ::torch::nn::Linear layer{::torch::nn::LinearOptions(4, 1).bias(false)};
  ::torch::optim::SGD sgd{layer->parameters(), ::torch::optim::SGDOptions(0.1)};
  Tiny() {
    ::torch::NoGradGuard no_grad;
    layer->weight.copy_(::torch::tensor({{0.5f, -1.0f, 0.25f, 2.0f}}));
  }
  ::torch::Tensor Loss() {
    const ::torch::Tensor x = ::torch::tensor({{1.0f, 2.0f, 3.0f, 4.0f}});
    return layer->forward(x).pow(2).sum();
  }
};

TEST(GradScalerTest, InfSkipsTheStepAndBacksOff) {
  Tiny tiny;
  trainscope::libtorch::GradScaler scaler;
  EXPECT_EQ(scaler.scale(), 65536.0);
  tiny.sgd.zero_grad();
  scaler.Scale(tiny.Loss()).backward();
  tiny.layer->weight.grad()[0][1] = std::numeric_limits<float>::infinity();
  const ::torch::Tensor before = tiny.layer->weight.detach().clone();
  absl::StatusOr<bool> stepped = scaler.Step(tiny.sgd);
  ASSERT_TRUE(stepped.ok()) << stepped.status();
  EXPECT_FALSE(*stepped);
  EXPECT_TRUE(::torch::equal(tiny.layer->weight, before)) << "a skipped step changes nothing";
  scaler.Update();
  EXPECT_EQ(scaler.scale(), 32768.0);
  EXPECT_EQ(scaler.skipped_steps(), 1);

  // A NaN the same way.
  tiny.sgd.zero_grad();
  scaler.Scale(tiny.Loss()).backward();
  tiny.layer->weight.grad()[0][0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(*scaler.Step(tiny.sgd));
  scaler.Update();
  EXPECT_EQ(scaler.scale(), 16384.0);
  EXPECT_EQ(scaler.skipped_steps(), 2);
}

// As PyTorch's (torch.full((), init_scale)): the scale is 0-dim, so a
// scalar loss stays a scalar.
TEST(GradScalerTest, TheScaleIsZeroDimensionalAndKeepsTheLossShape) {
  Tiny tiny;
  trainscope::libtorch::GradScaler scaler;
  const ::torch::Tensor loss = tiny.Loss();
  ASSERT_EQ(loss.dim(), 0);
  const ::torch::Tensor scaled = scaler.Scale(loss);
  EXPECT_EQ(scaled.dim(), 0) << scaled.sizes();
  EXPECT_EQ(scaled.item<double>(), loss.item<double>() * 65536.0);
  scaled.backward();
  ASSERT_TRUE(*scaler.Step(tiny.sgd));
  scaler.Update();
  EXPECT_EQ(scaler.scale(), 65536.0);
}

// PyTorch refuses to unscale fp16 gradients ("Attempting to unscale FP16
// gradients."); so does Unscale, unless the program opts in.
TEST(GradScalerTest, Fp16GradientsAreRefusedUnlessAllowed) {
  for (const bool allow : {false, true}) {
    ::torch::Tensor weight = ::torch::ones({4}, ::torch::kHalf).requires_grad_(true);
    ::torch::optim::SGD sgd({weight}, ::torch::optim::SGDOptions(0.1));
    trainscope::libtorch::GradScalerOptions options;
    options.allow_fp16_gradients = allow;
    options.init_scale = 1024;  // 65536 is past fp16's largest, 65504
    trainscope::libtorch::GradScaler scaler(options);
    scaler.Scale(weight.to(::torch::kFloat).sum()).backward();
    ASSERT_EQ(weight.grad().scalar_type(), ::torch::kHalf);
    const absl::Status unscaled = scaler.Unscale(sgd);
    if (allow) {
      ASSERT_TRUE(unscaled.ok()) << unscaled;
      EXPECT_TRUE(::torch::equal(weight.grad(), ::torch::ones({4}, ::torch::kHalf)));
      EXPECT_TRUE(*scaler.Step(sgd));
    } else {
      EXPECT_EQ(unscaled.code(), absl::StatusCode::kInvalidArgument) << unscaled;
      EXPECT_NE(unscaled.message().find("FP16"), std::string_view::npos) << unscaled;
      EXPECT_TRUE(::torch::equal(weight.grad(), ::torch::full({4}, 1024.0, ::torch::kHalf)))
          << "nothing unscaled";
      EXPECT_EQ(scaler.Step(sgd).status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

TEST(GradScalerTest, UnscaledGradientsAreTheUnscaledOnesBitForBit) {
  Tiny reference;
  reference.sgd.zero_grad();
  reference.Loss().backward();
  Tiny scaled;
  trainscope::libtorch::GradScaler scaler;
  scaled.sgd.zero_grad();
  scaler.Scale(scaled.Loss()).backward();
  EXPECT_FALSE(::torch::equal(scaled.layer->weight.grad(), reference.layer->weight.grad()));
  ASSERT_TRUE(scaler.Unscale(scaled.sgd).ok());
  EXPECT_TRUE(::torch::equal(scaled.layer->weight.grad(), reference.layer->weight.grad()));
  // Unscaling twice would divide twice: refused.
  const absl::Status again = scaler.Unscale(scaled.sgd);
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition) << again;
  ASSERT_TRUE(*scaler.Step(scaled.sgd));
  reference.sgd.step();
  EXPECT_TRUE(::torch::equal(scaled.layer->weight, reference.layer->weight));
  EXPECT_EQ(scaler.Step(scaled.sgd).status().code(), absl::StatusCode::kFailedPrecondition);
  scaler.Update();
}

// The scale after each Update(), worked out by hand from PyTorch's rule
// (back off x0.5 on inf and reset the count; x2 after growth_interval
// clean steps in a row), with growth_interval 3.
TEST(GradScalerTest, ScaleSequenceMatchesTheHandComputedOne) {
  const bool inf[] = {false, false, true, false, false, false,
                      false, true,  true, false, false, false};
  const double expected[] = {65536, 65536, 32768, 32768, 32768, 65536,
                             65536, 32768, 16384, 16384, 16384, 32768};
  const int64_t expected_tracker[] = {1, 2, 0, 1, 2, 0, 1, 0, 0, 1, 2, 0};
  Tiny tiny;
  trainscope::libtorch::GradScalerOptions options;
  options.growth_interval = 3;
  trainscope::libtorch::GradScaler scaler(options);
  for (int i = 0; i < 12; ++i) {
    tiny.sgd.zero_grad();
    scaler.Scale(tiny.Loss()).backward();
    if (inf[i]) tiny.layer->weight.grad()[0][2] = -std::numeric_limits<float>::infinity();
    EXPECT_EQ(*scaler.Step(tiny.sgd), !inf[i]) << i;
    scaler.Update();
    EXPECT_EQ(scaler.scale(), expected[i]) << "after step " << i;
    EXPECT_EQ(scaler.growth_tracker(), expected_tracker[i]) << "after step " << i;
  }
  EXPECT_EQ(scaler.skipped_steps(), 3);
}

TEST(GradScalerTest, GrowsAfterTheIntervalAndNeverBacksOffBelowTheFloor) {
  Tiny tiny;
  trainscope::libtorch::GradScalerOptions options;
  options.init_scale = 1024;
  options.growth_interval = 2000;
  options.min_scale = 256;
  trainscope::libtorch::GradScaler scaler(options);
  for (int i = 0; i < 2000; ++i) {
    tiny.sgd.zero_grad();
    scaler.Scale(tiny.Loss() * 0).backward();  // clean, and the weights stay put
    ASSERT_TRUE(*scaler.Step(tiny.sgd));
    scaler.Update();
    if (i == 1998) {
      EXPECT_EQ(scaler.scale(), 1024.0);
    }
  }
  EXPECT_EQ(scaler.scale(), 2048.0);
  for (int i = 0; i < 6; ++i) {
    tiny.sgd.zero_grad();
    scaler.Scale(tiny.Loss()).backward();
    tiny.layer->weight.grad()[0][0] = std::numeric_limits<float>::infinity();
    EXPECT_FALSE(*scaler.Step(tiny.sgd));
    scaler.Update();
  }
  EXPECT_EQ(scaler.scale(), 256.0) << "2048 / 2^6 = 32, clamped at min_scale";
  EXPECT_EQ(scaler.skipped_steps(), 6);
}

TEST(GradScalerTest, StateRoundTripsAndBadStateIsRefused) {
  Tiny tiny;
  trainscope::libtorch::GradScalerOptions options;
  options.growth_interval = 5;
  trainscope::libtorch::GradScaler scaler(options);
  for (int i = 0; i < 3; ++i) {
    tiny.sgd.zero_grad();
    scaler.Scale(tiny.Loss()).backward();
    if (i == 0) tiny.layer->weight.grad()[0][0] = std::numeric_limits<float>::infinity();
    ASSERT_TRUE(scaler.Step(tiny.sgd).ok());
    scaler.Update();
  }
  const trainscope::libtorch::GradScaler::State state = scaler.state();
  EXPECT_EQ(state.scale, 32768.0);
  EXPECT_EQ(state.growth_tracker, 2);
  EXPECT_EQ(state.skipped_steps, 1);
  trainscope::libtorch::GradScaler restored;
  ASSERT_TRUE(restored.Load(state).ok());
  EXPECT_EQ(restored.scale(), 32768.0);
  EXPECT_EQ(restored.growth_tracker(), 2);
  EXPECT_EQ(restored.options().growth_interval, 5);
  trainscope::libtorch::GradScaler::State bad = state;
  bad.scale = -1;
  EXPECT_EQ(restored.Load(bad).code(), absl::StatusCode::kInvalidArgument);
  bad = state;
  bad.options.backoff_factor = 2;
  EXPECT_EQ(restored.Load(bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(restored.scale(), 32768.0) << "a refused Load changes nothing";
}

TEST(LoaderTest, TorchDataLoaderBatchesAreDataWaitRangesWithTheirIndex) {
  TempDir dir;
  absl::StatusOr<Session> session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  auto dataset =
      ::torch::data::datasets::TensorDataset(::torch::arange(40, ::torch::kFloat).view({40, 1}))
          .map(::torch::data::transforms::Stack<::torch::data::TensorExample>());
  auto loader = ::torch::data::make_data_loader<::torch::data::samplers::SequentialSampler>(
      std::move(dataset), ::torch::data::DataLoaderOptions().batch_size(4).workers(2));
  // Instrument's iterator in a loop that opens its steps itself (here the
  // fetch of the next batch falls in the step before; Steps() in
  // torch_loop_test puts each in its own step).
  auto batches = libtorch::Instrument(*loader);
  int64_t n = 0;
  for (auto it = batches.begin(); it != batches.end(); ++n) {
    StepScope step(*session, StepIndex(n), Samples(4));
    EXPECT_EQ(it->data[0].item<float>(), 4.0f * n) << "batches in order";
    EXPECT_EQ(it.index(), n);
    ++it;
  }
  EXPECT_EQ(n, 10);
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  const Report::Counter* batch = FindCounter(*report, "loader.batch");
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(batch->samples, 10) << "ten batches; the fetch reaching end() counts none";
  EXPECT_EQ(batch->max, 9);
  const PhaseStat* wait = FindPhase(*report, "data_wait");
  ASSERT_NE(wait, nullptr);
  EXPECT_GE(wait->steps, 9);
  const std::string trace = testing::ReadAll(dir.File("trace.json"));
  EXPECT_NE(trace.find("\"name\":\"loader.next\""), std::string::npos);
  EXPECT_NE(trace.find("\"ph\":\"C\",\"cat\":\"trainscope\",\"name\":\"loader.batch\""),
            std::string::npos);
}

TEST(LoaderTest, PrefetchLoaderKeepsOrderStaysBoundedAndNamesItsWorkers) {
  TempDir dir;
  absl::StatusOr<Session> session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  std::atomic<int64_t> consumed{0}, max_ahead{0};
  libtorch::PrefetchOptions options;
  options.workers = 4;
  options.queue_depth = 3;
  options.name = "prefetch";
  options.session = &*session;
  libtorch::PrefetchLoader<::torch::Tensor> loader(
      [&](int64_t i) -> std::optional<::torch::Tensor> {
        if (i >= 60) return std::nullopt;
        int64_t ahead = i - consumed.load();
        for (int64_t m = max_ahead.load();
             ahead > m && !max_ahead.compare_exchange_weak(m, ahead);) {
        }
        if (i % 3 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        return ::torch::full({2}, static_cast<float>(i));
      },
      options);
  int64_t n = 0;
  while (std::optional<::torch::Tensor> batch = loader.Next()) {
    StepScope step(*session, StepIndex(n), Samples(1));
    EXPECT_EQ((*batch)[0].item<float>(), static_cast<float>(n));
    consumed.store(++n);
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  EXPECT_EQ(n, 60);
  EXPECT_FALSE(loader.Next().has_value()) << "the end stays the end";
  EXPECT_LE(max_ahead.load(), options.queue_depth);
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  const Report::Counter* depth = FindCounter(*report, "prefetch.queue_depth");
  ASSERT_NE(depth, nullptr);
  EXPECT_GE(depth->samples, 60);
  EXPECT_LE(depth->max, options.queue_depth);
  ASSERT_EQ(report->loaders.size(), 1u);
  EXPECT_EQ(report->loaders[0].kind, "PrefetchLoader");
  EXPECT_EQ(report->loaders[0].workers, 4);
  EXPECT_EQ(report->loaders[0].prefetch, 1) << "a queue of 3 over 4 workers, rounded up";
  EXPECT_EQ(report->loaders[0].batches, 60) << "one CPU sample per batch made";
  EXPECT_EQ(report->loaders[0].queue_depth_max, depth->max);
  const std::string trace = testing::ReadAll(dir.File("trace.json"));
  EXPECT_NE(trace.find("prefetch/0"), std::string::npos) << "worker threads are named";
  EXPECT_NE(trace.find("prefetch/3"), std::string::npos);
}

// Burns `ms` of the calling thread's CPU time.
void BurnThreadCpu(double ms) {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  const double until = t.tv_sec * 1e3 + t.tv_nsec / 1e6 + ms;
  volatile uint64_t x = 1;
  do {
    for (int i = 0; i < 1000; ++i) x = x * 6364136223846793005u + 1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  } while (t.tv_sec * 1e3 + t.tv_nsec / 1e6 < until);
}

// A dataset whose every example costs 0.5 ms of CPU to "decode".
class DecodingDataset : public ::torch::data::datasets::Dataset<DecodingDataset> {
 public:
  ::torch::data::Example<> get(size_t index) override {
    BurnThreadCpu(0.5);
    return {::torch::full({2}, static_cast<float>(index)), ::torch::tensor(1.0f)};
  }
  std::optional<size_t> size() const override { return 40; }
};

TEST(LoaderTest, MakeDataLoaderIsLibTorchsLoaderWithItsSettingsQueueAndCpuInTheReport) {
  TempDir dir;
  absl::StatusOr<Session> session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  LoaderSettings settings;
  settings.workers = 2;
  settings.prefetch = 3;
  settings.batch_size = 4;
  settings.pin_memory = true;  // a CPU device: nothing to pin, and the report says so
  EXPECT_EQ(libtorch::DataLoaderOptionsFor(settings).max_jobs(), 6u);
  EXPECT_EQ(libtorch::DataLoaderOptionsFor(settings).workers(), 2u);
  auto loader = libtorch::MakeDataLoader<::torch::data::samplers::SequentialSampler>(
      *session, DecodingDataset().map(::torch::data::transforms::Stack<>()), settings);
  ASSERT_TRUE(loader.ok()) << loader.status();
  int64_t n = 0;
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (auto& [step, batch] : libtorch::Steps(*session, **loader, StepIndex(n))) {
      step.set_samples(Samples(batch.data.size(0)));
      EXPECT_EQ(batch.data[0][0].item<float>(), 4.0f * (n % 10)) << "LibTorch's own order";
      ++n;
      // Slower than the two workers (2 ms a batch each): the queue fills.
      std::this_thread::sleep_for(std::chrono::milliseconds(4));
    }
  }
  EXPECT_EQ(n, 20);
  loader->reset();  // joins LibTorch's workers
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->loaders.size(), 1u);
  const Report::Loader& l = report->loaders[0];
  EXPECT_EQ(l.name, "loader");
  EXPECT_EQ(l.kind, "torch::data::DataLoader");
  EXPECT_EQ(l.workers, 2);
  EXPECT_EQ(l.prefetch, 3);
  EXPECT_FALSE(l.pin_memory) << "no CUDA device: nothing was pinned";
  EXPECT_EQ(l.batch_size, 4);
  EXPECT_EQ(l.batches, 20);
  EXPECT_GE(l.cpu_ms_per_batch, 1.9) << "four examples at 0.5 ms of CPU each";
  EXPECT_LT(l.cpu_ms_per_batch, 50);
  EXPECT_NEAR(l.cpu_s, l.cpu_ms_per_batch * 20 / 1e3, 1e-6);
  EXPECT_GT(l.cpu_cores, 0);
  EXPECT_GE(l.queue_samples, 20);
  EXPECT_GT(l.queue_depth_max, 0) << "the workers got ahead of a slow consumer";
  EXPECT_LE(l.queue_depth_max, 6) << "never more than max_jobs";
  const Report::Counter* depth = FindCounter(*report, "loader.queue_depth");
  ASSERT_NE(depth, nullptr);
  ASSERT_FALSE(depth->series.empty()) << "the depth over time";
  int64_t in_windows = 0;
  for (const Report::Counter::Window& w : depth->series) in_windows += w.samples;
  EXPECT_EQ(in_windows, depth->samples);
  const std::string trace = testing::ReadAll(dir.File("trace.json"));
  EXPECT_NE(trace.find("\"loader/0\""), std::string::npos) << "LibTorch's workers are named";
  EXPECT_NE(trace.find("\"loader/1\""), std::string::npos);
  absl::StatusOr<Report> read = exporter::ReadReportFile(dir.File("report.json"));
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->loaders.size(), 1u) << "report.json's loaders read back";
  EXPECT_EQ(read->loaders[0].kind, l.kind);
  EXPECT_EQ(read->loaders[0].queue_depth_max, l.queue_depth_max);
  const Report::Counter* read_depth = testing::FindCounter(*read, "loader.queue_depth");
  ASSERT_NE(read_depth, nullptr);
  EXPECT_EQ(read_depth->series.size(), depth->series.size());
}

TEST(LoaderTest, MakeDataLoaderWithoutWorkersMakesBatchesOnTheCallerAndQueuesNone) {
  TempDir dir;
  absl::StatusOr<Session> session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  LoaderSettings settings;
  settings.name = "inline";
  settings.batch_size = 8;
  auto loader = libtorch::MakeDataLoader(
      *session, DecodingDataset().map(::torch::data::transforms::Stack<>()), settings);
  ASSERT_TRUE(loader.ok()) << loader.status();
  int64_t n = 0;
  for (auto& batch : **loader) n += batch.data.size(0);
  EXPECT_EQ(n, 40) << "every example once, in a random order";
  settings.batch_size = 0;
  EXPECT_EQ(libtorch::MakeDataLoader(*session, DecodingDataset(), settings).status().code(),
            absl::StatusCode::kInvalidArgument);
  settings.batch_size = 1;
  settings.workers = -1;
  EXPECT_EQ(libtorch::MakeDataLoader(*session, DecodingDataset(), settings).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->loaders.size(), 1u) << "the refused settings recorded nothing";
  EXPECT_EQ(report->loaders[0].batches, 5);
  EXPECT_EQ(report->loaders[0].queue_depth_max, 0) << "nothing is made ahead without workers";
  EXPECT_GE(report->loaders[0].cpu_ms_per_batch, 3.9);
}

TEST(LoaderTest, PrefetchLoaderRethrowsTheProducersErrorInOrder) {
  libtorch::PrefetchLoader<int> loader([](int64_t i) -> std::optional<int> {
    if (i == 5) throw std::runtime_error("decode failed at 5");
    return static_cast<int>(i);
  });
  for (int i = 0; i < 5; ++i) EXPECT_EQ(loader.Next().value(), i);
  EXPECT_THROW(loader.Next(), std::runtime_error);
}

TEST(DevicePrefetcherTest, CpuPassesBatchesThroughInOrderAsH2dRanges) {
  TempDir dir;
  absl::StatusOr<Session> session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  libtorch::DevicePrefetcher prefetch(::torch::kCPU, /*max_pending=*/3);
  EXPECT_FALSE(prefetch.copies());
  EXPECT_FALSE(prefetch.Next().has_value());
  std::vector<::torch::Tensor> sent;
  for (int i = 0; i < 3; ++i) {
    sent.push_back(::torch::full({4}, static_cast<float>(i)));
    ASSERT_TRUE(prefetch.Submit(std::vector<::torch::Tensor>{sent.back()}).ok());
  }
  EXPECT_TRUE(prefetch.Submit(std::nullopt).ok());  // a loader's end: ignored
  EXPECT_EQ(prefetch.pending(), 3u);
  for (int i = 0; i < 3; ++i) {
    StepScope step(*session, StepIndex(i), Samples(4));
    std::optional<std::vector<::torch::Tensor>> batch = prefetch.Next();
    ASSERT_TRUE(batch.has_value());
    EXPECT_EQ((*batch)[0].data_ptr(), sent[i].data_ptr()) << "passed through, not copied";
  }
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok());
  const std::string trace = testing::ReadAll(dir.File("trace.json"));
  EXPECT_NE(trace.find("\"name\":\"prefetch.h2d\""), std::string::npos);
  EXPECT_NE(trace.find("\"phase\":\"h2d\""), std::string::npos);
}

TEST(DevicePrefetcherTest, PinningForTheCpuIsAPassThrough) {
  std::vector<::torch::Tensor> batch{::torch::ones({4}), ::torch::zeros({2})};
  const void* first = batch[0].data_ptr();
  libtorch::PinForDevice(batch, ::torch::kCPU);
  EXPECT_EQ(batch[0].data_ptr(), first) << "no copy for a CPU device";
  EXPECT_FALSE(batch[0].is_pinned());
  libtorch::DevicePrefetcher prefetch(::torch::kCPU);
  ASSERT_TRUE(prefetch.Submit(batch).ok());
  EXPECT_EQ(prefetch.pinned_on_submit(), 0);
}

// The prefetcher holds at most max_pending batches (2 by default): a Submit
// past that is refused, and it takes the batch again once one is taken.
TEST(DevicePrefetcherTest, NeverHoldsMoreThanMaxPendingBatches) {
  libtorch::DevicePrefetcher prefetch(::torch::kCPU);
  ASSERT_EQ(prefetch.max_pending(), 2u);
  std::mt19937 rng(7);
  int submitted = 0, refused = 0, taken = 0;
  for (int i = 0; i < 200; ++i) {
    if (rng() % 3 != 0) {  // submit twice as often as taking: it fills up
      const absl::Status s = prefetch.Submit(std::vector<::torch::Tensor>{::torch::full({2}, i)});
      if (s.ok()) {
        ++submitted;
      } else {
        EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
        EXPECT_EQ(prefetch.pending(), 2u) << "refused only when full";
        ++refused;
      }
    } else if (prefetch.Next().has_value()) {
      ++taken;
    }
    ASSERT_LE(prefetch.pending(), prefetch.max_pending()) << "after operation " << i;
  }
  EXPECT_GT(refused, 0);
  EXPECT_EQ(static_cast<size_t>(submitted - taken), prefetch.pending());
  EXPECT_EQ(libtorch::DevicePrefetcher(::torch::kCPU, 0).max_pending(), 1u) << "at least one";
}

// Setting the current device is a Status: nothing for CPU, an error (not an
// exception) for a CUDA device this machine cannot use.
TEST(DevicePrefetcherTest, SetCurrentDeviceIsAStatus) {
  EXPECT_TRUE(libtorch::SetCurrentDevice(::torch::kCPU).ok());
  const absl::Status cuda = libtorch::SetCurrentDevice(::torch::Device(::torch::kCUDA, 0));
  if (::torch::cuda::is_available()) {
    EXPECT_TRUE(cuda.ok()) << cuda;
  } else {
    EXPECT_EQ(cuda.code(), absl::StatusCode::kFailedPrecondition) << cuda;
  }
}

// The loader's workers pin; the training thread's Submit only launches the
// copies. A pageable batch submitted directly is still copied right, and
// counted as pinned on the training thread.
TEST(DevicePrefetcherTest, WorkersPinSoSubmitOnlyLaunchesTheCopies) {
  if (!libtorch::BuiltWithCuda() || !::torch::cuda::is_available()) {
    GTEST_SKIP() << "needs a CUDA device (tools/gpu-check.sh runs it)";
  }
  TempDir dir;
  absl::StatusOr<Session> session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  const ::torch::Device cuda(::torch::kCUDA, 0);
  std::atomic<int> pinned_by_workers{0};
  libtorch::PrefetchLoader<std::vector<::torch::Tensor>> loader(
      [&](int64_t i) -> std::optional<std::vector<::torch::Tensor>> {
        if (i >= 6) return std::nullopt;
        std::vector<::torch::Tensor> batch{::torch::full({1024}, static_cast<float>(i))};
        libtorch::PinForDevice(batch, cuda);
        if (batch[0].is_pinned()) ++pinned_by_workers;
        return batch;
      },
      {.workers = 2});
  libtorch::DevicePrefetcher prefetch(cuda);
  ASSERT_TRUE(prefetch.copies());
  ASSERT_TRUE(prefetch.Submit(loader.Next()).ok());
  for (int i = 0; i < 6; ++i) {
    StepScope step(*session, StepIndex(i), Samples(1));
    std::optional<std::vector<::torch::Tensor>> batch = prefetch.Next();
    ASSERT_TRUE(batch.has_value());
    ASSERT_TRUE(prefetch.Submit(loader.Next()).ok());
    EXPECT_TRUE((*batch)[0].is_cuda());
    EXPECT_EQ((*batch)[0].sum().item<float>(), 1024.0f * i);
  }
  EXPECT_EQ(pinned_by_workers.load(), 6);
  EXPECT_EQ(prefetch.pinned_on_submit(), 0) << "the training thread pinned nothing";
  ASSERT_TRUE(prefetch.Submit(std::vector<::torch::Tensor>{::torch::full({8}, 3.0f)}).ok());
  EXPECT_EQ(prefetch.pinned_on_submit(), 1);
  EXPECT_EQ(prefetch.Next().value()[0].sum().item<float>(), 24.0f);
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  const Report::Counter* pinned = FindCounter(*report, "prefetch.pinned_on_submit");
  ASSERT_NE(pinned, nullptr);
  EXPECT_EQ(pinned->max, 1);
}

// The pure part of NCCL collective timing: event pairs with synthetic
// times, complete or not, read back in order without blocking.
TEST(DeviceTimingsTest, CompletePairsAreHandedBackInOrderWithoutWaiting) {
  struct FakeEvents {
    double start_s, end_s;
    const bool* done;
  };
  libtorch::detail::DeviceTimings<FakeEvents> timings(/*capacity=*/3);
  bool done[4] = {true, true, false, true};
  timings.Add(10, {1.000, 1.004, &done[0]});
  timings.Add(11, {2.000, 2.010, &done[1]});
  timings.Add(12, {3.000, 3.002, &done[2]});  // still running on the device
  auto elapsed = [](const FakeEvents& e) -> std::optional<double> {
    if (!*e.done) return std::nullopt;
    return e.end_s - e.start_s;
  };
  std::vector<std::pair<int64_t, double>> got;
  auto sink = [&](int64_t step, double s) { got.emplace_back(step, s); };
  EXPECT_EQ(timings.Poll(elapsed, sink), 2u);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].first, 10);
  EXPECT_NEAR(got[0].second, 0.004, 1e-12);
  EXPECT_EQ(got[1].first, 11);
  EXPECT_NEAR(got[1].second, 0.010, 1e-12);
  EXPECT_EQ(timings.pending(), 1u) << "step 12 waits: nothing blocks";
  timings.Add(13, {4.0, 4.5, &done[3]});
  timings.Add(14, {5.0, 5.5, &done[3]});
  timings.Add(15, {6.0, 6.5, &done[3]});  // over capacity: 12 is dropped
  EXPECT_EQ(timings.dropped(), 1);
  got.clear();
  EXPECT_EQ(timings.Poll(elapsed, sink), 3u);
  EXPECT_EQ(got.front().first, 13);
}

// Runs `body(group)` on each of `world` ranks of one Gloo group, a thread
// each, meeting through a FileStore in `dir`.
template <typename Body>
void OnGlooRanks(const TempDir& dir, int world, Body body) {
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      libtorch::DistributedOptions d;
      d.rank = r;
      d.world_size = world;
      d.store_path = dir.File("c10d.store");
      d.backend = "gloo";
      d.timeout = std::chrono::seconds(30);
      absl::StatusOr<std::unique_ptr<libtorch::ProcessGroup>> group =
          libtorch::ProcessGroup::Create(d, nullptr);
      ASSERT_TRUE(group.ok()) << group.status();
      body(**group);
    });
  }
  for (std::thread& t : ranks) t.join();
}

// c10d reduces one tensor a call: a list of several, of different shapes
// (one flattened collective) or dtypes (one each), is summed tensor by
// tensor on every rank.
TEST(ProcessGroupTest, AllReduceSumsEachOfSeveralTensorsOnEveryRank) {
  TempDir dir;
  OnGlooRanks(dir, 2, [](libtorch::ProcessGroup& group) {
    const double k = group.rank() + 1;  // rank 0 holds 1x, rank 1 2x: the sum is 3x
    std::vector<::torch::Tensor> shapes = {::torch::full({2, 3}, k), ::torch::arange(5) * k,
                                           ::torch::full({1}, 10 * k)};
    const absl::Status same_dtype = group.AllReduce(shapes);
    ASSERT_TRUE(same_dtype.ok()) << same_dtype;
    EXPECT_TRUE(::torch::equal(shapes[0], ::torch::full({2, 3}, 3.0))) << shapes[0];
    EXPECT_TRUE(::torch::equal(shapes[1], ::torch::arange(5) * 3.0)) << shapes[1];
    EXPECT_TRUE(::torch::equal(shapes[2], ::torch::full({1}, 30.0))) << shapes[2];

    std::vector<::torch::Tensor> dtypes = {
        ::torch::full({3}, k), ::torch::full({2, 2}, k, ::torch::kDouble),
        ::torch::full({4}, 7 * group.rank() + 1, ::torch::kLong)};
    const absl::Status mixed = group.AllReduce(dtypes);
    ASSERT_TRUE(mixed.ok()) << mixed;
    EXPECT_TRUE(::torch::equal(dtypes[0], ::torch::full({3}, 3.0)));
    EXPECT_TRUE(::torch::equal(dtypes[1], ::torch::full({2, 2}, 3.0, ::torch::kDouble)));
    EXPECT_TRUE(::torch::equal(dtypes[2], ::torch::full({4}, 9, ::torch::kLong))) << dtypes[2];
    const absl::Status barrier = group.Barrier();
    EXPECT_TRUE(barrier.ok()) << barrier;
  });
}

// A call c10d refuses is the caller's error, reported at once; only c10d's
// distributed errors and the transport's are blamed on missing ranks.
TEST(ProcessGroupTest, UsageErrorsAreNotPeerFailures) {
  auto thrown = [](auto&& fn) -> bool {
    try {
      fn();
    } catch (const std::exception& e) {
      return libtorch::detail::IsPeerFailure(e);
    }
    ADD_FAILURE() << "nothing thrown";
    return false;
  };
  EXPECT_FALSE(
      thrown([] { TORCH_CHECK(false, "ProcessGroupGloo::allreduce: invalid tensor size"); }));
  EXPECT_FALSE(thrown([] { TORCH_CHECK_VALUE(false, "bad dtype"); }));
  EXPECT_TRUE(
      thrown([] { C10_THROW_ERROR(DistBackendError, "NCCL error: remote process exited"); }));
  EXPECT_TRUE(thrown([] { C10_THROW_ERROR(DistNetworkError, "Connection reset by peer"); }));
  EXPECT_TRUE(thrown([] { C10_THROW_ERROR(DistStoreError, "Timeout waiting for key"); }));
  EXPECT_TRUE(thrown(
      [] { throw std::runtime_error("[gloo/transport/tcp/pair.cc] Connection closed by peer"); }));
}

// TORCH_NCCL_BLOCKING_WAIT decides when set; NCCL_BLOCKING_WAIT only when
// it is not, as c10d reads them.
TEST(ProcessGroupTest, TorchNcclBlockingWaitWinsOverNcclBlockingWait) {
  auto blocking = [](std::map<std::string, std::string> env) {
    return libtorch::detail::NcclBlockingWait([&](const char* name) -> const char* {
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    });
  };
  EXPECT_FALSE(blocking({}));
  EXPECT_TRUE(blocking({{"NCCL_BLOCKING_WAIT", "1"}}));
  EXPECT_TRUE(blocking({{"TORCH_NCCL_BLOCKING_WAIT", "Yes"}}));
  EXPECT_FALSE(blocking({{"TORCH_NCCL_BLOCKING_WAIT", "0"}, {"NCCL_BLOCKING_WAIT", "1"}}));
  EXPECT_TRUE(blocking({{"TORCH_NCCL_BLOCKING_WAIT", "t"}, {"NCCL_BLOCKING_WAIT", "false"}}));
  EXPECT_FALSE(blocking({{"NCCL_BLOCKING_WAIT", "no"}}));
}

TEST(MemoryTest, ACudaDeviceWithoutAnIndexResolvesToTheCurrentOne) {
  int asked = 0;
  auto current = [&] {
    ++asked;
    return 3;
  };
  EXPECT_EQ(libtorch::detail::ResolveDeviceIndex(::torch::Device(::torch::kCUDA), current), 3);
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(libtorch::detail::ResolveDeviceIndex(::torch::Device(::torch::kCUDA, 1), current), 1);
  EXPECT_EQ(asked, 1) << "an explicit index needs no current device";
}

// A caching allocator's reserved bytes (what a memory cap limits) go to the
// report next to the allocated ones, and through report.json and back.
TEST(MemoryTest, ReservedBytesAndTheirPeakReachTheReport) {
  TempDir dir;
  absl::StatusOr<Session> session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  for (int i = 0; i < 3; ++i) {
    { StepScope step(*session, StepIndex(i), Samples(1)); }
    session->RecordStepMemory(i, 100 + i, 150 + i, "cuda_caching_allocator", 1000 + i,
                              i == 1 ? 4000 : 1000 + i);
  }
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->memory.reserved_peak_bytes, 4000);
  EXPECT_EQ(report->memory.reserved_last_bytes, 1002);
  EXPECT_EQ(report->memory.peak_bytes, 152);
  absl::StatusOr<Report> read = exporter::ReadReportFile(dir.File("report.json"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->memory.reserved_peak_bytes, 4000);
  EXPECT_EQ(read->memory.reserved_last_bytes, 1002);
}

TEST(MemoryTest, CpuStepsRecordResidentSetAndItsPeak) {
  TempDir dir;
  absl::StatusOr<Session> session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  for (int i = 0; i < 3; ++i) {
    {
      StepScope step(*session, StepIndex(i), Samples(1));
      if (i == 1) {  // 64 MiB touched and freed inside step 1
        ::torch::Tensor big = ::torch::ones({16 << 20}, ::torch::kFloat);
        EXPECT_EQ(big.sum().item<float>(), static_cast<float>(16 << 20));
      }
    }
    libtorch::RecordStepMemory(*session, i, ::torch::kCPU);
  }
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->memory.source, "process_rss");
  const absl::StatusOr<std::vector<Report::Step>> steps =
      exporter::ReadStepsFile(dir.File("steps.jsonl"));
  ASSERT_TRUE(steps.ok()) << steps.status();
  ASSERT_EQ(steps->size(), 3u);
  for (const Report::Step& s : *steps) {
    EXPECT_GT(s.memory_bytes, 1 << 20);
    EXPECT_GE(s.peak_memory_bytes, s.memory_bytes);
  }
  EXPECT_GE((*steps)[1].peak_memory_bytes, (*steps)[1].memory_bytes + (48 << 20))
      << "the freed 64 MiB shows in step 1's peak";
  EXPECT_GE(report->memory.peak_bytes, (*steps)[1].peak_memory_bytes);
  EXPECT_EQ(report->memory.reserved_peak_bytes, -1) << "no reserved bytes on CPU";
}

// The CPU budget stands in for a device's memory: Adam's first step, which
// allocates two moments per parameter, is refused with LibTorch's typed
// out-of-memory error when they do not fit, and fits once the cap is lifted.
TEST(CpuMemoryBudgetTest, AllocationsPastTheBudgetThrowTheTypedOutOfMemoryError) {
  ASSERT_TRUE(libtorch::LimitMemory(::torch::kCPU, 0).ok());  // counting, no cap
  struct LiftTheCap {  // the budget is the process's: never leave it to the next test
    ~LiftTheCap() { (void)libtorch::LimitMemory(::torch::kCPU, 0); }
  } lift;
  const libtorch::CpuTensorMemory before = libtorch::CpuTensorMemoryNow();
  {
    ::torch::Tensor block = ::torch::empty({1 << 18}, ::torch::kFloat);  // 1 MiB
    EXPECT_GE(libtorch::CpuTensorMemoryNow().live_bytes - before.live_bytes, 1 << 20);
  }
  EXPECT_EQ(libtorch::CpuTensorMemoryNow().live_bytes, before.live_bytes) << "frees are counted";

  ::torch::manual_seed(1);
  ::torch::nn::Sequential model(::torch::nn::Linear(32, 512), ::torch::nn::ReLU(),
                                ::torch::nn::Linear(512, 512), ::torch::nn::ReLU(),
                                ::torch::nn::Linear(512, 1));
  int64_t parameter_bytes = 0;
  for (const ::torch::Tensor& p : model->parameters()) parameter_bytes += p.nbytes();
  ::torch::optim::Adam adam(model->parameters(), ::torch::optim::AdamOptions(1e-3));
  ::torch::Tensor loss = model->forward(::torch::randn({8, 32})).pow(2).mean();
  loss.backward();
  const int64_t live = libtorch::CpuTensorMemoryNow().live_bytes;
  // Room for one moment per parameter, not two.
  ASSERT_TRUE(libtorch::LimitMemory(::torch::kCPU, live + parameter_bytes).ok());
  EXPECT_THROW(adam.step(), c10::OutOfMemoryError);
  const libtorch::CpuTensorMemory refused = libtorch::CpuTensorMemoryNow();
  EXPECT_GE(refused.refused, 1);
  EXPECT_EQ(refused.limit_bytes, live + parameter_bytes);
  EXPECT_LE(refused.peak_bytes, live + parameter_bytes);

  ASSERT_TRUE(libtorch::LimitMemory(::torch::kCPU, 0).ok());
  adam.zero_grad();
  model->forward(::torch::randn({8, 32})).pow(2).mean().backward();
  EXPECT_NO_THROW(adam.step());
  EXPECT_GE(libtorch::CpuTensorMemoryNow().peak_bytes, live + 2 * parameter_bytes);

  EXPECT_EQ(libtorch::LimitMemory(::torch::kCPU, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(libtorch::LimitMemory(::torch::kCPU, int64_t{1} << 62).code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_GT(libtorch::DeviceMemoryBytes(::torch::kCPU), int64_t{1} << 28);
}

// Save a trained model, Adam (with a changed lr), the scaler and the RNG;
// restore into freshly built objects: tensors bit-identical, the same lr
// (not restored before pytorch#125215), the same next random numbers.
// A checkpoint restores values, not devices: parameters saved on one device
// (the CPU here; on a GPU machine, another rank's GPU) are loaded onto the
// model's. The meta device stands in for a second device (a meta tensor
// cannot take a CPU tensor's data: loading as saved fails outright).
TEST(TrainingStateTest, RestoredParametersStayOnTheModelsDevice) {
  struct Net : ::torch::nn::Module {
    explicit Net(::torch::Device device) {
      weight = register_parameter("weight", ::torch::zeros({2, 4}, device));
      bias = register_parameter("bias", ::torch::zeros({2}, device));
    }
    ::torch::Tensor weight, bias;
  };
  Net saved(::torch::kCPU);
  libtorch::TrainingState save;
  save.Add("model", saved);
  absl::StatusOr<std::vector<CheckpointFile>> files = save.Snapshot();
  ASSERT_TRUE(files.ok()) << files.status();
  LoadedCheckpoint checkpoint;
  checkpoint.path = "in-memory";
  checkpoint.files = *files;

  Net on_meta(::torch::Device(::torch::kMeta));
  libtorch::TrainingState restore;
  restore.Add("model", on_meta);
  const absl::Status restored = restore.Restore(checkpoint);
  ASSERT_TRUE(restored.ok()) << restored;
  EXPECT_TRUE(on_meta.weight.is_meta()) << on_meta.weight.device();
  EXPECT_TRUE(on_meta.bias.is_meta()) << on_meta.bias.device();
  EXPECT_EQ(on_meta.weight.sizes(), saved.weight.sizes());
}

TEST(TrainingStateTest, RestoresModelOptimizerScalerAndRngBitForBit) {
  TempDir dir;
  auto make = [] {
    return ::torch::nn::Sequential(::torch::nn::Linear(4, 8), ::torch::nn::ReLU(),
                                   ::torch::nn::Linear(8, 1));
  };
  ::torch::manual_seed(1);
  ::torch::nn::Sequential model = make();
  ::torch::optim::Adam adam(model->parameters(), ::torch::optim::AdamOptions(1e-2));
  libtorch::GradScaler scaler;
  for (int i = 0; i < 3; ++i) {
    adam.zero_grad();
    scaler.Scale(model->forward(::torch::randn({16, 4})).pow(2).mean()).backward();
    ASSERT_TRUE(scaler.Step(adam).ok());
    scaler.Update();
  }
  static_cast<::torch::optim::AdamOptions&>(adam.param_groups()[0].options()).lr(0.0042);
  libtorch::TrainingState state;
  state.Add("model", *model);
  state.Add("optimizer", adam);
  state.Add("scaler", scaler);
  state.AddRng();
  state.SetLoaderPosition({2, 17, 99});
  absl::StatusOr<std::vector<CheckpointFile>> files = state.Snapshot();
  ASSERT_TRUE(files.ok()) << files.status();
  CheckpointStoreOptions options;
  options.dir = dir.path();
  absl::StatusOr<CheckpointStore> store = CheckpointStore::Open(options);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE(store->Save(3, *files).ok());
  const ::torch::Tensor next_random = ::torch::randn({5});
  const ::torch::Tensor probe = ::torch::randn({2, 4});
  const ::torch::Tensor want = model->forward(probe).detach();

  ::torch::manual_seed(12345);  // a different process's state
  ::torch::nn::Sequential fresh = make();
  ::torch::optim::Adam fresh_adam(fresh->parameters(), ::torch::optim::AdamOptions(1.0));
  libtorch::GradScaler fresh_scaler;
  libtorch::TrainingState restored;
  restored.Add("model", *fresh);
  restored.Add("optimizer", fresh_adam);
  restored.Add("scaler", fresh_scaler);
  restored.AddRng();
  absl::StatusOr<LoadedCheckpoint> latest = store->LoadLatest();
  ASSERT_TRUE(latest.ok());
  ASSERT_TRUE(restored.Restore(*latest).ok());
  EXPECT_TRUE(::torch::equal(fresh->forward(probe), want));
  for (size_t k = 0; k < model->parameters().size(); ++k) {
    EXPECT_TRUE(::torch::equal(fresh->parameters()[k], model->parameters()[k]));
  }
  EXPECT_EQ(static_cast<::torch::optim::AdamOptions&>(fresh_adam.param_groups()[0].options()).lr(),
            0.0042);
  EXPECT_EQ(fresh_scaler.scale(), scaler.scale());
  EXPECT_TRUE(::torch::equal(::torch::randn({5}), next_random)) << "the same RNG stream";
  EXPECT_EQ(restored.loader_position().batch_index, 17);
  EXPECT_EQ(restored.loader_position().sampler_seed, 99u);
  // One more identical step on both: Adam's moments came back too.
  ::torch::manual_seed(5);
  const ::torch::Tensor x = ::torch::randn({16, 4});
  adam.zero_grad();
  model->forward(x).pow(2).mean().backward();
  adam.step();
  fresh_adam.zero_grad();
  fresh->forward(x).pow(2).mean().backward();
  fresh_adam.step();
  EXPECT_TRUE(::torch::equal(fresh->parameters()[0], model->parameters()[0]));

  // A checkpoint of another model is a clear DataLoss, naming the file.
  ::torch::nn::Linear other(3, 3);
  libtorch::TrainingState wrong;
  wrong.Add("model", *other);
  const absl::Status mismatch = wrong.Restore(*latest);
  EXPECT_EQ(mismatch.code(), absl::StatusCode::kDataLoss) << mismatch;
  EXPECT_NE(std::string(mismatch.message()).find("model.pt"), std::string::npos) << mismatch;
}

// The loader position goes through a checkpoint, and a PrefetchLoader
// started at it in freshly built objects hands out the batch the first
// would have handed out next, without making the ones before it.
TEST(TrainingStateTest, ARestoredLoaderPositionGivesTheSameNextBatch) {
  TempDir dir;
  std::atomic<int64_t> lowest_made{INT64_MAX};
  auto producer = [&](uint64_t seed, int64_t epoch) {
    return [&lowest_made, seed, epoch](int64_t i) -> std::optional<::torch::Tensor> {
      if (i >= 12) return std::nullopt;
      int64_t seen = lowest_made.load();
      while (i < seen && !lowest_made.compare_exchange_weak(seen, i)) {
      }
      // A batch from its own generator: (seed, epoch, index) decide it.
      auto gen = ::at::make_generator<::at::CPUGeneratorImpl>(seed * 1000003 + epoch * 1009 + i);
      return ::torch::randn({8, 3}, gen);
    };
  };
  libtorch::LoaderPosition at_save;
  {
    libtorch::PrefetchLoader<::torch::Tensor> loader(producer(77, 2), {.workers = 3});
    for (int k = 0; k < 5; ++k) ASSERT_TRUE(loader.Next().has_value());
    at_save = {2, loader.position(), 77};
  }
  EXPECT_EQ(at_save.batch_index, 5);
  ::torch::Tensor want;
  {
    libtorch::PrefetchLoader<::torch::Tensor> loader(producer(77, 2), {.workers = 1});
    for (int k = 0; k <= 5; ++k) want = *loader.Next();
  }
  libtorch::TrainingState state;
  state.SetLoaderPosition(at_save);
  absl::StatusOr<std::vector<CheckpointFile>> files = state.Snapshot();
  ASSERT_TRUE(files.ok()) << files.status();
  CheckpointStoreOptions options;
  options.dir = dir.path();
  absl::StatusOr<CheckpointStore> store = CheckpointStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE(store->Save(5, *files).ok());

  libtorch::TrainingState restored;
  absl::StatusOr<LoadedCheckpoint> latest = store->LoadLatest();
  ASSERT_TRUE(latest.ok()) << latest.status();
  ASSERT_TRUE(restored.Restore(*latest).ok());
  const libtorch::LoaderPosition p = restored.loader_position();
  EXPECT_EQ(p.epoch, 2);
  EXPECT_EQ(p.sampler_seed, 77u);
  lowest_made = INT64_MAX;
  libtorch::PrefetchLoader<::torch::Tensor> resumed(producer(p.sampler_seed, p.epoch),
                                                    {.workers = 3, .first_index = p.batch_index});
  EXPECT_EQ(resumed.position(), 5);
  std::optional<::torch::Tensor> next = resumed.Next();
  ASSERT_TRUE(next.has_value());
  EXPECT_TRUE(::torch::equal(*next, want));
  EXPECT_EQ(resumed.position(), 6);
  int rest = 0;
  while (resumed.Next()) ++rest;
  EXPECT_EQ(rest, 6) << "batches 6 to 11";
  EXPECT_EQ(lowest_made.load(), 5) << "nothing before the position was made again";
  // A value set by hand that is not a number reads as 0, without throwing.
  restored.SetValue("loader.batch_index", "twelve");
  EXPECT_EQ(restored.loader_position().batch_index, 0);
}

}  // namespace
}  // namespace trainscope
