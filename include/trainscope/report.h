// trainscope/report.h: the baseline record of one run (report.json).
//
// Session::Finish() computes a Report from the run's timeline, writes it as
// report.json and returns it; `trainscope summary report.json` reads it back
// and prints it. Field names mirror the JSON keys documented in
// docs/report-schema.md, where every field is defined.
//
//   absl::StatusOr<trainscope::Report> report = session.Finish();
//   if (report.ok()) use(report->throughput.steady_samples_per_s);
#ifndef TRAINSCOPE_REPORT_H_
#define TRAINSCOPE_REPORT_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainscope/phase.h"

namespace trainscope {

// Version of the report.json schema this SDK writes and reads.
// 2: per-step rows moved to steps.jsonl; events.late added.
inline constexpr int kReportSchemaVersion = 2;

// How long one phase took per step, over the run's steps.
struct PhaseStat {
  std::string phase;     // PhaseName(), e.g. "forward"
  int64_t steps = 0;     // steps in which the phase appeared
  double median_ms = 0;  // per-step time in the phase
  double p90_ms = 0;
  double max_ms = 0;
  double total_s = 0;         // over the whole run
  double share_of_steps = 0;  // total_s / time inside steps
};

// The success criterion of the run, set by the user (Session::SetAcceptance).
struct Acceptance {
  std::string metric;            // e.g. "final_loss"
  std::optional<double> target;  // the required value
  std::optional<double> value;   // the achieved value
  bool higher_is_better = false;
  std::optional<bool> passed;  // value vs target; empty if either is unset
  int64_t evaluations = 0;     // values recorded (RecordQuality, SetAcceptance)
  // The first evaluation that met the target: seconds from process start,
  // and from the first step's begin (startup_s less); empty if never met.
  std::optional<double> time_to_target_s;
  std::optional<double> time_to_target_from_first_step_s;
};

// Request latencies of a serving run (Session::RecordLatency): Report's
// `serving`. Percentiles within QuantileSketch's 0.5% once more than 8192
// requests were recorded, exact below. (At namespace scope, not nested in
// Report: Clang would not take a nested struct with member initializers as
// default-constructible inside Report's own std::optional.)
struct ServingLatency {
  int64_t requests = 0;
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0;
  // Requests over the time from the first request's arrival (its recording
  // time less its latency) to the last recording.
  double requests_per_s = 0;
};

// The training curve a run wrote with Session::RecordLoss: Report's
// `loss_curve`.
struct LossCurve {
  std::string file;            // its name in the output directory ("loss.jsonl")
  int64_t points = 0;          // lines written
  int64_t nonfinite = 0;       // of them, values that were NaN or infinite
  int64_t skipped = 0;         // of them, steps the optimizer skipped
  std::optional<double> last;  // the last finite value
  int64_t lines_lost = 0;      // lines that could not be written (the file's error)
};

// The program's own account of why the run ended early: Report's
// `failure` (Session::RecordOutOfMemory).
struct RunFailure {
  std::string kind;     // "out_of_memory"
  std::string message;  // what the program said (LibTorch's error, without its backtrace)
  // The step open when it was recorded; -1: none
  // (CatchOutOfMemory records after the step's scope unwound: timing.steps
  // then says how many steps finished before it).
  int64_t step = -1;
  double at_s = 0;  // seconds from process start
};

struct Report {
  int schema_version = kReportSchemaVersion;

  struct Run {
    std::string name;
    std::string code_version;  // git commit, or the user's string
    std::string data_version;
    std::string started_at;  // ISO 8601, UTC, of process start
    std::string host;
    int64_t pid = 0;
    int rank = 0;        // Options::rank (torch.distributed rank)
    int world_size = 1;  // Options::world_size
  } run;

  struct Environment {
    std::string accelerator;         // CUDA device name, or the CPU model
    int accelerator_count = 0;       // CUDA devices visible (0: CPU only)
    std::string accelerator_status;  // how `accelerator` was found, or why not
    std::string cpu_model;
    int cpu_count = 0;
    std::string container_image;
    std::string os;
    std::string trainscope_version;
    bool nvtx_compiled = false;
  } environment;

