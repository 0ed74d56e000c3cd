// The CUPTI activity collector. See collector.h.
#include "sdk/cupti/collector.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <utility>

#include "fmt/format.h"
#include "sdk/cupti/buffer_pool.h"
#include "sdk/cupti/library.h"
#include "sdk/cupti/records.h"
#include "sdk/ground/cuda_devices.h"

namespace trainscope::cupti {
namespace {

struct Kind {
  CUpti_ActivityKind kind;
  const char* name;
};
constexpr Kind kKinds[] = {
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL"},
    {CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY"},
    {CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET"},
    {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "SYNCHRONIZATION"},
    {CUPTI_ACTIVITY_KIND_RUNTIME, "RUNTIME"},
    {CUPTI_ACTIVITY_KIND_DRIVER, "DRIVER"},
    {CUPTI_ACTIVITY_KIND_OVERHEAD, "OVERHEAD"},
};

constexpr size_t kMinBufferBytes = size_t{64} << 10;
constexpr size_t kMaxBufferBytes = size_t{1} << 30;

// CUPTI's callbacks carry no user pointer: they reach the running collector
// through g_active. Callbacks hold the lock shared; ~Impl takes it exclusively
// to unpublish, so no callback runs on a destroyed collector.
std::shared_mutex g_active_mu;
Collector::Impl* g_active = nullptr;
// Claimed by Start, released by ~Impl (or a failed Start): one collector at a time.
std::atomic<bool> g_claimed{false};

uint64_t CUPTIAPI Timestamp() { return static_cast<uint64_t>(NowNs()); }
// The subscriber's callback: none is enabled, so it never runs.
void CUPTIAPI NoCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}
void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size,
                              size_t valid_bytes);

absl::Status ValidateOptions(const CollectorOptions& o) {
  if (o.buffer_bytes < kMinBufferBytes || o.buffer_bytes > kMaxBufferBytes) {
    return absl::InvalidArgumentError(
        fmt::format("CollectorOptions::buffer_bytes is {}; it must be between {} and {}",
                    o.buffer_bytes, kMinBufferBytes, kMaxBufferBytes));
  }
  if (o.max_buffers < 1) {
    return absl::InvalidArgumentError(
        fmt::format("CollectorOptions::max_buffers is {}; it must be at least 1", o.max_buffers));
  }
  if (o.launch_timeout_ms < 1) {
    return absl::InvalidArgumentError(fmt::format(
        "CollectorOptions::launch_timeout_ms is {}; it must be at least 1", o.launch_timeout_ms));
  }
  if (o.flush_interval_ms < 0) {
    return absl::InvalidArgumentError(fmt::format(
        "CollectorOptions::flush_interval_ms is {}; it must be 0 or more", o.flush_interval_ms));
  }
  return absl::OkStatus();
}

}  // namespace

struct Collector::Impl {
  Impl(const CollectorOptions& o, const CuptiLibrary* l)
      : options(o),
        lib(l),
        pool(std::make_unique<BufferPool>(o.buffer_bytes, o.max_buffers)),
        converter(l->get_callback_name) {}
  ~Impl();

  absl::Status Configure();
  absl::Status SetKinds(bool enable, const char* prefix);
  void FlushLoop();
  void OnRequested(uint8_t** buffer, size_t* size, size_t* max_records);
  void OnCompleted(CUcontext context, uint32_t stream, uint8_t* buffer, size_t valid_bytes);

  const CollectorOptions options;
  const CuptiLibrary* const lib;
  std::unique_ptr<BufferPool> pool;
  std::atomic<int64_t> dropped{0};

  mutable std::mutex mu;  // guards converter, buffers_completed, all_flushed
  RecordConverter converter;
  int64_t buffers_completed = 0;
  bool all_flushed = false;  // Stop's forced flush returned

  std::mutex state_mu;  // guards active, stopped, status (SetActive vs Stop)
  bool active = false;
  bool stopped = false;
  absl::Status status;  // first error after Start, returned by Stop

  // Held from Configure to ~Impl: CUPTI's one subscriber slot, the
  // documented way for CUPTI clients to keep out of each other's sessions.
  CUpti_SubscriberHandle subscriber = nullptr;

  std::mutex flush_mu;
  std::condition_variable flush_wake;
  bool flush_stop = false;
  std::thread flusher;
  TimestampNs previous_flush = 0;  // flusher thread
};

namespace {

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  std::shared_lock<std::shared_mutex> lock(g_active_mu);
  if (g_active != nullptr) {
    g_active->OnRequested(buffer, size, max_records);
    return;
  }
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream, uint8_t* buffer, size_t,
                              size_t valid_bytes) {
  std::shared_lock<std::shared_mutex> lock(g_active_mu);
  // Without a collector the buffer is left alone: its pool was leaked on purpose.
  if (g_active != nullptr) g_active->OnCompleted(context, stream, buffer, valid_bytes);
}

}  // namespace

