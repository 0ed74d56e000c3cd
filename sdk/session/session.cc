// Session: start and finish. See session.h. The state is session_impl.h;
// the drain is drain.cc; what the run tells the session as it goes is
// session_records.cc.
#include "trainscope/session.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <thread>
#include <unordered_map>

#include "fmt/format.h"
#include "sdk/analysis/checkpoint_advice.h"
#include "sdk/analysis/quantile_sketch.h"
#include "sdk/analysis/run_analysis.h"
#include "sdk/analysis/run_fold.h"
#include "sdk/cupti/collector.h"
#include "sdk/export/steps_file.h"
#include "sdk/export/trace_windows.h"
#include "sdk/export/trace_writer.h"
#include "sdk/ground/files.h"
#include "sdk/ground/locks.h"
#include "sdk/ground/tick_clock.h"
#include "sdk/ground/timeline.h"
#include "sdk/nvtx/nvtx.h"
#include "sdk/recorder/thread_registry.h"
#include "sdk/session/environment.h"
#include "sdk/session/session_impl.h"
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

// The session that OnStepBegin reports to.
std::atomic<Session::Impl*> g_active_impl{nullptr};

}  // namespace

// The process's start and the job's submission (Options, else
// TRAINSCOPE_SUBMIT_TIME). Errors: the process start unreadable; a
// malformed TRAINSCOPE_SUBMIT_TIME (InvalidArgument naming it).
absl::Status Session::Impl::ReadStartTimes(const Options& options) {
  absl::StatusOr<environment::ProcessStart> start = environment::ReadProcessStart();
  if (!start.ok()) return start.status();
  process_start = *start;
  if (options.submit_time_unix_s) {
    submit_unix_s = options.submit_time_unix_s;
  } else if (const char* text = std::getenv("TRAINSCOPE_SUBMIT_TIME"); text && *text) {
    absl::StatusOr<double> submit = environment::ParseSubmitTime(text);
    if (!submit.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("TRAINSCOPE_SUBMIT_TIME: {}", std::string(submit.status().message())));
    }
    submit_unix_s = *submit;
  }
  return absl::OkStatus();
}

// A new generation: the registry's rings, the hooks' globals, NVTX, and
// the drainer thread.
void Session::Impl::BeginRecording() {
  generation = g_last_generation.fetch_add(1) + 1;
  if (generation == 0) generation = g_last_generation.fetch_add(1) + 1;
  const size_t capacity = options.buffer_bytes_per_thread.value / sizeof(Event);
  recorder::ThreadRegistry::Get().BeginSession(generation, capacity);
  internal::g_current_step.store(-1, std::memory_order_relaxed);
  internal::g_step_open_since.store(-1, std::memory_order_relaxed);
  if (options.nvtx) nvtx::Initialize();
  internal::g_nvtx_enabled.store(options.nvtx && nvtx::Available(), std::memory_order_relaxed);
  internal::g_generation.store(generation, std::memory_order_release);
  g_active_impl.store(this, std::memory_order_release);
  drainer = std::thread([this] {
    pthread_setname_np(pthread_self(),
                       "tscope-drain");  // as top and gdb show it (15 chars at most)
    DrainLoop();
  });
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
  if (absl::Status status = impl->ReadStartTimes(options); !status.ok()) return fail(status);
  environment::DescribeEnvironment(options, &impl->report);
  impl->report.run.started_at = environment::FormatIso8601(impl->process_start.unix_s);
  impl->report.resource_request = options.resource_request;
  impl->report.run.rank = options.rank;
  impl->report.run.world_size = options.world_size;
  impl->options.clock = options.clock;
  impl->ChooseClock();
  impl->scope_cost_ns = CalibrateScopeCostNs();
  if (absl::Status status = impl->outputs.Open(options, impl->report.run.pid); !status.ok()) {
    return fail(status);
  }
  for (const auto& [key, value] : options.config) impl->notes.SetConfig(key, value);
  impl->loss = std::make_unique<LossFile>(options.output_dir, RankedFile(options, "loss", "jsonl"));
  impl->options = std::move(options);
  impl->StartDeviceTimeline();
  impl->StartFold();
  impl->BeginRecording();
  return Session(std::shared_ptr<Impl>(std::move(impl)), /*owner=*/true);
}

namespace internal {
void OnStepBegin(int64_t step) noexcept {
  Session::Impl* impl = g_active_impl.load(std::memory_order_acquire);
  if (impl != nullptr && impl->collector != nullptr) {
    impl->collector->SetActive(impl->InProfileWindow(step));
  }
}
}  // namespace internal

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

std::string Session::trace_file() const { return RankedFile(impl_->options, "trace"); }
std::string Session::report_file() const { return RankedFile(impl_->options, "report"); }

const std::string& Session::output_dir() const { return impl_->options.output_dir; }

// Finish's stages.

void Session::Impl::RunFinishHooks() {
  for (auto& hook : notes.FinishHooks()) {  // unlocked: hooks may record into the session
    try {
      hook();
    } catch (const std::exception& e) {  // a hook's failure must not stop the report
      std::fprintf(stderr, "trainscope: a finish hook failed: %s\n", e.what());
    }
  }
}

// Scopes stop recording; the drainer stops after its last drain.
void Session::Impl::StopRecording() {
  internal::g_generation.store(0, std::memory_order_release);
  internal::g_step_hook.store(false, std::memory_order_relaxed);
  g_active_impl.store(nullptr, std::memory_order_release);
  internal::g_nvtx_enabled.store(false, std::memory_order_relaxed);
  internal::g_current_step.store(-1, std::memory_order_relaxed);
  {
    ground::MutexLock lock(&stop_mu);
    stop = true;
  }
  wake.SignalAll();
  drainer.join();
  finished = true;
}