  struct ResourceRequest {
    int accelerators = 1;   // devices allocated to the run
    double cpus = 0;        // 0: not stated
    double memory_gib = 0;  // 0: not stated
    std::string description;
  } resource_request;

  std::vector<std::pair<std::string, std::string>> config;

  struct Timing {
    std::optional<double> queue_delay_s;  // submission -> process start
    double startup_s = 0;                 // process start -> first step begins
    int64_t warmup_steps = 0;
    std::string warmup_rule;
    double total_s = 0;  // process start -> Finish()
    int64_t steps = 0;
    double steps_s = 0;  // first step begins -> last ends
  } timing;

  struct Throughput {
    int64_t steady_steps = 0;
    double steady_steps_per_s = 0;
    double steady_samples_per_s = 0;
    double median_step_ms = 0;
  } throughput;

  double resource_hours = 0;  // resource_request.accelerators x total_s / 3600

  std::vector<PhaseStat> phases;  // in Phase order, only phases that occurred

  struct Idle {
    double share = 0;  // idle_s / window_s, 0 to 1
    double idle_s = 0;
    double window_s = 0;      // first step begins -> last step ends
    std::string busy_source;  // what counted as busy ("cpu_compute_phases")
    std::vector<std::pair<std::string, double>> by_cause;  // seconds, largest first
    std::string top_cause;                                 // "" if the run never idled
  } idle;

  // The idle gaps of the same window and busy source: maximal spans of
  // idle time (docs/gap-analysis.md has the same for a trace).
  struct Gaps {
    int64_t count = 0;
    double largest_ms = 0;
    struct Bucket {
      std::string label;  // "<10us", "10us-100us", ..., ">=1s"
      int64_t count = 0;
      double total_ms = 0;
    };
    std::vector<Bucket> histogram;  // by length, every bucket present
    struct Gap {
      double start_s = 0;  // since process start
      double duration_ms = 0;
      int64_t step = -1;  // the step it begins in, -1 between steps
      std::string cause;  // the cause with the most of its time
    };
    std::vector<Gap> largest;  // the 10 longest, longest first (ties: earlier first)
  } gaps;

  // The CUPTI device timeline (sdk/cupti).
  struct DeviceTimeline {
    std::string status;  // "collected", "off", or "unavailable (<reason>)"
    int64_t records = 0;
    int64_t dropped = 0;  // records CUPTI dropped (no free buffer)
    int64_t kernels = 0;
    // Buffers whose records were cut short by an incomplete record (work
    // still running at the end): the rest of each is missing.
    int64_t incomplete_buffers = 0;
    // Launches whose device record never came (given up after 10 s).
    int64_t launches_unmatched = 0;
    // Device busy time by the host phase that launched it, largest first.
    std::vector<std::pair<std::string, double>> busy_s_by_phase;
    // Holistic Trace Analysis' temporal and idle-time breakdowns of the
    // device rows (kernels, copies, sets), by HTA's rules, folded as the
    // run goes (sdk/analysis/hta_breakdown.h; docs/report-schema.md).
    struct Hta {
      int64_t rows = 0;          // device rows
      double kernel_s = 0;       // first row's start to last row's end
      double idle_s = 0;         // kernel_s minus the union of the rows
      double compute_s = 0;      // the union of computation kernels
      double non_compute_s = 0;  // the rest of the busy time
      struct Stream {
        int64_t stream = 0;        // CUPTI stream id
        double host_wait_s = 0;    // gaps the launch call started after
        double kernel_wait_s = 0;  // short gaps between queued kernels
        double other_s = 0;
      };
      std::vector<Stream> idle_by_stream;  // in order of first kernel
      int64_t late_rows = 0;               // folded out of start order (approximate)
    } hta;
  } device_timeline;

  // Allocation vs activity vs useful work, side by side.
  struct Utilization {
    double allocated_device_hours = 0;  // = resource_hours
    double busy_device_hours = 0;       // busy time in the step window (union of all devices)
    double samples_per_busy_device_s = 0;
  } utilization;

