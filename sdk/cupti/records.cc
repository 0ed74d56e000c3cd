// CUPTI records to Records to Timeline intervals. See records.h.
#include "sdk/cupti/records.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <tuple>

#include "fmt/format.h"

namespace trainscope::cupti {
namespace {

std::string_view MemcpyName(uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "Memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "Memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return "Memcpy HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return "Memcpy AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
      return "Memcpy AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
      return "Memcpy AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return "Memcpy DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "Memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "Memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "Memcpy PtoP";
    default:
      return "Memcpy";
  }
}

std::string_view SyncName(CUpti_ActivitySynchronizationType type) {
  switch (type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
      return "cudaEventSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
      return "cudaStreamSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
      return "cudaDeviceSynchronize";
    default:
      return "CUDA synchronization";
  }
}

ground::IntervalKind IntervalKindOf(RecordKind kind) {
  switch (kind) {
    case RecordKind::kKernel:
      return ground::IntervalKind::kKernel;
    case RecordKind::kMemcpy:
      return ground::IntervalKind::kMemcpy;
    case RecordKind::kMemset:
      return ground::IntervalKind::kMemset;
    case RecordKind::kSyncCall:
      return ground::IntervalKind::kSyncCall;
    case RecordKind::kRuntimeCall:
    case RecordKind::kDriverCall:
      break;
  }
  return ground::IntervalKind::kRuntimeCall;
}

// A call that may have a sync record: a synchronisation or a query.
bool MaySync(std::string_view name) {
  return name.find("Synchronize") != std::string_view::npos ||
         name.find("Query") != std::string_view::npos;
}

// Event and stream queries: CUPTI reports them through SYNCHRONIZATION, but
// the host does not wait in them.
bool IsQuery(std::string_view name) {
  return name.find("EventQuery") != std::string_view::npos ||
         name.find("StreamQuery") != std::string_view::npos;
}

bool IsDeviceRecord(RecordKind kind) {
  return kind == RecordKind::kKernel || kind == RecordKind::kMemcpy || kind == RecordKind::kMemset;
}

}  // namespace

std::string_view StripVersionSuffix(std::string_view name) {
  const size_t v = name.rfind("_v");
  if (v == std::string_view::npos || v + 2 == name.size()) return name;
  for (size_t i = v + 2; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return name;
  }
  return name.substr(0, v);
}

bool LaunchesDeviceWork(std::string_view name) {
  auto starts = [&](std::string_view prefix) { return name.substr(0, prefix.size()) == prefix; };
  if (name.find("LaunchHostFunc") != std::string_view::npos) return false;
  return starts("cudaLaunch") || starts("cudaGraphLaunch") || starts("cudaMemcpy") ||
         starts("cudaMemset") || starts("cuLaunch") || starts("cuGraphLaunch") ||
         starts("cuMemcpy") || starts("cuMemset");
}

RecordConverter::RecordConverter(CallbackNameFn callback_name) : callback_name_(callback_name) {}

