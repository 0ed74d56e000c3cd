// sdk/cupti/collector.h: the device timeline, collected with CUPTI's activity
// API, as Timeline intervals on the recorder's clock.
//
//   absl::StatusOr<std::unique_ptr<cupti::Collector>> gpu = cupti::Collector::Start({});
//   if (!gpu.ok()) log(gpu.status());     // "CUPTI unavailable: ..." on a CPU machine
//   ... train; (*gpu)->SetActive(step >= 10 && step < 20) at step boundaries ...
//   cudaDeviceSynchronize();              // so that the last kernels have finished
//   (*gpu)->Stop();
//   (*gpu)->AppendTo(&timeline);          // kernels, copies, API calls, syncs
//
// Clock. Start registers a timestamp callback
// (cuptiActivityRegisterTimestampCallback) that returns trainscope::NowNs(),
// before enabling any kind, so every record, host API calls and device
// activity alike, is in CLOCK_MONOTONIC nanoseconds like the host ranges.
// CUPTI converts the GPU's own timestamps into that clock by interpolation.
//
// Buffers. CUPTI writes records into buffers it asks for from a BufferPool of
// `max_buffers` buffers of `buffer_bytes` (buffer_pool.h); a background thread
// calls cuptiActivityFlushAll(0) every `flush_interval_ms` so that full and
// completed buffers come back, are converted (records.h: a few dozen bytes a
// record, kernel names copied out) and reused at once. Memory is bounded by
// max_buffers x buffer_bytes, the records converted since the last AppendTo,
// and 32 bytes per launching call waited for (the launch rate x
// launch_timeout_ms at most).
//
// Arrival. CUPTI hands a buffer back only once every record in it is
// complete, so records come late and out of order across buffers, a
// launch's API record among them; CompleteBefore says up to when everything
// has come. Each launching call is announced at its entry by CUPTI's API
// callback (through the subscriber the collector holds; not while the
// calling thread captures a CUDA graph, whose work leaves no record until
// the graph is launched), and the converter waits for its device record
// (records.h).
//
// Dropped records. When every buffer is with CUPTI the pool refuses the
// request (CollectorStats::buffers_refused) and CUPTI drops what it cannot
// store; CUPTI's count of dropped records (cuptiActivityGetNumDroppedRecords,
// read for the buffer's context and stream in each completion callback, and
// for the global queue at Stop) is CollectorStats::dropped. Raise buffer_bytes
// or max_buffers, or flush more often, when it is not 0.
//
// Correlation. A kernel, copy or memset carries the correlation id of the
// runtime or driver call that launched it; those calls are kRuntimeCall
// intervals on the host thread that made them (CUPTI is told to report OS
// thread ids, cuptiSetThreadIdType(SYSTEM), so the track is the recorder's
// track of that thread), with the same id in Interval::value. Joining device
// intervals to host phases (launch in "forward" -> kernel time in "forward")
// happens in sdk/analysis, not here.
//
// Cost and threads. Nothing here is on the recording hot path: scopes never
// call into sdk/cupti. CUPTI itself slows every CUDA API call and kernel
// launch while kinds are enabled (SetActive(false) pauses that), and each
// launching call takes a lock to announce itself (16 bytes into a reserved
// array; no allocation). cudaGetDevice, cuCtxGetCurrent and
// cuDevicePrimaryCtxGetState are not recorded (CUPTI 12.5 on), as in
// Kineto. One Collector may run per process, and it owns CUPTI's activity
// callbacks: do not run it together with the PyTorch profiler (Kineto),
// which registers its own.
//
// Fork. Start initialises CUDA (cuInit), so, as with any CUDA program, a
// child forked afterwards cannot use CUDA: start workers that need it with
// spawn/exec. A forked child is free to start its own Collector; the
// parent's, copied into it, collects nothing there (its Stop says so).
#ifndef TRAINSCOPE_SDK_CUPTI_COLLECTOR_H_
#define TRAINSCOPE_SDK_CUPTI_COLLECTOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sdk/ground/timeline.h"
#include "trainscope/clock.h"

