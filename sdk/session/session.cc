// Session: start, drain, finish. See session.h.
#include "trainscope/session.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "fmt/format.h"
#include "sdk/analysis/checkpoint_advice.h"
#include "sdk/analysis/quantile_sketch.h"
#include "sdk/analysis/run_analysis.h"
#include "sdk/analysis/run_fold.h"
#include "sdk/cupti/collector.h"
#include "sdk/export/report_json.h"
#include "sdk/export/steps_file.h"
#include "sdk/export/summary.h"
#include "sdk/export/trace_windows.h"
#include "sdk/export/trace_writer.h"
#include "sdk/ground/files.h"
#include "sdk/ground/tick_clock.h"
#include "sdk/ground/timeline.h"
#include "sdk/nvtx/nvtx.h"
#include "sdk/recorder/thread_registry.h"
#include "sdk/session/environment.h"
#include "sdk/session/segment_policy.h"
#include "trainscope/recorder.h"

namespace trainscope {
namespace {

// Only one session records at a time.
std::atomic<bool> g_session_active{false};
std::atomic<uint32_t> g_last_generation{0};

// Limits on Options::buffer_bytes_per_thread.
constexpr uint64_t kMinBufferBytes = 64 * sizeof(Event);
constexpr uint64_t kMaxBufferBytes = uint64_t{1} << 30;

// RANK / WORLD_SIZE from the environment (torchrun's), or `fallback`.
int EnvInt(const char* name, int fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  return (*end == '\0' && value >= 0 && value < (1 << 20)) ? static_cast<int>(value) : fallback;
}

std::string RankedFile(const Options& o, std::string_view stem,
                       std::string_view extension = "json") {
  return o.world_size > 1 ? fmt::format("{}-rank{}.{}", stem, o.rank, extension)
                          : fmt::format("{}.{}", stem, extension);
}

absl::Status ValidateOptions(Options& o) {
  if (o.run_name.empty()) return absl::InvalidArgumentError("Options::run_name is empty");
  if (o.world_size < 0) o.world_size = EnvInt("WORLD_SIZE", 1);
  if (o.rank < 0) o.rank = EnvInt("RANK", 0);
  if (o.world_size < 1 || o.rank >= o.world_size) {
    return absl::InvalidArgumentError(
        fmt::format("Options::rank is {} and world_size {}: need 0 <= rank < world_size", o.rank,
                    o.world_size));
  }
  if (o.buffer_bytes_per_thread.value < kMinBufferBytes ||
      o.buffer_bytes_per_thread.value > kMaxBufferBytes) {
    return absl::InvalidArgumentError(
        fmt::format("Options::buffer_bytes_per_thread is {}; it must be between {} and {}",
                    o.buffer_bytes_per_thread.value, kMinBufferBytes, kMaxBufferBytes));
  }
  if (o.flush_interval_ms <= 0 || o.trace_checkpoint_interval_ms <= 0) {
    return absl::InvalidArgumentError(
        "Options::flush_interval_ms and trace_checkpoint_interval_ms must be positive");
  }
  if (o.fold_delay_ms < 0) {
    return absl::InvalidArgumentError(
        fmt::format("Options::fold_delay_ms is {}; it must be 0 or more", o.fold_delay_ms));
  }
  if (o.fold_buffer_bytes.value < (uint64_t{1} << 20)) {
    return absl::InvalidArgumentError(fmt::format(
        "Options::fold_buffer_bytes is {}; it must be at least 1 MiB", o.fold_buffer_bytes.value));
  }
  if (o.trace_first_steps < 0 || o.trace_slowest_steps < 0) {
    return absl::InvalidArgumentError(fmt::format(
        "Options::trace_first_steps ({}) and trace_slowest_steps ({}) must be 0 or more",
        o.trace_first_steps, o.trace_slowest_steps));
  }
  const Options::TraceSchedule& ts = o.trace_schedule;
  if (ts.skip_first < 0 || ts.wait < 0 || ts.warmup < 0 || ts.active < 0 || ts.repeat < 0) {
    return absl::InvalidArgumentError(fmt::format(
        "Options::trace_schedule is skip_first={} wait={} warmup={} active={} repeat={}; each "
        "must be 0 or more",
        ts.skip_first, ts.wait, ts.warmup, ts.active, ts.repeat));
  }
  if (o.resource_request.accelerators < 0) {
    return absl::InvalidArgumentError("Options::resource_request.accelerators is negative");
  }
  if (Writes(o.sinks, Sink::kSummary) && o.summary_stream == nullptr) {
    return absl::InvalidArgumentError("Options::summary_stream is null but Sink::kSummary is set");
  }
  return absl::OkStatus();
}

// The bytes of one ring of `requested` bytes (ThreadBuffer rounds the events
// down to a power of two, at least 64).
uint64_t RingBytes(Bytes requested) {
  uint64_t events = 64;
  while (events * 2 <= requested.value / sizeof(Event)) events *= 2;
  return events * sizeof(Event);
}

// The recorder's cost per scope (two ReadTicks, the nesting count and a
// push, as PhaseScope does), measured on a
// private ring so that nothing is recorded. After the clock is chosen.
double CalibrateScopeCostNs() {
  constexpr int kIterations = 4096;
  ThreadBuffer ring(8192, 0, 0);
  const TimestampNs begin = NowNs();
  for (int i = 0; i < kIterations; ++i) {
    const bool outermost = ring.OpenScope();
    const int64_t start = ReadTicks();
    if (outermost) ring.SetOpenStart(start);
    ring.Push(Event{start, ReadTicks(), i, 0, EventKind::kRange, Phase::kOther, ring.ScopeDepth()});
    ring.CloseScope();
    if ((i & 4095) == 4095) ring.Drain([](const Event*, size_t) {});
  }
  return static_cast<double>(NowNs() - begin) / kIterations;
}

}  // namespace

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
  std::unordered_map<NameId, Report::Counter> counters;
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
  std::mutex mu;  // guards report.config, report.acceptance, target_met_ns, memory, report.memory,
                  // report.distributed, report.checkpoint, stop, latency_ms and its span
  struct MemorySample {
    int64_t current = -1, peak = -1;
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
};

// The session that OnStepBegin reports to.
std::atomic<Session::Impl*> g_active_impl{nullptr};

void Session::Impl::StartDeviceTimeline() {
  if (!options.device_timeline) return;
  cupti::CollectorOptions collector_options;
  collector_options.buffer_bytes = options.cupti_buffer_bytes.value;
  absl::StatusOr<std::unique_ptr<cupti::Collector>> started =
      cupti::Collector::Start(collector_options);
  if (!started.ok()) {
    std::string reason(started.status().message());
    constexpr std::string_view kPrefix = "CUPTI unavailable: ";
    if (reason.rfind(kPrefix, 0) == 0) reason.erase(0, kPrefix.size());
    device_status = fmt::format("unavailable ({})", reason);
    std::fprintf(stderr, "trainscope: CUPTI unavailable: %s; host-only analysis\n", reason.c_str());
    return;
  }
  collector = std::move(*started);
  device_status = "collected";
  const bool windowed = options.profile_start_step >= 0 || options.profile_stop_step >= 0;
  if (windowed) {
    collector->SetActive(options.profile_start_step <= 0);
    detail::g_step_hook.store(true, std::memory_order_relaxed);
  }
}

void Session::Impl::StartFold() {
  analysis::RunFoldOptions fold_options;
  fold_options.process_start_ns = process_start.monotonic_ns;
  fold_options.warmup_override = options.warmup_steps;
  if (device_status == "collected") {
    fold_options.window_first_step = options.profile_start_step;
    fold_options.window_end_step = options.profile_stop_step;
  }
  fold_options.device = collector != nullptr;
  fold = std::make_unique<analysis::RunFold>(
      fold_options, [this](Report::Step& row) { WriteStepRow(row); },
      [this](const ground::Timeline& released) {
        if (windows != nullptr) windows->AddDevice(released);
      });
  ground::Timeline& input = fold->input();
  async_track =
      input.AddTrack({ground::TrackKind::kHostAsync, report.run.pid, 0, "cross-thread ranges"});
  step_name = input.Intern("step");
}

// One drained event into the fold (or the counters).
inline void Session::Impl::Fold(const Event& e, uint32_t track) {
  ground::Timeline& input = fold->input();
  if (e.kind == EventKind::kCounter) {
    ++counter_events;
    auto [it, added] = counters.try_emplace(e.value);
    Report::Counter& c = it->second;
    if (added) {
      c.name = std::string(LookupName(e.value));
      c.min = c.max = e.end_ns;
    }
    c.min = std::min(c.min, e.end_ns);
    c.max = std::max(c.max, e.end_ns);
    c.mean += (static_cast<double>(e.end_ns) - c.mean) / static_cast<double>(++c.samples);
    return;
  }
  // Filled where it is kept (Timeline::Append).
  ground::Interval& interval = input.Append();
  interval.start_ns = e.start_ns;
  interval.end_ns = std::max(e.start_ns, e.end_ns);
  interval.step = e.step;
  interval.phase = e.phase;
  interval.track = track;
  latest_end_ns = std::max(latest_end_ns, e.end_ns);
  if (e.kind == EventKind::kStep) {
    interval.kind = ground::IntervalKind::kStep;
    interval.value = e.value;
    interval.name = step_name;
  } else {
    // A NameId not from InternName (a caller's own number) goes to the map.
    uint32_t& name = e.value < kDenseNames ? DenseName(e.value) : sparse_names[e.value];
    if (name == 0) name = input.Intern(LookupName(e.value)) + 1;
    interval.name = name - 1;
    interval.kind = e.kind == EventKind::kAsync ? ground::IntervalKind::kAsyncRange
                                                : ground::IntervalKind::kHostRange;
    if (e.kind == EventKind::kAsync) interval.track = async_track;
  }
}

// A step's row: its memory sample, then steps.jsonl.
void Session::Impl::WriteStepRow(Report::Step& row) {
  // A run that never samples memory skips the lock, a row at a time.
  if (memory_sampled.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = memory.find(row.index);
    if (it != memory.end()) {
      row.memory_bytes = it->second.current;
      row.peak_memory_bytes = it->second.peak;
      report.memory.peak_bytes = std::max(report.memory.peak_bytes, it->second.peak);
      report.memory.last_bytes = it->second.current;
      memory.erase(it);
    }
  }
  if (steps_file != nullptr) steps_file->Append(row);
  if (windows != nullptr) windows->StepFolded(row.index);
}

void Session::Impl::ChooseClock() {
  std::string why_not;
  if (options.clock == Options::Clock::kAuto && ground::TscUsable(&why_not)) {
    tsc = true;
    clock_note = "tsc";
    // Two points 200 us apart: a first rate until the drains add better ones.
    calibration.Add(ground::ReadTickPair());
    const TimestampNs until = NowNs() + 200000;
    while (NowNs() < until) {
    }
    const ground::TickPair second = ground::ReadTickPair();
    calibration.Add(second);
    last_calibration_ns = second.ns;
  } else {
    tsc = false;
    clock_note = options.clock == Options::Clock::kMonotonic
                     ? "clock_monotonic (Options::clock)"
                     : fmt::format("clock_monotonic ({})", why_not);
  }
  detail::g_ticks_are_tsc.store(tsc, std::memory_order_relaxed);
}

void Session::Impl::DrainOnce(bool final) {
  // A calibration point at least every 10 ms, before the rings: what they
  // hold converts between points, or just ahead of the last.
  if (tsc) {
    const ground::TickPair point = ground::ReadTickPair();
    if (final || point.ns - last_calibration_ns >= 10000000) {
      calibration.Add(point);
      last_calibration_ns = point.ns;
    }
  }
  // Read before the rings: a step open now has not been drained; one closed
  // now has (StepScope resets this after its push). Not the same as its
  // thread's open scope (`bound` below): that one is waited for at most
  // fold_delay_ms while async ranges are open, an open step always.
  const TimestampNs now = NowNs();
  const int64_t open_ticks = detail::g_step_open_since.load(std::memory_order_acquire);
  // With the TSC, 1 ms of margin: the same tick may convert a little earlier
  // at a later drain (interpolated then, extrapolated now), and the fold
  // must not have passed the step's start by then.
  constexpr TimestampNs kMargin = 1000000;
  const int64_t open_since = open_ticks < 0 ? -1 : (tsc ? ToNs(open_ticks) - kMargin : open_ticks);
  // Read before the rings too: an async range has no thread's scope to
  // stand for it, and device sync times come late; while one is open, or
  // once the run measures them, the fold waits fold_delay_ms.
  const uint64_t async = detail::g_async.load(std::memory_order_seq_cst);
  const bool wait_full_delay =
      (async & 0xFFFFFFFF) != 0 || device_sync_expected.load(std::memory_order_relaxed);
  // An async range that began since the last drain and ended since may be
  // in a ring after a cut it began before: fold this drain's rings whole.
  const bool async_quiet = !wait_full_delay && async >> 32 == async_quiet_begun;
  async_quiet_begun = wait_full_delay ? ~uint64_t{0} : async >> 32;
  snapshot_registrations = recorder::ThreadRegistry::Get().registrations();  // before: none missed
  entries = recorder::ThreadRegistry::Get().Snapshot();
  if (threads.size() < entries.size()) threads.resize(entries.size());
  fullest = 0;
  // What each thread has open, read before any ring is drained: an Event
  // not in this drain began at or after its thread's outermost open scope,
  // or after `now` (a thread registered since the snapshot too). So nothing
  // still to come begins before `bound`, and the fold may pass everything
  // else up to it. The margin, as for the step: a tick converts a little
  // differently at a later drain.
  TimestampNs bound = now - kMargin;
  // For the rate and the segment policy: intervals, from the rings (not
  // counters) and from CUPTI.
  const int64_t intervals_before = recorded - counter_events;
  size_t busiest = entries.size();  // drained last, folded as it is drained
  size_t most = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].buffer == nullptr) continue;
    const int64_t since = entries[i].buffer->open_since();
    if (since == ThreadBuffer::kOpening) {
      bound = std::numeric_limits<TimestampNs>::min();  // a start being read: wait
    } else if (since != ThreadBuffer::kNothingOpen) {
      bound = std::min(bound, tsc ? ToNs(since) - kMargin : since);
    }
    if (const size_t pending = entries[i].buffer->pending(); pending >= most) {
      most = pending;
      busiest = i;
    }
  }
  if (open_since >= 0) bound = std::min(bound, open_since);
  if (memory_sampled.load(std::memory_order_acquire)) {
    bound = std::min(bound, last_memory_ns.load(std::memory_order_acquire));
  }
  // The busiest ring is folded chunk by chunk while the chunk is in cache,
  // up to its last cut (an Event with no scope open around it: no later
  // Event of the thread began before its end), once every other ring is in
  // the fold. Not with an async range open, nor with device records, which
  // come after the rings.
  const bool stream = async_quiet && collector == nullptr;
  // A slot's last thread, also after it exited (an async range that began
  // there may end elsewhere later).
  auto tid_of = [this](uint16_t index) {
    return index < threads.size() ? threads[index].os_tid : 0u;
  };
  recorder::ThreadRegistry& registry = recorder::ThreadRegistry::Get();
  auto drain_ring = [&](size_t i) {
    if (entries[i].buffer == nullptr) return;  // a free slot
    const bool streaming = stream && i == busiest;
    ThreadState& thread = threads[i];
    if (thread.buffer != entries[i].buffer.get()) {  // a new thread in the slot
      thread.buffer = entries[i].buffer.get();
      thread.os_tid = entries[i].os_tid;
      thread.written_name.clear();
    }
    // Read before the drain: a thread retires its ring after its last push.
    const bool retired = entries[i].buffer->retired();
    if (thread.track == kNoTrack) {
      thread.track =
          fold->input().AddTrack({ground::TrackKind::kHostThread, report.run.pid, thread.os_tid,
                                  recorder::ThreadRegistry::Get().ThreadName(thread.os_tid)});
    }
    if (trace != nullptr) {
      std::string name = recorder::ThreadRegistry::Get().ThreadName(thread.os_tid);
      if (!name.empty() && name != thread.written_name) {
        trace->NameThread(thread.os_tid, name);
        thread.written_name = std::move(name);
      }
    }
    const size_t drained = entries[i].buffer->Drain([&](Event* events, size_t count) {
      recorded += static_cast<int64_t>(count);
      // In chunks of 4096 (128 KB): each event is converted, folded and
      // shown to the trace windows while it is in cache, not in three passes
      // over a burst of megabytes.
      ground::TickCalibration::Hint hint;  // a ring's ticks come in about increasing order
      constexpr size_t kChunk = 4096;
      if (tsc && windows != nullptr && converted.size() < kChunk) converted.resize(kChunk);
      for (size_t from = 0; from < count; from += kChunk) {
        const size_t to = std::min(count, from + kChunk);
        const Event* chunk = events + from;
        TimestampNs cut = std::numeric_limits<TimestampNs>::min();
        auto note = [&](const Event& e) {  // converted
          if (e.kind == EventKind::kStep) {
            newest_step_start_ns = std::max(newest_step_start_ns, e.start_ns);
          }
          if (e.aux == 1 && (e.kind == EventKind::kRange || e.kind == EventKind::kStep)) {
            cut = e.end_ns;  // a ring is in end order
          }
        };
        if (tsc) {  // ticks to the session clock
          Event* out = windows != nullptr ? converted.data() : nullptr;
          for (size_t k = from; k < to; ++k) {
            Event e = events[k];
            e.start_ns = calibration.ToNs(e.start_ns, &hint);
            if (e.kind != EventKind::kCounter) e.end_ns = calibration.ToNs(e.end_ns, &hint);
            if (out != nullptr) out[k - from] = e;
            note(e);
            Fold(e, thread.track);
          }
          if (out != nullptr) chunk = out;
        } else {
          for (size_t k = from; k < to; ++k) {
            note(events[k]);
            Fold(events[k], thread.track);
          }
        }
        if (windows != nullptr) windows->AddEvents(thread.os_tid, chunk, to - from, tid_of);
        if (const TimestampNs up_to = std::min({bound, cut, StepGate()});
            streaming && up_to > fold->watermark()) {
          fold->Advance(up_to);
          continue;
        }
        if (to - from < kChunk) break;
        // A burst larger than the budget is folded as it is converted; the
        // fold takes batches of up to 16384 without a copy (so, taken here
        // from 12288, the input never grows past its room).
        if ((fold->held() + fold->input().size()) * sizeof(ground::Interval) >
            options.fold_buffer_bytes.value) {
          fold->Advance(latest_end_ns);  // this ring's later events end after it
        } else if (fold->input().size() >= 12288) {
          fold->Take();
        }
      }
    });
    fullest = std::max(
        fullest, static_cast<double>(drained) / static_cast<double>(entries[i].buffer->capacity()));
    if (retired) {  // drained to its last event: give the ring back
      released_dropped += static_cast<int64_t>(entries[i].buffer->dropped());
      registry.Release(static_cast<uint16_t>(i), entries[i].buffer.get());
      if (windows != nullptr) windows->ForgetThread(thread.os_tid);
      entries[i].buffer.reset();
    }
  };
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i != busiest) drain_ring(i);
  }
  if (busiest < entries.size()) drain_ring(busiest);  // the busiest last
  // Read before taking the records: what completes in between comes next time.
  const TimestampNs device_complete =
      collector != nullptr ? collector->CompleteBefore() : std::numeric_limits<TimestampNs>::max();
  const size_t before_device = fold->input().size();
  if (collector != nullptr) collector->AppendTo(&fold->input());
  const size_t drained_intervals =
      static_cast<size_t>(recorded - counter_events - intervals_before) +
      (fold->input().size() - before_device);
  // Fold what no open range can still reach: up to `bound`, but waiting at
  // most fold_delay_ms for a range still open (or less when the intervals of
  // that long would not fit in half of fold_buffer_bytes at the rate they
  // come), and not into the open step; at once when the held intervals
  // exceed the budget.
  const auto budget =
      static_cast<double>(options.fold_buffer_bytes.value / 2 / sizeof(ground::Interval));
  const auto arrived = static_cast<double>(drained_intervals);
  if (last_drain_ns > 0 && now > last_drain_ns) {
    const double rate = arrived / static_cast<double>(now - last_drain_ns);
    intervals_per_ns = intervals_per_ns == 0 ? rate : 0.8 * intervals_per_ns + 0.2 * rate;
  }
  // The time since the last drain: a segment folds at least that much, or
  // the fold would fall behind the drains when more than a slice comes
  // between two of them (several busy threads).
  const TimestampNs since_drain =
      last_drain_ns > 0 && now > last_drain_ns ? now - last_drain_ns : 0;
  last_drain_ns = now;
  auto delay = static_cast<TimestampNs>(options.fold_delay_ms) * 1000000;
  if (intervals_per_ns > 0) {
    delay = std::min(delay, static_cast<TimestampNs>(budget / intervals_per_ns));
  }
  // Up to what no thread has open (bound), waiting at most `delay` for a
  // scope or async range still open.
  TimestampNs watermark = now - delay;
  if (!wait_full_delay) watermark = std::max(watermark, std::min(bound, StepGate()));
  if (open_since >= 0) watermark = std::min(watermark, open_since);
  // Not past device work whose records CUPTI has not handed back yet.
  watermark = std::min(watermark, device_complete);
  const uint64_t held = (fold->held() + fold->input().size()) * sizeof(ground::Interval);
  if (held > options.fold_buffer_bytes.value) watermark = now;
  // How far: drain::SegmentEnd (segment_policy.h).
  drain::SegmentInput segment;
  segment.now = now;
  segment.watermark = watermark;
  segment.folded = fold->watermark();
  segment.since_drain = since_drain;
  segment.intervals_per_ns = intervals_per_ns;
  segment.quiet = drained_intervals == 0;
  segment.over = held > options.fold_buffer_bytes.value / 2;
  const TimestampNs to = drain::SegmentEnd(segment);
  TakeDeviceSync();
  fold->Advance(to);
  if (steps_file != nullptr && steps_status.ok()) steps_status.Update(steps_file->Flush());
}

