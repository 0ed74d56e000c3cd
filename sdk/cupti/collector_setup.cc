// What the collector asks of CUPTI: the subscriber slot, the activity
// kinds, the quiet APIs and the launch callbacks, in their order. See
// collector.h and collector_internal.h.
#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "sdk/cupti/collector_impl.h"
#include "sdk/cupti/collector_internal.h"
#include "sdk/cupti/library.h"
#include "sdk/cupti/records.h"

namespace trainscope::cupti {
namespace {

// Callback ids looked up past the headers' count: a newer libcupti may name
// launching calls these headers do not know.
constexpr uint32_t kCallbackIdMargin = 256;

}  // namespace

namespace internal {

std::vector<ActivityKind> KindsInOrder(bool enable) {
  std::vector<ActivityKind> kinds = {
      {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL"},
      {CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY"},
      {CUPTI_ACTIVITY_KIND_MEMCPY2, "MEMCPY2"},
      {CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET"},
      {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "SYNCHRONIZATION"},
      {CUPTI_ACTIVITY_KIND_RUNTIME, "RUNTIME"},
      {CUPTI_ACTIVITY_KIND_DRIVER, "DRIVER"},
      {CUPTI_ACTIVITY_KIND_OVERHEAD, "OVERHEAD"},
  };
  if (!enable) std::reverse(kinds.begin(), kinds.end());
  return kinds;
}

std::vector<std::pair<CUpti_CallbackDomain, CUpti_CallbackId>> QuietApis() {
  return {{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020},
          {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent},
          {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState}};
}

CallbackRole RoleOf(std::string_view name) {
  auto starts = [&](std::string_view prefix) { return name.substr(0, prefix.size()) == prefix; };
  if (LaunchesDeviceWork(name)) return CallbackRole::kLaunch;
  if (starts("cudaStreamBeginCapture") || starts("cuStreamBeginCapture")) {
    return CallbackRole::kCaptureBegin;
  }
  if (starts("cudaStreamEndCapture") || starts("cuStreamEndCapture")) {
    return CallbackRole::kCaptureEnd;
  }
  return CallbackRole::kNone;
}

}  // namespace internal

absl::Status Collector::Impl::SetKinds(bool enable, const char* prefix) {
  absl::Status first;
  for (const internal::ActivityKind& kind : internal::KindsInOrder(enable)) {
    const CUptiResult rc =
        enable ? lib->activity_enable(kind.kind) : lib->activity_disable(kind.kind);
    if (rc == CUPTI_SUCCESS || !first.ok()) continue;
    first = absl::UnavailableError(fmt::format("{}: cuptiActivity{}({}) failed: {}", prefix,
                                               enable ? "Enable" : "Disable", kind.name,
                                               lib->ResultText(rc)));
    if (enable) break;
  }
  if (enable && !first.ok()) {
    for (const internal::ActivityKind& kind : internal::KindsInOrder(false)) {
      lib->activity_disable(kind.kind);
    }
  }
  return first;
}

void Collector::Impl::SetCallbacks(bool on) {
  if (!on) {
    for (const auto& [domain, cbid] : callback_ids) {
      lib->enable_callback(0, subscriber, domain, cbid);
    }
    announcing = false;
    return;
  }
  // A call whose callback CUPTI refuses is not announced: its launches are
  // not waited for (records.h); the others still are.
  int enabled = 0;
  for (const auto& [domain, cbid] : callback_ids) {
    if (lib->enable_callback(1, subscriber, domain, cbid) == CUPTI_SUCCESS) ++enabled;
  }
  announcing = enabled > 0;
}

absl::Status Collector::Impl::SetCollecting(bool on, const char* prefix) {
  if (!on) SetCallbacks(false);
  absl::Status status = SetKinds(on, prefix);
  if (on && status.ok()) {
    // After the kinds: enabling RUNTIME or DRIVER overrides these. Best
    // effort (12.5 on).
    for (const auto& [domain, cbid] : internal::QuietApis()) {
      auto quiet = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? lib->activity_enable_runtime_api
                                                         : lib->activity_enable_driver_api;
      if (quiet != nullptr) quiet(cbid, 0);
    }
    SetCallbacks(true);
  }
  return status;
}

// The subscriber slot: CUPTI has one. Taken by the PyTorch profiler
// (Kineto), Nsight Systems or Compute, or a debugger, it means another
// client's session: leave CUPTI alone (NVTX and host ranges stay).
absl::Status Collector::Impl::Subscribe() {
  CUptiResult subscribed;
  char other[128] = {};
#if CUPTI_API_VERSION >= 130000
  static_assert(sizeof(other) > CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN);
  if (lib->subscribe_v2 != nullptr) {
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "trainscope";
    params.oldSubscriberName = other;
    params.oldSubscriberSize = sizeof(other) - 1;
    subscribed = lib->subscribe_v2(&subscriber, &entry::OnApiCallback, nullptr, &params);
  } else {
    subscribed = lib->subscribe(&subscriber, &entry::OnApiCallback, nullptr);
  }
#else
  subscribed = lib->subscribe(&subscriber, &entry::OnApiCallback, nullptr);
#endif
  if (subscribed == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    subscriber = nullptr;
    return absl::UnavailableError(
        fmt::format("CUPTI unavailable: CUPTI in use by {}",
                    DescribeOtherCuptiUser(other, std::getenv("CUDA_INJECTION64_PATH"),
                                           std::getenv("NSYS_PROFILING_SESSION_ID"))));
  }
  if (subscribed != CUPTI_SUCCESS) {
    subscriber = nullptr;
    return absl::UnavailableError(
        fmt::format("CUPTI unavailable: cuptiSubscribe failed: {}", lib->ResultText(subscribed)));
  }
  return absl::OkStatus();
}

// The launching calls and graph captures, by the names CUPTI gives them:
// each domain's callback ids to their roles, and the ids to enable.
void Collector::Impl::LearnCallbackRoles() {
  for (const CUpti_CallbackDomain domain :
       {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API}) {
    const uint32_t known = domain == CUPTI_CB_DOMAIN_RUNTIME_API
                               ? static_cast<uint32_t>(CUPTI_RUNTIME_TRACE_CBID_SIZE)
                               : static_cast<uint32_t>(CUPTI_DRIVER_TRACE_CBID_SIZE);
    auto& roles = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? runtime_roles : driver_roles;
    roles.assign(known + kCallbackIdMargin, internal::CallbackRole::kNone);
    for (uint32_t cbid = 1; cbid < roles.size(); ++cbid) {
      const char* name = nullptr;
      if (lib->get_callback_name(domain, cbid, &name) != CUPTI_SUCCESS || name == nullptr) continue;
      roles[cbid] = internal::RoleOf(StripVersionSuffix(name));
      if (roles[cbid] != internal::CallbackRole::kNone) callback_ids.emplace_back(domain, cbid);
    }
  }
}

absl::Status Collector::Impl::Configure() {
  auto fail = [&](const char* call, CUptiResult rc) {
    return absl::UnavailableError(
        fmt::format("CUPTI unavailable: {} failed: {}", call, lib->ResultText(rc)));
  };
  if (absl::Status status = Subscribe(); !status.ok()) return status;
  // OS thread ids (gettid) in API records, so host calls land on the
  // recorder's thread tracks; CUPTI's default is pthread_self().
  if (CUptiResult rc = lib->set_thread_id_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
      rc != CUPTI_SUCCESS) {
    return fail("cuptiSetThreadIdType(SYSTEM)", rc);
  }
  // Buffers come zeroed from the pool (buffer_pool.h), so CUPTI need not
  // zero them on the thread whose CUDA call asked for one; and one global
  // queue of buffers rather than one per thread, so that max_buffers bounds
  // them whatever the number of launching threads (main, autograd,
  // prefetch, NCCL's watchdog). Best effort: both are settings of 12.x on.
  if (lib->activity_set_attribute != nullptr) {
    uint8_t zeroed = 1, per_thread = 0;
    size_t bytes = sizeof(uint8_t);
    lib->activity_set_attribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &bytes, &zeroed);
    bytes = sizeof(uint8_t);
    lib->activity_set_attribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &bytes,
                                &per_thread);
  }
  if (CUptiResult rc = lib->activity_register_timestamp_callback(&entry::Timestamp);
      rc != CUPTI_SUCCESS) {
    return fail("cuptiActivityRegisterTimestampCallback", rc);
  }
  if (CUptiResult rc =
          lib->activity_register_callbacks(&entry::BufferRequested, &entry::BufferCompleted);
      rc != CUPTI_SUCCESS) {
    return fail("cuptiActivityRegisterCallbacks", rc);
  }
  // Best effort: no records for event and stream queries that find work
  // still pending (NCCL's watchdog polls them constantly).
  if (lib->activity_enable_all_sync_records != nullptr) lib->activity_enable_all_sync_records(0);
  LearnCallbackRoles();
  {
    std::lock_guard<std::mutex> lock(mu);
    previous_flush = NowNs();
    converter.Flushed(previous_flush);  // no record of earlier work will come
  }
  absl::Status enabled = SetCollecting(true, "CUPTI unavailable");
  if (!enabled.ok()) return enabled;
  active = true;
  if (options.flush_interval_ms > 0) {
    flusher = std::make_unique<std::thread>([this] { FlushLoop(); });
  }
  return absl::OkStatus();
}

}  // namespace trainscope::cupti
