// sdk/cupti: the buffer pool, the record converter (fed real CUPTI activity
// structs), a buffer walked by the real cuptiActivityGetNextRecord, and the
// collector's behaviour with and without a GPU.
#include <dlfcn.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "gtest/gtest.h"
#include "sdk/cupti/buffer_pool.h"
#include "sdk/cupti/collector.h"
#include "sdk/ground/timeline.h"
#include "trainscope/clock.h"

#if TRAINSCOPE_WITH_CUPTI
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include "sdk/analysis/launch_attribution.h"
#include "sdk/analysis/run_analysis.h"
#include "sdk/analysis/run_fold.h"
#include "sdk/cupti/library.h"
#include "sdk/cupti/records.h"
#include "tests/hta_fold_testing.h"
#include "tests/test_util.h"
#include "trainscope/report.h"
#endif

namespace trainscope::cupti {
namespace {

using ground::IntervalKind;
using ground::Timeline;
using ground::TrackKind;

bool HaveCudaDriver() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) return false;
  dlclose(driver);
  return true;
}

// ---- the collector on this machine ---------------------------------------

TEST(CollectorTest, StartWithoutDriverIsUnavailableWithOneLineReason) {
  if (HaveCudaDriver()) GTEST_SKIP() << "a CUDA driver is present";
  absl::StatusOr<std::unique_ptr<Collector>> collector = Collector::Start(CollectorOptions{});
  ASSERT_FALSE(collector.ok());
  EXPECT_EQ(collector.status().code(), absl::StatusCode::kUnavailable);
  const std::string message(collector.status().message());
  EXPECT_EQ(message.rfind("CUPTI unavailable: ", 0), 0u) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  if (CompiledWithCupti()) {
    EXPECT_NE(message.find("libcuda.so.1"), std::string::npos) << message;
  } else {
    EXPECT_EQ(message, "CUPTI unavailable: built without the CUDA toolkit");
  }
}

TEST(CollectorTest, FailedStartCanBeRetried) {
  if (HaveCudaDriver()) GTEST_SKIP() << "a CUDA driver is present";
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::unique_ptr<Collector>> collector = Collector::Start(CollectorOptions{});
    ASSERT_FALSE(collector.ok());
    // Not "another Collector is running": a failed Start releases the claim.
    EXPECT_EQ(collector.status().code(), absl::StatusCode::kUnavailable);
  }
}

#if TRAINSCOPE_WITH_CUPTI
TEST(CollectorTest, InvalidOptionsAreRejectedBeforeTouchingTheDriver) {
  CollectorOptions tiny;
  tiny.buffer_bytes = 1024;
  CollectorOptions no_buffers;
  no_buffers.max_buffers = 0;
  CollectorOptions negative_flush;
  negative_flush.flush_interval_ms = -1;
  for (const CollectorOptions& options : {tiny, no_buffers, negative_flush}) {
    absl::StatusOr<std::unique_ptr<Collector>> collector = Collector::Start(options);
    ASSERT_FALSE(collector.ok());
    EXPECT_EQ(collector.status().code(), absl::StatusCode::kInvalidArgument) << collector.status();
  }
}
#endif

// ---- the buffer pool -------------------------------------------------------

TEST(BufferPoolTest, HandsOutAlignedBuffersUntilExhaustedThenRefusesAndCounts) {
  BufferPool pool(1000, 3);
  EXPECT_EQ(pool.buffer_bytes() % kBufferAlignment, 0u);
  EXPECT_GE(pool.buffer_bytes(), 1000u);
  EXPECT_EQ(pool.allocated(), 0);  // nothing until CUPTI asks
  std::set<uint8_t*> handed;
  for (int i = 0; i < 3; ++i) {
    uint8_t* buffer = pool.Acquire();
    ASSERT_NE(buffer, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer) % kBufferAlignment, 0u);
    std::memset(buffer, 0xAB, pool.buffer_bytes());  // the whole buffer is ours to write
    handed.insert(buffer);
  }
  EXPECT_EQ(handed.size(), 3u);
  EXPECT_EQ(pool.Acquire(), nullptr);
  EXPECT_EQ(pool.Acquire(), nullptr);
  EXPECT_EQ(pool.refused(), 2);
  EXPECT_EQ(pool.acquired(), 3);
  EXPECT_EQ(pool.in_flight(), 3);
  EXPECT_EQ(pool.allocated(), 3);
}

TEST(BufferPoolTest, ReturnedBufferIsReusedWithoutAllocatingMore) {
  BufferPool pool(4096, 2);
  uint8_t* first = pool.Acquire();
  uint8_t* second = pool.Acquire();
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(pool.Acquire(), nullptr);
  EXPECT_TRUE(pool.Release(first));
  EXPECT_EQ(pool.in_flight(), 1);
  EXPECT_EQ(pool.Acquire(), first);  // the same memory, handed out again
  EXPECT_EQ(pool.allocated(), 2);
  EXPECT_EQ(pool.refused(), 1);
  EXPECT_EQ(pool.acquired(), 3);
}

TEST(BufferPoolTest, ForeignOrTwiceReturnedPointersAreRejected) {
  BufferPool pool(4096, 2);
  uint8_t* buffer = pool.Acquire();
  alignas(8) uint8_t foreign[64];
  EXPECT_FALSE(pool.Release(foreign));
  EXPECT_FALSE(pool.Release(nullptr));
  EXPECT_TRUE(pool.Release(buffer));
  EXPECT_FALSE(pool.Release(buffer));
  EXPECT_EQ(pool.in_flight(), 0);
}

TEST(BufferPoolTest, ConcurrentRequestsNeverShareABufferAndKeepCounts) {
  BufferPool pool(4096, 4);
  constexpr int kThreads = 8;
  constexpr int kRounds = 2000;
  std::vector<std::thread> threads;
  std::atomic<int> overlaps{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        uint8_t* buffer = pool.Acquire();
        if (buffer == nullptr) continue;
        buffer[0] = static_cast<uint8_t>(t);
        std::this_thread::yield();
        if (buffer[0] != static_cast<uint8_t>(t)) overlaps.fetch_add(1);
        ASSERT_TRUE(pool.Release(buffer));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(pool.acquired() + pool.refused(), int64_t{kThreads} * kRounds);
  EXPECT_EQ(pool.in_flight(), 0);
  EXPECT_LE(pool.allocated(), 4);
}

#if TRAINSCOPE_WITH_CUPTI
// ---- the record converter, fed real CUPTI structs ------------------------

constexpr TimestampNs kT0 = 5'000'000'000;  // a plausible CLOCK_MONOTONIC time

CUpti_ActivityKernel10 Kernel(uint64_t start, uint64_t end, uint32_t device, uint32_t stream,
                              uint32_t correlation, const char* name) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = start;
  k.end = end;
  k.deviceId = device;
  k.contextId = 1;
  k.streamId = stream;
  k.correlationId = correlation;
  k.name = name;
  k.gridX = k.gridY = k.gridZ = 1;
  k.blockX = 128;
  k.blockY = k.blockZ = 1;
  return k;
}

CUpti_ActivityMemcpy6 Memcpy(uint64_t start, uint64_t end, uint8_t copy_kind, uint32_t stream,
                             uint32_t correlation) {
  CUpti_ActivityMemcpy6 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = copy_kind;
  m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.bytes = 1 << 20;
  m.start = start;
  m.end = end;
  m.deviceId = 0;
  m.contextId = 1;
  m.streamId = stream;
  m.correlationId = correlation;
  m.copyCount = 1;
  return m;
}

CUpti_ActivityMemset4 Memset(uint64_t start, uint64_t end, uint32_t stream, uint32_t correlation) {
  CUpti_ActivityMemset4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  m.bytes = 4096;
  m.start = start;
  m.end = end;
  m.deviceId = 0;
  m.contextId = 1;
  m.streamId = stream;
  m.correlationId = correlation;
  return m;
}

CUpti_ActivityAPI Api(CUpti_ActivityKind kind, CUpti_CallbackId cbid, uint64_t start, uint64_t end,
                      uint32_t pid, uint32_t tid, uint32_t correlation) {
  CUpti_ActivityAPI a{};
  a.kind = kind;
  a.cbid = cbid;
  a.start = start;
  a.end = end;
  a.processId = pid;
  a.threadId = tid;
  a.correlationId = correlation;
  return a;
}

