// trainscope::libtorch on a CUDA device. Each test skips, saying why, where
// LibTorch sees no CUDA device, and prints one "figures: k=v ..." line that
// the GPU check quotes.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <string>

#include "tests/test_util.h"
#include "trainscope/torch/device.h"
#include "trainscope/torch/torch.h"
#include "trainscope/trainscope.h"

#if __has_include(<c10/cuda/CUDACachingAllocator.h>)
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#define TRAINSCOPE_TEST_CUDA_HEADERS 1
#else
#define TRAINSCOPE_TEST_CUDA_HEADERS 0
#endif

namespace trainscope {
namespace {

using testing::TempDir;

#define SKIP_WITHOUT_CUDA()                                                                \
  do {                                                                                     \
    if (!::torch::cuda::is_available())                                                    \
      GTEST_SKIP() << "no CUDA device (torch::cuda::is_available() is false)";             \
    if (!TRAINSCOPE_TEST_CUDA_HEADERS)                                                     \
      GTEST_SKIP() << "LibTorch without c10/cuda headers: this test needs its CUDA build"; \
  } while (false)

#if TRAINSCOPE_TEST_CUDA_HEADERS

// A device given as "cuda" (no index) is the current one: the allocator's
// stats are read there, not thrown at for index -1.
TEST(TorchCudaTest, RecordStepMemoryWithoutAnIndexUsesTheCurrentDevice) {
  SKIP_WITHOUT_CUDA();
  const auto last = static_cast<c10::DeviceIndex>(::torch::cuda::device_count() - 1);
  c10::cuda::set_device(last);
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
  const int64_t allocated =
      stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
          .current;
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  std::printf("figures: device=%d allocated_bytes=%lld last_bytes=%lld peak_bytes=%lld\n",
              static_cast<int>(last), static_cast<long long>(allocated),
              static_cast<long long>(report->memory.last_bytes),
              static_cast<long long>(report->memory.peak_bytes));
  EXPECT_EQ(report->memory.source, "cuda_caching_allocator");
  EXPECT_GE(report->memory.last_bytes, int64_t{64} << 20) << "the 64 MiB held on the device";
  EXPECT_EQ(report->memory.last_bytes, allocated);
  EXPECT_EQ(libtorch::QueryTorch().device, "cuda:" + std::to_string(last))
      << "the report names the current device";
}

#else

TEST(TorchCudaTest, NeedsTheCudaBuildOfLibTorch) {
  GTEST_SKIP() << "LibTorch without c10/cuda headers: the CUDA tests are not built";
}

#endif  // TRAINSCOPE_TEST_CUDA_HEADERS

}  // namespace
}  // namespace trainscope
