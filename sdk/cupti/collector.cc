// The CUPTI activity collector. See collector.h.
#include "sdk/cupti/collector.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <new>
#include <shared_mutex>
#include <thread>
#include <utility>

#include "fmt/format.h"
#include "sdk/cupti/buffer_pool.h"
#include "sdk/cupti/collector_impl.h"
#include "sdk/cupti/collector_internal.h"
#include "sdk/cupti/library.h"
#include "sdk/cupti/records.h"
#include "sdk/ground/cuda_devices.h"

namespace trainscope::cupti {
namespace {

constexpr size_t kMinBufferBytes = size_t{64} << 10;
constexpr size_t kMaxBufferBytes = size_t{1} << 30;
// CUPTI's callbacks carry no user pointer: they reach the running collector
// through g_active. Callbacks hold the lock shared; ~Impl takes it exclusively
// to unpublish, so no callback runs on a destroyed collector.
std::shared_mutex g_active_mu;
Collector::Impl* g_active = nullptr;
// Claimed by Start, released by ~Impl (or a failed Start): one collector at a time.
std::atomic<bool> g_claimed{false};

// A forked child has none of its parent's CUPTI threads or state: its
// collector, if it starts one, is its own. The parent's lock may have been
// held by a thread the child does not have, so it is made anew.
void ChildAfterFork() {
  new (&g_active_mu) std::shared_mutex();
  g_active = nullptr;
  g_claimed.store(false);
}

// The pools of stopped collectors whose buffers CUPTI still held: kept (and
// reachable) until each of those buffers comes back, then freed. At most
// max_buffers x buffer_bytes per collector stopped that way.
std::mutex g_parked_mu;
std::vector<std::unique_ptr<BufferPool>>& ParkedPools() {
  static auto* parked = new std::vector<std::unique_ptr<BufferPool>>();
  return *parked;
}

// A buffer of a stopped collector, handed back: into its pool, freed with
// the pool once the pool has all of its buffers back. False if none owns it.
bool ReturnToParkedPool(uint8_t* buffer) {
  std::lock_guard<std::mutex> lock(g_parked_mu);
  auto& parked = ParkedPools();
  for (auto it = parked.begin(); it != parked.end(); ++it) {
    if (!(*it)->Release(buffer)) continue;
    if ((*it)->in_flight() == 0) parked.erase(it);
    return true;
  }
  return false;
}

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
  if (o.max_pending_launches < 1) {
    return absl::InvalidArgumentError(
        fmt::format("CollectorOptions::max_pending_launches is {}; it must be at least 1",
                    o.max_pending_launches));
  }
  if (o.flush_interval_ms < 0) {
    return absl::InvalidArgumentError(fmt::format(
        "CollectorOptions::flush_interval_ms is {}; it must be 0 or more", o.flush_interval_ms));
  }
  return absl::OkStatus();
}

}  // namespace

namespace entry {

uint64_t CUPTIAPI Timestamp() { return static_cast<uint64_t>(NowNs()); }

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
  if (g_active != nullptr) {
    g_active->OnCompleted(context, stream, buffer, valid_bytes);
  } else if (buffer != nullptr) {
    ReturnToParkedPool(buffer);  // a stopped collector's: not read
  }
}

// The API callback, on the thread making the CUDA call: announces launching
// calls at their entry (not the driver calls a runtime launch makes, and
// nothing while this thread captures a CUDA graph: captured work leaves no
// device record until the graph is launched).
void CUPTIAPI OnApiCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                            const void* data) {
  thread_local uint32_t runtime_launch = 0;  // correlation id of the runtime launch in progress
  thread_local bool capturing = false;
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  const bool enter = call->callbackSite == CUPTI_API_ENTER;
  std::shared_lock<std::shared_mutex> lock(g_active_mu);
  if (g_active == nullptr) return;
  switch (g_active->RoleOf(domain, cbid)) {
    case internal::CallbackRole::kLaunch:
      if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
        if (!enter) {
          if (runtime_launch == call->correlationId) runtime_launch = 0;
          return;
        }
        runtime_launch = call->correlationId;
      } else if (!enter || runtime_launch != 0) {
        return;  // exit, or made inside a runtime launch: its records carry that call's id
      }
      if (!capturing) g_active->Announce(call->correlationId, domain == CUPTI_CB_DOMAIN_DRIVER_API);
      return;
    case internal::CallbackRole::kCaptureBegin:
      if (!enter && call->functionReturnValue != nullptr &&
          *static_cast<const int*>(call->functionReturnValue) == 0) {
        capturing = true;
      }
      return;
    case internal::CallbackRole::kCaptureEnd:
      if (!enter) capturing = false;
      return;
    case internal::CallbackRole::kNone:
      return;
  }
}

}  // namespace entry

Collector::Impl::~Impl() {
  if (Forked()) {
    // The parent's: its flush thread is not in this process, and CUPTI is
    // not running here. Leaked, like the parent's buffers.
    static_cast<void>(flusher.release());
    static_cast<void>(pool.release());
    return;
  }
  {
    std::unique_lock<std::shared_mutex> lock(g_active_mu);
    if (g_active == this) g_active = nullptr;
  }
  if (subscriber != nullptr) lib->unsubscribe(subscriber);
  // CUPTI may still write into a buffer it holds: never free one in flight.
  if (pool->in_flight() > 0) {
    std::lock_guard<std::mutex> lock(g_parked_mu);
    ParkedPools().push_back(std::move(pool));
  }
  g_claimed.store(false);
}