CUpti_ActivitySynchronization2 Sync(CUpti_ActivitySynchronizationType type, uint64_t start,
                                    uint64_t end, uint32_t stream, uint32_t correlation) {
  CUpti_ActivitySynchronization2 s{};
  s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  s.type = type;
  s.start = start;
  s.end = end;
  s.contextId = 1;
  s.streamId = stream;
  s.correlationId = correlation;
  return s;
}

template <typename T>
const CUpti_Activity* AsActivity(const T& record) {
  return reinterpret_cast<const CUpti_Activity*>(&record);
}

// The intervals of `kind`, in the order they were added.
std::vector<ground::Interval> OfKind(const Timeline& timeline, IntervalKind kind) {
  std::vector<ground::Interval> out;
  for (const ground::Interval& i : timeline.intervals()) {
    if (i.kind == kind) out.push_back(i);
  }
  return out;
}

CUptiResult FakeCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API &&
      cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) {
    *name = "cudaLaunchKernel_v7000";
  } else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API &&
             cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000) {
    *name = "cudaStreamSynchronize_ptsz_v7000";
  } else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API &&
             cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020) {
    *name = "cudaMemcpyAsync_v3020";
  } else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API &&
             cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_v10000) {
    *name = "cudaLaunchHostFunc_v10000";
  } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API &&
             cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) {
    *name = "cuLaunchKernel";
  } else {
    *name = nullptr;
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  return CUPTI_SUCCESS;
}

TEST(RecordConverterTest, KernelsGetOneTrackPerDeviceStreamWithNamesAndCorrelationIds) {
  RecordConverter converter;
  const auto a = Kernel(kT0 + 100, kT0 + 400, 0, 7, 11, "gemm_kernel");
  const auto b = Kernel(kT0 + 500, kT0 + 900, 0, 7, 12, "relu_kernel");
  const auto c = Kernel(kT0 + 150, kT0 + 250, 0, 13, 13, "gemm_kernel");
  const auto d = Kernel(kT0 + 200, kT0 + 300, 1, 7, 14, "gemm_kernel");
  for (const auto* k : {&a, &b, &c, &d}) converter.Add(AsActivity(*k));

  Timeline timeline;
  converter.AppendTo(&timeline);
  ASSERT_EQ(timeline.size(), 4u);
  ASSERT_EQ(timeline.tracks().size(), 3u);  // (0,7), (0,13), (1,7)
  const auto kernels = OfKind(timeline, IntervalKind::kKernel);
  ASSERT_EQ(kernels.size(), 4u);
  EXPECT_EQ(kernels[0].start_ns, kT0 + 100);
  EXPECT_EQ(kernels[0].end_ns, kT0 + 400);
  EXPECT_EQ(kernels[0].value, 11);
  EXPECT_EQ(kernels[0].step, -1);
  EXPECT_EQ(timeline.name(kernels[0].name), "gemm_kernel");
  EXPECT_EQ(timeline.name(kernels[1].name), "relu_kernel");
  EXPECT_EQ(kernels[0].name, kernels[2].name);    // interned once
  EXPECT_EQ(kernels[0].track, kernels[1].track);  // same device and stream
  EXPECT_NE(kernels[0].track, kernels[2].track);  // other stream
  EXPECT_NE(kernels[0].track, kernels[3].track);  // other device
  const ground::Track& stream7 = timeline.tracks()[kernels[0].track];
  EXPECT_EQ(stream7.kind, TrackKind::kDeviceStream);
  EXPECT_EQ(stream7.pid, 0);
  EXPECT_EQ(stream7.tid, 7);
  EXPECT_EQ(stream7.name, "GPU 0 stream 7");
  EXPECT_EQ(timeline.tracks()[kernels[3].track].name, "GPU 1 stream 7");
  EXPECT_EQ(converter.stats().kernels, 4);
  EXPECT_EQ(converter.stats().records, 4);
}

TEST(RecordConverterTest, SerialKernelKindIsReadLikeConcurrentKernels) {
  RecordConverter converter;
  auto k = Kernel(kT0, kT0 + 10, 0, 1, 5, "serial");
  k.kind = CUPTI_ACTIVITY_KIND_KERNEL;
  converter.Add(AsActivity(k));
  Timeline timeline;
  converter.AppendTo(&timeline);
  ASSERT_EQ(timeline.size(), 1u);
  EXPECT_EQ(timeline.intervals()[0].kind, IntervalKind::kKernel);
  EXPECT_EQ(timeline.name(timeline.intervals()[0].name), "serial");
}

TEST(RecordConverterTest, KernelNameIsCopiedOutOfTheBuffer) {
  RecordConverter converter;
  char name[] = "attention_fwd";
  converter.Add(AsActivity(Kernel(kT0, kT0 + 10, 0, 1, 1, name)));
  std::strcpy(name, "overwritten!!");  // CUPTI reuses the memory
  Timeline timeline;
  converter.AppendTo(&timeline);
  EXPECT_EQ(timeline.name(timeline.intervals()[0].name), "attention_fwd");
}

TEST(RecordConverterTest, CopiesAndMemsetsAreDeviceIntervalsNamedByDirection) {
  RecordConverter converter;
  converter.Add(AsActivity(Memcpy(kT0, kT0 + 50, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 3, 21)));
  converter.Add(AsActivity(Memcpy(kT0 + 60, kT0 + 90, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 3, 22)));
  converter.Add(AsActivity(Memset(kT0 + 95, kT0 + 99, 3, 23)));
  Timeline timeline;
  converter.AppendTo(&timeline);
  const auto copies = OfKind(timeline, IntervalKind::kMemcpy);
  const auto sets = OfKind(timeline, IntervalKind::kMemset);
  ASSERT_EQ(copies.size(), 2u);
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_EQ(timeline.name(copies[0].name), "Memcpy HtoD");
  EXPECT_EQ(timeline.name(copies[1].name), "Memcpy DtoH");
  EXPECT_EQ(timeline.name(sets[0].name), "Memset");
  EXPECT_EQ(copies[0].value, 21);
  EXPECT_EQ(sets[0].value, 23);
  EXPECT_EQ(sets[0].duration_ns(), 4);
  ASSERT_EQ(timeline.tracks().size(), 1u);
  EXPECT_EQ(timeline.tracks()[0].name, "GPU 0 stream 3");
  EXPECT_EQ(converter.stats().memcpys, 2);
  EXPECT_EQ(converter.stats().memsets, 1);
}

TEST(RecordConverterTest, ApiCallsLandOnTheirThreadTrackAndShareTheKernelsCorrelationId) {
  RecordConverter converter(&FakeCallbackName);
  const uint32_t pid = 4242;
  converter.Add(
      AsActivity(Api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                     kT0, kT0 + 5, pid, 100, 31)));
  converter.Add(AsActivity(Api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
                               kT0 + 10, kT0 + 12, pid, 101, 32)));
  converter.Add(AsActivity(Api(CUPTI_ACTIVITY_KIND_RUNTIME, 9999, kT0 + 20, kT0 + 21, pid, 100,
                               33)));  // a cbid the name function does not know
  converter.Add(AsActivity(Kernel(kT0 + 30, kT0 + 80, 0, 7, 31, "gemm_kernel")));

  Timeline timeline;
  converter.AppendTo(&timeline);
  const auto calls = OfKind(timeline, IntervalKind::kRuntimeCall);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(timeline.name(calls[0].name), "cudaLaunchKernel");  // version suffix dropped
  EXPECT_EQ(timeline.name(calls[1].name), "cuLaunchKernel");
  EXPECT_EQ(timeline.name(calls[2].name), "CUDA runtime API 9999");
  const ground::Track& main = timeline.tracks()[calls[0].track];
  EXPECT_EQ(main.kind, TrackKind::kHostThread);
  EXPECT_EQ(main.pid, pid);
  EXPECT_EQ(main.tid, 100);
  EXPECT_EQ(calls[2].track, calls[0].track);
  EXPECT_EQ(timeline.tracks()[calls[1].track].tid, 101);
  const auto kernels = OfKind(timeline, IntervalKind::kKernel);
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0].value, calls[0].value);  // the launch that made it
  EXPECT_EQ(converter.stats().runtime_calls, 2);
  EXPECT_EQ(converter.stats().driver_calls, 1);
}

