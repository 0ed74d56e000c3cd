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
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <limits>
#include <map>
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

#include "fmt/format.h"
#include "sdk/analysis/launch_attribution.h"
#include "sdk/analysis/run_analysis.h"
#include "sdk/analysis/run_fold.h"
#include "sdk/cupti/collector_internal.h"
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

KernelRecord Kernel(uint64_t start, uint64_t end, uint32_t device, uint32_t stream,
                    uint32_t correlation, const char* name) {
  KernelRecord k{};
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

CUpti_ActivitySynchronization Sync(CUpti_ActivitySynchronizationType type, uint64_t start,
                                   uint64_t end, uint32_t stream, uint32_t correlation) {
  CUpti_ActivitySynchronization s{};
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

// cuptiGetCallbackName for the calls the tests use.
CUptiResult FakeCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
  struct Named {
    CUpti_CallbackDomain domain;
    uint32_t cbid;
    const char* name;
  };
  static constexpr Named kNames[] = {
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
       "cudaLaunchKernel_v7000"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000,
       "cudaStreamSynchronize_ptsz_v7000"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
       "cudaMemcpyAsync_v3020"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000,
       "cudaMemcpyPeerAsync_v4000"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_v10000,
       "cudaLaunchHostFunc_v10000"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020,
       "cudaEventQuery_v3020"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_v3020,
       "cudaStreamQuery_v3020"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020,
       "cudaEventSynchronize_v3020"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000,
       "cudaStreamBeginCapture_v10000"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000,
       "cudaStreamEndCapture_v10000"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
       "cudaGraphLaunch_v10000"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
       "cudaGetDevice_v3020"},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel"},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuEventQuery, "cuEventQuery"},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, "cuCtxGetCurrent"},
  };
  for (const Named& n : kNames) {
    if (n.domain == domain && n.cbid == cbid) {
      *name = n.name;
      return CUPTI_SUCCESS;
    }
  }
  *name = nullptr;
  return CUPTI_ERROR_INVALID_PARAMETER;
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
  // The record without its call waits for it until the collector stops.
  EXPECT_EQ(OfKind(timeline, IntervalKind::kSyncCall).size(), 1u);
  converter.Finish();
  converter.AppendTo(&timeline);
  const auto syncs = OfKind(timeline, IntervalKind::kSyncCall);
  const auto calls = OfKind(timeline, IntervalKind::kRuntimeCall);
  ASSERT_EQ(syncs.size(), 2u);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(timeline.name(syncs[0].name), "cudaStreamSynchronize_ptsz");  // the call's name
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
  EXPECT_EQ(converter.stats().launches_tracked, 1);  // seen, and matched at once
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

TEST(CompleteBeforeTest, AnUntimedDeviceRecordStillEndsItsLaunchsWait) {
  // CUPTI may leave a kernel's timestamps 0: the kernel is dropped, but its
  // launch has its record and is not waited for until it is given up.
  RecordConverter converter(&FakeCallbackName);
  converter.Flushed(kT0 + 1000);
  converter.Add(AsActivity(Api(kRuntime, kLaunch, kT0 + 100, kT0 + 110, 77, 100, 1)));
  converter.Add(AsActivity(Kernel(0, 0, 0, 7, 1, "untimed")));
  EXPECT_EQ(converter.CompleteBefore(0), kT0 + 1000);
  EXPECT_EQ(converter.stats().untimed, 1);
  EXPECT_EQ(converter.CompleteBefore(kT0 + 500), kT0 + 1000);
  EXPECT_EQ(converter.stats().launches_unmatched, 0);
}

TEST(CompleteBeforeTest, AnnouncedLaunchesHoldTheWatermarkUntilTheirDeviceRecordComes) {
  // A default flush keeps back every buffer that holds an incomplete record,
  // so a launch's API record and its kernel can both come after a flush
  // that started later: the records alone let the watermark pass them.
  RecordConverter records_only(&FakeCallbackName);
  records_only.Flushed(kT0 + 1000);
  EXPECT_EQ(records_only.CompleteBefore(0), kT0 + 1000);  // the launch at +100 is not seen
  // Announced at its entry, it holds the watermark whatever comes late.
  RecordConverter converter(&FakeCallbackName);
  converter.Announce(21, kT0 + 100, 100, /*driver=*/false);
  converter.Announce(22, kT0 + 200, 100, /*driver=*/false);
  converter.Flushed(kT0 + 1000);
  EXPECT_EQ(converter.CompleteBefore(0), kT0 + 100);
  // Its API record says nothing new; a record of an unannounced launch
  // (its kind paused) starts no wait once calls are announced.
  converter.Add(AsActivity(Api(kRuntime, kLaunch, kT0 + 101, kT0 + 110, 77, 100, 21)));
  converter.Add(AsActivity(Api(kRuntime, kLaunch, kT0 + 50, kT0 + 60, 77, 100, 20)));
  EXPECT_EQ(converter.CompleteBefore(0), kT0 + 100);
  converter.Add(AsActivity(Kernel(kT0 + 150, kT0 + 400, 0, 7, 21, "gemm")));
  EXPECT_EQ(converter.CompleteBefore(0), kT0 + 200);
  converter.Add(AsActivity(Kernel(kT0 + 450, kT0 + 500, 0, 7, 22, "relu")));
  EXPECT_EQ(converter.CompleteBefore(0), kT0 + 1000);
  EXPECT_EQ(converter.stats().launches_tracked, 2);
  EXPECT_EQ(converter.stats().launches_unmatched, 0);
}

TEST(CompleteBeforeTest, AnAnnouncedDriverLaunchInsideARuntimeCallIsReleasedByItsRecord) {
  RecordConverter converter(&FakeCallbackName);
  converter.Flushed(kT0 + 1000);
  // A driver launch made inside a runtime call that is not a launch (the
  // callback only skips those inside runtime launches).
  converter.Announce(31, kT0 + 110, 100, /*driver=*/true);
  EXPECT_EQ(converter.CompleteBefore(0), kT0 + 110);
  converter.Add(AsActivity(Api(kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020,
                               kT0 + 100, kT0 + 130, 77, 100, 30)));
  EXPECT_EQ(converter.CompleteBefore(0), kT0 + 1000);
  // One made on its own is waited for until its kernel comes, even before
  // the announcement is drained.
  converter.Add(AsActivity(Kernel(kT0 + 240, kT0 + 260, 0, 7, 32, "triton")));
  converter.Announce(32, kT0 + 200, 100, /*driver=*/true);
  EXPECT_EQ(converter.CompleteBefore(0), kT0 + 1000);
  EXPECT_EQ(converter.stats().launches_tracked, 1);
}

TEST(RecordConverterTest, PeerCopiesAreDeviceRecordsMatchedToTheirLaunch) {
  CUpti_ActivityMemcpyPtoP4 copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  copy.bytes = 1 << 20;
  copy.start = kT0 + 200;
  copy.end = kT0 + 700;
  copy.deviceId = 1;
  copy.srcDeviceId = 0;
  copy.dstDeviceId = 1;
  copy.streamId = 9;
  copy.correlationId = 44;
  ASSERT_EQ(offsetof(CUpti_ActivityMemcpyPtoP4, correlationId), 60u);
  RecordConverter converter(&FakeCallbackName);
  converter.Flushed(kT0 + 1000);
  converter.Add(AsActivity(Api(kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000,
                               kT0 + 100, kT0 + 110, 77, 100, 44)));
  EXPECT_EQ(converter.CompleteBefore(0), kT0 + 100);
  converter.Add(AsActivity(copy));
  EXPECT_EQ(converter.CompleteBefore(0), kT0 + 1000);
  Timeline timeline;
  converter.AppendTo(&timeline);
  const auto copies = OfKind(timeline, IntervalKind::kMemcpy);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(timeline.name(copies[0].name), "Memcpy PtoP");
  EXPECT_EQ(copies[0].value, 44);
  EXPECT_EQ(timeline.tracks()[copies[0].track].name, "GPU 1 stream 9");
}

TEST(RecordConverterTest, SyncRecordsOfQueriesAndFailedCallsAreDropped) {
  // CUPTI reports event and stream queries through SYNCHRONIZATION; NCCL's
  // watchdog polls them. They are not host-blocked time, and neither is a
  // call that failed.
  RecordConverter converter(&FakeCallbackName);
  auto api = [&](CUpti_ActivityKind kind, CUpti_CallbackId cbid, uint32_t id, uint32_t rc) {
    CUpti_ActivityAPI a = Api(kind, cbid, kT0 + 100 * id, kT0 + 100 * id + 50, 77, 100, id);
    a.returnValue = rc;
    converter.Add(AsActivity(a));
  };
  auto sync = [&](CUpti_ActivitySynchronizationType type, uint32_t id) {
    converter.Add(AsActivity(Sync(type, kT0 + 100 * id + 5, kT0 + 100 * id + 45, 7, id)));
  };
  sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, 1);  // before its call
  api(kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020, 1, 0);
  api(kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_v3020, 2, 0);
  sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 2);
  api(kDriver, CUPTI_DRIVER_TRACE_CBID_cuEventQuery, 3, 0);
  sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, 3);
  api(kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020, 4, 700);  // failed
  sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, 4);
  api(kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020, 5, 0);  // a real wait
  sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, 5);
  converter.Finish();
  Timeline timeline;
  converter.AppendTo(&timeline);
  const auto syncs = OfKind(timeline, IntervalKind::kSyncCall);
  ASSERT_EQ(syncs.size(), 1u);
  EXPECT_EQ(syncs[0].value, 5);
  EXPECT_EQ(timeline.name(syncs[0].name), "cudaEventSynchronize");
  EXPECT_EQ(timeline.tracks()[syncs[0].track].tid, 100);
  EXPECT_EQ(converter.stats().syncs_dropped, 4);
  EXPECT_EQ(converter.stats().sync_calls, 1);
}