namespace trainscope::cupti {

// True when sdk/cupti was compiled against the CUDA toolkit's CUPTI headers;
// false for the stub, whose Start always fails.
bool CompiledWithCupti();

struct CollectorOptions {
  size_t buffer_bytes = 8 << 20;  // size of each activity buffer, 64 KiB to 1 GiB
  int max_buffers = 16;           // pooled buffers; when all are in flight CUPTI drops records
  int flush_interval_ms = 500;    // cuptiActivityFlushAll(0) cadence (0: only at Stop)
  // How long CompleteBefore waits for the device record of a launching call
  // (records.h) before giving it up.
  int launch_timeout_ms = 10000;
  // Launching calls announced between two flushes (or CompleteBefore
  // calls), at most; more are counted (announcements_dropped) and not
  // waited for. 16 bytes each, twice.
  int max_pending_launches = 1 << 16;
};

struct CollectorStats {
  int64_t records = 0;  // converted into intervals
  int64_t dropped = 0;  // records CUPTI dropped for lack of buffer space
  int64_t buffers_completed = 0;
  int64_t buffers_refused = 0;  // buffer requests refused: the pool was exhausted
  int64_t kernels = 0, memcpys = 0, memsets = 0, runtime_calls = 0, driver_calls = 0,
          sync_calls = 0, overhead_records = 0;
  TimestampNs cupti_overhead_ns = 0;  // summed duration of CUPTI's overhead records
  int64_t clamped = 0;                // end < start (clock skew): kept as empty intervals
  int64_t untimed = 0;                // no timestamp (CUPTI could not time it): dropped
  // Event and stream queries and failed calls, which CUPTI reports as
  // synchronisations: not host-blocked time, dropped.
  int64_t syncs_dropped = 0;
  // Buffers whose walk stopped at an invalid or incomplete record (records
  // still in progress at Stop): the rest of each is lost.
  int64_t incomplete_buffers = 0;
  int64_t foreign_buffers = 0;        // an earlier collector's buffers handed back late: not read
  int64_t launches_tracked = 0;       // launching calls whose device record was waited for
  int64_t launches_unmatched = 0;     // of those, given up after launch_timeout_ms
  int64_t announcements_dropped = 0;  // past max_pending_launches: not waited for
  bool announcing = false;  // launching calls are announced at entry (else by their records)
};

struct CuptiLibrary;  // library.h
class Collector;
namespace internal {
absl::StatusOr<std::unique_ptr<Collector>> StartWithLibrary(const CollectorOptions& options,
                                                            const CuptiLibrary* lib);
}  // namespace internal

class Collector {
 public:
  // Checks for a CUDA driver and device (ground::ProbeCudaDevices) before
  // anything touches CUPTI, loads libcupti (library.h has the search order),
  // takes CUPTI's subscriber slot, asks for OS thread ids, registers the
  // timestamp and buffer callbacks, enables CONCURRENT_KERNEL, MEMCPY,
  // MEMCPY2, MEMSET, SYNCHRONIZATION, RUNTIME, DRIVER and OVERHEAD in that
  // order (device kinds first), then the API callbacks of the launching
  // calls. Errors: Unavailable with a one-line reason starting
  // "CUPTI unavailable: " ("...: no CUDA driver: libcuda.so.1 not found",
  // "...: libcupti not found (...)", "...: CUPTI 11.8 found (PATH); this
  // build reads CUPTI 12.x and 13.x", "...: CUPTI in use by Nsight Systems",
  // "...: cuptiActivityEnable(CONCURRENT_KERNEL) failed: CUPTI_ERROR_...");
  // InvalidArgument for bad options; FailedPrecondition while another
  // Collector runs.
  static absl::StatusOr<std::unique_ptr<Collector>> Start(const CollectorOptions& options);

  // Stops collecting; any records not yet handed back by CUPTI are lost.
  ~Collector();
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  // Pauses or resumes collection (cuptiActivityDisable/Enable of the kinds,
  // API kinds off before device kinds; the launch callbacks off first and
  // on last), e.g. to profile only steps N..M. Cost: one CUPTI call per kind
  // and per launching API (about a hundred) when the state changes, nothing
  // otherwise. Call from one thread (the training loop, at step
  // boundaries); a no-op after Stop.
  void SetActive(bool active);

  // Stops the flush thread, disables the kinds and flushes everything
  // (cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)), then reads the
  // dropped count. Synchronise the device first, or the last kernels come
  // back incomplete: a buffer's walk stops at the first such record and the
  // rest of it is lost (counted in incomplete_buffers). Idempotent: later
  // calls return the first call's status. In a child forked after Start:
  // FailedPrecondition, and nothing touched.
  absl::Status Stop();

  // Moves the intervals converted so far into `timeline` (see
  // RecordConverter::AppendTo for the tracks, names and values). Call after
  // Stop() for the complete set; a second call appends only what came after.
  void AppendTo(ground::Timeline* timeline);

  // The time before which every record has been handed back, as far as
  // CUPTI's records tell (RecordConverter::CompleteBefore): the start of the
  // flush before the last periodic one (a flush interval of margin for
  // launching calls still in progress at a flush), held back to the oldest
  // kernel launch, copy or set whose device record has not come yet (given
  // up after launch_timeout_ms). A consumer folding the timeline as it
  // arrives keeps its watermark behind this. Start's time until the second
  // flush; the highest TimestampNs after Stop, or with flush_interval_ms 0
  // (nothing comes back before Stop). Limits: a CUDA graph launch is waited
  // for until its first kernel record only (how many nodes it has is not in
  // the records); a call whose device work leaves no record (a failed
  // launch, a zero-byte copy, a launch into a stream another thread
  // captures) holds this back for launch_timeout_ms. Also held back to a
  // sync record whose API call has not come. Cost: a lock and amortised
  // O(log n) per launch since the last call.
  TimestampNs CompleteBefore();

  CollectorStats stats() const;

  struct Impl;

 private:
  friend absl::StatusOr<std::unique_ptr<Collector>> internal::StartWithLibrary(
      const CollectorOptions& options, const CuptiLibrary* lib);
  explicit Collector(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainscope::cupti

#endif  // TRAINSCOPE_SDK_CUPTI_COLLECTOR_H_