void Session::Impl::TakeDeviceSync() {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (device_sync.empty()) return;
    device_sync_taken.swap(device_sync);
  }
  int64_t late = 0;
  for (const auto& [step, ns] : device_sync_taken) late += fold->AddStepSyncTime(step, ns) ? 0 : 1;
  device_sync_taken.clear();
  if (late > 0) {
    std::lock_guard<std::mutex> lock(mu);
    report.distributed.device_sync_late += late;
  }
}

void Session::Impl::DrainLoop() {
  using Clock = std::chrono::steady_clock;
  auto next_publish =
      Clock::now() + std::chrono::milliseconds(options.trace_checkpoint_interval_ms);
  // The wait adapts to the fill rate: when a ring came back more than a
  // quarter full it halves (down to 1 ms), and it doubles, up to
  // flush_interval_ms, when they come back under a sixteenth full. Rings
  // are never signalled from the hot path.
  const auto longest = std::chrono::microseconds(int64_t{1000} * options.flush_interval_ms);
  const auto shortest = std::min(longest, std::chrono::microseconds(1000));
  // From the shortest: a producer that starts fast fills a ring before a
  // first wait of flush_interval_ms ends; a slow one lets it grow in a few
  // drains.
  auto wait = shortest;
  // Between drains it looks at the rings every millisecond (one atomic load
  // a ring, in the last drain's snapshot, and one for new threads) and
  // drains at once when one is a quarter full or a thread registered: a
  // producer that starts fast after a quiet spell, when the wait had grown
  // to flush_interval_ms, is caught within a millisecond instead of after
  // its ring overflowed.
  constexpr auto kLook = std::chrono::microseconds(1000);
  // A ring at least this full drains at once, and halves the wait.
  constexpr double kFilling = 0.25;
  auto filling = [this] {
    // A thread registered since that snapshot: its ring is not in it.
    if (recorder::ThreadRegistry::Get().registrations() != snapshot_registrations) return true;
    for (const recorder::ThreadEntry& entry : entries) {
      if (entry.buffer != nullptr && static_cast<double>(entry.buffer->pending()) >=
                                         kFilling * static_cast<double>(entry.buffer->capacity())) {
        return true;
      }
    }
    return false;
  };
  auto due = Clock::now() + wait;
  std::unique_lock<std::mutex> lock(mu);
  while (!stop) {
    wake.wait_for(lock, std::min<Clock::duration>(due - Clock::now(), kLook));
    if (stop) break;
    if (Clock::now() < due && !filling()) continue;
    lock.unlock();
    DrainOnce();
    if (fullest > kFilling) {
      wait = std::max(shortest, wait / 2);
    } else if (fullest < 1.0 / 16) {
      wait = std::min(longest, wait * 2);
    }
    if (windows != nullptr && trace_status.ok()) {
      const bool publish = Clock::now() >= next_publish;
      trace_status.Update(windows->Flush(publish, false));
      if (publish)
        next_publish =
            Clock::now() + std::chrono::milliseconds(options.trace_checkpoint_interval_ms);
    }
    due = Clock::now() + wait;
    lock.lock();
  }
}

