// The session's drainer: rings (and CUPTI buffers) drained into the fold,
// the trace windows and the steps file, on its own thread. See
// session_impl.h and docs/architecture.md, "Data flow".
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "absl/time/time.h"
#include "sdk/ground/locks.h"
#include "sdk/ground/timeline.h"
#include "sdk/session/segment_policy.h"
#include "sdk/session/session_impl.h"

namespace trainscope {

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
    internal::g_step_hook.store(true, std::memory_order_relaxed);
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
  // The fold's two callbacks: a step's row, joined with its memory sample,
  // and device work it has passed, both to the outputs.
  auto step_folded = [this](Report::Step& row) {
    notes.JoinMemory(&row);
    outputs.StepFolded(row);
  };
  auto device_released = [this](const ground::Timeline& released) {
    outputs.DeviceReleased(released);
  };
  fold = std::make_unique<analysis::RunFold>(fold_options, step_folded, device_released);
  ground::Timeline& input = fold->input();
  drain.async_track =
      input.AddTrack({ground::TrackKind::kHostAsync, report.run.pid, 0, "cross-thread ranges"});
  drain.step_name = input.Intern("step");
}

// One drained event into the fold (or the counters).
inline void Session::Impl::Fold(const Event& e, uint32_t track) {
  ground::Timeline& input = fold->input();
  if (e.kind == EventKind::kCounter) {
    ++drain.counter_events;
    auto [it, added] = drain.counters.try_emplace(e.value);
    Report::Counter& c = it->second.summary;
    it->second.series.Add(e.start_ns, e.end_ns);
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
  drain.latest_end_ns = std::max(drain.latest_end_ns, e.end_ns);
  if (e.kind == EventKind::kStep) {
    interval.kind = ground::IntervalKind::kStep;
    interval.value = e.value;
    interval.name = drain.step_name;
  } else {
    // A NameId not from InternName (a caller's own number) goes to the map.
    uint32_t& name = e.value < kDenseNames ? DenseName(e.value) : drain.sparse_names[e.value];
    if (name == 0) name = input.Intern(LookupName(e.value)) + 1;
    interval.name = name - 1;
    interval.kind = e.kind == EventKind::kAsync ? ground::IntervalKind::kAsyncRange
                                                : ground::IntervalKind::kHostRange;
    if (e.kind == EventKind::kAsync) interval.track = drain.async_track;
  }
}

void Session::Impl::ChooseClock() {
  std::string why_not;
  if (options.clock == Options::Clock::kAuto && ground::TscUsable(&why_not)) {
    tsc = true;
    clock_note = "tsc";
    // Two points 200 us apart: a first rate until the drains add better ones.
    drain.calibration.Add(ground::ReadTickPair());
    const TimestampNs until = NowNs() + 200000;
    while (NowNs() < until) {
    }
    const ground::TickPair second = ground::ReadTickPair();
    drain.calibration.Add(second);
    drain.last_calibration_ns = second.ns;
  } else {
    tsc = false;
    clock_note = options.clock == Options::Clock::kMonotonic
                     ? "clock_monotonic (Options::clock)"
                     : fmt::format("clock_monotonic ({})", why_not);
  }
  internal::g_ticks_are_tsc.store(tsc, std::memory_order_relaxed);
}

// A calibration point at least every 10 ms, before the rings: what they
// hold converts between points, or just ahead of the last.
void Session::Impl::AddCalibrationPoint(bool final) {
  if (!tsc) return;
  const ground::TickPair point = ground::ReadTickPair();
  if (final || point.ns - drain.last_calibration_ns >= 10000000) {
    drain.calibration.Add(point);
    drain.last_calibration_ns = point.ns;
  }
}

// With the TSC, 1 ms of margin: the same tick may convert a little earlier
// at a later drain (interpolated then, extrapolated now), and the fold
// must not have passed a start by then.
constexpr TimestampNs kMargin = 1000000;

Session::Impl::DrainPlan Session::Impl::PlanDrain() {
  DrainPlan plan;
  // Read before the rings: a step open now has not been drained; one closed
  // now has (StepScope resets this after its push). Not the same as its
  // thread's open scope (`bound` below): that one is waited for at most
  // fold_delay_ms while async ranges are open, an open step always.
  plan.now = NowNs();
  const int64_t open_ticks = internal::g_step_open_since.load(std::memory_order_acquire);
  plan.open_since = open_ticks < 0 ? -1 : (tsc ? ToNs(open_ticks) - kMargin : open_ticks);
  // Read before the rings too: an async range has no thread's scope to
  // stand for it, and device sync times come late; while one is open, or
  // once the run measures them, the fold waits fold_delay_ms.
  const uint64_t async = internal::g_async.load(std::memory_order_seq_cst);
  plan.wait_full_delay = (async & 0xFFFFFFFF) != 0 || notes.device_sync_expected();
  // An async range that began since the last drain and ended since may be
  // in a ring after a cut it began before: fold this drain's rings whole.
  const bool async_quiet = !plan.wait_full_delay && async >> 32 == drain.async_quiet_begun;
  drain.async_quiet_begun = plan.wait_full_delay ? ~uint64_t{0} : async >> 32;
  drain.snapshot_registrations =
      recorder::ThreadRegistry::Get().registrations();  // before: none missed
  drain.entries = recorder::ThreadRegistry::Get().Snapshot();
  if (drain.slots.size() < drain.entries.size()) drain.slots.resize(drain.entries.size());
  drain.fullest = 0;
  // What each thread has open, read before any ring is drained: an Event
  // not in this drain began at or after its thread's outermost open scope,
  // or after `now` (a thread registered since the snapshot too). So nothing
  // still to come begins before `bound`, and the fold may pass everything
  // else up to it. The margin, as for the step: a tick converts a little
  // differently at a later drain.
  plan.bound = plan.now - kMargin;
  plan.intervals_before = drain.recorded - drain.counter_events;
  plan.busiest = drain.entries.size();
  size_t most = 0;
  for (size_t i = 0; i < drain.entries.size(); ++i) {
    if (drain.entries[i].buffer == nullptr) continue;
    const int64_t since = drain.entries[i].buffer->open_since();
    if (since == ThreadBuffer::kOpening) {
      plan.bound = std::numeric_limits<TimestampNs>::min();  // a start being read: wait
    } else if (since != ThreadBuffer::kNothingOpen) {
      plan.bound = std::min(plan.bound, tsc ? ToNs(since) - kMargin : since);
    }
    if (const size_t pending = drain.entries[i].buffer->pending(); pending >= most) {
      most = pending;
      plan.busiest = i;
    }
  }
  if (plan.open_since >= 0) plan.bound = std::min(plan.bound, plan.open_since);
  if (notes.memory_sampled()) {
    plan.bound = std::min(plan.bound, notes.last_memory_ns());
  }
  // The busiest ring is folded chunk by chunk while the chunk is in cache,
  // up to its last cut (an Event with no scope open around it: no later
  // Event of the thread began before its end), once every other ring is in
  // the fold. Not with an async range open, nor with device records, which
  // come after the rings.
  plan.stream = async_quiet && collector == nullptr;
  return plan;
}

void Session::Impl::DrainOnce(bool final) {
  AddCalibrationPoint(final);
  const DrainPlan plan = PlanDrain();
  for (size_t i = 0; i < drain.entries.size(); ++i) {
    if (i != plan.busiest) DrainRing(i, plan);
  }
  if (plan.busiest < drain.entries.size()) DrainRing(plan.busiest, plan);  // the busiest last
  // Read before taking the records: what completes in between comes next time.
  const TimestampNs device_complete =
      collector != nullptr ? collector->CompleteBefore() : std::numeric_limits<TimestampNs>::max();
  const size_t before_device = fold->input().size();
  if (collector != nullptr) collector->AppendTo(&fold->input());
  const size_t drained_intervals =
      static_cast<size_t>(drain.recorded - drain.counter_events - plan.intervals_before) +
      (fold->input().size() - before_device);
  const TimestampNs to = FoldEnd(plan, device_complete, drained_intervals);
  TakeDeviceSync();
  fold->Advance(to);
  outputs.AfterDrain();
}

// One thread's ring (slot i of the snapshot) drained into the fold and the
// trace windows; a retired ring is given back.
void Session::Impl::DrainRing(size_t i, const DrainPlan& plan) {
  if (drain.entries[i].buffer == nullptr) return;  // a free slot
  SlotState& thread = drain.slots[i];
  if (thread.buffer != drain.entries[i].buffer.get()) {  // a new thread in the slot
    thread.buffer = drain.entries[i].buffer.get();
    thread.os_tid = drain.entries[i].os_tid;
    thread.written_name.clear();
  }
  // Read before the drain: a thread retires its ring after its last push.
  const bool retired = drain.entries[i].buffer->retired();
  recorder::ThreadRegistry& registry = recorder::ThreadRegistry::Get();
  if (thread.track == kNoTrack) {
    thread.track = fold->input().AddTrack({ground::TrackKind::kHostThread, report.run.pid,
                                           thread.os_tid, registry.ThreadName(thread.os_tid)});
  }
  if (outputs.writes_trace()) {
    std::string name = registry.ThreadName(thread.os_tid);
    if (!name.empty() && name != thread.written_name) {
      outputs.NameThread(thread.os_tid, name);
      thread.written_name = std::move(name);
    }
  }
  const bool streaming = plan.stream && i == plan.busiest;
  const size_t drained = drain.entries[i].buffer->Drain(
      [&](Event* events, size_t count) { DrainEvents(thread, events, count, plan, streaming); });
  drain.fullest =
      std::max(drain.fullest, static_cast<double>(drained) /
                                  static_cast<double>(drain.entries[i].buffer->capacity()));
  if (retired) {  // drained to its last event: give the ring back
    drain.released_dropped += static_cast<int64_t>(drain.entries[i].buffer->dropped());
    registry.Release(static_cast<uint16_t>(i), drain.entries[i].buffer.get());
    outputs.ForgetThread(thread.os_tid);
    drain.entries[i].buffer.reset();
  }
}

// A span of a ring's events, in chunks of 4096 (128 KB): each event is
// converted, folded and shown to the trace windows while it is in cache,
// not in three passes over a burst of megabytes.
void Session::Impl::DrainEvents(const SlotState& thread, Event* events, size_t count,
                                const DrainPlan& plan, bool streaming) {
  drain.recorded += static_cast<int64_t>(count);
  // A slot's last thread, also after it exited (an async range that began
  // there may end elsewhere later).
  const exporter::TraceWriter::ThreadIdOf tid_of = [this](uint16_t index) {
    return index < drain.slots.size() ? drain.slots[index].os_tid : 0u;
  };
  ground::TickCalibration::Hint hint;  // a ring's ticks come in about increasing order
  constexpr size_t kChunk = 4096;
  if (tsc && outputs.keeps_events() && drain.converted.size() < kChunk)
    drain.converted.resize(kChunk);
  for (size_t from = 0; from < count; from += kChunk) {
    const size_t to = std::min(count, from + kChunk);
    const Event* chunk = events + from;
    TimestampNs cut = std::numeric_limits<TimestampNs>::min();
    auto note = [&](const Event& e) {  // converted
      if (e.kind == EventKind::kStep)
        drain.newest_step_start_ns = std::max(drain.newest_step_start_ns, e.start_ns);
      if (e.aux == 1 && (e.kind == EventKind::kRange || e.kind == EventKind::kStep)) {
        cut = e.end_ns;  // a ring is in end order
      }
    };
    if (tsc) {  // ticks to the session clock
      Event* out = outputs.keeps_events() ? drain.converted.data() : nullptr;
      for (size_t k = from; k < to; ++k) {
        Event e = events[k];
        e.start_ns = drain.calibration.ToNs(e.start_ns, &hint);
        if (e.kind != EventKind::kCounter) e.end_ns = drain.calibration.ToNs(e.end_ns, &hint);
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
    outputs.AddEvents(thread.os_tid, chunk, to - from, tid_of);
    if (const TimestampNs up_to = std::min({plan.bound, cut, StepGate()});
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
      fold->Advance(drain.latest_end_ns);  // this ring's later events end after it
    } else if (fold->input().size() >= 12288) {
      fold->Take();
    }
  }
}

// How far the fold may go after this drain: what no open range can still
// reach, up to `bound`, but waiting at most fold_delay_ms for a range still
// open (or less when the intervals of that long would not fit in half of
// fold_buffer_bytes at the rate they come), and not into the open step; at
// once when the held intervals exceed the budget. Then how much of that
// one Advance folds (drain::SegmentEnd, segment_policy.h).
TimestampNs Session::Impl::FoldEnd(const DrainPlan& plan, TimestampNs device_complete,
                                   size_t drained_intervals) {
  const TimestampNs now = plan.now;
  const auto budget =
      static_cast<double>(options.fold_buffer_bytes.value / 2 / sizeof(ground::Interval));
  const auto arrived = static_cast<double>(drained_intervals);
  if (drain.last_drain_ns > 0 && now > drain.last_drain_ns) {
    const double rate = arrived / static_cast<double>(now - drain.last_drain_ns);
    drain.intervals_per_ns =
        drain.intervals_per_ns == 0 ? rate : 0.8 * drain.intervals_per_ns + 0.2 * rate;
  }
  // The time since the last drain: a segment folds at least that much, or
  // the fold would fall behind the drains when more than a slice comes
  // between two of them (several busy threads).
  const TimestampNs since_drain =
      drain.last_drain_ns > 0 && now > drain.last_drain_ns ? now - drain.last_drain_ns : 0;
  drain.last_drain_ns = now;
  auto delay = static_cast<TimestampNs>(options.fold_delay_ms) * 1000000;
  if (drain.intervals_per_ns > 0) {
    delay = std::min(delay, static_cast<TimestampNs>(budget / drain.intervals_per_ns));
  }
  // Up to what no thread has open (bound), waiting at most `delay` for a
  // scope or async range still open.
  TimestampNs watermark = now - delay;
  if (!plan.wait_full_delay) watermark = std::max(watermark, std::min(plan.bound, StepGate()));
  if (plan.open_since >= 0) watermark = std::min(watermark, plan.open_since);
  // Not past device work whose records CUPTI has not handed back yet.
  watermark = std::min(watermark, device_complete);
  const uint64_t held = (fold->held() + fold->input().size()) * sizeof(ground::Interval);
  if (held > options.fold_buffer_bytes.value) watermark = now;
  drain::SegmentInput segment;
  segment.now = now;
  segment.watermark = watermark;
  segment.folded = fold->watermark();
  segment.since_drain = since_drain;
  segment.intervals_per_ns = drain.intervals_per_ns;
  segment.quiet = drained_intervals == 0;
  segment.over = held > options.fold_buffer_bytes.value / 2;
  return drain::SegmentEnd(segment);
}

void Session::Impl::TakeDeviceSync() {
  if (!notes.TakeDeviceSync(&drain.device_sync_taken)) return;
  int64_t late = 0;
  for (const auto& [step, ns] : drain.device_sync_taken)
    late += fold->AddStepSyncTime(step, ns) ? 0 : 1;
  drain.device_sync_taken.clear();
  if (late > 0) notes.CountLateDeviceSync(late);
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
    if (recorder::ThreadRegistry::Get().registrations() != drain.snapshot_registrations)
      return true;
    for (const recorder::ThreadEntry& entry : drain.entries) {
      if (entry.buffer != nullptr && static_cast<double>(entry.buffer->pending()) >=
                                         kFilling * static_cast<double>(entry.buffer->capacity())) {
        return true;
      }
    }
    return false;
  };
  auto due = Clock::now() + wait;
  ground::Lock(&stop_mu);
  while (!stop) {
    const Clock::duration until_due = std::max<Clock::duration>(due - Clock::now(), {});
    ground::WaitWithTimeout(&wake, &stop_mu,
                            absl::FromChrono(std::min<Clock::duration>(until_due, kLook)));
    if (stop) break;
    if (Clock::now() < due && !filling()) continue;
    ground::Unlock(&stop_mu);
    DrainOnce();
    if (drain.fullest > kFilling) {
      wait = std::max(shortest, wait / 2);
    } else if (drain.fullest < 1.0 / 16) {
      wait = std::min(longest, wait * 2);
    }
    const bool publish = Clock::now() >= next_publish;
    outputs.WriteWindows(publish);
    if (publish) {
      next_publish = Clock::now() + std::chrono::milliseconds(options.trace_checkpoint_interval_ms);
    }
    due = Clock::now() + wait;
    ground::Lock(&stop_mu);
  }
  ground::Unlock(&stop_mu);
}

}  // namespace trainscope