TEST(CompleteBeforeTest, ASyncRecordWaitsForItsCallThenIsGivenUp) {
  RecordConverter converter(&FakeCallbackName);
  converter.Flushed(kT0 + 1000);
  converter.Add(AsActivity(
      Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, kT0 + 300, kT0 + 600, 7, 9)));
  EXPECT_EQ(converter.CompleteBefore(0), kT0 + 300);           // its name and thread are to come
  EXPECT_EQ(converter.CompleteBefore(kT0 + 400), kT0 + 1000);  // given up: kept, thread unknown
  Timeline timeline;
  converter.AppendTo(&timeline);
  const auto syncs = OfKind(timeline, IntervalKind::kSyncCall);
  ASSERT_EQ(syncs.size(), 1u);
  EXPECT_EQ(timeline.name(syncs[0].name), "cudaStreamSynchronize");
  EXPECT_EQ(timeline.tracks()[syncs[0].track].name, "CUDA sync (thread unknown)");
}

// A buffer in a format of the tests' own, walked by FakeNextRecord: records
// back to back, each after an 8-byte header holding its size (0: an
// invalid or incomplete record, where CUPTI's walk stops).
template <typename T>
size_t PutFake(uint8_t* buffer, size_t used, const T& record) {
  const uint64_t size = sizeof(T);
  std::memcpy(buffer + used, &size, 8);
  std::memcpy(buffer + used + 8, &record, sizeof(T));
  return used + 8 + (sizeof(T) + 7) / 8 * 8;
}
size_t PutIncomplete(uint8_t* buffer, size_t used) {
  std::memset(buffer + used, 0, 16);
  return used + 16;
}

CUptiResult FakeNextRecord(uint8_t* buffer, size_t valid_bytes, CUpti_Activity** record) {
  size_t at = 0;
  if (*record != nullptr) {
    const auto* current = reinterpret_cast<uint8_t*>(*record);
    uint64_t size = 0;
    std::memcpy(&size, current - 8, 8);
    at = static_cast<size_t>(current - buffer) + (size + 7) / 8 * 8;
  }
  if (at >= valid_bytes) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  uint64_t size = 0;
  std::memcpy(&size, buffer + at, 8);
  if (size == 0) return CUPTI_ERROR_INVALID_KIND;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + at + 8);
  return CUPTI_SUCCESS;
}

TEST(RecordConverterTest, ABufferWalkThatStopsAtAnIncompleteRecordIsCounted) {
  alignas(8) uint8_t buffer[4096] = {};
  size_t used = PutFake(buffer, 0, Kernel(kT0 + 10, kT0 + 20, 0, 7, 1, "done"));
  const size_t complete = used;
  used = PutIncomplete(buffer, used);
  used = PutFake(buffer, used, Kernel(kT0 + 30, kT0 + 40, 0, 7, 2, "lost"));
  RecordConverter converter;
  EXPECT_EQ(converter.AddBuffer(&FakeNextRecord, buffer, complete), 1u);
  EXPECT_EQ(converter.stats().incomplete_buffers, 0);  // walked to its end
  RecordConverter cut;
  EXPECT_EQ(cut.AddBuffer(&FakeNextRecord, buffer, used), 1u);
  EXPECT_EQ(cut.stats().incomplete_buffers, 1);
  EXPECT_EQ(cut.stats().kernels, 1);
}

// A GPU-bound run as CUPTI reports it. Each step's copy goes to stream 9 and
// its forward, backward and optimizer kernels to stream 7; the GPU lags the
// host, so a step's kernels run on into the next steps, and every fourth
// step ends in cudaStreamSynchronize. Records go into buffers of 16 (one
// chain per stream, one for API and sync records), a device record from its
// launch on but complete only when the work ends; a flush every 100 ms hands
// back the buffers whose records have all completed (cuptiActivityFlushAll(0)),
// so device records arrive up to a few flushes late and out of order across
// buffers.
using CuptiRecord = std::variant<KernelRecord, CUpti_ActivityMemcpy6, CUpti_ActivityAPI,
                                 CUpti_ActivitySynchronization>;
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
    const auto* k = std::get_if<KernelRecord>(&w.record);
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
          used = Put(
              buffer, used,
              Api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
                  kT0 + 78, kT0 + 92, 77, 100, 54));
          // The sync record as CUPTI 12.x and 13.x write it (a longer
          // struct than the fields read).
          const CUpti_ActivitySynchronization fields = Sync(
              CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, kT0 + 80, kT0 + 90, 7, 54);
          CUpti_ActivitySynchronization2 sync{};
          std::memcpy(&sync, &fields, sizeof(fields));
          used = Put(buffer, used, sync);
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
      {"12.2.142", "libcupti.so.12", "ok 20 12.2"},
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
// Kineto loaded a libcupti this process cannot use (13.0 under a CUDA 12.8
// driver): the search ends there, and no second libcupti (here a readable
// 12.9 in $CUDA_HOME) enters the process.
TEST(CuptiLibraryTest, ARefusedLibcuptiAlreadyInTheProcessEndsTheSearch) {
  const std::string dir = TRAINSCOPE_CUPTI_WHEELS_DIR;
  const std::string other_lib = dir + "/12.9.79/libcupti.so.12";
  const std::string resident_lib = dir + "/13.0.85/libcupti.so.13";
  if (access(other_lib.c_str(), R_OK) != 0 || access(resident_lib.c_str(), R_OK) != 0) {
    GTEST_SKIP() << "libcupti 12.9 and 13.0 wheels not in " << dir
                 << " (tools/deps.sh downloads them)";
  }
  trainscope::testing::TempDir toolkit;
  const std::string lib64 = toolkit.path() + "/extras/CUPTI/lib64";
  std::filesystem::create_directories(lib64);
  std::filesystem::create_symlink(other_lib, lib64 + "/libcupti.so.12");
  std::string why_not;
  const std::string out = RunInChild(
      [&]() -> std::string {
        unsetenv("TRAINSCOPE_CUPTI_PATH");
        setenv("CUDA_HOME", toolkit.path().c_str(), 1);
        if (dlopen(resident_lib.c_str(), RTLD_NOW | RTLD_LOCAL) == nullptr) return "dlopen failed";
        absl::StatusOr<const CuptiLibrary*> lib = LoadCupti(/*driver_version=*/12080);
        const bool second =
            dlopen((lib64 + "/libcupti.so.12").c_str(), RTLD_NOW | RTLD_NOLOAD) != nullptr;
        return std::string(lib.ok() ? "loaded " + (*lib)->path : lib.status().message()) +
               (second ? " +12.9 loaded" : "");
      },
      &why_not);
  EXPECT_EQ(why_not, "");
  EXPECT_EQ(out, "CUPTI unavailable: CUPTI 13.0 found (" + resident_lib +
                     ") needs a CUDA 13 driver; this one is 12.8");
}

