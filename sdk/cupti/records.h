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
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sdk/analysis/timeline.h"
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
  int64_t clamped = 0;  // end < start (clock skew, incomplete): kept as empty intervals
  int64_t untimed = 0;  // start = end = 0 (CUPTI could not time it): dropped
  int64_t ignored = 0;  // other kinds, stream-wait-event synchronisations
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
  void AppendTo(analysis::Timeline* timeline);

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
  uint32_t ApiName(CUpti_CallbackDomain domain, uint32_t cbid);

  CallbackNameFn callback_name_;
  std::vector<Record> records_;
  analysis::NameTable names_;
  std::unordered_map<uint64_t, uint32_t> api_names_;  // (domain << 32 | cbid) -> name
  ConverterStats stats_;
};

}  // namespace trainscope::cupti

#endif  // TRAINSCOPE_SDK_CUPTI_RECORDS_H_
