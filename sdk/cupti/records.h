// sdk/cupti/records.h: turns CUPTI activity records into compact Records and
// then into Timeline intervals. Pure code: needs the CUPTI headers, no GPU.
//
// The collector feeds every record of a completed buffer to a RecordConverter
// (AddBuffer walks the buffer with the real cuptiActivityGetNextRecord);
// tests feed it structs they fill themselves (Add).
//
//   RecordConverter converter(cupti_get_callback_name);
//   converter.AddBuffer(cupti_activity_get_next_record, buffer, valid_bytes);
//   converter.AppendTo(&timeline);
//
// Record versions: this reads the structs of the CUDA 13 headers
// (CUpti_ActivityKernel10, CUpti_ActivityMemcpy6, CUpti_ActivityMemset4,
// CUpti_ActivityAPI, CUpti_ActivitySynchronization2, CUpti_ActivityOverhead3),
// the ones libcupti.so.13 writes. CUPTI grows a record by appending fields, and
// only fields present since CUDA 11 (start, end, device, context, stream and
// correlation ids, name) are read, so a newer CUPTI 13.x writing a larger
// record is read correctly; the walk itself is CUPTI's.
#ifndef TRAINSCOPE_SDK_CUPTI_RECORDS_H_
#define TRAINSCOPE_SDK_CUPTI_RECORDS_H_

#include <cupti_activity.h>
#include <cupti_callbacks.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sdk/ground/timeline.h"
#include "trainscope/clock.h"

namespace trainscope::cupti {

// What a Record describes.
enum class RecordKind : uint8_t {
  kKernel,
  kMemcpy,
  kMemset,
  kRuntimeCall,  // CUDA runtime API call (CUPTI_ACTIVITY_KIND_RUNTIME)
  kDriverCall,   // CUDA driver API call (CUPTI_ACTIVITY_KIND_DRIVER)
  kSyncCall,     // host blocked in a stream, event or context synchronisation
};

// One converted record. Device kinds fill device/stream, host kinds
// process/thread (a kSyncCall's thread is found through its correlation id
// when the records are appended to a Timeline; CUPTI does not report it).
struct Record {
  TimestampNs start_ns = 0;
  TimestampNs end_ns = 0;
  uint32_t correlation_id = 0;
  uint32_t name = 0;     // RecordConverter::name(id)
  uint32_t device = 0;   // device kinds: CUPTI device id
  uint32_t stream = 0;   // device kinds and kSyncCall: CUPTI stream id
  uint32_t process = 0;  // host kinds: process id
  uint32_t thread = 0;   // host kinds: OS thread id (see collector.h)
  RecordKind kind = RecordKind::kKernel;
};

struct ConverterStats {
  int64_t records = 0;  // converted into Records
  int64_t kernels = 0;
  int64_t memcpys = 0;
  int64_t memsets = 0;
  int64_t runtime_calls = 0;
  int64_t driver_calls = 0;
  int64_t sync_calls = 0;
  int64_t overhead_records = 0;       // CUPTI's own overhead; counted, not converted
  TimestampNs cupti_overhead_ns = 0;  // their summed duration
  int64_t clamped = 0;             // end < start (clock skew, incomplete): kept as empty intervals
  int64_t untimed = 0;             // start = end = 0 (CUPTI could not time it): dropped
  int64_t ignored = 0;             // other kinds, stream-wait-event synchronisations
  int64_t launches_tracked = 0;    // launching calls waited for (see CompleteBefore)
  int64_t launches_unmatched = 0;  // given up: no device record came in time
};

// cuptiActivityGetNextRecord and cuptiGetCallbackName, as loaded by dlopen.
using NextRecordFn = CUptiResult (*)(uint8_t* buffer, size_t valid_bytes, CUpti_Activity** record);
using CallbackNameFn = CUptiResult (*)(CUpti_CallbackDomain domain, uint32_t cbid,
                                       const char** name);

// Not thread-safe: the collector serialises calls.
class RecordConverter {
 public:
  // `callback_name` names runtime and driver API records ("cudaLaunchKernel");
  // without it they are named "CUDA runtime API 211", "CUDA driver API 307".
  explicit RecordConverter(CallbackNameFn callback_name = nullptr);

  // Converts one record, dispatching on record->kind. Kernel names are
  // copied, so the buffer may be reused at once.
  void Add(const CUpti_Activity* record);

  // Walks the first `valid_bytes` of a completed buffer with `next` and Adds
  // each record. Stops at the end (CUPTI_ERROR_MAX_LIMIT_REACHED) or at an
  // invalid or incomplete record (CUPTI_ERROR_INVALID_KIND). Returns the
  // number of records walked.
  size_t AddBuffer(NextRecordFn next, uint8_t* buffer, size_t valid_bytes);

  // Moves the Records converted so far into `timeline` and forgets them:
  // device kinds on kDeviceStream tracks (pid = device, tid = stream, "GPU 0
  // stream 7"), host kinds on kHostThread tracks (pid = process, tid = OS
  // thread), found or added with Timeline::FindOrAddTrack. Interval::value is
  // the correlation id, step -1, phase kOther. A kSyncCall takes the thread of
  // the runtime or driver call with its correlation id, or else goes on the
  // track (this process, tid 0) named "CUDA sync (thread unknown)".
  void AppendTo(ground::Timeline* timeline);