absl::Status Session::Impl::WriteOutputs() {
  absl::Status status = trace_status;
  if (windows != nullptr && status.ok()) status.Update(windows->Flush(true, true));
  if (windows != nullptr) {
    const exporter::TraceWindows::Stats& stats = windows->stats();
    Report::Trace& t = report.trace;
    t.windows_written = stats.windows_written;
    t.windows_dropped = stats.windows_dropped;
    t.first_window_step = stats.first_window_step;
    t.first_window_steps = stats.first_window_steps;
    t.slowest.clear();
    for (const auto& slow : stats.slowest) t.slowest.push_back({slow.index, slow.duration_ms});
    t.bytes = static_cast<int64_t>(stats.bytes);
  }
  status.Update(steps_status);
  if (steps_file != nullptr) status.Update(steps_file->Close());
  if (Writes(options.sinks, Sink::kReportJson)) {
    status.Update(ground::WriteFileAtomically(
        fmt::format("{}/{}", options.output_dir, RankedFile(options, "report")),
        exporter::ReportToJson(report)));
  }
  if (Writes(options.sinks, Sink::kSummary)) {
    const std::string summary = exporter::FormatSummary(report);
    std::fputs(summary.c_str(), options.summary_stream);
    if (Writes(options.sinks, Sink::kTraceJson | Sink::kReportJson)) {
      std::fprintf(
          options.summary_stream, "outputs: %s/%s%s\n", options.output_dir.c_str(),
          Writes(options.sinks, Sink::kTraceJson) ? (RankedFile(options, "trace") + " ").c_str()
                                                  : "",
          Writes(options.sinks, Sink::kReportJson)
              ? (RankedFile(options, "report") + " " + RankedFile(options, "steps", "jsonl"))
                    .c_str()
              : "");
    }
    std::fflush(options.summary_stream);
  }
  return status;
}

