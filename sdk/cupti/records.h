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
// Record versions: this reads the structs of the headers it is compiled
// against: CUpti_ActivityKernel10 with CUDA 13's, CUpti_ActivityKernel9 with
// CUDA 12's (KernelRecord), and CUpti_ActivityMemcpy6, CUpti_ActivityMemcpyPtoP4,
// CUpti_ActivityMemset4, CUpti_ActivityAPI, CUpti_ActivitySynchronization and
// CUpti_ActivityOverhead3 with both. CUPTI grows a record by appending fields,
// and only fields at the same offsets since CUDA 11 (kind, start, end, device,
// stream and correlation ids, name, cbid, process, thread, return value,
// copy and sync type) are read, so a CUPTI of 12.x or 13.x writing a shorter
// or longer record is read correctly; the walk itself is CUPTI's.
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

// The newest kernel record of the headers compiled against; the fields read
// sit at the same offsets in both.
#if CUPTI_API_VERSION >= 130000
using KernelRecord = CUpti_ActivityKernel10;
#else
using KernelRecord = CUpti_ActivityKernel9;
#endif

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
// process/thread (a kSyncCall takes the name, process and thread of the API
// call with its correlation id; CUPTI reports neither in the sync record).
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
  int64_t clamped = 0;  // end < start (clock skew, incomplete): kept as empty intervals
  int64_t untimed = 0;  // start = 0 (CUPTI could not time it): dropped, still matched to its call
  int64_t ignored = 0;  // other kinds, stream-wait-event synchronisations
  // Sync records that are not host-blocked time: event and stream queries
  // (NCCL's watchdog polls them), and calls that returned an error.
  int64_t syncs_dropped = 0;
  // Buffers whose walk stopped at an invalid or incomplete record
  // (CUPTI_ERROR_INVALID_KIND): the rest of each such buffer is lost.
  int64_t incomplete_buffers = 0;
  int64_t launches_tracked = 0;    // launching calls seen (announced or recorded)
  int64_t launches_unmatched = 0;  // given up: no device record came in time
};

// A CUPTI callback name without its version suffix: "cudaLaunchKernel_v7000"
// -> "cudaLaunchKernel" ("_ptsz" and the like stay).
std::string_view StripVersionSuffix(std::string_view name);

// A call whose work shows up as device records with its correlation id: a
// name starting with cudaLaunch, cudaGraphLaunch, cudaMemcpy, cudaMemset,
// cuLaunch, cuGraphLaunch, cuMemcpy or cuMemset, not *LaunchHostFunc.
bool LaunchesDeviceWork(std::string_view name);

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
  // invalid or incomplete record (any other result: counted in
  // incomplete_buffers, the rest of the buffer is lost). Returns the number
  // of records walked.
  size_t AddBuffer(NextRecordFn next, uint8_t* buffer, size_t valid_bytes);

  // Nothing more will come (the collector's Stop): sync records whose API
  // call never came are kept under their type's name on the track "CUDA
  // sync (thread unknown)", and the API calls kept for sync records are
  // forgotten.
  void Finish();

  // Moves the Records converted so far into `timeline` and forgets them:
  // device kinds on kDeviceStream tracks (pid = device, tid = stream, "GPU 0
  // stream 7"), host kinds on kHostThread tracks (pid = process, tid = OS
  // thread), found or added with Timeline::FindOrAddTrack. Interval::value is
  // the correlation id, step -1, phase kOther. A kSyncCall takes the thread of
  // the runtime or driver call with its correlation id (and its name:
  // "cudaStreamSynchronize"); it is dropped (syncs_dropped) when that call
  // is an event or stream query or returned an error; without that call it
  // goes on the track (this process, tid 0) named "CUDA sync (thread
  // unknown)" once CompleteBefore gives it up or Finish is called.
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
  // Records alone are not enough: a buffer that holds an incomplete record
  // is not handed back by a periodic flush, so a launch and its kernel can
  // both arrive after the flush that should have covered them. The
  // collector therefore announces each launching call at its entry
  // (Announce, from CUPTI's API callbacks); once anything is announced,
  // only announcements start a wait, and records only end waits.
  //
  // Flushed(t): every buffer that was complete at host time t has been
  // added (the collector calls it with the start of each cuptiActivityFlushAll).
  void Flushed(TimestampNs t);

  // A launching call entered at `start_ns` on OS thread `thread`, with the
  // correlation id its API record and device records will carry. `driver`:
  // a driver-domain call (waited for until a runtime call recorded around it
  // on the same thread shows it was made inside that call). From the first
  // call on, API records no longer start waits.
  void Announce(uint32_t correlation_id, TimestampNs start_ns, uint32_t thread, bool driver);

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
  void AddKernel(const KernelRecord& kernel);
  void AddMemcpy(const CUpti_ActivityMemcpy6& memcpy);
  void AddPeerCopy(const CUpti_ActivityMemcpyPtoP4& copy);
  void AddMemset(const CUpti_ActivityMemset4& memset);
  void AddApi(const CUpti_ActivityAPI& api);
  void AddSync(const CUpti_ActivitySynchronization& sync);
  void AddOverhead(const CUpti_ActivityOverhead3& overhead);
  // False (counted as untimed) for start = end = 0; clamps end < start.
  bool Time(uint64_t start, uint64_t end, Record* record);
  uint32_t InternName(std::string_view name);
  struct ApiName {
    uint32_t id = 0;
    bool launches = false;  // a launching call (see CompleteBefore)
    bool syncs = false;     // may have a sync record (a synchronize or query call)
    bool query = false;     // an event or stream query: its sync record is dropped
  };
  ApiName NameApi(CUpti_CallbackDomain domain, uint32_t cbid);
  void ApiCall(const Record& call, bool launches);
  void DeviceArrived(uint32_t correlation_id, TimestampNs seen);
  // A sync record joined with its API call: named and placed, or dropped.
  struct SyncCall {
    TimestampNs start_ns = 0;
    uint32_t name = 0, process = 0, thread = 0;
    bool keep = true;  // not a query, and returned success
  };
  void ResolveSync(Record sync, const SyncCall& call);
  void GiveUpSync(Record sync);

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
  void AddDriverWait(ThreadCalls* thread, uint32_t correlation_id);
  // Device records that came before their call: id -> start, and arrival order.
  std::unordered_map<uint32_t, TimestampNs> early_;
  std::deque<HeapEntry> early_order_;
  TimestampNs flushed_ = std::numeric_limits<TimestampNs>::min();
  bool announced_ = false;  // Announce was called: records no longer start waits
  // API calls that may have a sync record, until it comes (by correlation
  // id; given up with the launches), and sync records that came before
  // their call. Both bounded by the sync rate x the give-up span.
  std::unordered_map<uint32_t, SyncCall> sync_calls_;
  std::deque<HeapEntry> sync_calls_order_;
  std::unordered_map<uint32_t, Record> early_syncs_;
};

}  // namespace trainscope::cupti

#endif  // TRAINSCOPE_SDK_CUPTI_RECORDS_H_