void Collector::Impl::Announce(uint32_t correlation_id, bool driver) {
  thread_local const auto tid = static_cast<uint32_t>(syscall(SYS_gettid));
  const Announcement a{NowNs(), correlation_id, tid & 0x7fffffffu, driver ? 1u : 0u};
  std::lock_guard<std::mutex> lock(announce_mu);
  if (announced.size() == announced.capacity()) {  // never grows: no allocation here
    ++announcements_dropped;
    return;
  }
  announced.push_back(a);
}

void Collector::Impl::DrainAnnouncements() {
  std::lock_guard<std::mutex> lock(mu);
  {
    std::lock_guard<std::mutex> announce_lock(announce_mu);
    announced.swap(draining);
  }
  for (const Announcement& a : draining) {
    converter.Announce(a.correlation_id, a.start_ns, a.thread, a.driver != 0);
  }
  draining.clear();
}

void Collector::Impl::OnRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = pool->Acquire();
  *size = *buffer != nullptr ? pool->buffer_bytes() : 0;
  *max_records = 0;  // as many as fit
}

void Collector::Impl::OnCompleted(CUcontext context, uint32_t stream, uint8_t* buffer,
                                  size_t valid_bytes) {
  if (buffer == nullptr) return;
  if (!pool->InFlight(buffer)) {
    // An earlier collector's buffer, handed back late: not this run's records.
    foreign_buffers.fetch_add(1);
    ReturnToParkedPool(buffer);
    return;
  }
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
    DrainAnnouncements();  // the calls announced so far are waited for before this flush counts
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
  if (g_claimed.load()) {
    return absl::FailedPreconditionError(
        "CUPTI collector: another Collector is running in this process; destroy it first");
  }
  // Probe the driver before anything calls into CUPTI: without libcuda.so.1
  // some libcupti builds crash in their first call.
  const ground::CudaDevices devices = ground::ProbeCudaDevices();
  if (devices.count == 0) {
    return absl::UnavailableError(fmt::format("CUPTI unavailable: {}", devices.status));
  }
  absl::StatusOr<const CuptiLibrary*> lib = LoadCupti(devices.driver_version);
  if (!lib.ok()) return lib.status();
  return internal::StartWithLibrary(options, *lib);
}

absl::StatusOr<std::unique_ptr<Collector>> internal::StartWithLibrary(
    const CollectorOptions& options, const CuptiLibrary* lib) {
  if (absl::Status valid = ValidateOptions(options); !valid.ok()) return valid;
  static std::once_flag fork_handler;
  std::call_once(fork_handler, [] { pthread_atfork(nullptr, nullptr, &ChildAfterFork); });
  if (g_claimed.exchange(true)) {
    return absl::FailedPreconditionError(
        "CUPTI collector: another Collector is running in this process; destroy it first");
  }
  auto impl =
      std::make_unique<Collector::Impl>(options, lib);  // ~Impl releases the claim from here on
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
  if (s.Forked()) return;
  std::lock_guard<std::mutex> lock(s.state_mu);
  if (s.stopped || s.active == active) return;
  s.status.Update(s.SetCollecting(active, "CUPTI collector"));
  s.active = active;
}

absl::Status Collector::Stop() {
  Impl& s = *impl_;
  if (s.Forked()) {
    return absl::FailedPreconditionError(
        "CUPTI collector: started by the parent of this forked process; nothing is collected "
        "here");
  }
  std::lock_guard<std::mutex> lock(s.state_mu);
  if (s.stopped) return s.status;
  s.stopped = true;
  {
    std::lock_guard<std::mutex> flush_lock(s.flush_mu);
    s.flush_stop = true;
  }
  s.flush_wake.notify_all();
  if (s.flusher != nullptr) s.flusher->join();
  if (s.active) s.status.Update(s.SetCollecting(false, "CUPTI collector"));
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
  s.DrainAnnouncements();
  {
    std::lock_guard<std::mutex> converter_lock(s.mu);
    s.converter.Finish();
    s.all_flushed = true;  // nothing more will come
  }
  return s.status;
}

TimestampNs Collector::CompleteBefore() {
  Impl& s = *impl_;
  if (s.Forked()) return std::numeric_limits<TimestampNs>::max();
  s.DrainAnnouncements();
  std::lock_guard<std::mutex> lock(s.mu);
  // Without periodic flushes nothing comes back before Stop: nothing to wait for.
  if (s.all_flushed || s.options.flush_interval_ms == 0) {
    return std::numeric_limits<TimestampNs>::max();
  }
  return s.converter.CompleteBefore(NowNs() - TimestampNs{s.options.launch_timeout_ms} * 1000000);
}

void Collector::AppendTo(ground::Timeline* timeline) {
  if (impl_->Forked()) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->converter.AppendTo(timeline);
}

CollectorStats Collector::stats() const {
  Impl& s = *impl_;
  CollectorStats out;
  if (s.Forked()) return out;
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
    out.syncs_dropped = c.syncs_dropped;
    out.incomplete_buffers = c.incomplete_buffers;
    out.buffers_completed = s.buffers_completed;
    out.announcing = s.announcing.load();
  }
  {
    std::lock_guard<std::mutex> lock(s.announce_mu);
    out.announcements_dropped = s.announcements_dropped;
  }
  out.foreign_buffers = s.foreign_buffers.load();
  out.dropped = s.dropped.load();
  out.buffers_refused = s.pool->refused();
  return out;
}

}  // namespace trainscope::cupti