absl::StatusOr<Session> Session::Start(Options options) {
  if (const char* dir = std::getenv("TRAINSCOPE_OUTPUT_DIR"); dir != nullptr && *dir != 0) {
    options.output_dir = dir;
  }
  if (absl::Status status = ValidateOptions(options); !status.ok()) return status;
  if (g_session_active.exchange(true)) {
    return absl::FailedPreconditionError(
        "another trainscope::Session is active in this process; Finish() it first");
  }
  auto impl = std::make_unique<Impl>();
  auto fail = [](absl::Status status) {
    g_session_active.store(false);
    return status;
  };
  if (Writes(options.sinks, Sink::kTraceJson | Sink::kReportJson)) {
    if (absl::Status status = ground::EnsureWritableDirectory(options.output_dir); !status.ok()) {
      return fail(status);
    }
  }
  absl::StatusOr<environment::ProcessStart> start = environment::ReadProcessStart();
  if (!start.ok()) return fail(start.status());
  impl->process_start = *start;
  if (options.submit_time_unix_s) {
    impl->submit_unix_s = options.submit_time_unix_s;
  } else if (const char* text = std::getenv("TRAINSCOPE_SUBMIT_TIME"); text && *text) {
    absl::StatusOr<double> submit = environment::ParseSubmitTime(text);
    if (!submit.ok()) {
      return fail(absl::InvalidArgumentError(
          fmt::format("TRAINSCOPE_SUBMIT_TIME: {}", std::string(submit.status().message()))));
    }
    impl->submit_unix_s = *submit;
  }
  environment::DescribeEnvironment(options, &impl->report);
  impl->report.run.started_at = environment::FormatIso8601(impl->process_start.unix_s);
  impl->report.resource_request = options.resource_request;
  impl->report.config = options.config;
  impl->report.run.rank = options.rank;
  impl->report.run.world_size = options.world_size;
  impl->options.clock = options.clock;
  impl->ChooseClock();
  impl->scope_cost_ns = CalibrateScopeCostNs();
  if (Writes(options.sinks, Sink::kTraceJson)) {
    auto trace = exporter::TraceWriter::Open(options.output_dir, RankedFile(options, "trace"),
                                             options.run_name, impl->report.run.pid);
    if (!trace.ok()) return fail(trace.status());
    impl->trace = std::move(*trace);
    exporter::TraceWindowOptions windows;
    windows.first_steps = options.trace_first_steps;
    windows.warmup_steps = options.warmup_steps;
    windows.skip_first = options.trace_schedule.skip_first;
    windows.wait = options.trace_schedule.wait;
    windows.warmup = options.trace_schedule.warmup;
    windows.active = options.trace_schedule.active;
    windows.repeat = options.trace_schedule.repeat;
    windows.slowest_steps = options.trace_slowest_steps;
    windows.budget_bytes = options.trace_budget_bytes.value;
    impl->windows = std::make_unique<exporter::TraceWindows>(impl->trace.get(), windows);
  }
  if (Writes(options.sinks, Sink::kReportJson)) {
    auto steps =
        exporter::StepsWriter::Open(options.output_dir, RankedFile(options, "steps", "jsonl"));
    if (!steps.ok()) return fail(steps.status());
    impl->steps_file = std::move(*steps);
  }
  impl->options = std::move(options);
  impl->StartDeviceTimeline();
  impl->StartFold();
  impl->generation = g_last_generation.fetch_add(1) + 1;
  if (impl->generation == 0) impl->generation = g_last_generation.fetch_add(1) + 1;
  const size_t capacity = impl->options.buffer_bytes_per_thread.value / sizeof(Event);
  recorder::ThreadRegistry::Get().BeginSession(impl->generation, capacity);
  detail::g_current_step.store(-1, std::memory_order_relaxed);
  detail::g_step_open_since.store(-1, std::memory_order_relaxed);
  if (impl->options.nvtx) nvtx::Initialize();
  detail::g_nvtx_enabled.store(impl->options.nvtx && nvtx::Available(), std::memory_order_relaxed);
  detail::g_generation.store(impl->generation, std::memory_order_release);
  Impl* raw = impl.get();
  g_active_impl.store(raw, std::memory_order_release);
  impl->drainer = std::thread([raw] {
    pthread_setname_np(pthread_self(),
                       "tscope-drain");  // as top and gdb show it (15 chars at most)
    raw->DrainLoop();
  });
  return Session(std::shared_ptr<Impl>(std::move(impl)), /*owner=*/true);
}

