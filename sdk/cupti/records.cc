// CUPTI records to Records to Timeline intervals. See records.h.
#include "sdk/cupti/records.h"

#include <unistd.h>

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

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel"; "_ptsz" and the like stay.
std::string_view StripVersionSuffix(std::string_view name) {
  const size_t v = name.rfind("_v");
  if (v == std::string_view::npos || v + 2 == name.size()) return name;
  for (size_t i = v + 2; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return name;
  }
  return name.substr(0, v);
}

analysis::IntervalKind IntervalKindOf(RecordKind kind) {
  switch (kind) {
    case RecordKind::kKernel:
      return analysis::IntervalKind::kKernel;
    case RecordKind::kMemcpy:
      return analysis::IntervalKind::kMemcpy;
    case RecordKind::kMemset:
      return analysis::IntervalKind::kMemset;
    case RecordKind::kSyncCall:
      return analysis::IntervalKind::kSyncCall;
    case RecordKind::kRuntimeCall:
    case RecordKind::kDriverCall:
      break;
  }
  return analysis::IntervalKind::kRuntimeCall;
}

bool IsDeviceRecord(RecordKind kind) {
  return kind == RecordKind::kKernel || kind == RecordKind::kMemcpy || kind == RecordKind::kMemset;
}

}  // namespace

RecordConverter::RecordConverter(CallbackNameFn callback_name) : callback_name_(callback_name) {}

void RecordConverter::Add(const CUpti_Activity* record) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      AddKernel(*reinterpret_cast<const CUpti_ActivityKernel10*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      AddMemcpy(*reinterpret_cast<const CUpti_ActivityMemcpy6*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      AddMemset(*reinterpret_cast<const CUpti_ActivityMemset4*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      AddApi(*reinterpret_cast<const CUpti_ActivityAPI*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      AddSync(*reinterpret_cast<const CUpti_ActivitySynchronization2*>(record));
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
  while (valid_bytes > 0 && next(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
    Add(record);
    ++walked;
  }
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

void RecordConverter::AddKernel(const CUpti_ActivityKernel10& kernel) {
  Record r;
  if (!Time(kernel.start, kernel.end, &r)) return;
  r.kind = RecordKind::kKernel;
  r.device = kernel.deviceId;
  r.stream = kernel.streamId;
  r.correlation_id = kernel.correlationId;
  r.name = InternName(kernel.name != nullptr ? kernel.name : "<unnamed kernel>");
  records_.push_back(r);
  ++stats_.records;
  ++stats_.kernels;
}

void RecordConverter::AddMemcpy(const CUpti_ActivityMemcpy6& memcpy) {
  Record r;
  if (!Time(memcpy.start, memcpy.end, &r)) return;
  r.kind = RecordKind::kMemcpy;
  r.device = memcpy.deviceId;
  r.stream = memcpy.streamId;
  r.correlation_id = memcpy.correlationId;
  r.name = InternName(MemcpyName(memcpy.copyKind));
  records_.push_back(r);
  ++stats_.records;
  ++stats_.memcpys;
}

void RecordConverter::AddMemset(const CUpti_ActivityMemset4& memset) {
  Record r;
  if (!Time(memset.start, memset.end, &r)) return;
  r.kind = RecordKind::kMemset;
  r.device = memset.deviceId;
  r.stream = memset.streamId;
  r.correlation_id = memset.correlationId;
  r.name = InternName("Memset");
  records_.push_back(r);
  ++stats_.records;
  ++stats_.memsets;
}

void RecordConverter::AddApi(const CUpti_ActivityAPI& api) {
  Record r;
  if (!Time(api.start, api.end, &r)) return;
  const bool runtime = api.kind == CUPTI_ACTIVITY_KIND_RUNTIME;
  r.kind = runtime ? RecordKind::kRuntimeCall : RecordKind::kDriverCall;
  r.process = api.processId;
  r.thread = api.threadId;
  r.correlation_id = api.correlationId;
  r.name = ApiName(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, api.cbid);
  records_.push_back(r);
  ++stats_.records;
  ++(runtime ? stats_.runtime_calls : stats_.driver_calls);
}

void RecordConverter::AddSync(const CUpti_ActivitySynchronization2& sync) {
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
  records_.push_back(r);
  ++stats_.records;
  ++stats_.sync_calls;
}

void RecordConverter::AddOverhead(const CUpti_ActivityOverhead3& overhead) {
  ++stats_.overhead_records;
  if (overhead.end > overhead.start) {
    stats_.cupti_overhead_ns += static_cast<TimestampNs>(overhead.end - overhead.start);
  }
}

uint32_t RecordConverter::InternName(std::string_view name) { return names_.Intern(name); }

uint32_t RecordConverter::ApiName(CUpti_CallbackDomain domain, uint32_t cbid) {
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
  const uint32_t id = InternName(name);
  api_names_.emplace(key, id);
  return id;
}

void RecordConverter::AppendTo(analysis::Timeline* timeline) {
  // The host thread of each runtime/driver call, for the sync records.
  std::unordered_map<uint32_t, const Record*> calls;
  for (const Record& r : records_) {
    if (r.kind == RecordKind::kRuntimeCall || r.kind == RecordKind::kDriverCall) {
      calls.emplace(r.correlation_id, &r);
    }
  }
  const auto own_pid = static_cast<uint32_t>(getpid());
  std::map<std::tuple<bool, uint32_t, uint32_t>, uint32_t> tracks;
  auto track_of = [&](bool device, uint32_t a, uint32_t b) {
    auto [it, added] = tracks.try_emplace({device, a, b}, 0);
    if (added) {
      it->second = device
                       ? timeline->FindOrAddTrack(analysis::TrackKind::kDeviceStream, a, b,
                                                  fmt::format("GPU {} stream {}", a, b))
                       : timeline->FindOrAddTrack(analysis::TrackKind::kHostThread, a, b,
                                                  b == 0 ? std::string("CUDA sync (thread unknown)")
                                                         : fmt::format("thread {}", b));
    }
    return it->second;
  };
  std::vector<int64_t> names(names_.size(), -1);
  for (const Record& r : records_) {
    uint32_t track;
    if (IsDeviceRecord(r.kind)) {
      track = track_of(true, r.device, r.stream);
    } else if (r.kind == RecordKind::kSyncCall) {
      auto call = calls.find(r.correlation_id);
      track = call != calls.end() ? track_of(false, call->second->process, call->second->thread)
                                  : track_of(false, own_pid, 0);
    } else {
      track = track_of(false, r.process, r.thread);
    }
    if (names[r.name] < 0) names[r.name] = timeline->Intern(names_.name(r.name));
    analysis::Interval interval;
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
