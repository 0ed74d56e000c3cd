// sdk/export/trace_windows.h: which steps trace.json keeps.
//
// A week-long run cannot keep every event in its trace. TraceWindows keeps
// windows of whole steps, with everything tagged with them (host ranges of
// every thread, counters, and the device work they launched):
//   - the first steady window: `first_steps` steps from the end of the
//     warm-up, decided by the report's own rule (analysis::WarmupRule, fed
//     `warmup_steps` and the same step times), so that the window starts at
//     the step where the report's warm-up ends;
//   - repeating windows by step position, like torch.profiler.schedule
//     (skip_first, then cycles of wait + warmup + active steps, of which the
//     active ones are kept; `repeat` cycles, 0 for ever);
//   - the `slowest_steps` slowest steady steps so far (after the first steady
//     window began), replaced as slower ones come;
//   - before the first step, what the run records (the startup window,
//     written as it comes; all of a run without steps).
// Everything it holds and writes is within `budget_bytes`: a window that
// would pass it is counted in Stats::windows_dropped and not written, never
// half (the startup window is cut there instead).
//
// A window is written to the body when the analysis has folded two steps
// past its last (its device work is in by then), or at Finish. The slowest
// steps stay in memory and are written at each Publish.
//
// Memory: the `trace` term of the session's bound, less the publish copies
// (docs/architecture.md, "Memory"): the steps not yet decided or written
// (events 32 bytes each, text about 130 bytes an event), all within
// budget_bytes; in a run of small steps, (first_steps + slowest_steps + 11)
// steps' events, the 11 the warm-up rule looks ahead; and the room of
// kSpareChunks steps' events and text (at most kSpareText each) kept for
// the next steps, and kRememberDone step indices decided away.
#ifndef TRAINSCOPE_SDK_EXPORT_TRACE_WINDOWS_H_
#define TRAINSCOPE_SDK_EXPORT_TRACE_WINDOWS_H_

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/status.h"
#include "sdk/analysis/warmup.h"
#include "sdk/export/trace_writer.h"
#include "sdk/ground/timeline.h"
#include "trainscope/recorder.h"

namespace trainscope::exporter {

struct TraceWindowOptions {
  int64_t first_steps = 20;
  int64_t warmup_steps = -1;  // -1: WarmupRule's auto rule
  // torch.profiler.schedule; active == 0 turns the repeating windows off.
  int64_t skip_first = 0;
  int64_t wait = 0;
  int64_t warmup = 0;
  int64_t active = 0;
  int64_t repeat = 0;
  int slowest_steps = 5;
  uint64_t budget_bytes = uint64_t{256} << 20;
};

class TraceWindows {
 public:
  struct SlowStep {
    int64_t index = 0;
    double duration_ms = 0;
  };
  struct Stats {
    int64_t windows_written = 0;     // first, repeating and startup windows in the body
    int64_t windows_dropped = 0;     // windows (and slow steps) the budget left out
    int64_t first_window_step = -1;  // index of the first steady window's first step
    int64_t first_window_steps = 0;
    std::vector<SlowStep> slowest;  // kept now, slowest first
    uint64_t bytes = 0;             // of trace.json at the last publish
  };

  // `writer` must outlive this.
  TraceWindows(TraceWriter* writer, TraceWindowOptions options);
  ~TraceWindows();

  // Host events drained from thread `os_tid`, in ring order. Cost: formats
  // only the events of steps that may be kept.
  void AddEvents(uint32_t os_tid, const Event* events, size_t count,
                 const TraceWriter::ThreadIdOf& thread_id_of);
  // Device work, calls and syncs released by the analysis, with their
  // launching step (else placed by time among the steps held).
  void AddDevice(const ground::Timeline& timeline);
  // Thread `os_tid` exited: its name leaves the trace's metadata unless the
  // trace keeps some of its events, which is known once the steps that may
  // hold them are kept or dropped (until then the name waits).
  void ForgetThread(uint32_t os_tid);
  // The analysis wrote step `index`'s row.
  void StepFolded(int64_t index);
  // Writes the windows that are complete (all of them with `final`), then
  // republishes trace.json when `publish` and something changed, or when
  // `final`. Errors: the writer's, naming the file.
  // While running (not `final`) the publish is the writer's PublishSoon:
  // trace.json is replaced shortly after, on the writer's thread.
  absl::Status Flush(bool publish, bool final);
  // Waits until the publishes asked for so far are on disk (for tests and
  // tools that read trace.json while the run goes on).
  absl::Status AwaitPublished() { return writer_->AwaitPublished(); }

  const Stats& stats() const { return stats_; }
  // Bytes of text held in memory now.
  uint64_t held_bytes() const { return held_bytes_; }

