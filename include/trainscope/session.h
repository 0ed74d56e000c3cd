// trainscope/session.h: one profiled run, from Start() to Finish().
//
//   trainscope::Options options;
//   options.output_dir = "out/run1";
//   options.run_name = "mlp-baseline";
//   absl::StatusOr<trainscope::Session> session =
//       trainscope::Session::Start(options);
//   if (!session.ok()) { std::cerr << session.status() << "\n"; return 1; }
//   ... the training loop with StepScope / PhaseScope ...
//   absl::StatusOr<trainscope::Report> report = session->Finish();
//
// While a session is active every thread's scopes record into it. One session
// is active per process at a time. Finish() writes trace.json and
// report.json into the output directory and prints the summary.
#ifndef TRAINSCOPE_SESSION_H_
#define TRAINSCOPE_SESSION_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/report.h"
#include "trainscope/types.h"

namespace trainscope {

// Outputs a session writes; combine with |, test with Writes().
enum class Sink : uint32_t {
  kNone = 0,
  kTraceJson = 1u << 0,   // trace.json (Chrome trace / Kineto conventions)
  kReportJson = 1u << 1,  // report.json and steps.jsonl (docs/report-schema.md)
  kSummary = 1u << 2,     // the human summary, printed at Finish()
  kAll = kTraceJson | kReportJson | kSummary,
};
constexpr Sink operator|(Sink a, Sink b) {
  return static_cast<Sink>(static_cast<uint32_t>(a) | static_cast<uint32_t>(b));
}
constexpr Sink operator&(Sink a, Sink b) {
  return static_cast<Sink>(static_cast<uint32_t>(a) & static_cast<uint32_t>(b));
}
// True when `sinks` holds any of `which`: Writes(options.sinks, Sink::kSummary).
constexpr bool Writes(Sink sinks, Sink which) { return (sinks & which) != Sink::kNone; }

// How a Session is set up. Every field has a usable default. What a
// session keeps in memory does not grow with the run's length: its bound
// is a formula of these fields, stated once in docs/architecture.md
// ("Memory"); a field below names the term of it that it sets.
struct Options {
  // Where trace.json and report.json go; created (with parents) if missing.
  // The environment variable TRAINSCOPE_OUTPUT_DIR, when set and not empty,
  // replaces it: `trainscope experiment` points each trial of an unchanged
  // program at its own directory that way.
  std::string output_dir = "trainscope-out";
  // A name for the run, stored in the report and trace.
  std::string run_name = "run";
  // Ring size per recording thread. Rounded down to a power of two events
  // (32 bytes each). Memory: the `rings` term.
  Bytes buffer_bytes_per_thread{1u << 20};
  // Emit NVTX ranges (the `trainscope` domain) for Nsight Systems. Without a
  // tool attached they add a few nanoseconds to a scope (bench/).
  bool nvtx = true;
  // Which outputs to write.
  Sink sinks = Sink::kAll;
  // Where the summary goes when Sink::kSummary is set.
  FILE* summary_stream = stdout;
  // Steps treated as warmup; -1 picks them by the rule in
  // docs/report-schema.md (timing.warmup_rule).
  int64_t warmup_steps = -1;
  // The longest the background thread waits between drains. It drains
  // sooner when the rings fill fast (it looks every millisecond and drains
  // at a quarter full; docs/architecture.md).
  int flush_interval_ms = 50;
  // What scopes read the time with. kAuto: the time-stamp counter (one
  // `rdtsc`) where it is invariant (constant_tsc and nonstop_tsc, and the
  // kernel's clocksource is tsc), converted to CLOCK_MONOTONIC at each drain
  // with a calibration measured as the run goes; CLOCK_MONOTONIC elsewhere.
  // kMonotonic: CLOCK_MONOTONIC always (a scope costs about 2x). The report
  // says which (events.clock). Process-wide: set the same in every session.
  enum class Clock { kAuto, kMonotonic };
  Clock clock = Clock::kAuto;
  // How often trace.json is republished while running, so that a crash
  // leaves a valid trace of everything up to the last checkpoint.
  int trace_checkpoint_interval_ms = 2000;
  // trace.json keeps windows of whole steps, not the whole run (everything
  // tagged with them: every thread's ranges, counters, the device work they
  // launched; docs/report-schema.md, "trace"): the first `trace_first_steps`
  // steps after warmup, the `trace_slowest_steps` slowest steps after it
  // (replaced as slower ones come), repeating windows when `trace_schedule`
  // has active steps, and what the run records before its first step. What
  // the windows hold, in memory and on disk, stays within
  // `trace_budget_bytes`; a window that would pass it is left out whole and
  // counted in report.trace.windows_dropped. Memory: the `trace` term.
  int64_t trace_first_steps = 20;
  int trace_slowest_steps = 5;
  // Like torch.profiler.schedule: after skip_first steps, cycles of wait +
  // warmup + active steps, the active ones kept; `repeat` cycles (0: for
  // ever). active == 0: off.
  struct TraceSchedule {
    int64_t skip_first = 0;
    int64_t wait = 0;
    int64_t warmup = 0;
    int64_t active = 0;
    int64_t repeat = 0;
  } trace_schedule;
  Bytes trace_budget_bytes{uint64_t{256} << 20};
  // The report is analysed as the run goes, in memory that does not grow
  // with its length (docs/architecture.md): at each drain the time before
  // the oldest scope still open on any thread (each thread's ring says
  // when its outermost open scope began), and never inside the open step,
  // is folded into the report's aggregates and its steps written to
  // steps.jsonl; with nothing open, up to 1 ms ago, and a step's row once
  // the next step has ended (its memory sample has come by then). The fold
  // waits at most this long for a scope still open, and this long behind
  // while an AsyncRange is open or once step sync times are expected
  // (Session::ExpectStepSyncTimes; their times are on no thread's scope). A range still open longer
  // than this (a background checkpoint write) arrives late: its earlier part is missing from phases
  // and idle, counted in report.events.late.
  int fold_delay_ms = 5000;
  // The most the analysis holds in intervals not yet folded (48 bytes each).
  // When fold_delay_ms of intervals at the rate they come would fill more
  // than half of it, the delay shrinks to fit (at 10^6 ranges a second, the
  // default gives about 170 ms); past it, it folds everything drained at
  // once. Either way ranges still open then arrive late. At least 1 MiB.
  // Memory: the `fold` term.
  Bytes fold_buffer_bytes{16u << 20};