TEST(CuptiLibraryTest, HashedLibraryNamesAreFoundAndNoneNewerThanTheDriverIsSearched) {
  EXPECT_TRUE(IsLibraryFile("libcudart.so.12", "libcudart"));
  EXPECT_TRUE(IsLibraryFile("libcudart-8f6e2b1a.so.12", "libcudart"));
  EXPECT_TRUE(IsLibraryFile("libcupti.so", "libcupti"));
  EXPECT_FALSE(IsLibraryFile("libcudart_static.a", "libcudart"));
  EXPECT_FALSE(IsLibraryFile("libcudart-.so.12", "libcudart"));
  EXPECT_EQ(SonameMajor("/x/libcudart-8f6e2b1a.so.12"), 12);
  EXPECT_EQ(SonameMajor("libcupti.so.13.0.85"), 13);
  EXPECT_EQ(SonameMajor("/usr/lib/libcupti.so"), 0);
  EXPECT_EQ(CuptiMajor(20), 12);
  EXPECT_EQ(CuptiMajor(130001), 13);
  EXPECT_EQ(CuptiMajor(18), 11);

  // A repaired wheel: torch/lib holds hashed copies of both libraries.
  trainscope::testing::TempDir wheel;
  const std::string lib = wheel.path() + "/torch/lib";
  std::filesystem::create_directories(lib);
  for (const char* file : {"libcudart-8f6e2b1a.so.12", "libcupti-5c1d0e9f.so.12",
                           "libcupti-77aa00bb.so.13", "libtorch_cuda.so"}) {
    std::ofstream(lib + "/" + file) << "";
  }
  CandidateInputs in;
  in.loaded_cudart = {lib + "/libcudart-8f6e2b1a.so.12"};
  in.loaded_torch = {lib + "/libtorch_cuda.so"};
  in.toolkits = {"/opt/cuda"};
  in.driver_major = 12;
  const std::vector<std::string> paths = CuptiCandidates(in);
  auto has = [&](const std::string& p) {
    return std::find(paths.begin(), paths.end(), p) != paths.end();
  };
  EXPECT_TRUE(has(lib + "/libcupti.so.12"));
  EXPECT_TRUE(has(lib + "/libcupti-5c1d0e9f.so.12"));
  EXPECT_TRUE(has("/opt/cuda/extras/CUPTI/lib64/libcupti.so.12"));
  EXPECT_TRUE(has("libcupti.so"));
  for (const std::string& p : paths) {
    EXPECT_NE(SonameMajor(p), 13) << p << ": newer than the CUDA 12 driver";
  }
  // Under a CUDA 13 driver the 13.x ones are searched first.
  in.driver_major = 13;
  const std::vector<std::string> newer = CuptiCandidates(in);
  EXPECT_NE(std::find(newer.begin(), newer.end(), "libcupti.so.13"), newer.end());
}

TEST(CuptiLibraryTest, VersionsAreNamedAndOnlyVerifiedLayoutsAreRead) {
  auto check = [](uint32_t api, const char* name, bool readable) {
    const CuptiVersion v = DescribeCuptiVersion(api);
    EXPECT_EQ(v.name, name) << api;
    EXPECT_EQ(v.readable, readable) << api;
  };
  check(18, "11.8", false);
  check(19, "12.0", true);
  check(21, "12.3", true);
  check(22, "12.4", true);
  check(24, "12.6", true);
  check(26, "12.8", true);
  check(28, "12.9 Update 1", true);
  check(29, "12.x (API version 29)", true);  // records only grow within a major
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
  const std::vector<std::string> paths = CuptiCandidates(ProcessCandidateInputs(0));
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
      "walked 6",
      line(IntervalKind::kRuntimeCall, "cudaLaunchKernel 51 thread 100"),
      line(IntervalKind::kKernel, "walked_kernel 51 GPU 0 stream 7"),
      line(IntervalKind::kMemcpy, "Memcpy DtoH 52 GPU 0 stream 7"),
      line(IntervalKind::kMemset, "Memset 53 GPU 0 stream 7"),
      line(IntervalKind::kRuntimeCall, "cudaStreamSynchronize 54 thread 100"),
      line(IntervalKind::kSyncCall, "cudaStreamSynchronize 54 thread 100"),
  };
  std::vector<std::string> lines;
  for (size_t begin = 0, end; (end = walked.find('\n', begin)) != std::string::npos;
       begin = end + 1) {
    lines.push_back(walked.substr(begin, end - begin));
  }
  EXPECT_EQ(lines, expected) << walked;
}

// ---- the collector through a stand-in libcupti ---------------------------
//
// A CuptiLibrary of plain functions that record what the collector asks of
// CUPTI, keep the callbacks it registers, and walk buffers in FakeNextRecord's
// format: the collector's own logic, with no driver and no GPU.
struct FakeCupti {
  std::vector<std::string> calls;  // "enable MEMCPY", "disable RUNTIME", "quiet runtime 17", ...
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  CUpti_CallbackFunc api_callback = nullptr;
  bool subscribed = false;
  std::set<std::pair<int, uint32_t>> callbacks_on;
  std::map<int, int> attributes;
};
FakeCupti& Fake() {
  static FakeCupti fake;
  return fake;
}

std::string KindName(CUpti_ActivityKind kind) {
  for (const internal::ActivityKind& k : internal::KindsInOrder(true)) {
    if (k.kind == kind) return k.name;
  }
  return std::to_string(static_cast<int>(kind));
}