 private:
  enum class Fate { kOpen, kLookahead, kWindow, kSlow };
  struct Chunk {
    int64_t index = 0;
    int64_t position = -1;  // in closing order; -1 while open
    TimestampNs start_ns = 0;
    TimestampNs end_ns = 0;
    double duration_ms = 0;
    Fate fate = Fate::kOpen;
    uint64_t opened = 0;  // order of creation
    int64_t window = -1;
    bool overflow = false;                        // stopped taking text at the budget
    std::vector<std::pair<uint32_t, Event>> raw;  // until kept: thread, event
    std::string text;                             // once kept
    uint64_t bytes() const { return raw.size() * sizeof(raw[0]) + text.size(); }
  };
  struct Window {
    int64_t begin = 0;  // step positions [begin, end)
    int64_t end = 0;
    bool dropped = false;
    std::vector<int64_t> steps;  // indices, in order
  };

  Chunk* ChunkFor(int64_t step);
  Chunk* Find(int64_t step);  // nullptr if not held
  Chunk& At(int64_t step);    // the held one, or a new one
  Chunk& Add(int64_t step);   // a new one; `step` is not held
  Chunk* ChunkAt(TimestampNs t);
  bool Fits(uint64_t more) const;
  uint64_t Room() const;  // bytes that still fit: Fits(more) is more <= Room()
  void Overflow(Chunk* chunk);
  void AppendText(Chunk* chunk, const std::string& text);
  void Materialize(Chunk* chunk);
  void Recycle(std::vector<std::pair<uint32_t, Event>>* raw);
  void SetFate(Chunk* chunk, Fate fate);  // keeps open_
  void Close(const Event& step_event);
  void TakeWarmup();
  void Decide(Chunk* chunk);
  void DecideSlowest(Chunk* chunk);
  void Assign(Chunk* chunk, int64_t id, int64_t begin, int64_t end);
  void Drop(int64_t index);
  void DropWindow(int64_t id);
  absl::Status WriteWindow(Window& window);

  TraceWriter* writer_;
  TraceWindowOptions options_;
  Stats stats_;
  // Chunks by step index; boxed, so that a Chunk* stays valid while others
  // come and go.
  std::unordered_map<int64_t, std::unique_ptr<Chunk>> chunks_;
  size_t open_ = 0;                    // chunks whose fate is kOpen
  uint64_t opened_ = 0;                // chunks created so far
  std::map<int64_t, Window> windows_;  // in progress, by id (0: first steady)
  analysis::WarmupRule warmup_;        // fed every closed step until it decides
  int64_t first_begin_ = 0;            // the first steady window's first position, once started
  std::deque<int64_t> lookahead_;      // closed steps the warm-up rule has not placed
  // The last kRememberDone step indices decided away, oldest at
  // dropped_head_ once full. Steps mostly come in increasing order: one
  // above dropped_max_ (the largest ever dropped) was not dropped, without
  // a look at the others.
  std::vector<int64_t> dropped_;
  size_t dropped_head_ = 0;
  int64_t dropped_max_ = std::numeric_limits<int64_t>::min();
  bool WasDropped(int64_t step) const;
  // Dropped chunks and their nodes, for the next steps: two allocations
  // and two frees a step otherwise. At most kSpareChunks, their text's room
  // at most kSpareText bytes each.
  std::vector<std::unordered_map<int64_t, std::unique_ptr<Chunk>>::node_type> spare_chunks_;
  std::vector<int64_t> slow_;  // indices kept as slowest
  double slow_floor_ = 0;      // the fastest of them, when slow_floor_known_
  bool slow_floor_known_ = false;
  std::string startup_;  // before the first step: written as it comes
  bool startup_open_ = true;
  bool startup_cut_ = false;
  bool startup_written_ = false;
  bool first_started_ = false;
  TraceWriter::ThreadIdOf thread_id_of_;  // from the first AddEvents
  int64_t closed_ = 0;                    // steps closed so far
  int64_t folded_ = 0;                    // rows folded so far
  uint64_t held_bytes_ = 0;
  bool dirty_ = false;
  std::string scratch_;
  std::vector<std::vector<std::pair<uint32_t, Event>>> spare_raw_;  // see Recycle
  std::unordered_set<uint32_t> tids_;  // threads whose events were kept
  // Threads whose rings were given back while chunks that may hold their
  // events were undecided (opened at or before `mark`): their names wait
  // until those chunks are kept or dropped (ForgetRetired). At most one
  // entry a thread.
  struct Retiring {
    uint32_t os_tid;
    uint64_t mark;
  };
  std::vector<Retiring> retiring_;
  bool UndecidedSince(uint64_t mark) const;
  void ForgetRetired(bool final);
};

}  // namespace trainscope::exporter

#endif  // TRAINSCOPE_SDK_EXPORT_TRACE_WINDOWS_H_