Collector::Impl::~Impl() {
  {
    std::unique_lock<std::shared_mutex> lock(g_active_mu);
    if (g_active == this) g_active = nullptr;
  }
  if (subscriber != nullptr) lib->unsubscribe(subscriber);
  // CUPTI may still write into a buffer it holds: never free one in flight.
  if (pool->in_flight() > 0) static_cast<void>(pool.release());
  g_claimed.store(false);
}

void Collector::Impl::OnRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = pool->Acquire();
  *size = *buffer != nullptr ? pool->buffer_bytes() : 0;
  *max_records = 0;  // as many as fit
}

void Collector::Impl::OnCompleted(CUcontext context, uint32_t stream, uint8_t* buffer,
                                  size_t valid_bytes) {
  if (buffer == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mu);
    converter.AddBuffer(lib->activity_get_next_record, buffer, valid_bytes);
    ++buffers_completed;
  }
  size_t lost = 0;
  if (lib->activity_get_num_dropped_records(context, stream, &lost) == CUPTI_SUCCESS) {
    dropped.fetch_add(static_cast<int64_t>(lost));
  }
  pool->Release(buffer);
}

absl::Status Collector::Impl::SetKinds(bool enable, const char* prefix) {
  absl::Status first;
  for (const Kind& kind : kKinds) {
    const CUptiResult rc =
        enable ? lib->activity_enable(kind.kind) : lib->activity_disable(kind.kind);
    if (rc == CUPTI_SUCCESS || !first.ok()) continue;
    first = absl::UnavailableError(fmt::format("{}: cuptiActivity{}({}) failed: {}", prefix,
                                               enable ? "Enable" : "Disable", kind.name,
                                               lib->ResultText(rc)));
    if (enable) break;
  }
  if (enable && !first.ok()) {
    for (const Kind& kind : kKinds) lib->activity_disable(kind.kind);
  }
  return first;
}

absl::Status Collector::Impl::Configure() {
  auto fail = [&](const char* call, CUptiResult rc) {
    return absl::UnavailableError(
        fmt::format("CUPTI unavailable: {} failed: {}", call, lib->ResultText(rc)));
  };
  // First, the subscriber slot: CUPTI has one. Taken by the PyTorch
  // profiler (Kineto), Nsight Systems or Compute, or a debugger, it means
  // another client's session: leave CUPTI alone (NVTX and host ranges stay).
  CUptiResult subscribed;
  char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = {};
  if (lib->subscribe_v2 != nullptr) {
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "trainscope";
    params.oldSubscriberName = other;
    params.oldSubscriberSize = sizeof(other) - 1;
    subscribed = lib->subscribe_v2(&subscriber, &NoCallback, nullptr, &params);
  } else {
    subscribed = lib->subscribe(&subscriber, &NoCallback, nullptr);
  }
  if (subscribed == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    subscriber = nullptr;
    return absl::UnavailableError(
        fmt::format("CUPTI unavailable: CUPTI in use by {}",
                    DescribeOtherCuptiUser(other, std::getenv("CUDA_INJECTION64_PATH"),
                                           std::getenv("NSYS_PROFILING_SESSION_ID"))));
  }
  if (subscribed != CUPTI_SUCCESS) {
    subscriber = nullptr;
    return fail("cuptiSubscribe", subscribed);
  }
  // OS thread ids (gettid) in API records, so host calls land on the
  // recorder's thread tracks; CUPTI's default is pthread_self().
  if (CUptiResult rc = lib->set_thread_id_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
      rc != CUPTI_SUCCESS) {
    return fail("cuptiSetThreadIdType(SYSTEM)", rc);
  }
  if (CUptiResult rc = lib->activity_register_timestamp_callback(&Timestamp); rc != CUPTI_SUCCESS) {
    return fail("cuptiActivityRegisterTimestampCallback", rc);
  }
  if (CUptiResult rc = lib->activity_register_callbacks(&BufferRequested, &BufferCompleted);
      rc != CUPTI_SUCCESS) {
    return fail("cuptiActivityRegisterCallbacks", rc);
  }
  // Best effort: no records for event and stream queries that find work
  // still pending (NCCL's watchdog polls them constantly).
  if (lib->activity_enable_all_sync_records != nullptr) lib->activity_enable_all_sync_records(0);
  {
    std::lock_guard<std::mutex> lock(mu);
    previous_flush = NowNs();
    converter.Flushed(previous_flush);  // no record of earlier work will come
  }
  absl::Status enabled = SetKinds(true, "CUPTI unavailable");
  if (!enabled.ok()) return enabled;
  active = true;
  if (options.flush_interval_ms > 0) flusher = std::thread([this] { FlushLoop(); });
  return absl::OkStatus();
}