namespace detail {
void OnStepBegin(int64_t step) noexcept {
  Session::Impl* impl = g_active_impl.load(std::memory_order_acquire);
  if (impl != nullptr && impl->collector != nullptr) {
    impl->collector->SetActive(impl->InProfileWindow(step));
  }
}
}  // namespace detail

Session::Session(std::shared_ptr<Impl> impl, bool owner) : impl_(std::move(impl)), owner_(owner) {}
Session::Session(Session&& other) noexcept = default;
Session& Session::operator=(Session&& other) noexcept {
  if (this != &other) {
    if (owner_ && impl_ != nullptr && !impl_->finished) (void)Finish();
    impl_ = std::move(other.impl_);
    owner_ = other.owner_;
  }
  return *this;
}

namespace internal {
Session BorrowSession(Session& session) { return Session(session.impl_, /*owner=*/false); }
}  // namespace internal

Session::~Session() {
  if (!owner_ || impl_ == nullptr || impl_->finished) return;
  absl::StatusOr<Report> report = Finish();
  if (!report.ok()) {
    std::fprintf(stderr, "trainscope: finishing session '%s': %s\n",
                 impl_->options.run_name.c_str(), report.status().ToString().c_str());
  }
}

bool Session::active() const { return impl_ != nullptr && !impl_->finished; }