TEST(RecordConverterTest, ApiCallsWithoutANameFunctionAreNamedByDomainAndId) {
  RecordConverter converter;
  converter.Add(AsActivity(Api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
                               kT0, kT0 + 1, 1, 2, 3)));
  Timeline timeline;
  converter.AppendTo(&timeline);
  EXPECT_EQ(timeline.name(timeline.intervals()[0].name),
            "CUDA driver API " + std::to_string(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
}

// Calls from a thread of this process that trainscope never saw (LibTorch's
// autograd device thread) land on a track named as the OS names the thread.
TEST(RecordConverterTest, CallsFromAnUnknownThreadOfThisProcessTakeItsOsName) {
  std::promise<uint32_t> tid_promise;
  std::promise<void> done;
  std::thread autograd([&] {
    pthread_setname_np(pthread_self(), "pt_autograd_0");
    tid_promise.set_value(static_cast<uint32_t>(syscall(SYS_gettid)));
    done.get_future().wait();
  });
  const uint32_t tid = tid_promise.get_future().get();
  RecordConverter converter(&FakeCallbackName);
  converter.Add(
      AsActivity(Api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                     kT0, kT0 + 5, static_cast<uint32_t>(getpid()), tid, 41)));
  converter.Add(
      AsActivity(Api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                     kT0, kT0 + 5, 4242, 77, 42)));  // another process: no name to read
  Timeline timeline;
  converter.AppendTo(&timeline);
  done.set_value();
  autograd.join();
  const auto calls = OfKind(timeline, IntervalKind::kRuntimeCall);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(timeline.tracks()[calls[0].track].name, "pt_autograd_0");
  EXPECT_EQ(timeline.tracks()[calls[1].track].name, "thread 77");
}

TEST(RecordConverterTest, ExistingHostTrackOfTheThreadIsReused) {
  Timeline timeline;
  const uint32_t main = timeline.AddTrack({TrackKind::kHostThread, 4242, 100, "main"});
  RecordConverter converter(&FakeCallbackName);
  converter.Add(
      AsActivity(Api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                     kT0, kT0 + 5, 4242, 100, 31)));
  converter.AppendTo(&timeline);
  ASSERT_EQ(timeline.tracks().size(), 1u);
  EXPECT_EQ(timeline.intervals()[0].track, main);
  EXPECT_EQ(timeline.tracks()[main].name, "main");
}

TEST(RecordConverterTest, SyncCallTakesTheThreadOfTheApiCallWithItsCorrelationId) {
  RecordConverter converter(&FakeCallbackName);
  const uint32_t pid = 4242;
  converter.Add(AsActivity(
      Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, kT0 + 10, kT0 + 900, 7, 41)));
  // The API record may come after the sync record (another buffer, say).
  converter.Add(AsActivity(Api(CUPTI_ACTIVITY_KIND_RUNTIME,
                               CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000, kT0 + 5,
                               kT0 + 905, pid, 100, 41)));
  // No API record with this id: the thread is unknown.
  converter.Add(AsActivity(Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, kT0 + 1000,
                                kT0 + 1500, 0, 42)));
  // A stream waiting on an event does not block the host.
  converter.Add(AsActivity(
      Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, kT0 + 1600, kT0 + 1601, 7, 43)));

  Timeline timeline;
  converter.AppendTo(&timeline);
  const auto syncs = OfKind(timeline, IntervalKind::kSyncCall);
  const auto calls = OfKind(timeline, IntervalKind::kRuntimeCall);
  ASSERT_EQ(syncs.size(), 2u);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(timeline.name(syncs[0].name), "cudaStreamSynchronize");
  EXPECT_EQ(timeline.name(calls[0].name), "cudaStreamSynchronize_ptsz");
  EXPECT_EQ(syncs[0].track, calls[0].track);
  EXPECT_EQ(syncs[0].value, 41);
  EXPECT_EQ(syncs[0].duration_ns(), 890);
  const ground::Track& unknown = timeline.tracks()[syncs[1].track];
  EXPECT_EQ(unknown.kind, TrackKind::kHostThread);
  EXPECT_EQ(unknown.pid, getpid());
  EXPECT_EQ(unknown.tid, 0);
  EXPECT_EQ(unknown.name, "CUDA sync (thread unknown)");
  EXPECT_EQ(timeline.name(syncs[1].name), "cudaDeviceSynchronize");
  EXPECT_EQ(converter.stats().sync_calls, 2);
  EXPECT_EQ(converter.stats().ignored, 1);
}

TEST(RecordConverterTest, InvertedRecordsAreKeptAsEmptyIntervalsAndCounted) {
  RecordConverter converter;
  converter.Add(AsActivity(Kernel(kT0 + 100, kT0 + 40, 0, 7, 1, "skewed")));
  converter.Add(AsActivity(Memcpy(kT0 + 200, 0, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 7, 2)));
  Timeline timeline;
  converter.AppendTo(&timeline);
  ASSERT_EQ(timeline.size(), 2u);
  EXPECT_EQ(timeline.intervals()[0].start_ns, kT0 + 100);
  EXPECT_EQ(timeline.intervals()[0].end_ns, kT0 + 100);
  EXPECT_EQ(timeline.intervals()[1].start_ns, kT0 + 200);
  EXPECT_EQ(timeline.intervals()[1].end_ns, kT0 + 200);
  EXPECT_EQ(converter.stats().clamped, 2);
}

TEST(RecordConverterTest, ZeroLengthKernelsAreKeptAndUntimedRecordsDropped) {
  RecordConverter converter;
  converter.Add(AsActivity(Kernel(kT0 + 100, kT0 + 100, 0, 7, 1, "instant")));
  converter.Add(AsActivity(Kernel(0, 0, 0, 7, 2, "untimed")));  // CUPTI had no timestamps
  Timeline timeline;
  converter.AppendTo(&timeline);
  ASSERT_EQ(timeline.size(), 1u);
  EXPECT_EQ(timeline.intervals()[0].duration_ns(), 0);
  EXPECT_EQ(timeline.name(timeline.intervals()[0].name), "instant");
  EXPECT_EQ(converter.stats().kernels, 1);
  EXPECT_EQ(converter.stats().untimed, 1);
  EXPECT_EQ(converter.stats().clamped, 0);
}

TEST(RecordConverterTest, OverheadIsCountedNotConvertedAndOtherKindsAreIgnored) {
  RecordConverter converter;
  CUpti_ActivityOverhead3 overhead{};
  overhead.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  overhead.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
  overhead.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  overhead.start = kT0;
  overhead.end = kT0 + 1500;
  converter.Add(AsActivity(overhead));
  overhead.start = kT0 + 2000;
  overhead.end = kT0 + 2500;
  converter.Add(AsActivity(overhead));
  CUpti_ActivityName name{};
  name.kind = CUPTI_ACTIVITY_KIND_NAME;
  converter.Add(AsActivity(name));
  Timeline timeline;
  converter.AppendTo(&timeline);
  EXPECT_EQ(timeline.size(), 0u);
  EXPECT_EQ(converter.stats().overhead_records, 2);
  EXPECT_EQ(converter.stats().cupti_overhead_ns, 2000);
  EXPECT_EQ(converter.stats().ignored, 1);
  EXPECT_EQ(converter.stats().records, 0);
}

TEST(RecordConverterTest, AppendToMovesRecordsOutSoASecondCallAddsOnlyNewOnes) {
  RecordConverter converter;
  converter.Add(AsActivity(Kernel(kT0, kT0 + 10, 0, 7, 1, "k")));
  Timeline timeline;
  converter.AppendTo(&timeline);
  EXPECT_TRUE(converter.records().empty());
  converter.AppendTo(&timeline);
  EXPECT_EQ(timeline.size(), 1u);
  converter.Add(AsActivity(Kernel(kT0 + 20, kT0 + 30, 0, 7, 2, "k")));
  converter.AppendTo(&timeline);
  ASSERT_EQ(timeline.size(), 2u);
  EXPECT_EQ(timeline.tracks().size(), 1u);
  EXPECT_EQ(timeline.intervals()[0].name, timeline.intervals()[1].name);
}

// ---- what has arrived: CompleteBefore ------------------------------------

constexpr auto kRuntime = CUPTI_ACTIVITY_KIND_RUNTIME;
constexpr auto kDriver = CUPTI_ACTIVITY_KIND_DRIVER;
constexpr CUpti_CallbackId kLaunch = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
constexpr CUpti_CallbackId kCopy = CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020;
constexpr CUpti_CallbackId kDriverLaunch = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;

