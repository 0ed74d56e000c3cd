// sdk/session/session_impl.h: the state of a live Session, by owner (see
// Session::Impl), used by session.cc (start, finish), drain.cc (the
// drainer thread) and session_records.cc (what the run reports as it
// goes). Internal.
#ifndef TRAINSCOPE_SDK_SESSION_SESSION_IMPL_H_
#define TRAINSCOPE_SDK_SESSION_SESSION_IMPL_H_

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "sdk/analysis/counter_series.h"
#include "sdk/analysis/run_fold.h"
#include "sdk/cupti/collector.h"
#include "sdk/ground/tick_clock.h"
#include "sdk/recorder/thread_registry.h"
#include "sdk/session/environment.h"
#include "sdk/session/loss_file.h"
#include "sdk/session/run_notes.h"
#include "sdk/session/run_outputs.h"
#include "trainscope/recorder.h"
#include "trainscope/session.h"

namespace trainscope {

// Who owns what:
// - set at Start, then read only: options, the clock's choice, the
//   process's start, the device collector's handle;
// - `notes` (run_notes.h): what user threads tell the session, under its
//   own lock; `loss`: the loss file, under its own;
// - the drainer thread, and Finish after it joined: `drain` (below), the
//   fold and `outputs` (run_outputs.h), which the fold feeds through its
//   two callbacks;
// - Finish: `report`, which holds the environment's facts from Start and
//   is filled by its stages.
struct Session::Impl {
  Options options;
  std::unique_ptr<cupti::Collector> collector;
  std::string device_status = "off";
  uint32_t generation = 0;
  std::atomic<bool> finished{false};  // read by borrowed handles on other threads
  environment::ProcessStart process_start;
  std::optional<double> submit_unix_s;
  Report report;  // environment facts at Start; the rest at Finish
  double scope_cost_ns = 0;
  // The recorder's clock: TSC ticks converted at each drain, or CLOCK_MONOTONIC.
  bool tsc = false;
  std::string clock_note;
  void ChooseClock();

  RunNotes notes;
  std::unique_ptr<LossFile> loss;  // from Start
  RunOutputs outputs;
  // The analysis, fed at each drain.
  std::unique_ptr<analysis::RunFold> fold;

  static constexpr uint32_t kNoTrack = ~0u;
  // A registry slot, as the drainer last saw it. A slot is freed when its
  // thread exits and its ring is drained, then reused: its track (and the
  // memory here) goes with it.
  struct SlotState {
    const ThreadBuffer* buffer = nullptr;  // the ring last seen in the slot
    uint32_t os_tid = 0;
    uint32_t track = kNoTrack;  // in fold->input()
    std::string written_name;
  };
  // The drainer's own state (Finish's after the join).
  struct DrainState {
    ground::TickCalibration calibration;
    TimestampNs last_calibration_ns = 0;
    std::vector<SlotState> slots;                // per registry slot
    std::vector<recorder::ThreadEntry> entries;  // last registry snapshot
    uint64_t snapshot_registrations = 0;         // the registry's count before it
    uint32_t async_track = 0;
    uint32_t step_name = 0;
    // Recorder name -> fold name (+1; 0: not yet), by NameId: ids are dense
    // (phases, then names in the order interned), so this grows with the
    // distinct names, like the name table itself.
    std::vector<uint32_t> names;
    std::unordered_map<NameId, uint32_t> sparse_names;  // ids past kDenseNames
    // Per counter name: its summary and its windows over time (1 KiB).
    struct CounterState {
      Report::Counter summary;
      analysis::CounterSeries series;
    };
    std::unordered_map<NameId, CounterState> counters;
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
    // The async ranges begun as of the last drain that saw none open (all
    // 1s: it saw some), and the start of the newest step drained.
    uint64_t async_quiet_begun = ~uint64_t{0};
    TimestampNs newest_step_start_ns = std::numeric_limits<TimestampNs>::min();
    std::vector<std::pair<int64_t, TimestampNs>> device_sync_taken;
  };
  DrainState drain;
  static constexpr NameId kDenseNames = 1u << 20;
  uint32_t& DenseName(NameId id) {
    if (id >= drain.names.size()) drain.names.resize(id + 1, 0);
    return drain.names[id];
  }
  TimestampNs ToNs(int64_t ticks) const { return tsc ? drain.calibration.ToNs(ticks) : ticks; }
  // A step's row waits for the next step to end (or fold_delay_ms): what a
  // run measures of a step after it (its memory sample, a collective's
  // time) comes by then. No limit in a run without steps.
  TimestampNs StepGate() const {
    return drain.newest_step_start_ns == std::numeric_limits<TimestampNs>::min()
               ? std::numeric_limits<TimestampNs>::max()
               : drain.newest_step_start_ns;
  }
  // Hands AddStepSyncTime's measurements to the fold (the drainer, or
  // Finish after it stopped).
  void TakeDeviceSync();

  // The drainer thread and how it is told to stop.
  absl::Mutex stop_mu;
  bool stop ABSL_GUARDED_BY(stop_mu) = false;
  absl::CondVar wake;
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
  void DrainEvents(const SlotState& slot, Event* events, size_t count, const DrainPlan& plan,
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
  // Start's stages (session.cc).
  absl::Status ReadStartTimes(const Options& options);
  void BeginRecording();
  // Finish's stages, in order (session.cc).
  void RunFinishHooks();
  void StopRecording();
  void DrainLast(TimestampNs finish_ns);
  void StopDeviceTimeline();
  void FillReport();
  void FillEvents();
  void FillCheckpoint();
  void FillCountersAndLoaders();
  absl::Status WriteOutputs();
};

}  // namespace trainscope

#endif  // TRAINSCOPE_SDK_SESSION_SESSION_IMPL_H_