const Options& Session::options() const { return impl_->options; }

void Session::RecordStepMemory(int64_t step, int64_t current_bytes, int64_t peak_bytes,
                               std::string_view source) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto& memory = impl_->memory;
  memory[step] = {current_bytes, peak_bytes};
  // Here too, not only with the step's row: a sample that came after its
  // row (the first, or after fold_delay_ms) still counts in the peak.
  impl_->report.memory.peak_bytes = std::max(impl_->report.memory.peak_bytes, peak_bytes);
  impl_->last_memory_ns.store(NowNs(), std::memory_order_release);
  impl_->memory_sampled.store(true, std::memory_order_release);
  if (memory.size() > Impl::kMemoryKept) {  // samples of steps that never came
    auto oldest = std::min_element(memory.begin(), memory.end(),
                                   [](const auto& a, const auto& b) { return a.first < b.first; });
    memory.erase(oldest);
  }
  impl_->report.memory.source = std::string(source);
}

void Session::SetDistributedBackend(std::string_view backend) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->report.distributed.backend = std::string(backend);
}

void Session::NoteMissingRanks(const std::vector<int>& ranks, std::string_view error) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<int>& missing = impl_->report.distributed.missing_ranks;
  for (int r : ranks) {
    if (std::find(missing.begin(), missing.end(), r) == missing.end()) missing.push_back(r);
  }
  std::sort(missing.begin(), missing.end());
  if (!error.empty()) impl_->report.distributed.error = std::string(error);
}