TEST(CompleteBeforeTest, WaitsForTheDeviceRecordOfEachLaunchingCall) {
  RecordConverter converter(&FakeCallbackName);
  constexpr TimestampNs kNever = 0;  // never give up
  EXPECT_EQ(converter.CompleteBefore(kNever), std::numeric_limits<TimestampNs>::min());
  converter.Flushed(kT0);
  EXPECT_EQ(converter.CompleteBefore(kNever), kT0);
  converter.Add(AsActivity(Api(kRuntime, kLaunch, kT0 + 100, kT0 + 110, 77, 100, 1)));
  converter.Add(AsActivity(Api(kRuntime, kCopy, kT0 + 200, kT0 + 210, 77, 100, 2)));
  converter.Flushed(kT0 + 1000);
  EXPECT_EQ(converter.CompleteBefore(kNever), kT0 + 100);  // the kernel is still running
  converter.Add(AsActivity(Kernel(kT0 + 150, kT0 + 900, 0, 7, 1, "gemm")));
  EXPECT_EQ(converter.CompleteBefore(kNever), kT0 + 200);  // the copy has not come
  converter.Add(AsActivity(Memcpy(kT0 + 950, kT0 + 1500, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 9, 2)));
  EXPECT_EQ(converter.CompleteBefore(kNever), kT0 + 1000);
  EXPECT_EQ(converter.stats().launches_tracked, 2);
  EXPECT_EQ(converter.stats().launches_unmatched, 0);
}

TEST(CompleteBeforeTest, ADeviceRecordBeforeItsCallIsMatchedWhenTheCallComes) {
  RecordConverter converter(&FakeCallbackName);
  converter.Flushed(kT0 + 1000);
  converter.Add(AsActivity(Kernel(kT0 + 150, kT0 + 400, 0, 7, 5, "gemm")));  // another buffer
  converter.Add(AsActivity(Api(kRuntime, kLaunch, kT0 + 100, kT0 + 110, 77, 100, 5)));
  EXPECT_EQ(converter.CompleteBefore(0), kT0 + 1000);
  EXPECT_EQ(converter.stats().launches_tracked, 0);
}

TEST(CompleteBeforeTest, ADriverCallInsideARuntimeCallIsNotWaitedFor) {
  for (bool runtime_first : {false, true}) {
    SCOPED_TRACE(runtime_first ? "runtime record first" : "driver record first");
    RecordConverter converter(&FakeCallbackName);
    converter.Flushed(kT0 + 1000);
    const auto runtime = Api(kRuntime, kLaunch, kT0 + 100, kT0 + 130, 77, 100, 8);
    const auto driver = Api(kDriver, kDriverLaunch, kT0 + 110, kT0 + 120, 77, 100, 9);
    if (runtime_first) converter.Add(AsActivity(runtime));
    converter.Add(AsActivity(driver));
    if (!runtime_first) converter.Add(AsActivity(runtime));
    EXPECT_EQ(converter.CompleteBefore(0), kT0 + 100);
    converter.Add(AsActivity(Kernel(kT0 + 140, kT0 + 400, 0, 7, 8, "gemm")));  // the runtime id
    EXPECT_EQ(converter.CompleteBefore(0), kT0 + 1000);
    EXPECT_EQ(converter.stats().launches_tracked, 1);
  }
}

TEST(CompleteBeforeTest, ADriverLaunchOnItsOwnIsWaitedFor) {
  // cuBLAS and Triton launch through the driver: the kernel carries its id.
  RecordConverter converter(&FakeCallbackName);
  converter.Flushed(kT0 + 1000);
  converter.Add(AsActivity(Api(kRuntime, kLaunch, kT0 + 10, kT0 + 20, 77, 100, 1)));
  converter.Add(AsActivity(Kernel(kT0 + 30, kT0 + 40, 0, 7, 1, "a")));
  converter.Add(AsActivity(Api(kDriver, kDriverLaunch, kT0 + 110, kT0 + 120, 77, 100, 2)));
  EXPECT_EQ(converter.CompleteBefore(0), kT0 + 110);
  converter.Add(AsActivity(Kernel(kT0 + 130, kT0 + 400, 0, 7, 2, "triton_kernel")));
  EXPECT_EQ(converter.CompleteBefore(0), kT0 + 1000);
}

TEST(CompleteBeforeTest, ACallWhoseRecordNeverComesIsGivenUpAndCounted) {
  RecordConverter converter(&FakeCallbackName);
  converter.Flushed(kT0 + 1000);
  converter.Add(AsActivity(Api(kRuntime, kLaunch, kT0 + 100, kT0 + 110, 77, 100, 1)));
  converter.Add(AsActivity(Api(kRuntime, kLaunch, kT0 + 300, kT0 + 310, 77, 100, 2)));
  EXPECT_EQ(converter.CompleteBefore(kT0 + 50), kT0 + 100);
  EXPECT_EQ(converter.CompleteBefore(kT0 + 200), kT0 + 300);  // the first given up
  EXPECT_EQ(converter.stats().launches_unmatched, 1);
  // Its record, should it come after all, changes nothing.
  converter.Add(AsActivity(Kernel(kT0 + 120, kT0 + 140, 0, 7, 1, "late")));
  EXPECT_EQ(converter.CompleteBefore(kT0 + 200), kT0 + 300);
}

TEST(CompleteBeforeTest, CallsWithoutDeviceWorkAndUnnamedCallsAreNotWaitedFor) {
  RecordConverter named(&FakeCallbackName);
  named.Flushed(kT0 + 1000);
  named.Add(AsActivity(Api(kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000,
                           kT0 + 100, kT0 + 900, 77, 100, 1)));
  named.Add(AsActivity(Api(kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_v10000, kT0 + 100,
                           kT0 + 110, 77, 100, 2)));
  EXPECT_EQ(named.CompleteBefore(0), kT0 + 1000);
  // Without cuptiGetCallbackName nothing can be told apart: nothing is waited for.
  RecordConverter unnamed;
  unnamed.Flushed(kT0 + 1000);
  unnamed.Add(AsActivity(Api(kRuntime, kLaunch, kT0 + 100, kT0 + 110, 77, 100, 3)));
  EXPECT_EQ(unnamed.CompleteBefore(0), kT0 + 1000);
  EXPECT_EQ(unnamed.stats().launches_tracked, 0);
}

// ---- device records folded as CUPTI hands them back ----------------------

// A GPU-bound run as CUPTI reports it. Each step's copy goes to stream 9 and
// its forward, backward and optimizer kernels to stream 7; the GPU lags the
// host, so a step's kernels run on into the next steps, and every fourth
// step ends in cudaStreamSynchronize. Records go into buffers of 16 (one
// chain per stream, one for API and sync records), a device record from its
// launch on but complete only when the work ends; a flush every 100 ms hands
// back the buffers whose records have all completed (cuptiActivityFlushAll(0)),
// so device records arrive up to a few flushes late and out of order across
// buffers.
using CuptiRecord = std::variant<CUpti_ActivityKernel10, CUpti_ActivityMemcpy6, CUpti_ActivityAPI,
                                 CUpti_ActivitySynchronization2>;
struct Written {
  TimestampNs at = 0;        // when CUPTI writes it into a buffer
  TimestampNs complete = 0;  // when it is complete
  int chain = 0;             // 0: API and sync records, 1: stream 7, 2: stream 9
  CuptiRecord record;
};
struct GpuRun {
  std::vector<ground::Interval> host;  // phases and steps, on the fold's track 0
  std::vector<std::pair<TimestampNs, TimestampNs>> steps;
  std::vector<Written> written;  // in the order CUPTI writes them
  TimestampNs end_ns = 0;
};

constexpr uint32_t kPid = 77;
constexpr uint32_t kTid = 100;
constexpr TimestampNs kUs = 1000;
constexpr TimestampNs kMs = 1000 * kUs;
constexpr TimestampNs kMaxTime = std::numeric_limits<TimestampNs>::max();