  struct Events {
    int64_t recorded = 0;
    int64_t dropped = 0;
    int threads = 0;
    int64_t buffer_bytes_per_thread = 0;
    int64_t recorder_bytes = 0;  // buffer_bytes_per_thread x the most rings alive at once
    // Ranges (or device records) that reached the analysis after it had
    // folded the time they began in: their part before that point is missing
    // from phases and idle. Ranges longer than Options::fold_delay_ms that
    // end outside a step, device records more than 10 s behind their
    // launch. 0 in most runs.
    int64_t late = 0;
    // What the scopes' timestamps were read with: "tsc" (converted to
    // CLOCK_MONOTONIC at each drain) or "clock_monotonic" with the reason
    // ("clock_monotonic (the kernel's clocksource is kvm-clock)").
    std::string clock;
    double tsc_hz = 0;               // measured over the run; 0 without the TSC
    int64_t clock_calibrations = 0;  // calibration points taken
    int64_t clock_max_error_ns = 0;  // the worst extrapolation error seen
  } events;

  // What trace.json kept (docs/report-schema.md, "trace"): windows of whole
  // steps within Options::trace_budget_bytes.
  struct Trace {
    int64_t windows_written = 0;     // first steady, repeating and startup windows
    int64_t windows_dropped = 0;     // windows and slowest steps the budget left out
    int64_t first_window_step = -1;  // the first steady window's first step, -1 none
    int64_t first_window_steps = 0;
    struct SlowStep {
      int64_t index = 0;
      double duration_ms = 0;
    };
    std::vector<SlowStep> slowest;  // the slowest steady steps kept, slowest first
    int64_t bytes = 0;              // trace.json's size
  } trace;

  // What steps.jsonl holds: a row per step, written on a thread of its own.
  struct StepsFile {
    int64_t rows = 0;          // written
    int64_t rows_dropped = 0;  // the disk fell behind by more than the queue
  } steps_file;

  struct Overhead {
    double per_scope_ns = 0;     // measured at Session::Start
    double estimated_share = 0;  // recorded scopes x per_scope_ns / total
  } overhead;

