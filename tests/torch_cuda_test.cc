// trainscope::libtorch on a CUDA device. Each test skips, saying why, where
// LibTorch sees no CUDA device (or, for TorchNcclTest, has no NCCL), and
// prints one "figures: k=v ..." line that the GPU check quotes.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <simdjson.h>
#include <stdlib.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "trainscope/torch/amp.h"
#include "trainscope/torch/device.h"
#include "trainscope/torch/distributed.h"
#include "trainscope/torch/loader.h"
#include "trainscope/torch/state.h"
#include "trainscope/torch/torch.h"
#include "trainscope/trainscope.h"

#if __has_include(<c10/cuda/CUDACachingAllocator.h>)
#include <ATen/autocast_mode.h>
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#define TRAINSCOPE_TEST_CUDA_HEADERS 1
#else
#define TRAINSCOPE_TEST_CUDA_HEADERS 0
#endif

namespace trainscope {
namespace {

using testing::TempDir;

#define SKIP_WITHOUT_CUDA()                                                    \
  do {                                                                         \
    if (!::torch::cuda::is_available())                                        \
      GTEST_SKIP() << "no CUDA device (torch::cuda::is_available() is false)"; \
    if (!libtorch::BuiltWithCuda())                                            \
      GTEST_SKIP() << "this build of trainscope::torch has no CUDA paths";     \
  } while (false)

#if TRAINSCOPE_TEST_CUDA_HEADERS

::torch::Device CurrentCuda() {
  return ::torch::Device(::torch::kCUDA, c10::cuda::current_device());
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// Workers make 256 MiB batches of integer-valued floats (so that a sum in
// double is exact in any order), with their sum computed on the host; the
// prefetcher copies them to the device one step ahead. Each batch's sum on
// the device equals its host sum, in order.
TEST(TorchCudaTest, PrefetcherMoves256MiBBatchesFor50IterationsWithTheirSums) {
  SKIP_WITHOUT_CUDA();
  constexpr int kIterations = 50;
  constexpr int64_t kFloats = int64_t{256} << 18;  // 256 MiB of float
  const ::torch::Device cuda = CurrentCuda();
  libtorch::PrefetchLoader<std::vector<::torch::Tensor>> loader(
      [&](int64_t i) -> std::optional<std::vector<::torch::Tensor>> {
        if (i >= kIterations) return std::nullopt;
        at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(1000 + i);
        std::vector<::torch::Tensor> batch = {
            ::torch::randint(0, 100, {kFloats}, generator, ::torch::kFloat)};
        batch.push_back(batch[0].to(::torch::kDouble).sum().reshape({1}));  // the host's sum
        libtorch::PinForDevice(batch, cuda);
        return batch;
      },
      {.workers = 2, .queue_depth = 2});
  libtorch::DevicePrefetcher prefetch(cuda);
  ASSERT_TRUE(prefetch.copies());
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(prefetch.Submit(loader.Next()).ok());
  int checked = 0;
  for (int i = 0; i < kIterations; ++i) {
    std::optional<std::vector<::torch::Tensor>> batch = prefetch.Next();
    ASSERT_TRUE(batch.has_value()) << "batch " << i;
    ASSERT_TRUE(prefetch.Submit(loader.Next()).ok());
    ASSERT_TRUE((*batch)[0].is_cuda());
    ASSERT_EQ((*batch)[0].numel(), kFloats);
    const double on_device = (*batch)[0].to(::torch::kDouble).sum().item<double>();
    const double on_host = (*batch)[1].item<double>();
    EXPECT_EQ(on_device, on_host) << "batch " << i;
    ++checked;
  }
  ::torch::cuda::synchronize();
  const double seconds = Seconds(start);
  EXPECT_FALSE(prefetch.Next().has_value());
  EXPECT_EQ(prefetch.pinned_on_submit(), 0) << "the workers pinned every batch";
  std::printf(
      "figures: batches=%d batch_mib=256 seconds=%.3f gib_per_s=%.2f pinned_on_submit=%lld\n",
      checked, seconds, checked * 0.25 / seconds,
      static_cast<long long>(prefetch.pinned_on_submit()));
}

// A device given as "cuda" (no index) is the current one: the allocator's
// stats are read there, not thrown at for index -1.
TEST(TorchCudaTest, RecordStepMemoryWithoutAnIndexUsesTheCurrentDevice) {
  SKIP_WITHOUT_CUDA();
  const auto last = static_cast<c10::DeviceIndex>(::torch::cuda::device_count() - 1);
  ASSERT_TRUE(libtorch::SetCurrentDevice(::torch::Device(::torch::kCUDA, last)).ok());
  TempDir dir;
  absl::StatusOr<Session> session =
      Session::Start(testing::QuietOptions(dir.path(), "cuda-memory"));
  ASSERT_TRUE(session.ok()) << session.status();
  const ::torch::Tensor held =
      ::torch::ones({16 << 20}, ::torch::TensorOptions().device(::torch::Device(::torch::kCUDA)));
  ASSERT_EQ(held.device().index(), last);
  { StepScope step(*session, StepIndex(0), Samples(1)); }
  ASSERT_NO_THROW(libtorch::RecordStepMemory(*session, 0, ::torch::Device(::torch::kCUDA)));
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(last);
  constexpr auto kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  const int64_t allocated = stats.allocated_bytes[kAll].current;
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  std::printf(
      "figures: device=%d allocated_bytes=%lld last_bytes=%lld peak_bytes=%lld "
      "reserved_last_bytes=%lld reserved_peak_bytes=%lld\n",
      static_cast<int>(last), static_cast<long long>(allocated),
      static_cast<long long>(report->memory.last_bytes),
      static_cast<long long>(report->memory.peak_bytes),
      static_cast<long long>(report->memory.reserved_last_bytes),
      static_cast<long long>(report->memory.reserved_peak_bytes));
  EXPECT_EQ(report->memory.source, "cuda_caching_allocator");
  EXPECT_GE(report->memory.last_bytes, int64_t{64} << 20) << "the 64 MiB held on the device";
  EXPECT_EQ(report->memory.last_bytes, allocated);
  EXPECT_GE(report->memory.reserved_last_bytes, report->memory.last_bytes);
  EXPECT_GE(report->memory.reserved_peak_bytes, report->memory.reserved_last_bytes);
  EXPECT_EQ(libtorch::QueryTorch().device, "cuda:" + std::to_string(last))
      << "the report names the current device";
}

// LimitMemory caps the caching allocator: what fits under the cap is
// allocated, what does not throws LibTorch's typed out-of-memory error.
TEST(TorchCudaTest, LimitMemoryThenAnOverBudgetAllocationThrowsOutOfMemory) {
  SKIP_WITHOUT_CUDA();
  const ::torch::Device cuda = CurrentCuda();
  c10::cuda::CUDACachingAllocator::emptyCache();
  constexpr int64_t kBudget = int64_t{1} << 30;
  ASSERT_TRUE(libtorch::LimitMemory(cuda, kBudget).ok());
  bool fits = false, refused = false;
  std::string message;
  try {
    ::torch::Tensor small = ::torch::empty({int64_t{256} << 18}, cuda);  // 256 MiB
    fits = small.defined();
  } catch (const c10::OutOfMemoryError& e) {
    message = e.what_without_backtrace();
  }
  try {
    static_cast<void>(::torch::empty({int64_t{512} << 20}, cuda));  // 2 GiB of float
    ADD_FAILURE() << "2 GiB allocated under a 1 GiB budget";
  } catch (const c10::OutOfMemoryError& e) {
    refused = true;
    message = e.what_without_backtrace();
  }
  ASSERT_TRUE(libtorch::LimitMemory(cuda, 0).ok());  // lifted for the tests after this one
  c10::cuda::CUDACachingAllocator::emptyCache();
  std::printf("figures: budget_bytes=%lld device_bytes=%lld small_fits=%d big_refused=%d\n",
              static_cast<long long>(kBudget),
              static_cast<long long>(libtorch::DeviceMemoryBytes(cuda)), fits ? 1 : 0,
              refused ? 1 : 0);
  EXPECT_TRUE(fits) << message;
  EXPECT_TRUE(refused);
}

// fp16 and bf16 autocast on CUDA: a matmul inside gives the region's dtype,
// fp32 outside; nested regions restore the outer one on exit.
TEST(TorchCudaTest, AutocastGuardDtypesAndNesting) {
  SKIP_WITHOUT_CUDA();
  const ::torch::Tensor a = ::torch::randn({16, 16}, CurrentCuda());
  const auto mm = [&] { return ::torch::mm(a, a).scalar_type(); };
  const ::torch::ScalarType outside = mm();
  ::torch::ScalarType fp16 = ::torch::kFloat, bf16 = ::torch::kFloat, off = ::torch::kHalf,
                      back = ::torch::kFloat;
  {
    libtorch::AutocastGuard half(::torch::kCUDA, ::torch::kHalf);
    EXPECT_TRUE(at::autocast::is_autocast_enabled(::torch::kCUDA));
    fp16 = mm();
    {
      libtorch::AutocastGuard nested(::torch::kCUDA, ::torch::kBFloat16);
      bf16 = mm();
      {
        libtorch::AutocastGuard disabled(::torch::kCUDA, ::torch::kHalf, /*enabled=*/false);
        off = mm();
      }
    }
    back = mm();
  }
  const ::torch::ScalarType after = mm();
  std::printf("figures: outside=%s fp16=%s bf16=%s disabled=%s restored=%s after=%s\n",
              c10::toString(outside), c10::toString(fp16), c10::toString(bf16), c10::toString(off),
              c10::toString(back), c10::toString(after));
  EXPECT_EQ(outside, ::torch::kFloat);
  EXPECT_EQ(fp16, ::torch::kHalf);
  EXPECT_EQ(bf16, ::torch::kBFloat16);
  EXPECT_EQ(off, ::torch::kFloat);
  EXPECT_EQ(back, ::torch::kHalf) << "leaving the nested region restores fp16";
  EXPECT_EQ(after, ::torch::kFloat);
  EXPECT_FALSE(at::autocast::is_autocast_enabled(::torch::kCUDA));
}

// A GradScaler reference: settings, which steps overflowed, and the scale
// after each step.
struct ScalerReference {
  libtorch::GradScalerOptions options;
  std::vector<bool> found_inf;
  std::vector<double> scales;
  std::string source;
};

// Read from the JSON that Python's torch.amp.GradScaler produced
// ($TRAINSCOPE_GRADSCALER_REFERENCE), else the sequence worked out by hand
// from PyTorch's rule: growth_interval 3; the scale halves on an overflow
// (and the count of clean steps restarts) and doubles after 3 clean steps.
absl::StatusOr<ScalerReference> LoadScalerReference() {
  ScalerReference ref;
  const char* path = std::getenv("TRAINSCOPE_GRADSCALER_REFERENCE");
  if (path == nullptr || *path == '\0') {
    ref.options.growth_interval = 3;
    ref.found_inf = {false, false, true, false, false, false,
                     false, true,  true, false, false, false};
    ref.scales = {65536, 65536, 32768, 32768, 32768, 65536,
                  65536, 32768, 16384, 16384, 16384, 32768};
    ref.source = "by-hand";
    return ref;
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.load(path).get(doc) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(std::string("cannot parse ") + path);
  }
  auto number = [](simdjson::dom::element e) -> double {
    double d = 0;
    if (e.get_double().get(d) == simdjson::SUCCESS) return d;
    int64_t i = 0;
    if (e.get_int64().get(i) == simdjson::SUCCESS) return static_cast<double>(i);
    bool b = false;
    if (e.get_bool().get(b) == simdjson::SUCCESS) return b ? 1 : 0;
    return std::numeric_limits<double>::quiet_NaN();
  };
  simdjson::dom::array found, scales;
  if (doc["found_inf"].get_array().get(found) != simdjson::SUCCESS ||
      doc["scales"].get_array().get(scales) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(std::string(path) + ": needs found_inf and scales arrays");
  }
  auto field = [&](const char* key) {
    simdjson::dom::element e;
    return doc[key].get(e) == simdjson::SUCCESS ? number(e)
                                                : std::numeric_limits<double>::quiet_NaN();
  };
  for (const char* key : {"init_scale", "growth_factor", "backoff_factor", "growth_interval"}) {
    if (std::isnan(field(key))) {
      return absl::InvalidArgumentError(std::string(path) + ": no number " + key);
    }
  }
  ref.options.init_scale = field("init_scale");
  ref.options.growth_factor = field("growth_factor");
  ref.options.backoff_factor = field("backoff_factor");
  ref.options.growth_interval = static_cast<int64_t>(field("growth_interval"));
  for (simdjson::dom::element e : found) ref.found_inf.push_back(number(e) != 0);
  for (simdjson::dom::element e : scales) ref.scales.push_back(number(e));
  if (ref.found_inf.size() != ref.scales.size()) {
    return absl::InvalidArgumentError(std::string(path) +
                                      ": found_inf and scales differ in length");
  }
  ref.source = path;
  return ref;
}

// Our GradScaler, driven with gradients that are inf on exactly the
// reference's overflow steps, has the reference's scale after every step.
TEST(TorchCudaTest, GradScalerFollowsPythonsScaleSequence) {
  SKIP_WITHOUT_CUDA();
  absl::StatusOr<ScalerReference> ref = LoadScalerReference();
  ASSERT_TRUE(ref.ok()) << ref.status();
  const ::torch::Device cuda = CurrentCuda();
  ::torch::nn::Linear layer(::torch::nn::LinearOptions(4, 1).bias(false));
  layer->to(cuda);
  ::torch::optim::SGD sgd(layer->parameters(), ::torch::optim::SGDOptions(1e-6));
  libtorch::GradScaler scaler(ref->options);
  const ::torch::Tensor x = ::torch::ones({2, 4}, cuda);
  int mismatches = 0, skipped = 0;
  for (size_t i = 0; i < ref->scales.size(); ++i) {
    sgd.zero_grad();
    scaler.Scale(layer->forward(x).sum()).backward();
    if (ref->found_inf[i]) {
      ::torch::NoGradGuard no_grad;
      layer->weight.grad()[0][1].fill_(std::numeric_limits<float>::infinity());
    }
    absl::StatusOr<bool> stepped = scaler.Step(sgd);
    ASSERT_TRUE(stepped.ok()) << stepped.status();
    EXPECT_EQ(*stepped, !ref->found_inf[i]) << "step " << i;
    skipped += *stepped ? 0 : 1;
    scaler.Update();
    if (scaler.scale() != ref->scales[i]) ++mismatches;
    EXPECT_EQ(scaler.scale(), ref->scales[i]) << "after step " << i;
  }
  std::printf("figures: reference=%s steps=%zu skipped=%d mismatches=%d final_scale=%g\n",
              ref->source.c_str(), ref->scales.size(), skipped, mismatches, scaler.scale());
}

// The CUDA generators' state goes into a checkpoint and back: after a
// restore the device draws what it drew after the save.
TEST(TorchCudaTest, CudaRngStateRoundTrips) {
  SKIP_WITHOUT_CUDA();
  const ::torch::Device cuda = CurrentCuda();
  ::torch::manual_seed(7);
  static_cast<void>(::torch::randn({8}, cuda));
  libtorch::TrainingState state;
  state.AddRng();
  absl::StatusOr<std::vector<CheckpointFile>> files = state.Snapshot();
  ASSERT_TRUE(files.ok()) << files.status();
  const ::torch::Tensor next = ::torch::randn({1024}, cuda);
  static_cast<void>(::torch::randn({4096}, cuda));  // the stream moves on
  LoadedCheckpoint checkpoint;
  checkpoint.path = "in-memory";
  checkpoint.files = *files;
  const absl::Status restored = state.Restore(checkpoint);
  ASSERT_TRUE(restored.ok()) << restored;
  const ::torch::Tensor again = ::torch::randn({1024}, cuda);
  const bool equal = ::torch::equal(again, next);
  std::printf("figures: devices=%d rng_bytes=%zu equal=%d\n",
              static_cast<int>(::torch::cuda::device_count()), (*files)[0].bytes.size(),
              equal ? 1 : 0);
  EXPECT_TRUE(equal) << "the draw after the restore is the draw after the save";
}

// A small CUDA training loop: three linear layers, launch-bound steps.
struct CudaLoop {
  ::torch::nn::Sequential model{::torch::nn::Linear(512, 512), ::torch::nn::ReLU(),
                                ::torch::nn::Linear(512, 512), ::torch::nn::ReLU(),
                                ::torch::nn::Linear(512, 1)};
  ::torch::optim::SGD sgd{model->parameters(), ::torch::optim::SGDOptions(1e-3)};
  ::torch::Tensor x, y;
  explicit CudaLoop(const ::torch::Device& cuda) {
    model->to(cuda);  // in place: the optimizer's parameters move too
    x = ::torch::randn({256, 512}, cuda);
    y = ::torch::randn({256, 1}, cuda);
  }
  void Step() {
    sgd.zero_grad();
    ::torch::mse_loss(model->forward(x), y).backward();
    sgd.step();
  }
  // The best of three runs of `steps` steps.
  double StepsPerSecond(int steps) {
    double best = 0;
    for (int run = 0; run < 3; ++run) {
      ::torch::cuda::synchronize();
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < steps; ++i) Step();
      ::torch::cuda::synchronize();
      best = std::max(best, steps / Seconds(start));
    }
    return best;
  }
};

// CUDA kernels a torch profiler (Kineto, CPU and CUDA activities) collects
// over `steps` steps of `loop`.
int64_t ProfiledCudaKernels(CudaLoop& loop, int steps) {
  namespace impl = ::torch::profiler::impl;
  const impl::ProfilerConfig config(impl::ProfilerState::KINETO);
  const std::set<impl::ActivityType> activities = {impl::ActivityType::CPU,
                                                   impl::ActivityType::CUDA};
  ::torch::autograd::profiler::prepareProfiler(config, activities);
  ::torch::autograd::profiler::enableProfiler(config, activities);
  for (int i = 0; i < steps; ++i) loop.Step();
  ::torch::cuda::synchronize();
  std::unique_ptr<::torch::autograd::profiler::ProfilerResult> result =
      ::torch::autograd::profiler::disableProfiler();
  int64_t kernels = 0;
  for (const auto& e : result->events()) {
    if (e.deviceType() == c10::DeviceType::CUDA) ++kernels;
  }
  return kernels;
}

// A trainscope session with the device timeline; its report.
absl::StatusOr<Report> RunWithTrainscope(CudaLoop& loop, const std::string& dir, int steps) {
  absl::StatusOr<Session> session =
      Session::Start(testing::QuietOptions(dir, "cuda-timeline", /*device_timeline=*/true));
  if (!session.ok()) return session.status();
  for (int i = 0; i < steps; ++i) {
    StepScope step(*session, StepIndex(i), Samples(256));
    loop.Step();
  }
  ::torch::cuda::synchronize();
  return session->Finish();
}

// Once a session with the device timeline has finished, training runs as
// fast as before it (CUPTI's callbacks and activity records are off again),
// and the torch profiler still collects CUDA kernels. The other order, in a
// fresh process (CUDA cannot be used after fork): the profiler holds CUPTI
// first, and the session either collects too or says CUPTI is in use.
TEST(TorchCudaTest, StepRateAfterFinishMatchesTheBaselineAndTheProfilerRunsInBothOrders) {
  SKIP_WITHOUT_CUDA();
  CudaLoop loop(CurrentCuda());
  for (int i = 0; i < 50; ++i) loop.Step();  // warm up: kernels loaded, allocator primed
  const double baseline = loop.StepsPerSecond(300);
  TempDir dir;
  absl::StatusOr<Report> report = RunWithTrainscope(loop, dir.path(), 100);
  ASSERT_TRUE(report.ok()) << report.status();
  const double after = loop.StepsPerSecond(300);
  const int64_t profiled = ProfiledCudaKernels(loop, 20);

  const testing::ProcessResult child = testing::RunProcess(
      {"/proc/self/exe",
       "--gtest_filter=TorchCudaTest.DISABLED_ProfilerFirstThenATrainscopeSession",
       "--gtest_also_run_disabled_tests"});
  std::string child_figures = "none";
  if (const size_t at = child.out.find("figures: "); at != std::string::npos) {
    child_figures = child.out.substr(at + 9, child.out.find('\n', at) - at - 9);
  }
  std::printf(
      "figures: baseline_steps_per_s=%.1f after_finish_steps_per_s=%.1f ratio=%.3f "
      "timeline_status=\"%s\" timeline_kernels=%lld profiler_kernels_after=%lld "
      "child_exit=%d child=[%s]\n",
      baseline, after, after / baseline, report->device_timeline.status.c_str(),
      static_cast<long long>(report->device_timeline.kernels), static_cast<long long>(profiled),
      child.exit_code, child_figures.c_str());
  EXPECT_GE(after, 0.9 * baseline) << "more than 10% slower after Finish";
  EXPECT_GT(profiled, 0) << "the torch profiler collects no CUDA kernel after trainscope";
  EXPECT_EQ(child.exit_code, 0) << child.out << child.err;
  EXPECT_NE(child.out.find("[  PASSED  ] 1 test"), std::string::npos) << child.out << child.err;
}

// The child of the test above (run alone, in a fresh process): the torch
// profiler first, then a trainscope session with the device timeline.
TEST(TorchCudaTest, DISABLED_ProfilerFirstThenATrainscopeSession) {
  SKIP_WITHOUT_CUDA();
  CudaLoop loop(CurrentCuda());
  namespace impl = ::torch::profiler::impl;
  const impl::ProfilerConfig config(impl::ProfilerState::KINETO);
  const std::set<impl::ActivityType> activities = {impl::ActivityType::CPU,
                                                   impl::ActivityType::CUDA};
  ::torch::autograd::profiler::prepareProfiler(config, activities);
  ::torch::autograd::profiler::enableProfiler(config, activities);
  TempDir dir;
  absl::StatusOr<Report> report = RunWithTrainscope(loop, dir.path(), 50);
  std::unique_ptr<::torch::autograd::profiler::ProfilerResult> result =
      ::torch::autograd::profiler::disableProfiler();
  ASSERT_TRUE(report.ok()) << report.status();
  int64_t profiled = 0;
  for (const auto& e : result->events()) {
    if (e.deviceType() == c10::DeviceType::CUDA) ++profiled;
  }
  const std::string& status = report->device_timeline.status;
  const bool collected = status == "collected" && report->device_timeline.kernels > 0;
  const bool in_use = status.find("CUPTI in use by") != std::string::npos;
  std::printf(
      "figures: outcome=%s timeline_status=\"%s\" timeline_kernels=%lld "
      "profiler_kernels=%lld\n",
      collected ? "collected"
      : in_use  ? "cupti_in_use"
                : "unclear",
      status.c_str(), static_cast<long long>(report->device_timeline.kernels),
      static_cast<long long>(profiled));
  EXPECT_TRUE(collected || in_use) << "neither collected nor a clear reason: " << status;
}

// Gloo's all-reduce of CUDA tensors waits for the current stream first: the
// compute queued before it. That wait is the range "c10d.device_sync"
// (phase other), not the collective's sync range.
TEST(TorchCudaTest, GlooAllReduceOfCudaTensorsKeepsQueuedComputeOutOfSync) {
  SKIP_WITHOUT_CUDA();
  TempDir dir;
  absl::StatusOr<Session> session = Session::Start(testing::QuietOptions(dir.path(), "gloo"));
  ASSERT_TRUE(session.ok()) << session.status();
  libtorch::DistributedOptions d;
  d.store_path = dir.path() + "/c10d.store";
  d.backend = "gloo";
  d.device = CurrentCuda();
  d.timeout = std::chrono::seconds(60);
  absl::StatusOr<std::unique_ptr<libtorch::ProcessGroup>> group =
      libtorch::ProcessGroup::Create(d, &*session);
  ASSERT_TRUE(group.ok()) << group.status();
  constexpr int kSteps = 5;
  constexpr int64_t kQueuedCycles = 100'000'000;  // about 50 ms at 2 GHz
  for (int i = 0; i < kSteps; ++i) {
    StepScope step(*session, StepIndex(i), Samples(1));
    std::vector<::torch::Tensor> tensors = {::torch::full({1024}, 3.0f, CurrentCuda())};
    at::cuda::sleep(kQueuedCycles);  // compute queued before the collective
    const absl::Status reduced = (*group)->AllReduce(tensors);
    ASSERT_TRUE(reduced.ok()) << reduced;
    EXPECT_EQ(tensors[0][0].item<float>(), 3.0f);
  }
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  double sync_s = 0, other_s = 0;
  for (const PhaseStat& p : report->phases) {
    if (p.phase == "sync") sync_s = p.total_s;
    if (p.phase == "other") other_s = p.total_s;
  }
  std::printf("figures: steps=%d device_sync_s=%.4f collective_sync_s=%.4f backend=%s\n", kSteps,
              other_s, sync_s, report->distributed.backend.c_str());
  EXPECT_EQ(report->distributed.backend, "gloo");
  EXPECT_GT(other_s, kSteps * 0.01) << "the queued compute is waited for in c10d.device_sync";
  EXPECT_LT(sync_s, other_s) << "the collective's sync range holds the queued compute";
}

// A one-rank NCCL group on `device` in `session` (null: none); skips the
// calling test where LibTorch has no NCCL.
absl::StatusOr<std::unique_ptr<libtorch::ProcessGroup>> OneRankNccl(const std::string& dir,
                                                                    Session* session) {
  libtorch::DistributedOptions d;
  d.store_path = dir + "/c10d.store";
  d.backend = "nccl";
  d.device = CurrentCuda();
  d.timeout = std::chrono::seconds(60);
  return libtorch::ProcessGroup::Create(d, session);
}

// All-reduce, barrier and the checkpoint vote on one rank; returns the
// report. `device_timed`: whether the collective's time is measured on the
// device (no blocking wait).
void CheckOneRankNccl(bool device_timed) {
  TempDir dir;
  absl::StatusOr<Session> session = Session::Start(testing::QuietOptions(dir.path(), "nccl"));
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<std::unique_ptr<libtorch::ProcessGroup>> group =
      OneRankNccl(dir.path(), &*session);
  if (group.status().code() == absl::StatusCode::kUnimplemented) {
    GTEST_SKIP() << group.status().message();
  }
  ASSERT_TRUE(group.ok()) << group.status();
  double value = 0;
  for (int i = 0; i < 5; ++i) {
    StepScope step(*session, StepIndex(i), Samples(1));
    std::vector<::torch::Tensor> tensors = {::torch::full({1 << 20}, 3.0f, CurrentCuda()),
                                            ::torch::full({7}, 2.0f, CurrentCuda())};
    const absl::Status reduced = (*group)->AllReduce(tensors);
    ASSERT_TRUE(reduced.ok()) << reduced;
    value = tensors[0][0].item<double>();
    EXPECT_TRUE(::torch::equal(tensors[1], ::torch::full({7}, 2.0f, CurrentCuda())));
  }
  const absl::Status barrier = (*group)->Barrier();
  std::unique_ptr<SaveCoordinator> vote = (*group)->MakeSaveCoordinator();
  absl::StatusOr<std::vector<int>> none_failed = vote->FailedRanks(false);
  absl::StatusOr<std::vector<int>> this_failed = vote->FailedRanks(true);
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  std::printf(
      "figures: allreduce_value=%g device_sync_s=%.6f device_sync_late=%lld barrier=%s "
      "vote_none=%zu vote_self=%zu backend=%s\n",
      value, report->distributed.device_sync_s,
      static_cast<long long>(report->distributed.device_sync_late),
      barrier.ok() ? "ok" : std::string(barrier.message()).c_str(),
      none_failed.ok() ? none_failed->size() : size_t{999},
      this_failed.ok() ? this_failed->size() : size_t{999}, report->distributed.backend.c_str());
  EXPECT_EQ(value, 3.0) << "one rank: the sum is its own value";
  EXPECT_TRUE(barrier.ok()) << barrier;
  ASSERT_TRUE(none_failed.ok()) << none_failed.status();
  EXPECT_TRUE(none_failed->empty());
  ASSERT_TRUE(this_failed.ok()) << this_failed.status();
  EXPECT_EQ(*this_failed, std::vector<int>{0});
  EXPECT_EQ(report->distributed.backend, "nccl");
  if (device_timed) {
    EXPECT_GT(report->distributed.device_sync_s, 0) << "collectives timed on the device";
  } else {
    EXPECT_EQ(report->distributed.device_sync_s, 0) << "blocking wait: the host range is the time";
  }
}

TEST(TorchNcclTest, OneRankAllReduceBarrierAndCheckpointVote) {
  SKIP_WITHOUT_CUDA();
  CheckOneRankNccl(/*device_timed=*/true);
}

TEST(TorchNcclTest, OneRankWithBlockingWait) {
  SKIP_WITHOUT_CUDA();
  setenv("TORCH_NCCL_BLOCKING_WAIT", "1", /*overwrite=*/1);
  CheckOneRankNccl(/*device_timed=*/false);
  unsetenv("TORCH_NCCL_BLOCKING_WAIT");
}

#else

TEST(TorchCudaTest, NeedsTheCudaBuildOfLibTorch) {
  GTEST_SKIP() << "LibTorch without c10/cuda headers: the CUDA tests are not built";
}

#endif  // TRAINSCOPE_TEST_CUDA_HEADERS

}  // namespace
}  // namespace trainscope