GpuRun SimulateGpuRun(int steps, uint64_t seed) {
  GpuRun run;
  std::mt19937_64 rng(seed);
  auto uniform = [&](TimestampNs lo, TimestampNs hi) {
    return std::uniform_int_distribution<TimestampNs>(lo, hi)(rng);
  };
  TimestampNs now = kT0;
  TimestampNs free7 = now, free9 = now;
  uint32_t correlation = 1;
  auto range = [&](TimestampNs a, TimestampNs b, int64_t step, Phase phase, IntervalKind kind) {
    ground::Interval i;
    i.start_ns = a;
    i.end_ns = b;
    i.step = step;
    i.phase = phase;
    i.kind = kind;
    i.value = kind == IntervalKind::kStep ? 32 : 0;
    i.name = kind == IntervalKind::kStep ? 0 : 1 + static_cast<uint32_t>(phase);
    run.host.push_back(i);
  };
  auto api = [&](CUpti_CallbackId cbid, TimestampNs a, TimestampNs b) {
    run.written.push_back({b, b, 0, Api(kRuntime, cbid, a, b, kPid, kTid, correlation)});
  };
  // `count` launches spread over a phase that takes `host` on the CPU.
  auto phase = [&](int64_t s, Phase p, int count, TimestampNs host, TimestampNs lo,
                   TimestampNs hi) {
    const TimestampNs a = now;
    for (int k = 0; k < count; ++k) {
      const TimestampNs call = a + host * k / count + uniform(0, 5 * kUs);
      const TimestampNs call_end = call + uniform(4 * kUs, 12 * kUs);
      api(kLaunch, call, call_end);
      const TimestampNs k0 = std::max(call_end + uniform(3 * kUs, 8 * kUs), free7);
      free7 = k0 + uniform(lo, hi);
      run.written.push_back({call_end, free7, 1, Kernel(k0, free7, 0, 7, correlation, "gemm")});
      ++correlation;
    }
    now = a + host;
    range(a, now, s, p, IntervalKind::kHostRange);
    now += uniform(0, 20 * kUs);
  };
  for (int64_t s = 0; s < steps; ++s) {
    const TimestampNs step_start = now;
    const TimestampNs wait_end = now + uniform(50 * kUs, 400 * kUs);
    range(now, wait_end, s, Phase::kDataWait, IntervalKind::kHostRange);
    now = wait_end;
    {  // the batch's copy, on its own stream
      const TimestampNs call = now + uniform(2 * kUs, 5 * kUs);
      const TimestampNs call_end = call + uniform(5 * kUs, 10 * kUs);
      api(kCopy, call, call_end);
      const TimestampNs c0 = std::max(call_end + 5 * kUs, free9);
      free9 = c0 + uniform(80 * kUs, 150 * kUs);
      run.written.push_back(
          {call_end, free9, 2, Memcpy(c0, free9, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 9, correlation)});
      ++correlation;
      range(now, call_end + 2 * kUs, s, Phase::kHostToDevice, IntervalKind::kHostRange);
      now = call_end + 2 * kUs;
    }
    phase(s, Phase::kForward, 6, 300 * kUs, 150 * kUs, 400 * kUs);
    phase(s, Phase::kBackward, 8, 500 * kUs, 200 * kUs, 500 * kUs);
    phase(s, Phase::kOptimizer, 2, 100 * kUs, 50 * kUs, 100 * kUs);
    if (s % 4 == 3) {  // wait for the GPU
      const TimestampNs a = now;
      const TimestampNs b = std::max(a + 5 * kUs, free7 + uniform(5 * kUs, 15 * kUs));
      api(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000, a, b);
      run.written.push_back(
          {b, b, 0,
           Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, a, b, 7, correlation)});
      ++correlation;
      range(a, b, s, Phase::kSync, IntervalKind::kHostRange);
      now = b;
    }
    range(step_start, now, s, Phase::kOther, IntervalKind::kStep);
    run.steps.emplace_back(step_start, now);
    now += uniform(0, 30 * kUs);
  }
  run.end_ns = std::max({now, free7, free9}) + 10 * kMs;
  std::stable_sort(run.written.begin(), run.written.end(),
                   [](const Written& a, const Written& b) { return a.at < b.at; });
  return run;
}

void AddRecord(RecordConverter* converter, const CuptiRecord& record) {
  std::visit([&](const auto& r) { converter->Add(AsActivity(r)); }, record);
}

Timeline HostTimeline() {
  Timeline timeline;
  timeline.AddTrack({TrackKind::kHostThread, kPid, kTid, "main"});
  timeline.Intern("step");
  for (int p = 0; p < kPhaseCount; ++p) timeline.Intern(PhaseName(static_cast<Phase>(p)));
  return timeline;
}

struct DeviceFold {
  Report report;
  std::vector<Report::Step> rows;
  int64_t late = 0;
  int64_t buffers_out_of_order = 0;  // handed back before an older buffer
};

// Feeds `run` to a RunFold as the Session does: every 10 ms the host
// intervals that ended, every 100 ms a flush, the watermark 20 ms behind,
// not into the open step, and (with `horizon`) not past CompleteBefore.
DeviceFold FoldAsItArrives(const GpuRun& run, const analysis::RunFoldOptions& options,
                           bool horizon) {
  DeviceFold out;
  analysis::RunFold fold(options, [&](Report::Step& row) { out.rows.push_back(row); });
  fold.input() = HostTimeline();
  RecordConverter converter(&FakeCallbackName);
  converter.Flushed(kT0);
  struct Buffer {
    std::vector<const Written*> records;
    int64_t opened = 0;  // order of opening
  };
  std::vector<Buffer> held;    // with CUPTI, written to or waiting to complete
  int open[3] = {-1, -1, -1};  // each chain's buffer being written
  int64_t opened = 0, newest_returned = -1;
  std::vector<ground::Interval> host = run.host;
  std::stable_sort(host.begin(), host.end(),
                   [](const auto& a, const auto& b) { return a.end_ns < b.end_ns; });
  size_t next_host = 0, next_write = 0, open_step = 0;
  for (TimestampNs t = kT0 + 10 * kMs;; t += 10 * kMs) {
    while (next_host < host.size() && host[next_host].end_ns <= t) {
      fold.input().Add(host[next_host++]);
    }
    while (next_write < run.written.size() && run.written[next_write].at <= t) {
      const Written& w = run.written[next_write++];
      if (open[w.chain] < 0 || held[open[w.chain]].records.size() == 16) {
        held.push_back({{}, opened++});
        open[w.chain] = static_cast<int>(held.size()) - 1;
      }
      held[open[w.chain]].records.push_back(&w);
    }
    const bool done = next_host == host.size() && next_write == run.written.size();
    if ((t - kT0) % (100 * kMs) == 0 || done) {  // cuptiActivityFlushAll(0) at t
      std::vector<Buffer> kept;
      for (Buffer& b : held) {
        const bool complete = std::all_of(b.records.begin(), b.records.end(),
                                          [&](const Written* w) { return w->complete <= t; });
        if (!complete || b.records.empty()) {
          kept.push_back(std::move(b));
          continue;
        }
        if (b.opened < newest_returned) ++out.buffers_out_of_order;
        newest_returned = std::max(newest_returned, b.opened);
        for (const Written* w : b.records) AddRecord(&converter, w->record);
      }
      held = std::move(kept);
      for (int& c : open) c = -1;  // a flushed chain starts a new buffer
      bool all_delivered = done && held.empty();
      converter.Flushed(t);
      if (done && !all_delivered) continue;  // wait for the last kernels
    }
    const TimestampNs complete = converter.CompleteBefore(t - 5000 * kMs);
    converter.AppendTo(&fold.input());
    while (open_step < run.steps.size() && run.steps[open_step].second <= t) ++open_step;
    TimestampNs watermark = t - 20 * kMs;
    if (open_step < run.steps.size() && run.steps[open_step].first <= t) {
      watermark = std::min(watermark, run.steps[open_step].first);
    }
    if (horizon) watermark = std::min(watermark, complete);
    fold.Advance(watermark);
    if (done && held.empty()) break;
  }
  analysis::RunClock clock;
  clock.process_start_ns = options.process_start_ns;
  clock.finish_ns = run.end_ns;
  fold.Finish(clock, &out.report);
  out.late = fold.late();
  EXPECT_EQ(converter.stats().launches_unmatched, 0);
  return out;
}

struct WholeRun {
  Report report;
  std::vector<Report::Step> rows;
};

WholeRun AnalyzeWholeGpuRun(const GpuRun& run, const analysis::RunFoldOptions& options) {
  WholeRun out;
  Timeline timeline = HostTimeline();
  for (const ground::Interval& i : run.host) timeline.Add(i);
  RecordConverter converter(&FakeCallbackName);
  for (const Written& w : run.written) AddRecord(&converter, w.record);
  converter.AppendTo(&timeline);
  timeline.Sort();
  const analysis::LaunchAttribution launches = analysis::AttributeLaunches(&timeline);
  for (const auto& [phase, ns] : launches.busy_by_phase) {
    out.report.device_timeline.busy_s_by_phase.emplace_back(phase, ns / 1e9);
  }
  analysis::RunClock clock;
  clock.process_start_ns = options.process_start_ns;
  clock.finish_ns = run.end_ns;
  analysis::AnalyzeRun(timeline, clock, options.warmup_override, &out.report, &out.rows);
  analysis::FillHta(analysis::ComputeHtaBreakdown(timeline, analysis::HtaTraceFacts{}), 0,
                    &out.report.device_timeline.hta);
  return out;
}