void Session::NoteCheckpointSave(double blocking_s, double persist_s, uint64_t bytes,
                                 bool committed) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Report::Checkpoint& c = impl_->report.checkpoint;
  if (!committed) {
    ++c.failed;
    return;
  }
  ++c.saves;
  c.blocking_s += blocking_s;
  c.blocking_max_s = std::max(c.blocking_max_s, blocking_s);
  c.persist_s += persist_s;
  c.bytes += bytes;
  impl_->last_save_ns = NowNs();
  if (c.saves == 1) impl_->first_save_ns = impl_->last_save_ns;
}

void Session::ExpectStepSyncTimes() {
  if (impl_ != nullptr) impl_->device_sync_expected.store(true, std::memory_order_relaxed);
}

void Session::AddStepSyncTime(int64_t step, double seconds) {
  if (impl_ == nullptr || !(seconds >= 0)) return;
  impl_->device_sync_expected.store(true, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->report.distributed.device_sync_s += seconds;
  if (impl_->device_sync.size() >= Impl::kDeviceSyncWaiting) {
    ++impl_->report.distributed.device_sync_late;
    return;
  }
  impl_->device_sync.emplace_back(step, static_cast<TimestampNs>(seconds * 1e9));
}

void Session::NoteResume(int64_t from_step, int64_t interrupted_at_step, double restore_s) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Report::Checkpoint& c = impl_->report.checkpoint;
  c.resumed_from_step = from_step;
  c.recomputed_steps = interrupted_at_step > from_step ? interrupted_at_step - from_step : 0;
  c.restore_s = restore_s;
}

int Session::AddFinishHook(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->finish_hooks.emplace_back(++impl_->next_hook, std::move(hook));
  return impl_->next_hook;
}

void Session::RemoveFinishHook(int id) {
  if (impl_ == nullptr) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto& hooks = impl_->finish_hooks;
  hooks.erase(
      std::remove_if(hooks.begin(), hooks.end(), [&](const auto& h) { return h.first == id; }),
      hooks.end());
}

std::string Session::trace_file() const { return RankedFile(impl_->options, "trace"); }
std::string Session::report_file() const { return RankedFile(impl_->options, "report"); }

// The counters' statistics and the checkpoint figures. Called with mu
// held, after the fold finished.
void Session::Impl::SummarizeCountersAndCheckpoints() {
  // Checkpoints: throughput, restart delay, and the Young/Daly advice
  // (analysis/checkpoint_advice.h).
  Report::Checkpoint& c = report.checkpoint;
  c.persist_bytes_per_s = c.persist_s > 0 ? c.bytes / c.persist_s : 0;
  const Report::Step& first = fold->first_row();
  if (c.resumed_from_step >= 0 && first.index >= 0) {
    c.restart_delay_s = first.start_s + first.duration_ms / 1e3;
  }
  if (c.saves >= 2) {
    c.interval_s = (last_save_ns - first_save_ns) / 1e9 / static_cast<double>(c.saves - 1);
  }
  analysis::AdviseCheckpointInterval(options.checkpoint_mtbf_hours, &c);
  report.counters.clear();
  for (const auto& [id, counter] : counters) report.counters.push_back(counter);
  std::sort(report.counters.begin(), report.counters.end(),
            [](const Report::Counter& a, const Report::Counter& b) { return a.name < b.name; });
}

const std::string& Session::output_dir() const { return impl_->options.output_dir; }

void Session::SetConfig(std::string_view key, std::string_view value) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (auto& [k, v] : impl_->report.config) {
    if (k == key) {
      v = std::string(value);
      return;
    }
  }
  impl_->report.config.emplace_back(std::string(key), std::string(value));
}

void Session::SetQualityTarget(std::string_view metric, double target, bool higher_is_better) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Acceptance& a = impl_->report.acceptance;
  if (a.metric != metric) {
    a = Acceptance{};
    impl_->target_met_ns = 0;
    a.metric = std::string(metric);
  }
  a.target = target;
  a.higher_is_better = higher_is_better;
  if (a.value) a.passed = higher_is_better ? *a.value >= target : *a.value <= target;
}

absl::Status Session::RecordQuality(std::string_view metric, double value) {
  const TimestampNs now = NowNs();
  std::lock_guard<std::mutex> lock(impl_->mu);
  Acceptance& a = impl_->report.acceptance;
  if (!a.metric.empty() && a.metric != metric) {
    return absl::InvalidArgumentError(fmt::format(
        "RecordQuality(\"{}\"): the quality metric of this run is \"{}\"", metric, a.metric));
  }
  if (std::isnan(value)) {
    return absl::InvalidArgumentError(fmt::format("RecordQuality(\"{}\"): value is NaN", metric));
  }
  a.metric = std::string(metric);
  a.value = value;
  ++a.evaluations;
  if (a.target) {
    a.passed = a.higher_is_better ? value >= *a.target : value <= *a.target;
    if (*a.passed && impl_->target_met_ns == 0) impl_->target_met_ns = now;
  }
  return absl::OkStatus();
}

absl::Status Session::RecordLatency(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) {
    return absl::InvalidArgumentError(fmt::format(
        "RecordLatency({}): a latency is a finite, non-negative number of seconds", seconds));
  }
  const TimestampNs now = NowNs();
  std::lock_guard<std::mutex> lock(impl_->mu);
  const auto arrival = now - static_cast<TimestampNs>(seconds * 1e9);
  if (impl_->latency_ms.count() == 0 || arrival < impl_->first_arrival_ns) {
    impl_->first_arrival_ns = arrival;
  }
  impl_->last_latency_ns = now;
  impl_->latency_ms.Add(seconds * 1e3);
  return absl::OkStatus();
}