void RecordConverter::Add(const CUpti_Activity* record) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      AddKernel(*reinterpret_cast<const KernelRecord*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      AddMemcpy(*reinterpret_cast<const CUpti_ActivityMemcpy6*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      AddPeerCopy(*reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      AddMemset(*reinterpret_cast<const CUpti_ActivityMemset4*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      AddApi(*reinterpret_cast<const CUpti_ActivityAPI*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      AddSync(*reinterpret_cast<const CUpti_ActivitySynchronization*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
      AddOverhead(*reinterpret_cast<const CUpti_ActivityOverhead3*>(record));
      break;
    default:
      ++stats_.ignored;
      break;
  }
}

size_t RecordConverter::AddBuffer(NextRecordFn next, uint8_t* buffer, size_t valid_bytes) {
  size_t walked = 0;
  CUpti_Activity* record = nullptr;
  if (valid_bytes == 0) return 0;
  CUptiResult result;
  while ((result = next(buffer, valid_bytes, &record)) == CUPTI_SUCCESS) {
    Add(record);
    ++walked;
  }
  if (result != CUPTI_ERROR_MAX_LIMIT_REACHED) ++stats_.incomplete_buffers;
  return walked;
}

bool RecordConverter::Time(uint64_t start, uint64_t end, Record* record) {
  if (start == 0) {
    ++stats_.untimed;
    return false;
  }
  record->start_ns = static_cast<TimestampNs>(start);
  record->end_ns = static_cast<TimestampNs>(end);
  if (record->end_ns < record->start_ns) {
    record->end_ns = record->start_ns;
    ++stats_.clamped;
  }
  return true;
}

void RecordConverter::AddKernel(const KernelRecord& kernel) {
  Record r;
  if (!Time(kernel.start, kernel.end, &r)) {
    DeviceArrived(kernel.correlationId, flushed_);  // its launch is done waiting
    return;
  }
  r.kind = RecordKind::kKernel;
  r.device = kernel.deviceId;
  r.stream = kernel.streamId;
  r.correlation_id = kernel.correlationId;
  r.name = InternName(kernel.name != nullptr ? kernel.name : "<unnamed kernel>");
  records_.push_back(r);
  ++stats_.records;
  ++stats_.kernels;
  DeviceArrived(r.correlation_id, r.start_ns);
}

void RecordConverter::AddMemcpy(const CUpti_ActivityMemcpy6& memcpy) {
  Record r;
  if (!Time(memcpy.start, memcpy.end, &r)) {
    DeviceArrived(memcpy.correlationId, flushed_);
    return;
  }
  r.kind = RecordKind::kMemcpy;
  r.device = memcpy.deviceId;
  r.stream = memcpy.streamId;
  r.correlation_id = memcpy.correlationId;
  r.name = InternName(MemcpyName(memcpy.copyKind));
  records_.push_back(r);
  ++stats_.records;
  ++stats_.memcpys;
  DeviceArrived(r.correlation_id, r.start_ns);
}

void RecordConverter::AddPeerCopy(const CUpti_ActivityMemcpyPtoP4& copy) {
  Record r;
  if (!Time(copy.start, copy.end, &r)) {
    DeviceArrived(copy.correlationId, flushed_);
    return;
  }
  r.kind = RecordKind::kMemcpy;
  r.device = copy.deviceId;
  r.stream = copy.streamId;
  r.correlation_id = copy.correlationId;
  r.name = InternName(MemcpyName(CUPTI_ACTIVITY_MEMCPY_KIND_PTOP));
  records_.push_back(r);
  ++stats_.records;
  ++stats_.memcpys;
  DeviceArrived(r.correlation_id, r.start_ns);
}

void RecordConverter::AddMemset(const CUpti_ActivityMemset4& memset) {
  Record r;
  if (!Time(memset.start, memset.end, &r)) {
    DeviceArrived(memset.correlationId, flushed_);
    return;
  }
  r.kind = RecordKind::kMemset;
  r.device = memset.deviceId;
  r.stream = memset.streamId;
  r.correlation_id = memset.correlationId;
  r.name = InternName("Memset");
  records_.push_back(r);
  ++stats_.records;
  ++stats_.memsets;
  DeviceArrived(r.correlation_id, r.start_ns);
}

void RecordConverter::AddApi(const CUpti_ActivityAPI& api) {
  Record r;
  if (!Time(api.start, api.end, &r)) return;
  const bool runtime = api.kind == CUPTI_ACTIVITY_KIND_RUNTIME;
  r.kind = runtime ? RecordKind::kRuntimeCall : RecordKind::kDriverCall;
  r.process = api.processId;
  r.thread = api.threadId;
  r.correlation_id = api.correlationId;
  const ApiName name =
      NameApi(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, api.cbid);
  r.name = name.id;
  records_.push_back(r);
  ++stats_.records;
  ++(runtime ? stats_.runtime_calls : stats_.driver_calls);
  if (callback_name_ != nullptr) ApiCall(r, name.launches);
  if (name.syncs && r.correlation_id != 0) {
    const SyncCall call{r.start_ns, r.name, r.process, r.thread,
                        !name.query && api.returnValue == 0};
    if (auto early = early_syncs_.find(r.correlation_id); early != early_syncs_.end()) {
      ResolveSync(early->second, call);
      early_syncs_.erase(early);
    } else if (sync_calls_.try_emplace(r.correlation_id, call).second) {
      sync_calls_order_.emplace_back(r.start_ns, r.correlation_id);
    }
  }
}

void RecordConverter::AddSync(const CUpti_ActivitySynchronization& sync) {
  // A stream waiting on an event blocks the device queue, not the host.
  if (sync.type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT) {
    ++stats_.ignored;
    return;
  }
  Record r;
  if (!Time(sync.start, sync.end, &r)) return;
  r.kind = RecordKind::kSyncCall;
  r.stream = sync.streamId;
  r.correlation_id = sync.correlationId;
  r.name = InternName(SyncName(sync.type));
  if (auto call = sync_calls_.find(r.correlation_id); call != sync_calls_.end()) {
    ResolveSync(r, call->second);
    sync_calls_.erase(call);
  } else {
    early_syncs_.emplace(r.correlation_id, r);  // its API call comes later
  }
}

void RecordConverter::ResolveSync(Record sync, const SyncCall& call) {
  if (!call.keep) {
    ++stats_.syncs_dropped;
    return;
  }
  sync.name = call.name;
  sync.process = call.process;
  sync.thread = call.thread;
  records_.push_back(sync);
  ++stats_.records;
  ++stats_.sync_calls;
}

void RecordConverter::GiveUpSync(Record sync) {
  sync.process = static_cast<uint32_t>(getpid());
  sync.thread = 0;  // "CUDA sync (thread unknown)"
  records_.push_back(sync);
  ++stats_.records;
  ++stats_.sync_calls;
}

void RecordConverter::Finish() {
  for (auto& [id, sync] : early_syncs_) GiveUpSync(sync);
  early_syncs_.clear();
  sync_calls_.clear();
  sync_calls_order_.clear();
}

void RecordConverter::AddOverhead(const CUpti_ActivityOverhead3& overhead) {
  ++stats_.overhead_records;
  if (overhead.end > overhead.start) {
    stats_.cupti_overhead_ns += static_cast<TimestampNs>(overhead.end - overhead.start);
  }
}

uint32_t RecordConverter::InternName(std::string_view name) { return names_.Intern(name); }

RecordConverter::ApiName RecordConverter::NameApi(CUpti_CallbackDomain domain, uint32_t cbid) {
  const uint64_t key = (static_cast<uint64_t>(domain) << 32) | cbid;
  auto it = api_names_.find(key);
  if (it != api_names_.end()) return it->second;
  const char* text = nullptr;
  std::string name;
  if (callback_name_ != nullptr && callback_name_(domain, cbid, &text) == CUPTI_SUCCESS &&
      text != nullptr) {
    name = std::string(StripVersionSuffix(text));
  } else {
    name = fmt::format("CUDA {} API {}",
                       domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "runtime" : "driver", cbid);
  }
  ApiName out;
  out.id = InternName(name);
  out.launches = callback_name_ != nullptr && LaunchesDeviceWork(name);
  // Unnamed calls may be anything: each is kept for a sync record.
  out.syncs = callback_name_ == nullptr || MaySync(name);
  out.query = callback_name_ != nullptr && IsQuery(name);
  api_names_.emplace(key, out);
  return out;
}

void RecordConverter::ApiCall(const Record& call, bool launches) {
  const bool driver = call.kind == RecordKind::kDriverCall;
  ThreadCalls& thread = threads_[call.thread];
  auto inside = [](const Record& c, TimestampNs start, TimestampNs end) {
    return c.start_ns >= start && c.end_ns <= end;
  };
  if (!driver) {
    // The driver calls this runtime call made were (usually) recorded
    // before it: the device record carries this call's id, not theirs.
    thread.runtime_start = call.start_ns;
    thread.runtime_end = call.end_ns;
    size_t kept = 0;
    for (uint32_t id : thread.drivers) {
      auto d = waiting_.find(id);
      if (d == waiting_.end()) continue;  // arrived, or given up
      if (d->second.start_ns >= call.start_ns && d->second.end_ns <= call.end_ns) {
        waiting_.erase(d);
        --stats_.launches_tracked;
        continue;
      }
      thread.drivers[kept++] = id;
    }
    thread.drivers.resize(kept);
  } else if (inside(call, thread.runtime_start, thread.runtime_end)) {
    return;  // made inside the runtime call recorded before it
  }
  if (!launches || call.correlation_id == 0) return;
  if (announced_) {
    // Its wait, if any, started at its announcement: the record only says
    // how long the call took.
    if (auto w = waiting_.find(call.correlation_id); w != waiting_.end()) {
      w->second.end_ns = std::max(w->second.end_ns, call.end_ns);
    }
    return;
  }
  ++stats_.launches_tracked;
  if (auto early = early_.find(call.correlation_id); early != early_.end()) {
    early_.erase(early);  // its device record came first
    return;
  }
  auto [it, added] =
      waiting_.try_emplace(call.correlation_id, Waiting{call.start_ns, call.end_ns, call.thread});
  if (!added) return;
  by_start_.emplace(call.start_ns, call.correlation_id);
  if (driver) AddDriverWait(&thread, call.correlation_id);
}

void RecordConverter::AddDriverWait(ThreadCalls* thread, uint32_t correlation_id) {
  thread->drivers.push_back(correlation_id);
  // A thread that launches through the driver only (cuBLAS, Triton):
  // forget the ids that arrived, at doubling sizes.
  if (thread->drivers.size() >= thread->prune_at) {
    size_t kept = 0;
    for (uint32_t id : thread->drivers) {
      if (waiting_.count(id) > 0) thread->drivers[kept++] = id;
    }
    thread->drivers.resize(kept);
    thread->prune_at = std::max<size_t>(64, 2 * kept);
  }
}

void RecordConverter::Announce(uint32_t correlation_id, TimestampNs start_ns, uint32_t thread,
                               bool driver) {
  announced_ = true;
  if (correlation_id == 0) return;
  ++stats_.launches_tracked;
  if (auto early = early_.find(correlation_id); early != early_.end()) {
    early_.erase(early);  // its device record came first
    return;
  }
  if (!waiting_.try_emplace(correlation_id, Waiting{start_ns, start_ns, thread}).second) return;
  by_start_.emplace(start_ns, correlation_id);
  if (driver) AddDriverWait(&threads_[thread], correlation_id);
}

void RecordConverter::DeviceArrived(uint32_t correlation_id, TimestampNs seen) {
  // Nothing is waited for without names, unless calls are announced.
  if ((callback_name_ == nullptr && !announced_) || correlation_id == 0) return;
  if (waiting_.erase(correlation_id) > 0) return;
  if (early_.try_emplace(correlation_id, seen).second) {
    early_order_.emplace_back(seen, correlation_id);
  }
}

void RecordConverter::Flushed(TimestampNs t) { flushed_ = std::max(flushed_, t); }

TimestampNs RecordConverter::CompleteBefore(TimestampNs give_up_before) {
  // Device records whose call never came (its kind was paused, or it is not
  // a launching call): forgotten in arrival order.
  while (!early_order_.empty() && early_order_.front().first < give_up_before) {
    auto it = early_.find(early_order_.front().second);
    if (it != early_.end() && it->second == early_order_.front().first) early_.erase(it);
    early_order_.pop_front();
  }
  // Threads that made no call for a while (a job that starts threads keeps
  // this to the threads of the last give-up span).
  if (threads_.size() > 1024) {
    for (auto it = threads_.begin(); it != threads_.end();) {
      const auto& drivers = it->second.drivers;
      const bool idle = it->second.runtime_end < give_up_before &&
                        std::none_of(drivers.begin(), drivers.end(),
                                     [&](uint32_t d) { return waiting_.count(d); });
      it = idle ? threads_.erase(it) : std::next(it);
    }
  }
  // API calls whose sync record never came (a query that found work
  // pending leaves none), and sync records whose call never came.
  while (!sync_calls_order_.empty() && sync_calls_order_.front().first < give_up_before) {
    auto it = sync_calls_.find(sync_calls_order_.front().second);
    if (it != sync_calls_.end() && it->second.start_ns == sync_calls_order_.front().first) {
      sync_calls_.erase(it);
    }
    sync_calls_order_.pop_front();
  }
  TimestampNs complete = flushed_;
  for (auto it = early_syncs_.begin(); it != early_syncs_.end();) {
    if (it->second.start_ns < give_up_before) {
      GiveUpSync(it->second);
      it = early_syncs_.erase(it);
    } else {
      complete = std::min(complete, it->second.start_ns);
      ++it;
    }
  }
  while (!by_start_.empty()) {
    const auto [start, id] = by_start_.top();
    auto it = waiting_.find(id);
    if (it == waiting_.end() || it->second.start_ns != start) {
      by_start_.pop();  // arrived
      continue;
    }
    if (start < give_up_before) {
      waiting_.erase(it);
      ++stats_.launches_unmatched;
      by_start_.pop();
      continue;
    }
    return std::min(complete, start);
  }
  return complete;
}

std::string RecordConverter::ThreadName(bool own_process, uint32_t tid) {
  if (thread_names_.size() >= 4096) thread_names_.clear();  // threads come and go
  auto [it, added] = thread_names_.try_emplace(tid);
  if (added) {
    // The OS name of a thread of this process that trainscope never saw
    // (autograd's device threads); "thread <tid>" if it is gone or elsewhere.
    if (own_process) {
      std::ifstream comm(fmt::format("/proc/self/task/{}/comm", tid));
      std::getline(comm, it->second);
    }
    if (it->second.empty()) it->second = fmt::format("thread {}", tid);
  }
  return it->second;
}

void RecordConverter::AppendTo(ground::Timeline* timeline) {
  const auto own_pid = static_cast<uint32_t>(getpid());
  std::map<std::tuple<bool, uint32_t, uint32_t>, uint32_t> tracks;
  auto track_of = [&](bool device, uint32_t a, uint32_t b) {
    auto [it, added] = tracks.try_emplace({device, a, b}, 0);
    if (added) {
      it->second = device
                       ? timeline->FindOrAddTrack(ground::TrackKind::kDeviceStream, a, b,
                                                  fmt::format("GPU {} stream {}", a, b))
                       : timeline->FindOrAddTrack(ground::TrackKind::kHostThread, a, b,
                                                  b == 0 ? std::string("CUDA sync (thread unknown)")
                                                         : ThreadName(a == own_pid, b));
    }
    return it->second;
  };
  std::vector<int64_t> names(names_.size(), -1);
  for (const Record& r : records_) {
    uint32_t track;
    if (IsDeviceRecord(r.kind)) {
      track = track_of(true, r.device, r.stream);
    } else if (r.kind == RecordKind::kSyncCall && r.thread == 0) {
      track = track_of(false, own_pid, 0);
    } else {
      track = track_of(false, r.process, r.thread);
    }
    if (names[r.name] < 0) names[r.name] = timeline->Intern(names_.name(r.name));
    ground::Interval interval;
    interval.start_ns = r.start_ns;
    interval.end_ns = r.end_ns;
    interval.value = r.correlation_id;
    interval.name = static_cast<uint32_t>(names[r.name]);
    interval.track = track;
    interval.kind = IntervalKindOf(r.kind);
    timeline->Add(interval);
  }
  records_.clear();
}

}  // namespace trainscope::cupti