// The stand-in library, its record of calls cleared.
const CuptiLibrary* FakeLibrary() {
  static const CuptiLibrary lib = [] {
    CuptiLibrary l;
    l.path = "fake-libcupti";
    l.api_version = 130001;
    l.version = "13.0";
    l.activity_enable = [](CUpti_ActivityKind k) {
      Fake().calls.push_back("enable " + KindName(k));
      return CUPTI_SUCCESS;
    };
    l.activity_disable = [](CUpti_ActivityKind k) {
      Fake().calls.push_back("disable " + KindName(k));
      return CUPTI_SUCCESS;
    };
    l.activity_flush_all = [](uint32_t) { return CUPTI_SUCCESS; };
    l.activity_get_next_record = &FakeNextRecord;
    l.activity_get_num_dropped_records = [](CUcontext, uint32_t, size_t* n) {
      *n = 0;
      return CUPTI_SUCCESS;
    };
    l.activity_register_callbacks = [](CUpti_BuffersCallbackRequestFunc r,
                                       CUpti_BuffersCallbackCompleteFunc c) {
      Fake().request = r;
      Fake().complete = c;
      return CUPTI_SUCCESS;
    };
    l.activity_register_timestamp_callback = [](CUpti_TimestampCallbackFunc) {
      return CUPTI_SUCCESS;
    };
    l.activity_enable_all_sync_records = [](uint8_t) { return CUPTI_SUCCESS; };
    l.set_thread_id_type = [](CUpti_ActivityThreadIdType) { return CUPTI_SUCCESS; };
    l.get_callback_name = &FakeCallbackName;
    l.subscribe = [](CUpti_SubscriberHandle* handle, CUpti_CallbackFunc callback, void*) {
      if (Fake().subscribed) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
      Fake().subscribed = true;
      Fake().api_callback = callback;
      *handle = reinterpret_cast<CUpti_SubscriberHandle>(&Fake());
      return CUPTI_SUCCESS;
    };
    l.unsubscribe = [](CUpti_SubscriberHandle) {
      Fake().subscribed = false;
      Fake().callbacks_on.clear();
      return CUPTI_SUCCESS;
    };
    l.enable_callback = [](uint32_t on, CUpti_SubscriberHandle, CUpti_CallbackDomain domain,
                           CUpti_CallbackId cbid) {
      const std::string call = on ? "callbacks on" : "callbacks off";
      if (Fake().calls.empty() || Fake().calls.back() != call) Fake().calls.push_back(call);
      if (on) {
        Fake().callbacks_on.emplace(domain, cbid);
      } else {
        Fake().callbacks_on.erase({domain, cbid});
      }
      return CUPTI_SUCCESS;
    };
    l.activity_set_attribute = [](CUpti_ActivityAttribute attribute, size_t* size, void* value) {
      Fake().attributes[attribute] = *size == 1 ? *static_cast<uint8_t*>(value) : -1;
      return CUPTI_SUCCESS;
    };
    l.activity_enable_runtime_api = [](CUpti_CallbackId cbid, uint8_t on) {
      Fake().calls.push_back(fmt::format("runtime api {} {}", cbid, on ? "on" : "off"));
      return CUPTI_SUCCESS;
    };
    l.activity_enable_driver_api = [](CUpti_CallbackId cbid, uint8_t on) {
      Fake().calls.push_back(fmt::format("driver api {} {}", cbid, on ? "on" : "off"));
      return CUPTI_SUCCESS;
    };
    return l;
  }();
  Fake().calls.clear();
  Fake().attributes.clear();
  return &lib;
}

std::unique_ptr<Collector> StartFake(int flush_interval_ms = 0) {
  CollectorOptions options;
  options.buffer_bytes = 64 << 10;
  options.max_buffers = 4;
  options.flush_interval_ms = flush_interval_ms;
  options.launch_timeout_ms = 60000;
  absl::StatusOr<std::unique_ptr<Collector>> started =
      internal::StartWithLibrary(options, FakeLibrary());
  EXPECT_TRUE(started.ok()) << started.status();
  return started.ok() ? *std::move(started) : nullptr;
}

// The API callback as CUPTI calls it on the thread making a CUDA call.
void FakeApiCall(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, CUpti_ApiCallbackSite site,
                 uint32_t correlation_id, int returned = 0) {
  CUpti_CallbackData data{};
  data.callbackSite = site;
  data.correlationId = correlation_id;
  data.functionReturnValue = &returned;
  Fake().api_callback(nullptr, domain, cbid, &data);
}

// A buffer CUPTI asked for, filled with `records` and handed back.
template <typename... Records>
void FakeCompleteBuffer(const Records&... records) {
  uint8_t* buffer = nullptr;
  size_t size = 0, max_records = 0;
  Fake().request(&buffer, &size, &max_records);
  ASSERT_NE(buffer, nullptr);
  size_t used = 0;
  ((used = PutFake(buffer, used, records)), ...);
  Fake().complete(nullptr, 0, buffer, size, used);
}

TEST(CollectorFakeTest, KindsGoOnDeviceFirstAndOffApiFirstWithTheCallbacksOutside) {
  std::unique_ptr<Collector> collector = StartFake();
  ASSERT_NE(collector, nullptr);
  const std::vector<std::string> started = {
      "enable CONCURRENT_KERNEL",
      "enable MEMCPY",
      "enable MEMCPY2",
      "enable MEMSET",
      "enable SYNCHRONIZATION",
      "enable RUNTIME",
      "enable DRIVER",
      "enable OVERHEAD",
      fmt::format("runtime api {} off", CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020),
      fmt::format("driver api {} off", CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent),
      fmt::format("driver api {} off", CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState),
      "callbacks on"};
  EXPECT_EQ(Fake().calls, started);
  Fake().calls.clear();
  collector->SetActive(false);
  EXPECT_EQ(Fake().calls, (std::vector<std::string>{
                              "callbacks off", "disable OVERHEAD", "disable DRIVER",
                              "disable RUNTIME", "disable SYNCHRONIZATION", "disable MEMSET",
                              "disable MEMCPY2", "disable MEMCPY", "disable CONCURRENT_KERNEL"}));
  EXPECT_TRUE(Fake().callbacks_on.empty());
  Fake().calls.clear();
  collector->SetActive(true);
  EXPECT_EQ(Fake().calls, started);  // the quiet APIs again: enabling RUNTIME resets them
  // The launching calls and the capture calls have callbacks, nothing else.
  const std::set<std::pair<int, uint32_t>> expected = {
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel}};
  EXPECT_EQ(Fake().callbacks_on, expected);
  EXPECT_TRUE(collector->stats().announcing);
  ASSERT_TRUE(collector->Stop().ok());
}

TEST(CollectorFakeTest, BuffersComeZeroedFromOneQueueAndCuptiIsToldSo) {
  std::unique_ptr<Collector> collector = StartFake();
  ASSERT_NE(collector, nullptr);
  EXPECT_EQ(Fake().attributes[CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER], 1);
  EXPECT_EQ(Fake().attributes[CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER], 0);
  for (int round = 0; round < 2; ++round) {
    uint8_t* buffer = nullptr;
    size_t size = 0, max_records = 0;
    Fake().request(&buffer, &size, &max_records);
    ASSERT_NE(buffer, nullptr);
    ASSERT_EQ(size, size_t{64} << 10);
    EXPECT_EQ(std::count(buffer, buffer + size, 0), static_cast<std::ptrdiff_t>(size)) << round;
    std::memset(buffer, 0xab, size);  // what CUPTI wrote
    Fake().complete(nullptr, 0, buffer, size, 0);
  }
  ASSERT_TRUE(collector->Stop().ok());
}