void Session::SetAcceptance(std::string_view metric, double target, double value,
                            bool higher_is_better) {
  SetQualityTarget(metric, target, higher_is_better);
  // Only a NaN is refused, and then the run simply did not reach its target.
  (void)RecordQuality(metric, value);
}

absl::StatusOr<Report> Session::Finish() {
  if (impl_ == nullptr || impl_->finished) {
    return absl::FailedPreconditionError("trainscope session already finished");
  }
  if (!owner_) {
    return absl::FailedPreconditionError(
        "trainscope: Finish() on a borrowed session handle (StepScope::session() in Steps(), "
        "or a checkpointer's); finish the Session object itself");
  }
  Impl& s = *impl_;
  {
    std::vector<std::pair<int, std::function<void()>>> hooks;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      hooks = s.finish_hooks;
    }
    for (auto& [id, hook] : hooks) {  // unlocked: hooks may record into the session
      try {
        hook();
      } catch (const std::exception& e) {  // a hook's failure must not stop the report
        std::fprintf(stderr, "trainscope: a finish hook failed: %s\n", e.what());
      }
    }
  }
  const TimestampNs finish_ns = NowNs();
  detail::g_generation.store(0, std::memory_order_release);
  detail::g_step_hook.store(false, std::memory_order_relaxed);
  g_active_impl.store(nullptr, std::memory_order_release);
  detail::g_nvtx_enabled.store(false, std::memory_order_relaxed);
  detail::g_current_step.store(-1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.stop = true;
  }
  s.wake.notify_all();
  s.drainer.join();
  s.DrainOnce(/*final=*/true);
  s.finished = true;

  Report::Events& events = s.report.events;
  recorder::ThreadRegistry& registry = recorder::ThreadRegistry::Get();
  events.threads = static_cast<int>(registry.registered());
  events.buffer_bytes_per_thread =
      events.threads == 0 ? 0 : static_cast<int64_t>(RingBytes(s.options.buffer_bytes_per_thread));
  events.recorder_bytes = events.buffer_bytes_per_thread * registry.peak_live();
  // Lost: events refused for want of a ring slot, those of full rings (freed
  // or not), those pushed since the final drain (scopes that ended during
  // Finish), and the step still open, whose event comes too late.
  events.dropped = registry.refused() + s.released_dropped;
  for (const recorder::ThreadEntry& entry : s.entries) {
    if (entry.buffer == nullptr) continue;
    events.dropped += static_cast<int64_t>(entry.buffer->dropped() + entry.buffer->pending());
  }
  if (detail::g_step_open_since.load(std::memory_order_acquire) >= 0) ++events.dropped;
  events.recorded = s.recorded;
  events.clock = s.clock_note;
  if (s.tsc) {
    events.tsc_hz = s.calibration.tsc_hz();
    events.clock_calibrations = s.calibration.points();
    events.clock_max_error_ns = s.calibration.max_error_ns();
  }
  recorder::ThreadRegistry::Get().EndSession();

  analysis::RunClock clock;
  clock.process_start_ns = s.process_start.monotonic_ns;
  clock.finish_ns = finish_ns;
  clock.process_start_unix_s = s.process_start.unix_s;
  clock.submit_unix_s = s.submit_unix_s;
  Report::DeviceTimeline& device = s.report.device_timeline;
  device.status = s.device_status;
  if (s.collector != nullptr) {
    if (absl::Status stopped = s.collector->Stop(); !stopped.ok()) {
      device.status =
          fmt::format("collected, then failed to stop: {}", std::string(stopped.message()));
    }
    s.collector->AppendTo(&s.fold->input());
    const cupti::CollectorStats stats = s.collector->stats();
    device.records = stats.records;
    device.dropped = stats.dropped;
    device.kernels = stats.kernels;
    s.collector.reset();
  }
  // Unlocked: its step rows take mu for the memory samples. SetConfig and
  // SetAcceptance touch other fields.
  s.TakeDeviceSync();
  s.fold->Finish(clock, &s.report);
  std::lock_guard<std::mutex> lock(s.mu);
  s.SummarizeCountersAndCheckpoints();
  if (s.target_met_ns != 0) {
    Acceptance& a = s.report.acceptance;
    a.time_to_target_s = (s.target_met_ns - s.process_start.monotonic_ns) / 1e9;
    if (s.report.timing.steps > 0) {
      a.time_to_target_from_first_step_s = *a.time_to_target_s - s.report.timing.startup_s;
    }
  }
  if (s.latency_ms.count() > 0) {
    Report::Serving& serving = s.report.serving.emplace();
    serving.requests = s.latency_ms.count();
    serving.p50_ms = s.latency_ms.Percentile(50);
    serving.p90_ms = s.latency_ms.Percentile(90);
    serving.p99_ms = s.latency_ms.Percentile(99);
    serving.max_ms = s.latency_ms.max();
    const double span_s = (s.last_latency_ns - s.first_arrival_ns) / 1e9;
    serving.requests_per_s = span_s > 0 ? serving.requests / span_s : 0;
  }
  s.report.overhead.per_scope_ns = s.scope_cost_ns;
  s.report.overhead.estimated_share =
      s.report.timing.total_s > 0
          ? events.recorded * s.scope_cost_ns / (s.report.timing.total_s * 1e9)
          : 0;

  absl::Status status = s.WriteOutputs();
  g_session_active.store(false);
  if (!status.ok()) return status;
  return s.report;
}

}  // namespace trainscope