  // Collect the device timeline with CUPTI (kernels, copies, CUDA API calls,
  // synchronisations) when a CUDA driver and device are present. Without them
  // the session still starts, prints one line ("trainscope: CUPTI
  // unavailable: no CUDA driver ...") and the report says device_timeline
  // "unavailable (<reason>)"; the host-only analysis runs.
  bool device_timeline = true;
  // Profile the device only in steps [profile_start_step, profile_stop_step)
  // (-1: from the start / to the end), like the PyTorch profiler's schedule,
  // so that long runs stay cheap. Host ranges are always recorded.
  int64_t profile_start_step = -1;
  int64_t profile_stop_step = -1;
  // Size of each CUPTI activity buffer (16 are pooled). Memory: the `device`
  // term.
  Bytes cupti_buffer_bytes{8u << 20};

  // Baseline-record facts. Empty strings are filled from the environment:
  // TRAINSCOPE_CODE_VERSION or `git rev-parse HEAD`, TRAINSCOPE_DATA_VERSION,
  // TRAINSCOPE_CONTAINER_IMAGE (else "kubernetes pod" / "docker container"
  // is noted when detected, with no image name).
  std::string code_version;
  std::string data_version;
  std::string container_image;
  // When the job was submitted (Unix seconds), for timing.queue_delay_s.
  // Unset: read from TRAINSCOPE_SUBMIT_TIME (Unix seconds or ISO 8601 UTC).
  std::optional<double> submit_time_unix_s;
  // What the run was allocated; resource_hours = accelerators x hours.
  Report::ResourceRequest resource_request;
  // The run's configuration as key/value pairs, copied into the report.
  std::vector<std::pair<std::string, std::string>> config;
  // This process's torch.distributed rank and the number of ranks. -1 reads
  // the RANK / WORLD_SIZE environment variables (torchrun sets them), else 0
  // and 1. With world_size > 1 the outputs are trace-rank<R>.json and
  // report-rank<R>.json, so that all ranks can share one output directory.
  int rank = -1;
  int world_size = -1;
  // The mean time between failures to plan checkpoints for (hours); > 0
  // turns on report.checkpoint's Young/Daly interval advice.
  double checkpoint_mtbf_hours = 0;
};

// How an input pipeline is set up, for the report (Session::RecordLoader).
struct LoaderSettings {
  std::string name = "loader";  // the prefix of its counters ("loader.queue_depth")
  std::string kind;             // "torch::data::DataLoader", "PrefetchLoader", ...
  int workers = 0;              // threads (or processes) making batches; 0: the consumer's own
  int prefetch = 0;             // batches in flight per worker
  bool pin_memory = false;      // batches pinned where they are made
  int64_t batch_size = 0;       // 0: not said
};

class Session;

namespace internal {
// A second handle on `session`'s run, for objects that keep using it after
// the call that received it (AsyncCheckpointer, libtorch::ProcessGroup,
// libtorch::Steps): it stays valid when `session` is moved (the run's state
// lives on the heap, shared), keeps that state alive, and never finishes
// the run (destroying it does nothing to the run). After the run finished,
// its calls act on the finished state: notes are kept but written nowhere.
// Its Finish() returns FailedPrecondition. Cost: a shared_ptr copy.
Session BorrowSession(Session& session);
}  // namespace internal

// One active profiling run. Movable, not copyable; objects handed a Session
// keep working when it is moved (internal::BorrowSession). Methods are
// thread-safe unless noted.
class Session {
 public:
  // Validates `options`, creates the output directory, and starts recording.
  // Errors: InvalidArgument for a bad option (named in the message),
  // FailedPrecondition if another session is active, PermissionDenied /
  // NotFound / FailedPrecondition naming the directory if it cannot be
  // created or written. Cost: a few milliseconds (environment probe,
  // overhead calibration, one background thread).
  static absl::StatusOr<Session> Start(Options options);