TEST(CollectorFakeTest, LaunchesAreAnnouncedAtEntryButNotInsideRuntimeLaunchesOrWhileCapturing) {
  std::unique_ptr<Collector> collector = StartFake(/*flush_interval_ms=*/1);
  ASSERT_NE(collector, nullptr);
  constexpr auto kRt = CUPTI_CB_DOMAIN_RUNTIME_API;
  constexpr auto kDrv = CUPTI_CB_DOMAIN_DRIVER_API;
  const TimestampNs before = NowNs();
  // cudaLaunchKernel, which calls cuLaunchKernel: one launch, the runtime's id.
  FakeApiCall(kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_API_ENTER, 7);
  const TimestampNs announced = NowNs();
  FakeApiCall(kDrv, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_API_ENTER, 8);
  FakeApiCall(kDrv, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_API_EXIT, 8);
  FakeApiCall(kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_API_EXIT, 7);
  // Captured into a graph: no device record until the graph is launched.
  FakeApiCall(kRt, CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000, CUPTI_API_EXIT, 9);
  FakeApiCall(kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_API_ENTER, 10);
  FakeApiCall(kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_API_EXIT, 10);
  FakeApiCall(kDrv, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_API_ENTER, 11);
  FakeApiCall(kRt, CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000, CUPTI_API_EXIT, 12);
  // A capture that failed to begin captures nothing.
  FakeApiCall(kRt, CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000, CUPTI_API_EXIT, 13,
              /*returned=*/900);
  // Periodic flushes pass the launch: the watermark stays at its entry.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const TimestampNs held = collector->CompleteBefore();
  EXPECT_GE(held, before);
  EXPECT_LE(held, announced);
  EXPECT_EQ(collector->stats().launches_tracked, 1);
  // The graph's launch is announced like any other; then the kernels come.
  FakeApiCall(kRt, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, CUPTI_API_ENTER, 14);
  FakeApiCall(kRt, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, CUPTI_API_EXIT, 14);
  const TimestampNs now = NowNs();
  FakeCompleteBuffer(Kernel(now, now + 10, 0, 7, 7, "gemm"), Kernel(now, now + 10, 0, 7, 14, "g"));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_GT(collector->CompleteBefore(), now);
  const CollectorStats stats = collector->stats();
  EXPECT_EQ(stats.launches_tracked, 2);
  EXPECT_EQ(stats.launches_unmatched, 0);
  EXPECT_EQ(stats.kernels, 2);
  EXPECT_TRUE(stats.announcing);
  ASSERT_TRUE(collector->Stop().ok());
}

TEST(CollectorFakeTest, AnEarlierCollectorsBufferHandedBackLateIsNotRead) {
  uint8_t* stale = nullptr;
  {
    std::unique_ptr<Collector> first = StartFake();
    ASSERT_NE(first, nullptr);
    size_t size = 0, max_records = 0;
    Fake().request(&stale, &size, &max_records);
    ASSERT_NE(stale, nullptr);
    ASSERT_TRUE(first->Stop().ok());
  }  // CUPTI still holds the buffer: its pool is left alone, not freed
  std::unique_ptr<Collector> second = StartFake();
  ASSERT_NE(second, nullptr);
  const size_t used = PutFake(stale, 0, Kernel(kT0, kT0 + 10, 0, 7, 1, "from_the_first_run"));
  Fake().complete(nullptr, 0, stale, size_t{64} << 10, used);
  FakeCompleteBuffer(Kernel(kT0 + 20, kT0 + 30, 0, 7, 2, "this_run"));
  ASSERT_TRUE(second->Stop().ok());
  const CollectorStats stats = second->stats();
  EXPECT_EQ(stats.foreign_buffers, 1);
  EXPECT_EQ(stats.kernels, 1);
  Timeline timeline;
  second->AppendTo(&timeline);
  ASSERT_EQ(timeline.size(), 1u);
  EXPECT_EQ(timeline.name(timeline.intervals()[0].name), "this_run");
}

TEST(CollectorFakeTest, RecordsCutShortAtStopAreCounted) {
  std::unique_ptr<Collector> collector = StartFake();
  ASSERT_NE(collector, nullptr);
  uint8_t* buffer = nullptr;
  size_t size = 0, max_records = 0;
  Fake().request(&buffer, &size, &max_records);
  size_t used = PutFake(buffer, 0, Kernel(kT0, kT0 + 10, 0, 7, 1, "finished"));
  used = PutIncomplete(buffer, used);  // still running when the flush was forced
  used = PutFake(buffer, used, Kernel(kT0 + 20, kT0 + 30, 0, 7, 2, "after_it"));
  Fake().complete(nullptr, 0, buffer, size, used);
  ASSERT_TRUE(collector->Stop().ok());
  EXPECT_EQ(collector->stats().incomplete_buffers, 1);
  EXPECT_EQ(collector->stats().kernels, 1);
}

