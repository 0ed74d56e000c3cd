// sdk/session/session_impl.h: the state of a live Session, shared by
// session.cc (start, finish), drain.cc (the drainer thread) and
// session_records.cc (what the run reports as it goes). Internal.
#ifndef TRAINSCOPE_SDK_SESSION_SESSION_IMPL_H_
#define TRAINSCOPE_SDK_SESSION_SESSION_IMPL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "sdk/analysis/counter_series.h"
#include "sdk/analysis/quantile_sketch.h"
#include "sdk/analysis/run_fold.h"
#include "sdk/cupti/collector.h"
#include "sdk/export/steps_file.h"
#include "sdk/export/trace_windows.h"
#include "sdk/export/trace_writer.h"
#include "sdk/ground/tick_clock.h"
#include "sdk/recorder/thread_registry.h"
#include "sdk/session/environment.h"
#include "trainscope/recorder.h"
#include "trainscope/session.h"

namespace trainscope {

// "report.json", or "report-rank3.json" when the run has several ranks.
inline std::string RankedFile(const Options& o, std::string_view stem,
                              std::string_view extension = "json") {
  return o.world_size > 1 ? fmt::format("{}-rank{}.{}", stem, o.rank, extension)
                          : fmt::format("{}.{}", stem, extension);
}

struct Session::Impl {
  Options options;
  std::unique_ptr<cupti::Collector> collector;
  std::string device_status = "off";
  uint32_t generation = 0;
  std::atomic<bool> finished{false};  // read by borrowed handles on other threads
  environment::ProcessStart process_start;
  std::optional<double> submit_unix_s;
  Report report;  // environment facts at Start; analysis at Finish
  double scope_cost_ns = 0;
  // The recorder's clock: TSC ticks converted at each drain, or CLOCK_MONOTONIC.
  bool tsc = false;
  std::string clock_note;
  ground::TickCalibration calibration;  // drainer thread (Finish after the join)
  TimestampNs last_calibration_ns = 0;
  void ChooseClock();
  TimestampNs ToNs(int64_t ticks) const { return tsc ? calibration.ToNs(ticks) : ticks; }
  std::unique_ptr<exporter::TraceWriter> trace;
  std::unique_ptr<exporter::TraceWindows> windows;  // with trace: what it keeps
  absl::Status trace_status;                        // first trace error, reported at Finish
  std::unique_ptr<exporter::StepsWriter> steps_file;
  absl::Status steps_status;  // first steps-file error, reported at Finish

  // The analysis, fed at each drain (drainer thread; Finish after the join).
  std::unique_ptr<analysis::RunFold> fold;
  static constexpr uint32_t kNoTrack = ~0u;
  // Per registry slot. A slot is freed when its thread exits and its ring is
  // drained, then reused: its track (and the memory here) goes with it.
  struct ThreadState {
    const ThreadBuffer* buffer = nullptr;  // the ring last seen in the slot
    uint32_t os_tid = 0;
    uint32_t track = kNoTrack;  // in fold->input()
    std::string written_name;
  };
  std::vector<ThreadState> threads;            // per registry slot
  std::vector<recorder::ThreadEntry> entries;  // last registry snapshot
  uint64_t snapshot_registrations = 0;         // the registry's count before it
  uint32_t async_track = 0;
  uint32_t step_name = 0;
  // Recorder name -> fold name (+1; 0: not yet), by NameId: ids are dense
  // (phases, then names in the order interned), so this grows with the
  // distinct names, like the name table itself.
  std::vector<uint32_t> names;
  std::unordered_map<NameId, uint32_t> sparse_names;  // ids past kDenseNames
  static constexpr NameId kDenseNames = 1u << 20;
  uint32_t& DenseName(NameId id) {
    if (id >= names.size()) names.resize(id + 1, 0);
    return names[id];
  }
  // Per counter name: its summary and its windows over time (1 KiB).
  struct CounterState {
    Report::Counter summary;
    analysis::CounterSeries series;
  };
  std::unordered_map<NameId, CounterState> counters;
  // RecordLoader's settings, by name (at most Report::kMaxLoaders); under mu.
  std::vector<Report::Loader> loaders;
  int64_t recorded = 0;
  int64_t counter_events = 0;    // of `recorded`: counters, which make no interval
  int64_t released_dropped = 0;  // events dropped by rings freed since
  TimestampNs last_drain_ns = 0;
  TimestampNs latest_end_ns = 0;  // the latest end of a drained range
  double fullest = 0;             // the fullest ring at the last drain, 0 to 1
  // A chunk of drained events on the session clock (4096, 128 KiB), for
  // the trace windows: the ring's slots are only read, so the producer
  // finds their cache lines clean when it comes round to them again.
  std::vector<Event> converted;
  double intervals_per_ns = 0;  // drained, smoothed over drains

