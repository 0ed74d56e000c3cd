// sdk/cupti/collector_impl.h: the state of a running Collector, shared by
// collector.cc (start, the CUPTI callbacks, the flusher, stop) and
// collector_setup.cc (what it asks of CUPTI: the subscriber, the kinds and
// the callbacks). Internal.
#ifndef TRAINSCOPE_SDK_CUPTI_COLLECTOR_IMPL_H_
#define TRAINSCOPE_SDK_CUPTI_COLLECTOR_IMPL_H_

#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "sdk/cupti/buffer_pool.h"
#include "sdk/cupti/collector.h"
#include "sdk/cupti/collector_internal.h"
#include "sdk/cupti/library.h"
#include "sdk/cupti/records.h"

namespace trainscope::cupti {

// CUPTI's entry points into the running collector (collector.cc). Its
// callbacks carry no user pointer: these reach the collector through a
// process-wide one, under a shared lock.
namespace entry {
uint64_t CUPTIAPI Timestamp();
void CUPTIAPI OnApiCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                            const void* data);
void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size,
                              size_t valid_bytes);
}  // namespace entry

struct Collector::Impl {
  Impl(const CollectorOptions& o, const CuptiLibrary* l)
      : options(o),
        lib(l),
        pool(std::make_unique<BufferPool>(o.buffer_bytes, o.max_buffers)),
        converter(l->get_callback_name),
        owner_pid(getpid()) {
    announced.reserve(static_cast<size_t>(o.max_pending_launches));
    draining.reserve(static_cast<size_t>(o.max_pending_launches));
  }
  ~Impl();

  absl::Status Configure();
  absl::Status Subscribe();
  void LearnCallbackRoles();
  // Turns collection on or off: the kinds in KindsInOrder's order, the quiet
  // APIs, and the launch callbacks (on last, off first).
  absl::Status SetCollecting(bool on, const char* prefix);
  absl::Status SetKinds(bool enable, const char* prefix);
  void SetCallbacks(bool on);
  void FlushLoop();
  void OnRequested(uint8_t** buffer, size_t* size, size_t* max_records);
  void OnCompleted(CUcontext context, uint32_t stream, uint8_t* buffer, size_t valid_bytes);
  void Announce(uint32_t correlation_id, bool driver);
  void DrainAnnouncements();  // takes mu
  internal::CallbackRole RoleOf(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) const {
    const auto& roles = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? runtime_roles : driver_roles;
    return cbid < roles.size() ? roles[cbid] : internal::CallbackRole::kNone;
  }
  // In a child forked after Start: nothing here may touch CUPTI, join the
  // parent's threads or take locks they may have held.
  bool Forked() const { return getpid() != owner_pid; }

  const CollectorOptions options;
  const CuptiLibrary* const lib;
  std::unique_ptr<BufferPool> pool;
  std::atomic<int64_t> dropped{0};
  std::atomic<int64_t> foreign_buffers{0};

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
  // The role of each callback id, by domain (Configure; read-only after),
  // and the ids whose callbacks are enabled with the kinds.
  std::vector<internal::CallbackRole> runtime_roles, driver_roles;
  std::vector<std::pair<CUpti_CallbackDomain, CUpti_CallbackId>> callback_ids;
  std::atomic<bool> announcing{false};  // the launch callbacks are enabled

  // Launching calls announced at their entry, until the next drain: at most
  // max_pending_launches (16 bytes each; more are counted and not waited for).
  struct Announcement {
    TimestampNs start_ns;
    uint32_t correlation_id;
    uint32_t thread : 31;
    uint32_t driver : 1;
  };
  std::mutex announce_mu;
  std::vector<Announcement> announced;  // guarded by announce_mu
  int64_t announcements_dropped = 0;    // guarded by announce_mu
  std::vector<Announcement> draining;   // guarded by mu

  const pid_t owner_pid;
  std::mutex flush_mu;
  std::condition_variable flush_wake;
  bool flush_stop = false;
  std::unique_ptr<std::thread> flusher;
  TimestampNs previous_flush = 0;  // flusher thread
};

}  // namespace trainscope::cupti

#endif  // TRAINSCOPE_SDK_CUPTI_COLLECTOR_IMPL_H_