analysis::RunFoldOptions GpuRunFoldOptions() {
  analysis::RunFoldOptions options;
  options.process_start_ns = kT0 - 2000 * kMs;
  options.device = true;
  return options;
}

TEST(DeviceFoldTest, RecordsFromLateOutOfOrderBuffersFoldAsTheWholeRunAnalysisDoes) {
  const GpuRun run = SimulateGpuRun(600, 3);
  const analysis::RunFoldOptions options = GpuRunFoldOptions();
  const WholeRun whole = AnalyzeWholeGpuRun(run, options);
  const DeviceFold folded = FoldAsItArrives(run, options, /*horizon=*/true);

  // The scenario: device work runs past the step that launched it, and
  // buffers come back out of order.
  int kernels_past_their_step = 0;
  for (const Written& w : run.written) {
    const auto* k = std::get_if<CUpti_ActivityKernel10>(&w.record);
    if (k == nullptr) continue;
    auto step = std::upper_bound(run.steps.begin(), run.steps.end(),
                                 std::pair<TimestampNs, TimestampNs>(w.at, kMaxTime)) -
                1;  // the step whose start is the last before the launch
    if (static_cast<TimestampNs>(k->end) > step->second) ++kernels_past_their_step;
  }
  EXPECT_GT(kernels_past_their_step, 1000);
  EXPECT_GT(folded.buffers_out_of_order, 10);
  EXPECT_EQ(whole.report.idle.busy_source, "device_activity");

  EXPECT_EQ(folded.late, 0);
  EXPECT_EQ(folded.report.idle.busy_source, whole.report.idle.busy_source);
  EXPECT_EQ(folded.report.idle.idle_s, whole.report.idle.idle_s);
  EXPECT_EQ(folded.report.idle.window_s, whole.report.idle.window_s);
  EXPECT_EQ(folded.report.idle.by_cause, whole.report.idle.by_cause);
  EXPECT_EQ(folded.report.idle.top_cause, whole.report.idle.top_cause);
  EXPECT_EQ(folded.report.utilization.busy_device_hours,
            whole.report.utilization.busy_device_hours);
  EXPECT_EQ(folded.report.device_timeline.busy_s_by_phase,
            whole.report.device_timeline.busy_s_by_phase);
  // HTA's breakdowns: every kernel on its CUPTI stream, each joined to its
  // launch call, folded in start order though buffers came out of order.
  const Report::DeviceTimeline::Hta& want = whole.report.device_timeline.hta;
  EXPECT_GT(want.rows, 1000);
  EXPECT_GT(want.idle_s, 0);
  testing::ExpectSameHta(folded.report.device_timeline.hta, want);
  ASSERT_FALSE(want.idle_by_stream.empty());
  double host_wait_s = 0;
  for (const Report::DeviceTimeline::Hta::Stream& stream : want.idle_by_stream) {
    host_wait_s += stream.host_wait_s;
  }
  EXPECT_GT(host_wait_s, 0) << "launch calls joined";
  ASSERT_EQ(folded.rows.size(), whole.rows.size());
  for (size_t k = 0; k < whole.rows.size(); ++k) {
    SCOPED_TRACE("step " + std::to_string(k));
    EXPECT_EQ(folded.rows[k].idle_ms, whole.rows[k].idle_ms);
    EXPECT_EQ(folded.rows[k].top_cause, whole.rows[k].top_cause);
    EXPECT_EQ(folded.rows[k].phase_ms, whole.rows[k].phase_ms);
    if (HasFailure()) break;
  }
}

// Without waiting for CompleteBefore the same run loses device time: the
// check above can fail.
TEST(DeviceFoldTest, WithoutTheHorizonLateDeviceRecordsAreLost) {
  const GpuRun run = SimulateGpuRun(200, 3);
  const analysis::RunFoldOptions options = GpuRunFoldOptions();
  const WholeRun whole = AnalyzeWholeGpuRun(run, options);
  const DeviceFold folded = FoldAsItArrives(run, options, /*horizon=*/false);
  EXPECT_GT(folded.late, 0);
  EXPECT_NE(folded.report.idle.idle_s, whole.report.idle.idle_s);
}

// ---- a buffer walked by the real cuptiActivityGetNextRecord ---------------

// Fills `buffer` as CUPTI does: records back to back, each 8-byte aligned.
template <typename T>
size_t Put(uint8_t* buffer, size_t offset, const T& record) {
  static_assert(sizeof(T) % 8 == 0, "CUPTI records are multiples of 8 bytes");
  std::memcpy(buffer + offset, &record, sizeof(T));
  return offset + sizeof(T);
}

// Walks a buffer with the toolkit's libcupti in a child process (a libcupti
// may crash without a driver; 13.2 does) and returns what the walk produced,
// one line per interval: "<kind> <name> <value> <track name>".
// Runs `body` in a forked child and returns what it returned; `why_not`
// says how the child failed (a signal: a libcupti crashing).
std::string RunInChild(const std::function<std::string()>& body, std::string* why_not) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) {
    *why_not = "pipe failed";
    return "";
  }
  const pid_t child = fork();
  if (child == 0) {
    close(pipe_fds[0]);
    const std::string out = body();
    const ssize_t written = write(pipe_fds[1], out.data(), out.size());
    _exit(written == static_cast<ssize_t>(out.size()) ? 0 : 1);
  }
  close(pipe_fds[1]);
  std::string result;
  char chunk[512];
  for (ssize_t n; (n = read(pipe_fds[0], chunk, sizeof(chunk))) > 0;) result.append(chunk, n);
  close(pipe_fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *why_not = WIFSIGNALED(status) ? "crashed with signal " + std::to_string(WTERMSIG(status))
                                   : "the child failed";
  }
  return result;
}

std::string WalkInChild(const std::string& library, std::string* why_not) {
  return RunInChild(
      [&] {
        std::string out;
        absl::StatusOr<CuptiLibrary> lib = LoadCuptiFrom(library);
        if (!lib.ok()) {
          out = std::string(lib.status().message());
        } else {
          alignas(8) static uint8_t buffer[4096];
          size_t used = 0;
          used =
              Put(buffer, used,
                  Api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                      kT0, kT0 + 5, 77, 100, 51));
          used = Put(buffer, used, Kernel(kT0 + 10, kT0 + 30, 0, 7, 51, "walked_kernel"));
          used =
              Put(buffer, used, Memcpy(kT0 + 40, kT0 + 60, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 7, 52));
          used = Put(buffer, used, Memset(kT0 + 70, kT0 + 75, 7, 53));
          used = Put(buffer, used,
                     Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, kT0 + 80,
                          kT0 + 90, 7, 51));
          RecordConverter converter(lib->get_callback_name);
          const size_t walked = converter.AddBuffer(lib->activity_get_next_record, buffer, used);
          Timeline timeline;
          converter.AppendTo(&timeline);
          out = "walked " + std::to_string(walked) + "\n";
          for (const ground::Interval& i : timeline.intervals()) {
            out += std::to_string(static_cast<int>(i.kind)) + " " + timeline.name(i.name) + " " +
                   std::to_string(i.value) + " " + timeline.tracks()[i.track].name + "\n";
          }
        }
        return out;
      },
      why_not);
}

// The toolkit's libcupti, or $TRAINSCOPE_TEST_LIBCUPTI (another build to check).
std::string TestLibcupti() {
  const char* path = std::getenv("TRAINSCOPE_TEST_LIBCUPTI");
  return path != nullptr && path[0] != 0 ? path : TRAINSCOPE_TEST_LIBCUPTI;
}

// What LoadCuptiFrom says of `library`, in a child process (a libcupti may
// crash without a driver: 13.2's cuptiGetVersion recurses until the stack
// overflows). "ok <api version> <CUDA version>" or the error message.
std::string LoadInChild(const std::string& library) {
  std::string why_not;
  const std::string out = RunInChild(
      [&]() -> std::string {
        absl::StatusOr<CuptiLibrary> lib = LoadCuptiFrom(library);
        if (!lib.ok()) return std::string(lib.status().message());
        return "ok " + std::to_string(lib->api_version) + " " + lib->version;
      },
      &why_not);
  return why_not.empty() ? out : why_not;
}