void Collector::Impl::FlushLoop() {
  const auto interval = std::chrono::milliseconds(options.flush_interval_ms);
  std::unique_lock<std::mutex> lock(flush_mu);
  while (!flush_wake.wait_for(lock, interval, [this] { return flush_stop; })) {
    lock.unlock();
    // Buffers complete when a flush starts are handed back by its end. A
    // launching call still in progress then (a blocking copy) is recorded
    // only when it returns: the converter is told the previous flush's
    // start, a flush interval of margin for such calls.
    const TimestampNs started = NowNs();
    if (lib->activity_flush_all(0) == CUPTI_SUCCESS) {
      std::lock_guard<std::mutex> converter_lock(mu);
      converter.Flushed(previous_flush);
    }
    previous_flush = started;
    lock.lock();
  }
}

bool CompiledWithCupti() { return true; }

absl::StatusOr<std::unique_ptr<Collector>> Collector::Start(const CollectorOptions& options) {
  if (absl::Status valid = ValidateOptions(options); !valid.ok()) return valid;
  if (g_claimed.exchange(true)) {
    return absl::FailedPreconditionError(
        "CUPTI collector: another Collector is running in this process; destroy it first");
  }
  // Probe the driver before anything calls into CUPTI: without libcuda.so.1
  // some libcupti builds crash in their first call.
  const ground::CudaDevices devices = ground::ProbeCudaDevices();
  if (devices.count == 0) {
    g_claimed.store(false);
    return absl::UnavailableError(fmt::format("CUPTI unavailable: {}", devices.status));
  }
  absl::StatusOr<const CuptiLibrary*> lib = LoadCupti();
  if (!lib.ok()) {
    g_claimed.store(false);
    return lib.status();
  }
  auto impl = std::make_unique<Impl>(options, *lib);  // ~Impl releases the claim from here on
  {
    std::unique_lock<std::shared_mutex> lock(g_active_mu);
    g_active = impl.get();
  }
  if (absl::Status configured = impl->Configure(); !configured.ok()) return configured;
  return std::unique_ptr<Collector>(new Collector(std::move(impl)));
}

Collector::Collector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Collector::~Collector() { static_cast<void>(Stop()); }

void Collector::SetActive(bool active) {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> lock(s.state_mu);
  if (s.stopped || s.active == active) return;
  s.status.Update(s.SetKinds(active, "CUPTI collector"));
  s.active = active;
}

absl::Status Collector::Stop() {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> lock(s.state_mu);
  if (s.stopped) return s.status;
  s.stopped = true;
  {
    std::lock_guard<std::mutex> flush_lock(s.flush_mu);
    s.flush_stop = true;
  }
  s.flush_wake.notify_all();
  if (s.flusher.joinable()) s.flusher.join();
  if (s.active) s.status.Update(s.SetKinds(false, "CUPTI collector"));
  s.active = false;
  if (CUptiResult rc = s.lib->activity_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
      rc != CUPTI_SUCCESS) {
    s.status.Update(absl::InternalError(fmt::format(
        "CUPTI collector: cuptiActivityFlushAll(FORCED) failed: {}", s.lib->ResultText(rc))));
  }
  size_t lost = 0;
  if (s.lib->activity_get_num_dropped_records(nullptr, 0, &lost) == CUPTI_SUCCESS) {
    s.dropped.fetch_add(static_cast<int64_t>(lost));
  }
  {
    std::lock_guard<std::mutex> converter_lock(s.mu);
    s.all_flushed = true;  // nothing more will come
  }
  return s.status;
}

TimestampNs Collector::CompleteBefore() {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> lock(s.mu);
  // Without periodic flushes nothing comes back before Stop: nothing to wait for.
  if (s.all_flushed || s.options.flush_interval_ms == 0) {
    return std::numeric_limits<TimestampNs>::max();
  }
  return s.converter.CompleteBefore(NowNs() - TimestampNs{s.options.launch_timeout_ms} * 1000000);
}

void Collector::AppendTo(ground::Timeline* timeline) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->converter.AppendTo(timeline);
}

CollectorStats Collector::stats() const {
  const Impl& s = *impl_;
  CollectorStats out;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    const ConverterStats& c = s.converter.stats();
    out.records = c.records;
    out.kernels = c.kernels;
    out.memcpys = c.memcpys;
    out.memsets = c.memsets;
    out.runtime_calls = c.runtime_calls;
    out.driver_calls = c.driver_calls;
    out.sync_calls = c.sync_calls;
    out.overhead_records = c.overhead_records;
    out.cupti_overhead_ns = c.cupti_overhead_ns;
    out.clamped = c.clamped;
    out.untimed = c.untimed;
    out.launches_tracked = c.launches_tracked;
    out.launches_unmatched = c.launches_unmatched;
    out.buffers_completed = s.buffers_completed;
  }
  out.dropped = s.dropped.load();
  out.buffers_refused = s.pool->refused();
  return out;
}

}  // namespace trainscope::cupti