  // One row per step: what steps.jsonl holds (one JSON object a line,
  // appended as the run goes; report.json keeps aggregates only) and what the
  // cross-rank straggler report (`trainscope ranks DIR`) compares.
  struct Step {
    int64_t index = 0;
    double start_s = 0;  // since process start
    double duration_ms = 0;
    int64_t samples = 0;
    double sync_ms = 0;       // in kSync ranges tagged with the step (collectives, device syncs)
    double data_wait_ms = 0;  // in kDataWait ranges tagged with the step
    // Per phase (PhaseName order): the union of the phase's ranges, any
    // thread, inside the step's time.
    std::array<double, kPhaseCount> phase_ms{};
    double idle_ms = 0;              // compute idle inside the step (see idle)
    std::string top_cause;           // the cause with the most of idle_ms; "" if none
    int64_t memory_bytes = -1;       // allocated at the step's end (-1: not sampled)
    int64_t peak_memory_bytes = -1;  // peak during the step (-1: not sampled)
  };
  // Session::RecordStepMemory's samples, summed up.
  struct Memory {
    std::string source;  // "cuda_caching_allocator", "process_rss", "" if never sampled
    int64_t peak_bytes = -1;
    int64_t last_bytes = -1;
    // Reserved from the device by the allocator (cuda_caching_allocator
    // only; -1: not sampled): the largest per-step peak, and at the end of
    // the last sampled step.
    int64_t reserved_peak_bytes = -1;
    int64_t reserved_last_bytes = -1;
  } memory;
  // RecordCounter's values, by name.
  struct Counter {
    std::string name;
    int64_t samples = 0;
    int64_t min = 0;
    int64_t max = 0;
    double mean = 0;
    // The samples over time: consecutive windows of equal width from the
    // window holding the first sample, at most kCounterWindows; a run that
    // outlasts them merges neighbours and doubles the width, so a run of
    // any length keeps the same number (analysis/counter_series.h).
    struct Window {
      double start_s = 0;  // from process start
      double end_s = 0;
      int64_t samples = 0;  // 0: none fell in it (min, max and mean are then 0)
      int64_t min = 0;
      int64_t max = 0;
      double mean = 0;
    };
    std::vector<Window> series;
  };
  static constexpr int kCounterWindows = 32;
  std::vector<Counter> counters;
  // Each input pipeline the program described (Session::RecordLoader):
  // its settings, and what its counters "<name>.queue_depth" and
  // "<name>.cpu_us" say it did.
  struct Loader {
    std::string name;  // the counters' prefix, "loader"
    std::string kind;  // "torch::data::DataLoader", "PrefetchLoader", or the program's word
    int64_t workers = 0;
    int64_t prefetch = 0;     // batches in flight per worker (LibTorch: max_jobs / workers)
    bool pin_memory = false;  // batches pinned on the workers for asynchronous copies
    int64_t batch_size = 0;   // 0: not said
    int64_t batches = 0;      // batches made (samples of "<name>.cpu_us")
    double cpu_s = 0;         // CPU time making them, on whichever threads made them
    double cpu_ms_per_batch = 0;
    double cpu_cores = 0;         // cpu_s / timing.total_s: cores kept busy on average
    int64_t queue_samples = 0;    // fetches that recorded the queue's depth
    double queue_depth_mean = 0;  // batches ready when the consumer asked
    int64_t queue_depth_max = 0;
  };
  static constexpr int kMaxLoaders = 16;
  std::vector<Loader> loaders;
  // Checkpoint cost and recovery (Session::NoteCheckpointSave / NoteResume).
  struct Checkpoint {
    int64_t saves = 0;  // committed
    int64_t failed = 0;
    double blocking_s = 0;  // training-thread time of all saves (snapshot, or the whole sync save)
    double blocking_max_s = 0;
    double persist_s = 0;  // write + commit time (background for async saves)
    uint64_t bytes = 0;
    double persist_bytes_per_s = 0;
    int64_t resumed_from_step = -1;  // -1: a fresh start
    int64_t recomputed_steps = 0;    // steps re-done: interrupted-at step - resumed-from step
    double restore_s = -1;           // process start -> state restored (-1: no resume)
    double restart_delay_s = -1;     // process start -> first step finished after a resume
    // Young/Daly advisor (Options::checkpoint_mtbf_hours > 0 and two saves or more).
    double mtbf_hours = 0;
    double interval_s = 0;                   // mean time between saves
    double optimal_interval_s = 0;           // sqrt(2 x mean blocking cost x MTBF)
    double expected_overhead_share = 0;      // cost/interval + interval/(2 MTBF), at interval_s
    double expected_lost_s_per_failure = 0;  // interval/2 + restart delay
  } checkpoint;
  // A torch.distributed run (Options::world_size > 1).
  struct Distributed {
    std::string backend;             // "gloo", "nccl"; "" when not distributed
    std::vector<int> missing_ranks;  // ranks this one saw fail or vanish
    std::string error;               // the failed collective's error, if any
    // Collective time measured on the device (NCCL: CUDA events around each
    // collective), added to the steps' sync_ms: its total, and the
    // measurements that came after their step's row was written.
    double device_sync_s = 0;
    int64_t device_sync_late = 0;
  } distributed;

  // Request latencies of a serving run; empty when none was recorded.
  using Serving = ServingLatency;
  std::optional<Serving> serving;

  // The training curve (Session::RecordLoss); empty when none was written.
  std::optional<LossCurve> loss_curve;
  // Why the run ended early, as the program said (RecordOutOfMemory);
  // empty when it did not say.
  std::optional<RunFailure> failure;

  Acceptance acceptance;

  std::string recommendation;  // one line, from the idle analysis
};

}  // namespace trainscope

#endif  // TRAINSCOPE_REPORT_H_