  Session(Session&& other) noexcept;
  Session& operator=(Session&& other) noexcept;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  // Finishes the session if Finish() was not called (unless this is a
  // borrowed handle); errors go to stderr.
  ~Session();

  // Adds or replaces a configuration key/value in the report.
  void SetConfig(std::string_view key, std::string_view value);

  // The directory the run writes to: Options::output_dir, or
  // $TRAINSCOPE_OUTPUT_DIR when set (as `trainscope experiment` does), for
  // a program's own files beside the report. Cost: none.
  const std::string& output_dir() const;

  // Declares the quality target: `metric` must reach `target` (at least, or
  // at most when !higher_is_better). Call it before the first evaluation so
  // that RecordQuality can time when the target is first met. Replaces an
  // earlier target (and its evaluations) for another metric. Cost: a lock.
  void SetQualityTarget(std::string_view metric, double target, bool higher_is_better);
  // Records an evaluation of the quality metric, now (at an eval point).
  // report.acceptance.value becomes `value` and `passed` compares it with
  // the target; the first value that meets the target sets
  // acceptance.time_to_target_s (from process start, and from the first
  // step), the time to result that `trainscope experiment` compares.
  // Without a declared target the value is recorded and `passed` stays
  // empty. Errors: InvalidArgument, nothing recorded, for a NaN or for a
  // metric other than the declared one. Cost: a lock and a clock read;
  // nothing is kept per evaluation.
  absl::Status RecordQuality(std::string_view metric, double value);
  // SetQualityTarget(metric, target, higher_is_better) then
  // RecordQuality(metric, value): the value the run reached, recorded now.
  void SetAcceptance(std::string_view metric, double target, double value, bool higher_is_better);

  // Records one served request's latency (seconds from its arrival to its
  // answer), now: report.serving gets the count, p50/p90/p99 and maximum,
  // and the rate of requests served. For serving runs and batching
  // experiments (`trainscope experiment`'s latency_p99_ms objective).
  // Errors: InvalidArgument, nothing recorded, for a negative or non-finite
  // value. Cost: a lock and a sketch update; memory bounded by the sketch
  // (about 70 KiB at most), never by the number of requests.
  absl::Status RecordLatency(double seconds);

  // Writes one point of the training curve, `value` (the loss) at `step`,
  // as a line of loss.jsonl in output_dir() ("loss-rank<R>.jsonl" when
  // world_size > 1): {"step": 12, "loss": 0.731}; "loss": null for a
  // value that is not finite; "skipped": true when the optimizer skipped
  // the step (GradScaler on inf/NaN). `trainscope tune amp` and an
  // experiment's "curve" check hold it against the baseline seeds' noise
  // band (docs/experiments.md, "The trial contract"). The file is created
  // at the first call (replacing one of an earlier run) and closed by
  // Finish; its lines are buffered (64 KiB) and written when the buffer
  // fills and at Finish, so a killed run's file ends at its last write
  // (the curve reader ignores a last line cut short). report.loss_curve
  // counts the points, non-finite values and skipped steps. Errors: the
  // file's error naming its path (the point is counted in
  // loss_curve.lines_lost; later calls return the same error);
  // FailedPrecondition after Finish. Cost: a lock and a line formatted
  // into the buffer; a write per 64 KiB. Memory: the 64 KiB buffer.
  absl::Status RecordLoss(int64_t step, double value, bool skipped = false);

  // Says that this run ran out of memory: report.failure becomes
  // {"kind": "out_of_memory", "message": `message`, the step open then and
  // the time}. `trainscope tune batch` reads it to tell a batch that does
  // not fit from a crash; the run should then end (Finish, or let the
  // Session go out of scope) and exit non-zero (docs/experiments.md, "The
  // trial contract"). trainscope::libtorch::CatchOutOfMemory calls it for
  // LibTorch's c10::OutOfMemoryError. A later call replaces an earlier
  // one's message. Cost: a lock.
  void RecordOutOfMemory(std::string_view message);