// The rings drained once more, the device's last records taken, and the
// rest of the run folded into the report's analysed sections.
void Session::Impl::DrainLast(TimestampNs finish_ns) {
  DrainOnce(/*final=*/true);
  StopDeviceTimeline();
  analysis::RunClock clock;
  clock.process_start_ns = process_start.monotonic_ns;
  clock.finish_ns = finish_ns;
  clock.process_start_unix_s = process_start.unix_s;
  clock.submit_unix_s = submit_unix_s;
  TakeDeviceSync();
  fold->Finish(clock, &report);
}

// The CUPTI collector stops; its last records go to the fold and its
// figures to report.device_timeline.
void Session::Impl::StopDeviceTimeline() {
  Report::DeviceTimeline& device = report.device_timeline;
  device.status = device_status;
  if (collector == nullptr) return;
  if (absl::Status stopped = collector->Stop(); !stopped.ok()) {
    device.status =
        fmt::format("collected, then failed to stop: {}", std::string(stopped.message()));
  }
  collector->AppendTo(&fold->input());
  const cupti::CollectorStats stats = collector->stats();
  device.records = stats.records;
  device.dropped = stats.dropped;
  device.kernels = stats.kernels;
  device.incomplete_buffers = stats.incomplete_buffers;
  device.launches_unmatched = stats.launches_unmatched;
  collector.reset();
}

// After the fold: the recorder's figures, what user threads noted, the
// counters and loaders, the recorder's overhead.
void Session::Impl::FillReport() {
  FillEvents();
  notes.FillReport(process_start.monotonic_ns, &report);
  if (std::optional<LossCurve> curve = loss->Close()) report.loss_curve = std::move(*curve);
  FillCheckpoint();
  FillCountersAndLoaders();
  report.overhead.per_scope_ns = scope_cost_ns;
  report.overhead.estimated_share =
      report.timing.total_s > 0
          ? report.events.recorded * scope_cost_ns / (report.timing.total_s * 1e9)
          : 0;
}

// report.events: the recorder's threads, rings, losses and clock.
void Session::Impl::FillEvents() {
  Report::Events& events = report.events;
  recorder::ThreadRegistry& registry = recorder::ThreadRegistry::Get();
  events.threads = static_cast<int>(registry.registered());
  events.buffer_bytes_per_thread =
      events.threads == 0 ? 0 : static_cast<int64_t>(RingBytes(options.buffer_bytes_per_thread));
  events.recorder_bytes = events.buffer_bytes_per_thread * registry.peak_live();
  // Lost: events refused for want of a ring slot, those of full rings (freed
  // or not), those pushed since the final drain (scopes that ended during
  // Finish), and the step still open, whose event comes too late.
  events.dropped = registry.refused() + drain.released_dropped;
  for (const recorder::ThreadEntry& entry : drain.entries) {
    if (entry.buffer == nullptr) continue;
    events.dropped += static_cast<int64_t>(entry.buffer->dropped() + entry.buffer->pending());
  }
  if (internal::g_step_open_since.load(std::memory_order_acquire) >= 0) ++events.dropped;
  events.recorded = drain.recorded;
  events.clock = clock_note;
  if (tsc) {
    events.tsc_hz = drain.calibration.tsc_hz();
    events.clock_calibrations = drain.calibration.points();
    events.clock_max_error_ns = drain.calibration.max_error_ns();
  }
  registry.EndSession();
}

// The checkpoints' throughput, restart delay, and the Young/Daly advice
// (analysis/checkpoint_advice.h).
void Session::Impl::FillCheckpoint() {
  Report::Checkpoint& c = report.checkpoint;
  c.persist_bytes_per_s = c.persist_s > 0 ? c.bytes / c.persist_s : 0;
  const Report::Step& first = fold->first_row();
  if (c.resumed_from_step >= 0 && first.index >= 0) {
    c.restart_delay_s = first.start_s + first.duration_ms / 1e3;
  }
  analysis::AdviseCheckpointInterval(options.checkpoint_mtbf_hours, &c);
}

// The counters' statistics, and each loader's settings joined with its two
// counters.
void Session::Impl::FillCountersAndLoaders() {
  report.counters.clear();
  for (const auto& [id, counter] : drain.counters) {
    Report::Counter& c = report.counters.emplace_back(counter.summary);
    c.series = counter.series.Windows(process_start.monotonic_ns);
  }
  std::sort(report.counters.begin(), report.counters.end(),
            [](const Report::Counter& a, const Report::Counter& b) { return a.name < b.name; });
  for (Report::Loader& l : report.loaders) {
    for (const Report::Counter& c : report.counters) {
      if (c.name == l.name + ".cpu_us") {
        l.batches = c.samples;
        l.cpu_s = c.mean * static_cast<double>(c.samples) / 1e6;
        l.cpu_ms_per_batch = c.mean / 1e3;
        l.cpu_cores = report.timing.total_s > 0 ? l.cpu_s / report.timing.total_s : 0;
      } else if (c.name == l.name + ".queue_depth") {
        l.queue_samples = c.samples;
        l.queue_depth_mean = c.mean;
        l.queue_depth_max = c.max;
      }
    }
  }
}

// trace.json's last windows, steps.jsonl closed, then report.json and the
// summary. Errors: the first of the files'.
absl::Status Session::Impl::WriteOutputs() {
  absl::Status status = outputs.Close(&report);
  status.Update(RunOutputs::WriteReport(options, report));
  return status;
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
  s.RunFinishHooks();
  const TimestampNs finish_ns = NowNs();
  s.StopRecording();
  s.DrainLast(finish_ns);
  s.FillReport();
  absl::Status status = s.WriteOutputs();
  g_session_active.store(false);
  if (!status.ok()) return status;
  return s.report;
}

}  // namespace trainscope