// The real libcupti of CUDA 12.2, 12.4, 12.9 and 13.0 from their PyPI
// wheels (tools/deps.sh unpacks them into .cache/cupti), loaded with no
// driver: each reports its version, and only those whose records this
// build reads field for field are taken.
TEST(CuptiLibraryTest, RealLibrariesOf12And13ReportTheirVersionAndAreTakenOrRefused) {
  const std::string dir = TRAINSCOPE_CUPTI_WHEELS_DIR;
  struct Case {
    const char* version;
    const char* file;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"12.2.142", "libcupti.so.12",
       "CUPTI unavailable: CUPTI 12.2 found (" + dir +
           "/12.2.142/libcupti.so.12); this build reads CUPTI 12.4 to "
           "12.9 and 13.x"},
      {"12.4.127", "libcupti.so.12", "ok 22 12.4"},
      {"12.9.79", "libcupti.so.12", "ok 28 12.9 Update 1"},
      {"13.0.85", "libcupti.so.13", "ok 130001 13.0"},
  };
  int tested = 0;
  for (const Case& c : cases) {
    const std::string path = dir + "/" + c.version + "/" + c.file;
    if (access(path.c_str(), R_OK) != 0) continue;
    EXPECT_EQ(LoadInChild(path), c.expected) << path;
    ++tested;
  }
  if (tested < static_cast<int>(cases.size())) {
    GTEST_SKIP() << "only " << tested << " of " << cases.size() << " libcupti wheels in " << dir
                 << " (tools/deps.sh downloads them)";
  }
}

// Kineto loaded a libcupti this build refuses: the search ends there, and
// no second libcupti (here a readable 13.0 in $CUDA_HOME) enters the process.
TEST(CuptiLibraryTest, ARefusedLibcuptiAlreadyInTheProcessEndsTheSearch) {
  const std::string dir = TRAINSCOPE_CUPTI_WHEELS_DIR;
  const std::string old_lib = dir + "/12.2.142/libcupti.so.12";
  const std::string new_lib = dir + "/13.0.85/libcupti.so.13";
  if (access(old_lib.c_str(), R_OK) != 0 || access(new_lib.c_str(), R_OK) != 0) {
    GTEST_SKIP() << "libcupti 12.2 and 13.0 wheels not in " << dir
                 << " (tools/deps.sh downloads them)";
  }
  trainscope::testing::TempDir toolkit;
  const std::string lib64 = toolkit.path() + "/extras/CUPTI/lib64";
  std::filesystem::create_directories(lib64);
  std::filesystem::create_symlink(new_lib, lib64 + "/libcupti.so.13");
  std::string why_not;
  const std::string out = RunInChild(
      [&]() -> std::string {
        unsetenv("TRAINSCOPE_CUPTI_PATH");
        setenv("CUDA_HOME", toolkit.path().c_str(), 1);
        if (dlopen(old_lib.c_str(), RTLD_NOW | RTLD_LOCAL) == nullptr) return "dlopen failed";
        absl::StatusOr<const CuptiLibrary*> lib = LoadCupti();
        const bool second =
            dlopen((lib64 + "/libcupti.so.13").c_str(), RTLD_NOW | RTLD_NOLOAD) != nullptr;
        return std::string(lib.ok() ? "loaded " + (*lib)->path : lib.status().message()) +
               (second ? " +13.0 loaded" : "");
      },
      &why_not);
  EXPECT_EQ(why_not, "");
  EXPECT_EQ(out, "CUPTI unavailable: CUPTI 12.2 found (" + old_lib +
                     "); this build reads CUPTI 12.4 to 12.9 and 13.x");
}

TEST(CuptiLibraryTest, VersionsAreNamedAndOnlyVerifiedLayoutsAreRead) {
  auto check = [](uint32_t api, const char* name, bool readable) {
    const CuptiVersion v = DescribeCuptiVersion(api);
    EXPECT_EQ(v.name, name) << api;
    EXPECT_EQ(v.readable, readable) << api;
  };
  check(18, "11.8", false);
  check(19, "12.0", false);
  check(21, "12.3", false);
  check(22, "12.4", true);
  check(24, "12.6", true);
  check(26, "12.8", true);
  check(28, "12.9 Update 1", true);
  check(29, "12.x (API version 29)", false);  // unknown: not verified
  check(130000, "13.0", true);
  check(130001, "13.0", true);
  check(130200, "13.2", true);
  check(140000, "14.0", false);  // a newer major may change the records
}

TEST(CuptiLibraryTest, AnotherCuptiUserIsNamedWhenKnown) {
  EXPECT_EQ(DescribeOtherCuptiUser("CUPTI for Nsight Systems", nullptr, nullptr), "Nsight Systems");
  EXPECT_EQ(DescribeOtherCuptiUser("CUPTI for kineto", nullptr, nullptr), "kineto");
  EXPECT_EQ(DescribeOtherCuptiUser("", nullptr, "42"), "Nsight Systems");
  EXPECT_EQ(
      DescribeOtherCuptiUser(
          nullptr, "/opt/nvidia/nsight-systems/2025.1/target-linux-x64/libToolsInjection64.so",
          nullptr),
      "Nsight Systems");
  EXPECT_EQ(DescribeOtherCuptiUser(
                nullptr,
                "/opt/nvidia/nsight-compute/2025.1/target/linux-desktop-glibc_2_11_3-x64/"
                "libInterceptorInjectionTarget.so",
                nullptr),
            "Nsight Compute");
  EXPECT_EQ(DescribeOtherCuptiUser(nullptr, "/opt/tools/libmyinject.so", nullptr),
            "the CUDA injection library /opt/tools/libmyinject.so");
  EXPECT_EQ(DescribeOtherCuptiUser(nullptr, nullptr, nullptr),
            "another CUPTI client (the PyTorch profiler, Nsight, a debugger)");
}

TEST(CuptiLibraryTest, CandidatesStartWithTheOverrideAndIncludeTheToolkitAndWheels) {
  setenv("TRAINSCOPE_CUPTI_PATH", "/opt/mine/libcupti.so.13", 1);
  setenv("CUDA_HOME", "/opt/cuda-12.6", 1);
  const std::vector<std::string> paths = CuptiCandidates();
  unsetenv("TRAINSCOPE_CUPTI_PATH");
  unsetenv("CUDA_HOME");
  ASSERT_FALSE(paths.empty());
  EXPECT_EQ(paths[0], "/opt/mine/libcupti.so.13");
  auto has = [&](const std::string& p) {
    return std::find(paths.begin(), paths.end(), p) != paths.end();
  };
  EXPECT_TRUE(has("libcupti.so.13"));
  EXPECT_TRUE(has("libcupti.so.12"));
  EXPECT_TRUE(has("/opt/cuda-12.6/extras/CUPTI/lib64/libcupti.so.12"));
  EXPECT_TRUE(has("/opt/cuda-12.6/lib64/libcupti.so.12"));
  EXPECT_TRUE(has("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"));
  EXPECT_LT(std::find(paths.begin(), paths.end(), "libcupti.so.13") - paths.begin(),
            std::find(paths.begin(), paths.end(), "libcupti.so.12") - paths.begin())
      << "13 before 12";
}

TEST(RecordConverterTest, WalksARealBufferWithCuptiActivityGetNextRecord) {
  std::string why_not;
  const std::string library = TestLibcupti();
  const std::string walked = WalkInChild(library, &why_not);
  if (!why_not.empty() && !HaveCudaDriver()) {
    GTEST_SKIP() << library << " cannot walk buffers without a CUDA driver: " << why_not;
  }
  ASSERT_TRUE(why_not.empty()) << why_not;
  auto line = [](IntervalKind kind, const std::string& rest) {
    return std::to_string(static_cast<int>(kind)) + " " + rest;
  };
  const std::vector<std::string> expected = {
      "walked 5",
      line(IntervalKind::kRuntimeCall, "cudaLaunchKernel 51 thread 100"),
      line(IntervalKind::kKernel, "walked_kernel 51 GPU 0 stream 7"),
      line(IntervalKind::kMemcpy, "Memcpy DtoH 52 GPU 0 stream 7"),
      line(IntervalKind::kMemset, "Memset 53 GPU 0 stream 7"),
      line(IntervalKind::kSyncCall, "cudaStreamSynchronize 51 thread 100"),
  };
  std::vector<std::string> lines;
  for (size_t begin = 0, end; (end = walked.find('\n', begin)) != std::string::npos;
       begin = end + 1) {
    lines.push_back(walked.substr(begin, end - begin));
  }
  EXPECT_EQ(lines, expected) << walked;
}