  // Describes an input pipeline: report.loaders.<name> gets `settings`
  // and, from the counters "<name>.cpu_us" (CPU microseconds each batch
  // took to make, on the thread that made it) and "<name>.queue_depth"
  // (batches ready when the consumer asked; 0: it waited), the batches
  // made, their CPU time and the cores they kept busy, and the queue's
  // mean and maximum depth; its depth over time is
  // counters.<name>.queue_depth.series. trainscope::libtorch's
  // PrefetchLoader (given PrefetchOptions::session) and MakeDataLoader
  // call it and record both counters. A second call with the same name
  // replaces the settings. Errors: InvalidArgument, nothing recorded, for
  // an empty name or negative numbers; ResourceExhausted past
  // Report::kMaxLoaders names. Cost: a lock. Memory: at most
  // Report::kMaxLoaders settings.
  absl::Status RecordLoader(const LoaderSettings& settings);

  // Records the memory in use at the end of step `step` and its peak during
  // the step (bytes; `source` says what was measured, e.g.
  // "cuda_caching_allocator" or "process_rss"), and, where the source has
  // them, the bytes it holds reserved from the device (a caching
  // allocator's segments, what a memory cap limits) and their peak (-1: not
  // sampled). trainscope::libtorch's RecordStepMemory fills these from
  // LibTorch. A peak (-1: not sampled) below its current value (two
  // readings a moment apart: /proc's VmHWM lags VmRSS) is taken as the
  // current value. Cost: a lock; once a step.
  void RecordStepMemory(int64_t step, int64_t current_bytes, int64_t peak_bytes,
                        std::string_view source, int64_t reserved_bytes = -1,
                        int64_t reserved_peak_bytes = -1);
  // Notes the torch.distributed backend in the report ("gloo", "nccl").
  void SetDistributedBackend(std::string_view backend);
  // Notes ranks that this one saw fail or vanish, and the error it got.
  // They appear in report.distributed and in `trainscope ranks`.
  void NoteMissingRanks(const std::vector<int>& ranks, std::string_view error);
  // Records one checkpoint save: its blocking time on the training thread,
  // its persist time and bytes, and whether it committed. Cost: a lock.
  void NoteCheckpointSave(double blocking_s, double persist_s, uint64_t bytes, bool committed);
  // Records a resume: the step of the checkpoint restored, the last step the
  // interrupted run had finished (for recomputation; -1 if unknown), and the
  // time from process start until the state was restored.
  void NoteResume(int64_t from_step, int64_t interrupted_at_step, double restore_s);
  // Adds `seconds` of collective time measured on the device to step
  // `step`'s sync_ms (steps.jsonl, the straggler report) and to
  // report.distributed.device_sync_s: under NCCL the host only enqueues a
  // collective, so its kSync range measures the enqueue (libtorch::
  // ProcessGroup times NCCL collectives with CUDA events and calls this).
  // A measurement that comes after the step's row was written is counted in
  // report.distributed.device_sync_late. Cost: a lock and a push; at most
  // 4096 wait for the next drain (more are counted late).
  void AddStepSyncTime(int64_t step, double seconds);
  // Says that AddStepSyncTime will come for the steps from now on (as
  // libtorch::ProcessGroup does when it times collectives on the device):
  // the steps' rows then wait Options::fold_delay_ms for their times,
  // which come steps late, instead of the next step's end. The first
  // AddStepSyncTime says it too, but rows written before it miss their
  // time. Cost: a store.
  void ExpectStepSyncTimes();
  // Runs `hook` at the start of Finish(), before recording stops: an
  // AsyncCheckpointer waits for its save in flight there. Returns an id for
  // RemoveFinishHook. Thread-safe.
  int AddFinishHook(std::function<void()> hook);
  void RemoveFinishHook(int id);
  // The output file names: "trace.json" and "report.json", or with
  // "-rank<R>" before ".json" when world_size > 1.
  std::string trace_file() const;
  std::string report_file() const;

  // Stops recording, drains every thread, analyses the timeline, writes the
  // outputs selected by Options::sinks and prints the summary. Events that
  // threads record after this are discarded. Errors: FailedPrecondition if
  // the session already finished; the file's error (ResourceExhausted for a
  // full disk, PermissionDenied, ...) naming the path when an output cannot
  // be written. Recording has stopped either way.
  absl::StatusOr<Report> Finish();

  // True between Start() and Finish().
  bool active() const;
  // The options the session was started with.
  const Options& options() const;

  // Internal (sdk/session/session.cc).
  struct Impl;

 private:
  friend Session internal::BorrowSession(Session& session);
  Session(std::shared_ptr<Impl> impl, bool owner);
  std::shared_ptr<Impl> impl_;
  bool owner_ = true;  // false: a borrowed handle, which never finishes the run
};

}  // namespace trainscope

#endif  // TRAINSCOPE_SESSION_H_