  // ---- What has arrived -------------------------------------------------
  //
  // The fold (sdk/analysis/run_fold.h) may only pass time whose intervals
  // have all arrived. CUPTI hands a buffer back (cuptiActivityFlushAll(0))
  // only once every record in it is complete, so a kernel still running
  // holds its buffer back while later buffers come: device records arrive
  // late and out of order across buffers. The converter therefore waits for
  // each launching call: a runtime or driver call whose name starts with
  // cudaLaunch, cudaGraphLaunch, cudaMemcpy, cudaMemset, cuLaunch,
  // cuGraphLaunch, cuMemcpy or cuMemset (not cudaLaunchHostFunc or
  // cuLaunchHostFunc), from its record until a device record with its
  // correlation id arrives (before or after it). A driver call made inside a
  // runtime call on the same thread (cudaLaunchKernel calling cuLaunchKernel)
  // is not waited for: the device record carries the runtime call's id.
  // Without a callback-name function nothing is waited for.
  //
  // Flushed(t): every buffer that was complete at host time t has been
  // added (the collector calls it with the start of each cuptiActivityFlushAll).
  void Flushed(TimestampNs t);

  // The time before which every device record has arrived, as far as the
  // converter can tell: the last Flushed time, or the start of the oldest
  // launching call still waited for, whichever is earlier. A call that
  // started before `give_up_before` is no longer waited for (counted in
  // launches_unmatched: a dropped record, or a call whose work leaves none).
  // A graph launch (or a copy CUPTI splits) is waited for until its first
  // device record only: its later records may come after this time.
  // Before the first Flushed: the lowest TimestampNs. Cost: amortised
  // O(log n) per launching call; memory: 32 bytes per call waited for or
  // device record seen before its call, both bounded by the launch rate x
  // the time until give_up_before.
  TimestampNs CompleteBefore(TimestampNs give_up_before);

  const std::vector<Record>& records() const { return records_; }
  const std::string& name(uint32_t id) const { return names_.name(id); }
  const ConverterStats& stats() const { return stats_; }

 private:
  void AddKernel(const CUpti_ActivityKernel10& kernel);
  void AddMemcpy(const CUpti_ActivityMemcpy6& memcpy);
  void AddMemset(const CUpti_ActivityMemset4& memset);
  void AddApi(const CUpti_ActivityAPI& api);
  void AddSync(const CUpti_ActivitySynchronization2& sync);
  void AddOverhead(const CUpti_ActivityOverhead3& overhead);
  // False (counted as untimed) for start = end = 0; clamps end < start.
  bool Time(uint64_t start, uint64_t end, Record* record);
  uint32_t InternName(std::string_view name);
  struct ApiName {
    uint32_t id = 0;
    bool launches = false;  // a launching call (see CompleteBefore)
  };
  ApiName NameApi(CUpti_CallbackDomain domain, uint32_t cbid);
  void ApiCall(const Record& call, bool launches);
  void DeviceArrived(const Record& device);

  CallbackNameFn callback_name_;
  std::vector<Record> records_;
  ground::NameTable names_;
  std::unordered_map<uint64_t, ApiName> api_names_;  // (domain << 32 | cbid) -> name
  // Host track names of this process's threads, read once per thread from
  // /proc/self/task/<tid>/comm (autograd's "pt_autograd_0"): one entry per
  // thread that made CUDA calls, at most 4096 (then forgotten and re-read).
  std::unordered_map<uint32_t, std::string> thread_names_;
  std::string ThreadName(bool own_process, uint32_t tid);
  ConverterStats stats_;

  // Launching calls waited for, by correlation id; the heap orders them by
  // start (entries whose call is no longer waited for are skipped there).
  struct Waiting {
    TimestampNs start_ns = 0;
    TimestampNs end_ns = 0;
    uint32_t thread = 0;
  };
  std::unordered_map<uint32_t, Waiting> waiting_;
  using HeapEntry = std::pair<TimestampNs, uint32_t>;  // (start, correlation id)
  std::priority_queue<HeapEntry, std::vector<HeapEntry>, std::greater<>> by_start_;
  // Per thread: the last runtime call, and the driver calls waited for
  // that a later runtime record may turn out to contain.
  struct ThreadCalls {
    TimestampNs runtime_start = 0, runtime_end = -1;
    std::vector<uint32_t> drivers;
    size_t prune_at = 64;
  };
  std::unordered_map<uint32_t, ThreadCalls> threads_;
  // Device records that came before their call: id -> start, and arrival order.
  std::unordered_map<uint32_t, TimestampNs> early_;
  std::deque<HeapEntry> early_order_;
  TimestampNs flushed_ = std::numeric_limits<TimestampNs>::min();
};

}  // namespace trainscope::cupti

#endif  // TRAINSCOPE_SDK_CUPTI_RECORDS_H_