// ---- the collector on a GPU (skipped without one) ------------------------

// Just enough of the driver API, through dlopen, to make device work.
struct Driver {
  using Fn0 = int (*)();
  int (*init)(unsigned) = nullptr;
  int (*device_get)(int*, int) = nullptr;
  int (*primary_ctx_retain)(void**, int) = nullptr;
  int (*primary_ctx_release)(int) = nullptr;
  int (*ctx_set_current)(void*) = nullptr;
  int (*mem_alloc)(uint64_t*, size_t) = nullptr;
  int (*mem_free)(uint64_t) = nullptr;
  int (*memset_d32)(uint64_t, unsigned, size_t) = nullptr;
  int (*module_load_data)(void**, const void*) = nullptr;
  int (*module_unload)(void*) = nullptr;
  int (*module_get_function)(void**, void*, const char*) = nullptr;
  int (*launch_kernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       void*, void**, void**) = nullptr;
  Fn0 ctx_synchronize = nullptr;

  bool Load() {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return false;
    auto bind = [h](auto* fn, const char* name) {
      *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(dlsym(h, name));
      return *fn != nullptr;
    };
    return bind(&init, "cuInit") && bind(&device_get, "cuDeviceGet") &&
           bind(&primary_ctx_retain, "cuDevicePrimaryCtxRetain") &&
           bind(&primary_ctx_release, "cuDevicePrimaryCtxRelease_v2") &&
           bind(&ctx_set_current, "cuCtxSetCurrent") && bind(&mem_alloc, "cuMemAlloc_v2") &&
           bind(&mem_free, "cuMemFree_v2") && bind(&memset_d32, "cuMemsetD32_v2") &&
           bind(&module_load_data, "cuModuleLoadData") && bind(&module_unload, "cuModuleUnload") &&
           bind(&module_get_function, "cuModuleGetFunction") &&
           bind(&launch_kernel, "cuLaunchKernel") && bind(&ctx_synchronize, "cuCtxSynchronize");
  }
};

constexpr char kEmptyKernelPtx[] = R"(
.version 7.0
.target sm_75
.address_size 64
.visible .entry trainscope_empty_kernel()
{
  ret;
}
)";

// Another CUPTI client holds the subscriber slot (as the PyTorch profiler,
// Nsight Systems or a debugger would): the collector leaves CUPTI alone and
// says so in one line; once the slot is free it starts.
TEST(CollectorGpuTest, AnotherCuptiSubscriberLeavesTheDeviceTimelineUnavailable) {
  Driver cu;
  int device = 0;
  if (!cu.Load() || cu.init(0) != 0 || cu.device_get(&device, 0) != 0) {
    GTEST_SKIP() << "no CUDA driver or device";
  }
  absl::StatusOr<const CuptiLibrary*> lib = LoadCupti();
  ASSERT_TRUE(lib.ok()) << lib.status();
  CUpti_SubscriberHandle other = nullptr;
  ASSERT_EQ((*lib)->subscribe(
                &other, [](void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}, nullptr),
            CUPTI_SUCCESS);
  absl::StatusOr<std::unique_ptr<Collector>> refused = Collector::Start(CollectorOptions{});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("CUPTI unavailable: CUPTI in use by "),
            std::string::npos)
      << refused.status();
  std::printf("another subscriber: %s\n", std::string(refused.status().message()).c_str());
  ASSERT_EQ((*lib)->unsubscribe(other), CUPTI_SUCCESS);
  absl::StatusOr<std::unique_ptr<Collector>> started = Collector::Start(CollectorOptions{});
  EXPECT_TRUE(started.ok()) << started.status();
}

TEST(CollectorGpuTest, CollectsAMemsetAKernelAndTheirDriverCallsOnTheRecordersClock) {
  Driver cu;
  int device = 0;
  void* context = nullptr;
  if (!cu.Load() || cu.init(0) != 0 || cu.device_get(&device, 0) != 0) {
    GTEST_SKIP() << "no CUDA driver or device";
  }
  CollectorOptions options;
  options.flush_interval_ms = 20;
  absl::StatusOr<std::unique_ptr<Collector>> started = Collector::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  Collector& collector = **started;
  EXPECT_EQ(Collector::Start(CollectorOptions{}).status().code(),
            absl::StatusCode::kFailedPrecondition);

  const TimestampNs t0 = NowNs();
  ASSERT_EQ(cu.primary_ctx_retain(&context, device), 0);
  ASSERT_EQ(cu.ctx_set_current(context), 0);
  uint64_t memory = 0;
  ASSERT_EQ(cu.mem_alloc(&memory, 1 << 20), 0);
  ASSERT_EQ(cu.memset_d32(memory, 0x5a5a5a5a, (1 << 20) / 4), 0);
  void* module = nullptr;
  void* function = nullptr;
  ASSERT_EQ(cu.module_load_data(&module, kEmptyKernelPtx), 0);
  ASSERT_EQ(cu.module_get_function(&function, module, "trainscope_empty_kernel"), 0);
  ASSERT_EQ(cu.launch_kernel(function, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr), 0);
  ASSERT_EQ(cu.ctx_synchronize(), 0);
  const TimestampNs t1 = NowNs();
  // Periodic flushes hand the completed work back: everything before t1
  // has come, and the set's and the kernel's launches were matched.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_GE(collector.CompleteBefore(), t1);
  ASSERT_TRUE(collector.Stop().ok());
  EXPECT_TRUE(collector.Stop().ok());  // idempotent

  Timeline timeline;
  collector.AppendTo(&timeline);
  const CollectorStats stats = collector.stats();
  EXPECT_EQ(stats.dropped, 0);
  EXPECT_GE(stats.buffers_completed, 1);
  EXPECT_GE(stats.kernels, 1);
  EXPECT_GE(stats.memsets, 1);
  EXPECT_GE(stats.driver_calls, 4);
  EXPECT_GE(stats.launches_tracked, 2);  // cuMemsetD32, cuLaunchKernel
  EXPECT_EQ(stats.launches_unmatched, 0);
  EXPECT_EQ(collector.CompleteBefore(), std::numeric_limits<TimestampNs>::max());  // stopped

  const auto kernels = OfKind(timeline, IntervalKind::kKernel);
  const auto sets = OfKind(timeline, IntervalKind::kMemset);
  const auto calls = OfKind(timeline, IntervalKind::kRuntimeCall);
  ASSERT_EQ(kernels.size(), 1u);
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_EQ(timeline.name(kernels[0].name), "trainscope_empty_kernel");
  // The timestamp callback puts device time on the recorder's clock.
  for (const ground::Interval& i : {kernels[0], sets[0]}) {
    EXPECT_GE(i.start_ns, t0);
    EXPECT_LE(i.end_ns, t1);
    EXPECT_EQ(timeline.tracks()[i.track].kind, TrackKind::kDeviceStream);
  }
  EXPECT_LE(sets[0].end_ns, kernels[0].start_ns);  // same stream, in order
  // The launch is on this thread's track (OS thread ids) with the kernel's id.
  const auto tid = static_cast<int64_t>(syscall(SYS_gettid));
  bool found_launch = false;
  for (const ground::Interval& call : calls) {
    if (call.value != kernels[0].value) continue;
    found_launch = true;
    EXPECT_EQ(timeline.name(call.name), "cuLaunchKernel");
    EXPECT_EQ(timeline.tracks()[call.track].tid, tid);
    EXPECT_EQ(timeline.tracks()[call.track].pid, getpid());
    EXPECT_LE(call.end_ns, kernels[0].end_ns);
  }
  EXPECT_TRUE(found_launch);
  for (const ground::Interval& sync : OfKind(timeline, IntervalKind::kSyncCall)) {
    EXPECT_EQ(timeline.tracks()[sync.track].tid, tid) << timeline.name(sync.name);
  }

  cu.mem_free(memory);
  cu.module_unload(module);
  cu.primary_ctx_release(device);
}
#endif  // TRAINSCOPE_WITH_CUPTI

}  // namespace
}  // namespace trainscope::cupti
