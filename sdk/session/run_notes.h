// sdk/session/run_notes.h: what user threads tell a live session as it goes
// (session_records.cc): configuration, quality, memory samples, distributed
// and checkpoint facts, latencies, loaders, finish hooks. Internal.
//
// One owner, one lock: every field is guarded by the notes' absl::Mutex,
// checked by Clang's thread-safety analysis (tools/thread-safety.sh). The
// drainer joins memory samples to step rows and takes device sync times
// from here; Finish copies the notes into the report. Three atomics tell
// the drainer, without the lock, whether it must wait for any of these.
//
// Memory: part of the "steps" term of docs/architecture.md, "Memory": at
// most kMemoryKept memory samples and kDeviceSyncWaiting sync times waiting
// for their step rows, Report::kMaxLoaders loaders, a latency sketch, and
// the configuration and finish hooks the program set.
#ifndef TRAINSCOPE_SDK_SESSION_RUN_NOTES_H_
#define TRAINSCOPE_SDK_SESSION_RUN_NOTES_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "sdk/analysis/quantile_sketch.h"
#include "trainscope/clock.h"
#include "trainscope/report.h"
#include "trainscope/session.h"

namespace trainscope {

class RunNotes {
 public:
  // What the run tells the session; each takes the lock once. The
  // Session methods of the same names (trainscope/session.h) validate their
  // arguments and come here.
  void SetConfig(std::string_view key, std::string_view value) ABSL_LOCKS_EXCLUDED(mu_);
  void SetQualityTarget(std::string_view metric, double target, bool higher_is_better)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Errors: InvalidArgument when `metric` is not the run's quality metric,
  // or `value` is NaN.
  absl::Status RecordQuality(std::string_view metric, double value, TimestampNs now)
      ABSL_LOCKS_EXCLUDED(mu_);
  void AddLatency(double seconds, TimestampNs now) ABSL_LOCKS_EXCLUDED(mu_);
  struct MemorySample {
    int64_t current = -1, peak = -1;
    int64_t reserved = -1, reserved_peak = -1;
  };
  void AddMemorySample(int64_t step, MemorySample sample, std::string_view source, TimestampNs now)
      ABSL_LOCKS_EXCLUDED(mu_);
  void SetDistributedBackend(std::string_view backend) ABSL_LOCKS_EXCLUDED(mu_);
  void NoteMissingRanks(const std::vector<int>& ranks, std::string_view error)
      ABSL_LOCKS_EXCLUDED(mu_);
  void AddStepSyncTime(int64_t step, TimestampNs ns, double seconds) ABSL_LOCKS_EXCLUDED(mu_);
  void NoteCheckpointSave(double blocking_s, double persist_s, uint64_t bytes, bool committed,
                          TimestampNs now) ABSL_LOCKS_EXCLUDED(mu_);
  void NoteResume(int64_t from_step, int64_t interrupted_at_step, double restore_s)
      ABSL_LOCKS_EXCLUDED(mu_);
  void NoteFailure(RunFailure failure) ABSL_LOCKS_EXCLUDED(mu_);
  // Errors: ResourceExhausted past Report::kMaxLoaders names.
  absl::Status SetLoader(const LoaderSettings& settings) ABSL_LOCKS_EXCLUDED(mu_);
  int AddFinishHook(std::function<void()> hook) ABSL_LOCKS_EXCLUDED(mu_);
  void RemoveFinishHook(int id) ABSL_LOCKS_EXCLUDED(mu_);
  // A copy: the hooks run unlocked, and may record into the session.
  std::vector<std::function<void()>> FinishHooks() const ABSL_LOCKS_EXCLUDED(mu_);

  // The drainer's. Its step's memory sample into `row` (and the run's
  // memory totals); without the lock until the first sample came.
  void JoinMemory(Report::Step* row) ABSL_LOCKS_EXCLUDED(mu_);
  // AddStepSyncTime's (step, ns) waiting, swapped into `taken` (empty);
  // false when none waited.
  bool TakeDeviceSync(std::vector<std::pair<int64_t, TimestampNs>>* taken) ABSL_LOCKS_EXCLUDED(mu_);
  void CountLateDeviceSync(int64_t late) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether a memory sample came yet, and when the newest did: a step's
  // sample comes after the step, so the fold waits for it (at most
  // fold_delay_ms) before the row.
  bool memory_sampled() const { return memory_sampled_.load(std::memory_order_acquire); }
  TimestampNs last_memory_ns() const { return last_memory_ns_.load(std::memory_order_acquire); }
  // Set by ExpectStepSyncTimes or the first AddStepSyncTime: those times
  // come from the device, steps after theirs, and the fold waits
  // fold_delay_ms for them.
  void ExpectDeviceSync() { device_sync_expected_.store(true, std::memory_order_relaxed); }
  bool device_sync_expected() const {
    return device_sync_expected_.load(std::memory_order_relaxed);
  }

  // Finish's, after the fold filled report->timing: configuration,
  // acceptance with its time to target, memory, distributed, checkpoint
  // (with the interval between saves), failure, loaders' settings, serving.
  void FillReport(TimestampNs process_start_ns, Report* report) const ABSL_LOCKS_EXCLUDED(mu_);

  static constexpr size_t kMemoryKept = 4096;
  static constexpr size_t kDeviceSyncWaiting = 4096;

 private:
  mutable absl::Mutex mu_;
  std::vector<std::pair<std::string, std::string>> config_ ABSL_GUARDED_BY(mu_);
  Acceptance acceptance_ ABSL_GUARDED_BY(mu_);
  TimestampNs target_met_ns_ ABSL_GUARDED_BY(mu_) = 0;  // 0: not yet
  Report::Memory memory_ ABSL_GUARDED_BY(mu_);
  // By step, until the step's row is written (the oldest dropped past
  // kMemoryKept).
  std::unordered_map<int64_t, MemorySample> samples_ ABSL_GUARDED_BY(mu_);
  Report::Distributed distributed_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<int64_t, TimestampNs>> device_sync_ ABSL_GUARDED_BY(mu_);
  Report::Checkpoint checkpoint_ ABSL_GUARDED_BY(mu_);
  TimestampNs first_save_ns_ ABSL_GUARDED_BY(mu_) = 0;
  TimestampNs last_save_ns_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<RunFailure> failure_ ABSL_GUARDED_BY(mu_);
  std::vector<Report::Loader> loaders_ ABSL_GUARDED_BY(mu_);
  // RecordLatency's milliseconds, and the span they were recorded over.
  analysis::QuantileSketch latency_ms_ ABSL_GUARDED_BY(mu_);
  TimestampNs first_arrival_ns_ ABSL_GUARDED_BY(mu_) = 0;
  TimestampNs last_latency_ns_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::pair<int, std::function<void()>>> finish_hooks_ ABSL_GUARDED_BY(mu_);
  int next_hook_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<bool> memory_sampled_{false};
  std::atomic<TimestampNs> last_memory_ns_{0};
  std::atomic<bool> device_sync_expected_{false};
};

}  // namespace trainscope

#endif  // TRAINSCOPE_SDK_SESSION_RUN_NOTES_H_