TEST(CollectorFakeTest, AForkedChildCanStartItsOwnCollectorAndLeavesTheParentsAlone) {
  std::unique_ptr<Collector> parent = StartFake(/*flush_interval_ms=*/1);
  ASSERT_NE(parent, nullptr);
  const pid_t child = fork();
  if (child == 0) {
    // The parent's collector, copied here, collects nothing and says so.
    const absl::Status stopped = parent->Stop();
    int code = stopped.code() == absl::StatusCode::kFailedPrecondition ? 0 : 10;
    Fake().subscribed = false;   // CUPTI is not running in this process
    CollectorOptions no_thread;  // no new threads after a multi-threaded fork
    no_thread.flush_interval_ms = 0;
    absl::StatusOr<std::unique_ptr<Collector>> own =
        internal::StartWithLibrary(no_thread, FakeLibrary());
    if (!own.ok()) code += 20;
    if (own.ok() && !(*own)->Stop().ok()) code += 40;
    static_cast<void>(parent.release());  // not destroyed here: it is the parent's
    _exit(code);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "10: the parent's Stop ran in the child; 20: the child could not start its own";
  // The parent's collector is untouched by all of it.
  EXPECT_EQ(internal::StartWithLibrary(CollectorOptions{}, FakeLibrary()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(parent->Stop().ok());
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
  // For the collector checks below.
  int (*ctx_get_current)(void**) = nullptr;
  int (*primary_ctx_get_state)(int, unsigned*, int*) = nullptr;
  int (*stream_create)(void**, unsigned) = nullptr;
  int (*stream_destroy)(void*) = nullptr;
  int (*stream_query)(void*) = nullptr;
  int (*event_create)(void**, unsigned) = nullptr;
  int (*event_record)(void*, void*) = nullptr;
  int (*event_query)(void*) = nullptr;
  int (*event_synchronize)(void*) = nullptr;
  int (*event_destroy)(void*) = nullptr;
  int (*stream_begin_capture)(void*, int) = nullptr;
  int (*stream_end_capture)(void*, void**) = nullptr;
  int (*graph_instantiate)(void**, void*, unsigned long long) = nullptr;
  int (*graph_launch)(void*, void*) = nullptr;
  int (*graph_exec_destroy)(void*) = nullptr;
  int (*graph_destroy)(void*) = nullptr;
  int (*memcpy_htod)(uint64_t, const void*, size_t) = nullptr;
  int (*memcpy_dtoh)(void*, uint64_t, size_t) = nullptr;

  bool LoadMore() {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return false;
    auto bind = [h](auto* fn, const char* name) {
      *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(dlsym(h, name));
      return *fn != nullptr;
    };
    return bind(&ctx_get_current, "cuCtxGetCurrent") &&
           bind(&primary_ctx_get_state, "cuDevicePrimaryCtxGetState") &&
           bind(&stream_create, "cuStreamCreate") && bind(&stream_destroy, "cuStreamDestroy_v2") &&
           bind(&stream_query, "cuStreamQuery") && bind(&event_create, "cuEventCreate") &&
           bind(&event_record, "cuEventRecord") && bind(&event_query, "cuEventQuery") &&
           bind(&event_synchronize, "cuEventSynchronize") &&
           bind(&event_destroy, "cuEventDestroy_v2") &&
           bind(&stream_begin_capture, "cuStreamBeginCapture_v2") &&
           bind(&stream_end_capture, "cuStreamEndCapture") &&
           bind(&graph_instantiate, "cuGraphInstantiateWithFlags") &&
           bind(&graph_launch, "cuGraphLaunch") &&
           bind(&graph_exec_destroy, "cuGraphExecDestroy") &&
           bind(&graph_destroy, "cuGraphDestroy") && bind(&memcpy_htod, "cuMemcpyHtoD_v2") &&
           bind(&memcpy_dtoh, "cuMemcpyDtoH_v2");
  }

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

// ---- the collector's GPU checks (tools/gpu-check.sh; skipped without one) --
//
// Each prints one "figures: ..." line that the GPU check quotes.

constexpr char kGpuCheckPtx[] = R"(
.version 7.0
.target sm_75
.address_size 64
.visible .entry trainscope_empty_kernel()
{
  ret;
}
.visible .entry trainscope_spin(.param .u64 ns)
{
  .reg .u64 %t0, %t1, %d, %n;
  .reg .pred %p;
  ld.param.u64 %n, [ns];
  mov.u64 %t0, %globaltimer;
SPIN:
  mov.u64 %t1, %globaltimer;
  sub.u64 %d, %t1, %t0;
  setp.lt.u64 %p, %d, %n;
  @%p bra SPIN;
  ret;
}
)";

// A context on device 0 with the empty and spinning kernels loaded.
struct Gpu {
  Driver cu;
  int device = 0;
  void* context = nullptr;
  void* module = nullptr;
  void* empty = nullptr;
  void* spin = nullptr;

  bool Open() {
    if (!cu.Load() || !cu.LoadMore() || cu.init(0) != 0 || cu.device_get(&device, 0) != 0) {
      return false;
    }
    return cu.primary_ctx_retain(&context, device) == 0 && MakeCurrent() &&
           cu.module_load_data(&module, kGpuCheckPtx) == 0 &&
           cu.module_get_function(&empty, module, "trainscope_empty_kernel") == 0 &&
           cu.module_get_function(&spin, module, "trainscope_spin") == 0;
  }
  bool MakeCurrent() { return cu.ctx_set_current(context) == 0; }
  int Empty(void* stream = nullptr) {
    return cu.launch_kernel(empty, 1, 1, 1, 32, 1, 1, 0, stream, nullptr, nullptr);
  }
  int Spin(uint64_t ns, void* stream = nullptr) {
    void* args[] = {&ns};
    return cu.launch_kernel(spin, 1, 1, 1, 1, 1, 1, 0, stream, args, nullptr);
  }
  ~Gpu() {
    if (module != nullptr) cu.module_unload(module);
    if (context != nullptr) cu.primary_ctx_release(device);
  }
};

#define TRAINSCOPE_OPEN_GPU(gpu) \
  Gpu gpu;                       \
  if (!gpu.Open()) GTEST_SKIP() << "no CUDA driver or device"

std::unique_ptr<Collector> StartOnGpu(int flush_interval_ms, int launch_timeout_ms = 60000,
                                      size_t buffer_bytes = 8 << 20, int max_buffers = 16) {
  CollectorOptions options;
  options.flush_interval_ms = flush_interval_ms;
  options.launch_timeout_ms = launch_timeout_ms;
  options.buffer_bytes = buffer_bytes;
  options.max_buffers = max_buffers;
  absl::StatusOr<std::unique_ptr<Collector>> started = Collector::Start(options);
  EXPECT_TRUE(started.ok()) << started.status();
  return started.ok() ? *std::move(started) : nullptr;
}

// Drains the collector as the session does, every 2 ms until `done`, and
// counts the records that arrive behind a watermark it already gave out.
struct WatermarkWatch {
  int64_t appended = 0, behind = 0;
  TimestampNs worst_ns = 0;
  void Run(Collector& collector, const std::atomic<bool>& done, Timeline* timeline) {
    TimestampNs watermark = std::numeric_limits<TimestampNs>::min();
    auto drain = [&] {
      const size_t before = timeline->size();
      collector.AppendTo(timeline);
      for (size_t k = before; k < timeline->size(); ++k) {
        const ground::Interval& i = timeline->intervals()[k];
        ++appended;
        if (i.start_ns < watermark) {
          ++behind;
          worst_ns = std::max(worst_ns, watermark - i.start_ns);
        }
      }
      watermark = std::max(watermark, collector.CompleteBefore());
    };
    while (!done.load()) {
      drain();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    drain();
  }
};

TEST(CollectorGpuTest, SpinKernelThenManySmallKernelsLeaveNoRecordBehindTheWatermark) {
  TRAINSCOPE_OPEN_GPU(gpu);
  std::unique_ptr<Collector> collector = StartOnGpu(/*flush_interval_ms=*/20);
  ASSERT_NE(collector, nullptr);
  std::atomic<bool> done{false};
  Timeline timeline;
  WatermarkWatch watch;
  std::thread drainer([&] { watch.Run(*collector, done, &timeline); });
  ASSERT_EQ(gpu.Spin(300'000'000), 0);  // holds its buffer back for 300 ms
  for (int k = 0; k < 10000; ++k) ASSERT_EQ(gpu.Empty(), 0);
  ASSERT_EQ(gpu.cu.ctx_synchronize(), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(collector->Stop().ok());
  done.store(true);
  drainer.join();
  const CollectorStats stats = collector->stats();
  std::printf(
      "figures: kernels=%lld behind=%lld worst_behind_us=%lld tracked=%lld unmatched=%lld "
      "announcing=%d dropped=%lld\n",
      static_cast<long long>(stats.kernels), static_cast<long long>(watch.behind),
      static_cast<long long>(watch.worst_ns / 1000), static_cast<long long>(stats.launches_tracked),
      static_cast<long long>(stats.launches_unmatched), stats.announcing ? 1 : 0,
      static_cast<long long>(stats.dropped));
  EXPECT_TRUE(stats.announcing);
  EXPECT_EQ(stats.kernels, 10001);
  EXPECT_EQ(stats.dropped, 0);
  EXPECT_EQ(watch.behind, 0);
  EXPECT_EQ(stats.launches_unmatched, 0);
}

TEST(CollectorGpuTest, TinyBuffersCountWhatCuptiDrops) {
  TRAINSCOPE_OPEN_GPU(gpu);
  std::unique_ptr<Collector> collector =
      StartOnGpu(/*flush_interval_ms=*/0, 60000, /*buffer_bytes=*/64 << 10, /*max_buffers=*/1);
  ASSERT_NE(collector, nullptr);
  for (int k = 0; k < 5000; ++k) ASSERT_EQ(gpu.Empty(), 0);
  ASSERT_EQ(gpu.cu.ctx_synchronize(), 0);
  ASSERT_TRUE(collector->Stop().ok());
  const CollectorStats stats = collector->stats();
  std::printf("figures: kernels=%lld dropped=%lld refused=%lld completed=%lld\n",
              static_cast<long long>(stats.kernels), static_cast<long long>(stats.dropped),
              static_cast<long long>(stats.buffers_refused),
              static_cast<long long>(stats.buffers_completed));
  // Either everything fitted, or what did not is counted.
  EXPECT_TRUE(stats.kernels == 5000 || stats.dropped > 0 || stats.buffers_refused > 0);
  EXPECT_LE(stats.kernels, 5000);
}

TEST(CollectorGpuTest, StopDuringARunningKernelCountsWhatIsLost) {
  TRAINSCOPE_OPEN_GPU(gpu);
  std::unique_ptr<Collector> collector = StartOnGpu(/*flush_interval_ms=*/20);
  ASSERT_NE(collector, nullptr);
  for (int k = 0; k < 100; ++k) ASSERT_EQ(gpu.Empty(), 0);
  ASSERT_EQ(gpu.Spin(1'000'000'000), 0);  // still running at Stop
  const auto t0 = std::chrono::steady_clock::now();
  const absl::Status stopped = collector->Stop();
  const double stop_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(gpu.cu.ctx_synchronize(), 0);
  const CollectorStats stats = collector->stats();
  std::printf("figures: stop_ms=%.1f kernels=%lld incomplete_buffers=%lld clamped=%lld status=%s\n",
              stop_ms, static_cast<long long>(stats.kernels),
              static_cast<long long>(stats.incomplete_buffers),
              static_cast<long long>(stats.clamped), std::string(stopped.message()).c_str());
  EXPECT_TRUE(stopped.ok()) << stopped;
  EXPECT_GE(stats.kernels, 100);
  // The spinning kernel came back complete, cut short or clamped: counted.
  EXPECT_TRUE(stats.kernels == 101 || stats.incomplete_buffers > 0 || stats.clamped > 0);
}

TEST(CollectorGpuTest, EventAndStreamQueriesAreNotSyncTime) {
  TRAINSCOPE_OPEN_GPU(gpu);
  std::unique_ptr<Collector> collector = StartOnGpu(/*flush_interval_ms=*/20);
  ASSERT_NE(collector, nullptr);
  void* event = nullptr;
  ASSERT_EQ(gpu.cu.event_create(&event, 0), 0);
  ASSERT_EQ(gpu.Spin(100'000'000), 0);
  ASSERT_EQ(gpu.cu.event_record(event, nullptr), 0);
  int queries = 0;
  while (gpu.cu.event_query(event) != 0) {  // NCCL's watchdog polls like this
    gpu.cu.stream_query(nullptr);
    queries += 2;
  }
  ASSERT_EQ(gpu.Spin(100'000'000), 0);
  ASSERT_EQ(gpu.cu.event_record(event, nullptr), 0);
  ASSERT_EQ(gpu.cu.event_synchronize(event), 0);  // a real wait, about 100 ms
  ASSERT_EQ(gpu.cu.event_destroy(event), 0);
  ASSERT_TRUE(collector->Stop().ok());
  Timeline timeline;
  collector->AppendTo(&timeline);
  int query_syncs = 0, waits = 0;
  TimestampNs waited = 0;
  for (const ground::Interval& i : OfKind(timeline, IntervalKind::kSyncCall)) {
    const std::string name = timeline.name(i.name);
    if (name.find("Query") != std::string::npos) ++query_syncs;
    if (name == "cuEventSynchronize") {
      ++waits;
      waited += i.duration_ns();
    }
  }
  std::printf("figures: queries=%d query_syncs=%d waits=%d waited_ms=%.1f syncs_dropped=%lld\n",
              queries, query_syncs, waits, waited / 1e6,
              static_cast<long long>(collector->stats().syncs_dropped));
  EXPECT_EQ(query_syncs, 0);
  EXPECT_EQ(waits, 1);
  EXPECT_GE(waited, 50'000'000);
}

TEST(CollectorGpuTest, ThirtyTwoLaunchingThreadsAreAllMatched) {
  TRAINSCOPE_OPEN_GPU(gpu);
  std::unique_ptr<Collector> collector = StartOnGpu(/*flush_interval_ms=*/20);
  ASSERT_NE(collector, nullptr);
  constexpr int kThreads = 32, kLaunches = 200;
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      if (!gpu.MakeCurrent()) failed.fetch_add(1);
      for (int k = 0; k < kLaunches; ++k) {
        if (gpu.Empty() != 0) failed.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(failed.load(), 0);
  ASSERT_EQ(gpu.cu.ctx_synchronize(), 0);
  const TimestampNs done = NowNs();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const TimestampNs watermark = collector->CompleteBefore();
  ASSERT_TRUE(collector->Stop().ok());
  const CollectorStats stats = collector->stats();
  std::printf(
      "figures: threads=%d kernels=%lld tracked=%lld unmatched=%lld dropped=%lld "
      "refused=%lld watermark_passed=%d\n",
      kThreads, static_cast<long long>(stats.kernels),
      static_cast<long long>(stats.launches_tracked),
      static_cast<long long>(stats.launches_unmatched), static_cast<long long>(stats.dropped),
      static_cast<long long>(stats.buffers_refused), watermark >= done ? 1 : 0);
  EXPECT_EQ(stats.kernels, kThreads * kLaunches);
  EXPECT_EQ(stats.launches_tracked, kThreads * kLaunches);
  EXPECT_EQ(stats.launches_unmatched, 0);
  EXPECT_EQ(stats.dropped, 0);
  EXPECT_GE(watermark, done);
}

TEST(CollectorGpuTest, SetActiveToggledDuringCopiesLeavesNoLaunchWaiting) {
  TRAINSCOPE_OPEN_GPU(gpu);
  std::unique_ptr<Collector> collector = StartOnGpu(/*flush_interval_ms=*/20);
  ASSERT_NE(collector, nullptr);
  uint64_t device_memory = 0;
  ASSERT_EQ(gpu.cu.mem_alloc(&device_memory, 4 << 20), 0);
  std::vector<uint8_t> host(4 << 20, 1);
  std::atomic<bool> stop{false};
  std::atomic<int> copies{0}, failed{0};
  std::thread copier([&] {
    if (!gpu.MakeCurrent()) failed.fetch_add(1);
    while (!stop.load()) {
      if (gpu.cu.memcpy_htod(device_memory, host.data(), host.size()) != 0) failed.fetch_add(1);
      if (gpu.cu.memcpy_dtoh(host.data(), device_memory, host.size()) != 0) failed.fetch_add(1);
      copies.fetch_add(2);
    }
  });
  for (int k = 0; k < 50; ++k) {
    collector->SetActive(k % 2 == 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  collector->SetActive(true);
  stop.store(true);
  copier.join();
  ASSERT_EQ(failed.load(), 0);
  ASSERT_EQ(gpu.cu.ctx_synchronize(), 0);
  const TimestampNs done = NowNs();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const TimestampNs watermark = collector->CompleteBefore();
  ASSERT_TRUE(collector->Stop().ok());
  gpu.cu.mem_free(device_memory);
  const CollectorStats stats = collector->stats();
  std::printf("figures: copies=%d memcpys=%lld tracked=%lld watermark_passed=%d\n", copies.load(),
              static_cast<long long>(stats.memcpys), static_cast<long long>(stats.launches_tracked),
              watermark >= done ? 1 : 0);
  EXPECT_GE(watermark, done) << "a copy launched around a toggle is still waited for";
}

TEST(CollectorGpuTest, GraphCaptureAndReplayDoNotHoldTheWatermark) {
  TRAINSCOPE_OPEN_GPU(gpu);
  std::unique_ptr<Collector> collector = StartOnGpu(/*flush_interval_ms=*/20);
  ASSERT_NE(collector, nullptr);
  void* stream = nullptr;
  ASSERT_EQ(gpu.cu.stream_create(&stream, 1 /* non-blocking */), 0);
  ASSERT_EQ(gpu.cu.stream_begin_capture(stream, 2 /* relaxed */), 0);
  for (int k = 0; k < 10; ++k) ASSERT_EQ(gpu.Empty(stream), 0);  // captured: no records
  void* graph = nullptr;
  void* exec = nullptr;
  ASSERT_EQ(gpu.cu.stream_end_capture(stream, &graph), 0);
  ASSERT_EQ(gpu.cu.graph_instantiate(&exec, graph, 0), 0);
  for (int k = 0; k < 5; ++k) ASSERT_EQ(gpu.cu.graph_launch(exec, stream), 0);
  ASSERT_EQ(gpu.cu.ctx_synchronize(), 0);
  const TimestampNs done = NowNs();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const TimestampNs watermark = collector->CompleteBefore();
  ASSERT_TRUE(collector->Stop().ok());
  gpu.cu.graph_exec_destroy(exec);
  gpu.cu.graph_destroy(graph);
  gpu.cu.stream_destroy(stream);
  const CollectorStats stats = collector->stats();
  std::printf("figures: kernels=%lld tracked=%lld unmatched=%lld watermark_passed=%d\n",
              static_cast<long long>(stats.kernels), static_cast<long long>(stats.launches_tracked),
              static_cast<long long>(stats.launches_unmatched), watermark >= done ? 1 : 0);
  EXPECT_EQ(stats.kernels, 50);          // the replays' kernels
  EXPECT_EQ(stats.launches_tracked, 5);  // the graph launches, not the captured ones
  EXPECT_GE(watermark, done);
}

TEST(CollectorGpuTest, ChosenLibcuptiIsTheOneMappedIntoTheProcess) {
  TRAINSCOPE_OPEN_GPU(gpu);
  std::unique_ptr<Collector> collector = StartOnGpu(/*flush_interval_ms=*/0);
  ASSERT_NE(collector, nullptr);
  absl::StatusOr<const CuptiLibrary*> lib = LoadCupti();
  ASSERT_TRUE(lib.ok()) << lib.status();
  std::set<std::string> mapped;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const size_t slash = line.find('/');
    if (slash != std::string::npos && line.find("libcupti") != std::string::npos) {
      mapped.insert(std::filesystem::canonical(line.substr(slash)).string());
    }
  }
  const std::string chosen = std::filesystem::canonical((*lib)->path).string();
  std::printf("figures: libcupti=%s version=%s api=%u mapped=%zu\n", chosen.c_str(),
              (*lib)->version.c_str(), (*lib)->api_version, mapped.size());
  EXPECT_EQ(mapped, std::set<std::string>{chosen});
  ASSERT_TRUE(collector->Stop().ok());
}

TEST(CollectorGpuTest, BackToBackSessionsEachSeeOnlyTheirOwnWork) {
  TRAINSCOPE_OPEN_GPU(gpu);
  int64_t foreign = 0;
  for (int run = 0; run < 3; ++run) {
    const TimestampNs start = NowNs();
    std::unique_ptr<Collector> collector = StartOnGpu(/*flush_interval_ms=*/20);
    ASSERT_NE(collector, nullptr);
    for (int k = 0; k < 1000; ++k) ASSERT_EQ(gpu.Empty(), 0);
    ASSERT_EQ(gpu.Spin(20'000'000), 0);  // in flight when this run stops
    ASSERT_TRUE(collector->Stop().ok());
    Timeline timeline;
    collector->AppendTo(&timeline);
    int64_t earlier = 0;
    for (const ground::Interval& i : timeline.intervals()) {
      if (IsDeviceKind(i.kind) && i.start_ns < start) ++earlier;
    }
    foreign += collector->stats().foreign_buffers;
    EXPECT_EQ(earlier, 0) << "run " << run << " holds an earlier run's device work";
    EXPECT_GE(collector->stats().kernels, 1000) << run;
    ASSERT_EQ(gpu.cu.ctx_synchronize(), 0);
  }
  std::printf("figures: runs=3 foreign_buffers=%lld\n", static_cast<long long>(foreign));
}

TEST(CollectorGpuTest, AForkedChildIsNotToldAnotherCollectorRuns) {
  TRAINSCOPE_OPEN_GPU(gpu);
  std::unique_ptr<Collector> collector = StartOnGpu(/*flush_interval_ms=*/20);
  ASSERT_NE(collector, nullptr);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  if (child == 0) {
    close(pipe_fds[0]);
    const absl::Status parents = collector->Stop();
    absl::StatusOr<std::unique_ptr<Collector>> own = Collector::Start(CollectorOptions{});
    const std::string out =
        std::string(parents.message()) + "\n" +
        (own.ok() ? std::string("started") : std::string(own.status().message()));
    const bool claimed = !own.ok() && own.status().code() == absl::StatusCode::kFailedPrecondition;
    static_cast<void>(write(pipe_fds[1], out.data(), out.size()));
    static_cast<void>(collector.release());
    _exit(claimed || parents.code() != absl::StatusCode::kFailedPrecondition ? 1 : 0);
  }
  close(pipe_fds[1]);
  std::string said;
  char chunk[256];
  for (ssize_t n; (n = read(pipe_fds[0], chunk, sizeof(chunk))) > 0;) said.append(chunk, n);
  close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  std::string one_line = said;
  std::replace(one_line.begin(), one_line.end(), '\n', '|');
  std::printf("figures: child_said=\"%s\"\n", one_line.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << said;
  ASSERT_EQ(gpu.Empty(), 0);
  ASSERT_EQ(gpu.cu.ctx_synchronize(), 0);
  EXPECT_TRUE(collector->Stop().ok());
}

TEST(CollectorGpuTest, SkippedApisLeaveNoRecords) {
  TRAINSCOPE_OPEN_GPU(gpu);
  absl::StatusOr<const CuptiLibrary*> lib = LoadCupti();
  ASSERT_TRUE(lib.ok()) << lib.status();
  if ((*lib)->activity_enable_driver_api == nullptr) {
    GTEST_SKIP() << "libcupti " << (*lib)->version << " lacks cuptiActivityEnableDriverApi (12.5+)";
  }
  std::unique_ptr<Collector> collector = StartOnGpu(/*flush_interval_ms=*/0);
  ASSERT_NE(collector, nullptr);
  for (int k = 0; k < 1000; ++k) {
    void* current = nullptr;
    unsigned flags = 0;
    int active = 0;
    ASSERT_EQ(gpu.cu.ctx_get_current(&current), 0);
    ASSERT_EQ(gpu.cu.primary_ctx_get_state(gpu.device, &flags, &active), 0);
  }
  ASSERT_EQ(gpu.Empty(), 0);
  ASSERT_EQ(gpu.cu.ctx_synchronize(), 0);
  ASSERT_TRUE(collector->Stop().ok());
  Timeline timeline;
  collector->AppendTo(&timeline);
  int quiet = 0, launches = 0;
  for (const ground::Interval& i : OfKind(timeline, IntervalKind::kRuntimeCall)) {
    const std::string name = timeline.name(i.name);
    if (name == "cuCtxGetCurrent" || name == "cuDevicePrimaryCtxGetState") ++quiet;
    if (name == "cuLaunchKernel") ++launches;
  }
  std::printf("figures: quiet_records=%d launches=%d\n", quiet, launches);
  EXPECT_EQ(quiet, 0);
  EXPECT_EQ(launches, 1);
}

#endif  // TRAINSCOPE_WITH_CUPTI

}  // namespace
}  // namespace trainscope::cupti