  TimestampNs target_met_ns = 0;  // the first evaluation meeting the target; 0: none yet
  // RecordLatency's milliseconds, and the span they were recorded over.
  analysis::QuantileSketch latency_ms;
  TimestampNs first_arrival_ns = 0, last_latency_ns = 0;
  // RecordLoss's file (with its own 64 KiB buffer) and counts; guarded by
  // loss_mu (taken after mu in Finish, never before it).
  std::mutex loss_mu;
  std::string loss_path;
  std::FILE* loss_file = nullptr;
  std::unique_ptr<char[]> loss_buffer;
  absl::Status loss_status;  // the first error; returned by every later call
  bool loss_closed = false;  // by Finish
  LossCurve loss_curve;      // its counts; `file` empty until the first call
  // Closes the loss file (Finish): its counts go to report.loss_curve.
  void CloseLossCurve();
  std::mutex mu;  // guards report.config, report.acceptance, target_met_ns, memory, report.memory,
                  // report.distributed, report.checkpoint, stop, latency_ms and its span
  struct MemorySample {
    int64_t current = -1, peak = -1;
    int64_t reserved = -1, reserved_peak = -1;
  };
  // By step, until the step's row is written (bounded: the oldest are
  // dropped past kMemoryKept).
  std::unordered_map<int64_t, MemorySample> memory;
  std::atomic<bool> memory_sampled{false};  // set with the first sample
  // When the newest memory sample came: a step's sample comes after the
  // step, so the fold waits for it (at most fold_delay_ms) before the row.
  std::atomic<TimestampNs> last_memory_ns{0};
  // Set by ExpectStepSyncTimes or the first AddStepSyncTime: those times
  // come from the device, steps after theirs, and the fold waits
  // fold_delay_ms for them.
  std::atomic<bool> device_sync_expected{false};
  // The drainer's: the async ranges begun as of the last drain that saw
  // none open (all 1s: it saw some), and the start of the newest step drained.
  uint64_t async_quiet_begun = ~uint64_t{0};
  TimestampNs newest_step_start_ns = std::numeric_limits<TimestampNs>::min();
  // A step's row waits for the next step to end (or fold_delay_ms): what a
  // run measures of a step after it (its memory sample, a collective's
  // time) comes by then. No limit in a run without steps.
  TimestampNs StepGate() const {
    return newest_step_start_ns == std::numeric_limits<TimestampNs>::min()
               ? std::numeric_limits<TimestampNs>::max()
               : newest_step_start_ns;
  }
  static constexpr size_t kMemoryKept = 4096;
  // AddStepSyncTime's (step, ns), until the drainer hands them to the fold:
  // at most kDeviceSyncWaiting (16 bytes each).
  std::vector<std::pair<int64_t, TimestampNs>> device_sync;
  static constexpr size_t kDeviceSyncWaiting = 4096;
  std::vector<std::pair<int64_t, TimestampNs>> device_sync_taken;  // drainer's
  // Hands AddStepSyncTime's measurements to the fold (the drainer, or
  // Finish after it stopped).
  void TakeDeviceSync();
  TimestampNs first_save_ns = 0, last_save_ns = 0;  // NoteCheckpointSave's
  std::vector<std::pair<int, std::function<void()>>> finish_hooks;
  int next_hook = 0;
  void SummarizeCountersAndCheckpoints();
  std::condition_variable wake;
  bool stop = false;
  std::thread drainer;

  // `final`: Finish's last drain, which always takes a calibration point.
  void DrainOnce(bool final = false);
  // What a drain reads before any ring, and decides from it (PlanDrain).
  struct DrainPlan {
    TimestampNs now = 0;
    TimestampNs open_since = -1;   // the open step's start, -1 when none
    bool wait_full_delay = false;  // async ranges open, or device sync times to come
    bool stream = false;           // fold the busiest ring chunk by chunk
    TimestampNs bound = 0;         // nothing still to come begins before it
    size_t busiest = 0;            // its slot (entries.size(): none)
    int64_t intervals_before = 0;  // recorded intervals before the drain
  };
  // DrainOnce's stages.
  void AddCalibrationPoint(bool final);
  DrainPlan PlanDrain();
  void DrainRing(size_t slot, const DrainPlan& plan);
  void DrainEvents(const ThreadState& thread, Event* events, size_t count, const DrainPlan& plan,
                   bool streaming);
  TimestampNs FoldEnd(const DrainPlan& plan, TimestampNs device_complete, size_t drained_intervals);
  void StartDeviceTimeline();
  bool InProfileWindow(int64_t step) const {
    return (options.profile_start_step < 0 || step >= options.profile_start_step) &&
           (options.profile_stop_step < 0 || step < options.profile_stop_step);
  }
  void DrainLoop();
  void StartFold();
  // Inline: once per drained event.
  inline __attribute__((always_inline)) void Fold(const Event& e, uint32_t track);
  void WriteStepRow(Report::Step& row);
  absl::Status WriteOutputs();
  // Start's stages (session.cc).
  absl::Status ReadStartTimes(const Options& options);
  absl::Status OpenOutputs(const Options& options);
  void BeginRecording();
  // Finish's stages, in order (session.cc).
  void RunFinishHooks();
  void StopRecording();
  void FillEvents();
  void StopDeviceTimeline();
  void FoldRest(TimestampNs finish_ns);
  void FillRunNotes();  // under mu
};

}  // namespace trainscope

#endif  // TRAINSCOPE_SDK_SESSION_SESSION_IMPL_H_
