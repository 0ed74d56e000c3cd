// Session: start, drain, finish. See session.h.
#include "trainscope/session.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "fmt/format.h"
#include "sdk/analysis/launch_attribution.h"
#include "sdk/analysis/run_analysis.h"
#include "sdk/analysis/timeline.h"
#include "sdk/core/environment.h"
#include "sdk/core/files.h"
#include "sdk/core/thread_registry.h"
#include "sdk/cupti/collector.h"
#include "sdk/export/report_json.h"
#include "sdk/export/summary.h"
#include "sdk/export/trace_writer.h"
#include "sdk/nvtx/nvtx.h"
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

std::string RankedFile(const Options& o, std::string_view stem) {
  return o.world_size > 1 ? fmt::format("{}-rank{}.json", stem, o.rank)
                          : fmt::format("{}.json", stem);
}

absl::Status ValidateOptions(Options& o) {
  if (o.run_name.empty()) return absl::InvalidArgumentError("Options::run_name is empty");
  if (o.world_size < 0) o.world_size = EnvInt("WORLD_SIZE", 1);
  if (o.rank < 0) o.rank = EnvInt("RANK", 0);
  if (o.world_size < 1 || o.rank >= o.world_size) {
    return absl::InvalidArgumentError(fmt::format(
        "Options::rank is {} and world_size {}: need 0 <= rank < world_size", o.rank,
        o.world_size));
  }
  if (o.buffer_bytes_per_thread.value < kMinBufferBytes ||
      o.buffer_bytes_per_thread.value > kMaxBufferBytes) {
    return absl::InvalidArgumentError(
        fmt::format("Options::buffer_bytes_per_thread is {}; it must be between {} and {}", o.buffer_bytes_per_thread.value, kMinBufferBytes, kMaxBufferBytes));
  }
  if (o.flush_interval_ms <= 0 || o.trace_checkpoint_interval_ms <= 0) {
    return absl::InvalidArgumentError(
        "Options::flush_interval_ms and trace_checkpoint_interval_ms must be positive");
  }
  if (o.resource_request.accelerators < 0) {
    return absl::InvalidArgumentError("Options::resource_request.accelerators is negative");
  }
  if ((o.sinks & kSinkSummary) != 0 && o.summary_stream == nullptr) {
    return absl::InvalidArgumentError("Options::summary_stream is null but kSinkSummary is set");
  }
  return absl::OkStatus();
}

// The recorder's cost per scope (two clock reads and a push), measured on a
// private ring so that nothing is recorded.
double CalibrateScopeCostNs() {
  constexpr int kIterations = 4096;
  ThreadBuffer ring(8192, 0, 0);
  const TimestampNs begin = NowNs();
  for (int i = 0; i < kIterations; ++i) {
    const TimestampNs start = NowNs();
    ring.Push(Event{start, NowNs(), i, 0, EventKind::kRange, Phase::kOther, 0});
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
  bool finished = false;
  core::ProcessStart process_start;
  std::optional<double> submit_unix_s;
  Report report;  // environment facts at Start; analysis at Finish
  double scope_cost_ns = 0;
  std::unique_ptr<exporter::TraceWriter> trace;
  absl::Status trace_status;  // first trace error, reported at Finish

  // Drained events, per registry index.
  struct ThreadEvents {
    uint32_t os_tid = 0;
    std::vector<Event> events;
    std::string written_name;
  };
  std::vector<ThreadEvents> threads;
  std::vector<core::ThreadEntry> entries;  // last registry snapshot

  std::mutex mu;  // guards report.config, report.acceptance, memory, report.distributed, stop
  struct MemorySample {
    int64_t current = -1, peak = -1;
  };
  std::unordered_map<int64_t, MemorySample> memory;  // by step
  std::vector<TimestampNs> save_times_ns;             // NoteCheckpointSave's
  std::vector<std::pair<int, std::function<void()>>> finish_hooks;
  int next_hook = 0;
  void SummarizeMemoryAndCounters();
  std::condition_variable wake;
  bool stop = false;
  std::thread drainer;

  void DrainOnce();
  void StartDeviceTimeline();
  bool InProfileWindow(int64_t step) const {
    return (options.profile_start_step < 0 || step >= options.profile_start_step) &&
           (options.profile_stop_step < 0 || step < options.profile_stop_step);
  }
  void DrainLoop();
  analysis::Timeline BuildTimeline() const;
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
    std::fprintf(stderr, "trainscope: CUPTI unavailable: %s; host-only analysis\n",
                 reason.c_str());
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

void Session::Impl::DrainOnce() {
  entries = core::ThreadRegistry::Get().Snapshot();
  if (threads.size() < entries.size()) threads.resize(entries.size());
  auto tid_of = [this](uint16_t index) {
    return index < entries.size() ? entries[index].os_tid : 0u;
  };
  for (size_t i = 0; i < entries.size(); ++i) {
    ThreadEvents& thread = threads[i];
    thread.os_tid = entries[i].os_tid;
    if (trace != nullptr) {
      std::string name = core::ThreadRegistry::Get().ThreadName(thread.os_tid);
      if (!name.empty() && name != thread.written_name) {
        trace_status.Update(trace->NameThread(thread.os_tid, name));
        thread.written_name = std::move(name);
      }
    }
    entries[i].buffer->Drain([&](const Event* events, size_t count) {
      thread.events.insert(thread.events.end(), events, events + count);
      if (trace != nullptr && trace_status.ok()) {
        trace_status.Update(trace->Append(thread.os_tid, events, count, tid_of));
      }
    });
  }
}

void Session::Impl::DrainLoop() {
  using Clock = std::chrono::steady_clock;
  auto next_publish = Clock::now() + std::chrono::milliseconds(options.trace_checkpoint_interval_ms);
  std::unique_lock<std::mutex> lock(mu);
  while (!stop) {
    wake.wait_for(lock, std::chrono::milliseconds(options.flush_interval_ms));
    if (stop) break;
    lock.unlock();
    DrainOnce();
    if (trace != nullptr && trace_status.ok() && Clock::now() >= next_publish) {
      trace_status.Update(trace->Publish(false));
      next_publish = Clock::now() + std::chrono::milliseconds(options.trace_checkpoint_interval_ms);
    }
    lock.lock();
  }
}

analysis::Timeline Session::Impl::BuildTimeline() const {
  analysis::Timeline timeline;
  const int64_t pid = report.run.pid;
  std::unordered_map<NameId, uint32_t> names;
  auto name_of = [&](NameId id) {
    auto it = names.find(id);
    if (it != names.end()) return it->second;
    const uint32_t local = timeline.Intern(LookupName(id));
    names.emplace(id, local);
    return local;
  };
  const uint32_t async_track = timeline.AddTrack(
      {analysis::TrackKind::kHostAsync, pid, 0, "cross-thread ranges"});
  const uint32_t step_name = timeline.Intern("step");
  for (const ThreadEvents& thread : threads) {
    std::string name = core::ThreadRegistry::Get().ThreadName(thread.os_tid);
    const uint32_t track =
        timeline.AddTrack({analysis::TrackKind::kHostThread, pid, thread.os_tid, name});
    for (const Event& e : thread.events) {
      analysis::Interval interval;
      interval.start_ns = e.start_ns;
      interval.end_ns = e.end_ns;
      interval.step = e.step;
      interval.phase = e.phase;
      switch (e.kind) {
        case EventKind::kStep:
          interval.kind = analysis::IntervalKind::kStep;
          interval.value = e.value;
          interval.name = step_name;
          interval.track = track;
          break;
        case EventKind::kAsync:
          interval.kind = analysis::IntervalKind::kAsyncRange;
          interval.name = name_of(e.value);
          interval.track = async_track;
          break;
        case EventKind::kRange:
          interval.kind = analysis::IntervalKind::kHostRange;
          interval.name = name_of(e.value);
          interval.track = track;
          break;
        case EventKind::kCounter:  // report.counters, not intervals
          continue;
      }
      timeline.Add(interval);
    }
  }
  timeline.Sort();
  return timeline;
}

absl::Status Session::Impl::WriteOutputs() {
  absl::Status status = trace_status;
  if (trace != nullptr && status.ok()) status.Update(trace->Publish(true));
  if ((options.sinks & kSinkReportJson) != 0) {
    status.Update(core::WriteFileAtomically(
        fmt::format("{}/{}", options.output_dir, RankedFile(options, "report")),
        exporter::ReportToJson(report)));
  }
  if ((options.sinks & kSinkSummary) != 0) {
    const std::string summary = exporter::FormatSummary(report);
    std::fputs(summary.c_str(), options.summary_stream);
    if ((options.sinks & (kSinkTraceJson | kSinkReportJson)) != 0) {
      std::fprintf(options.summary_stream, "outputs: %s/%s%s\n", options.output_dir.c_str(),
                   (options.sinks & kSinkTraceJson) != 0
                       ? (RankedFile(options, "trace") + " ").c_str()
                       : "",
                   (options.sinks & kSinkReportJson) != 0 ? RankedFile(options, "report").c_str()
                                                           : "");
    }
    std::fflush(options.summary_stream);
  }
  return status;
}

namespace {
bool trace_ok(const Session::Impl& s) { return s.trace != nullptr && s.trace_status.ok(); }
}  // namespace

absl::StatusOr<Session> Session::Start(Options options) {
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
  if ((options.sinks & (kSinkTraceJson | kSinkReportJson)) != 0) {
    if (absl::Status status = core::EnsureWritableDirectory(options.output_dir); !status.ok()) {
      return fail(status);
    }
  }
  absl::StatusOr<core::ProcessStart> start = core::ReadProcessStart();
  if (!start.ok()) return fail(start.status());
  impl->process_start = *start;
  if (options.submit_time_unix_s) {
    impl->submit_unix_s = options.submit_time_unix_s;
  } else if (const char* text = std::getenv("TRAINSCOPE_SUBMIT_TIME"); text && *text) {
    absl::StatusOr<double> submit = core::ParseSubmitTime(text);
    if (!submit.ok()) {
      return fail(absl::InvalidArgumentError(
          fmt::format("TRAINSCOPE_SUBMIT_TIME: {}", std::string(submit.status().message()))));
    }
    impl->submit_unix_s = *submit;
  }
  core::DescribeEnvironment(options, &impl->report);
  impl->report.run.started_at = core::FormatIso8601(impl->process_start.unix_s);
  impl->report.resource_request = options.resource_request;
  impl->report.config = options.config;
  impl->report.run.rank = options.rank;
  impl->report.run.world_size = options.world_size;
  impl->scope_cost_ns = CalibrateScopeCostNs();
  if ((options.sinks & kSinkTraceJson) != 0) {
    auto trace =
        exporter::TraceWriter::Open(options.output_dir, RankedFile(options, "trace"),
                                    options.run_name, impl->report.run.pid);
    if (!trace.ok()) return fail(trace.status());
    impl->trace = std::move(*trace);
  }
  impl->options = std::move(options);
  impl->StartDeviceTimeline();
  impl->generation = g_last_generation.fetch_add(1) + 1;
  if (impl->generation == 0) impl->generation = g_last_generation.fetch_add(1) + 1;
  const size_t capacity = impl->options.buffer_bytes_per_thread.value / sizeof(Event);
  core::ThreadRegistry::Get().BeginSession(impl->generation, capacity);
  detail::g_current_step.store(-1, std::memory_order_relaxed);
  if (impl->options.nvtx) nvtx::Initialize();
  detail::g_nvtx_enabled.store(impl->options.nvtx && nvtx::Available(),
                               std::memory_order_relaxed);
  detail::g_generation.store(impl->generation, std::memory_order_release);
  Impl* raw = impl.get();
  g_active_impl.store(raw, std::memory_order_release);
  impl->drainer = std::thread([raw] { raw->DrainLoop(); });
  return Session(std::move(impl));
}

namespace detail {
void OnStepBegin(int64_t step) noexcept {
  Session::Impl* impl = g_active_impl.load(std::memory_order_acquire);
  if (impl != nullptr && impl->collector != nullptr) {
    impl->collector->SetActive(impl->InProfileWindow(step));
  }
}
}  // namespace detail

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::Session(Session&& other) noexcept = default;
Session& Session::operator=(Session&& other) noexcept {
  if (this != &other) {
    if (impl_ != nullptr && !impl_->finished) (void)Finish();
    impl_ = std::move(other.impl_);
  }
  return *this;
}

Session::~Session() {
  if (impl_ == nullptr || impl_->finished) return;
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
  impl_->memory[step] = {current_bytes, peak_bytes};
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
  impl_->save_times_ns.push_back(NowNs());
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
  hooks.erase(std::remove_if(hooks.begin(), hooks.end(), [&](const auto& h) { return h.first == id; }),
              hooks.end());
}

std::string Session::trace_file() const { return RankedFile(impl_->options, "trace"); }
std::string Session::report_file() const { return RankedFile(impl_->options, "report"); }

// Per-step memory into report.steps, and the counters' statistics. Called
// with mu held, after AnalyzeRun.
void Session::Impl::SummarizeMemoryAndCounters() {
  for (Report::Step& step : report.steps) {
    auto it = memory.find(step.index);
    if (it == memory.end()) continue;
    step.memory_bytes = it->second.current;
    step.peak_memory_bytes = it->second.peak;
    report.memory.peak_bytes = std::max(report.memory.peak_bytes, it->second.peak);
    report.memory.last_bytes = it->second.current;
  }
  std::unordered_map<NameId, Report::Counter> counters;
  std::vector<NameId> order;
  for (const ThreadEvents& thread : threads) {
    for (const Event& e : thread.events) {
      if (e.kind != EventKind::kCounter) continue;
      auto [it, added] = counters.try_emplace(e.value);
      Report::Counter& c = it->second;
      if (added) {
        order.push_back(e.value);
        c.name = std::string(LookupName(e.value));
        c.min = c.max = e.end_ns;
      }
      c.min = std::min(c.min, e.end_ns);
      c.max = std::max(c.max, e.end_ns);
      c.mean += (static_cast<double>(e.end_ns) - c.mean) / static_cast<double>(++c.samples);
    }
  }
  // Checkpoints: throughput, restart delay, and the Young/Daly advice.
  Report::Checkpoint& c = report.checkpoint;
  c.persist_bytes_per_s = c.persist_s > 0 ? c.bytes / c.persist_s : 0;
  if (c.resumed_from_step >= 0 && !report.steps.empty()) {
    c.restart_delay_s = report.steps.front().start_s + report.steps.front().duration_ms / 1e3;
  }
  c.mtbf_hours = options.checkpoint_mtbf_hours;
  if (save_times_ns.size() >= 2) {
    c.interval_s = (save_times_ns.back() - save_times_ns.front()) / 1e9 /
                   static_cast<double>(save_times_ns.size() - 1);
  }
  if (c.mtbf_hours > 0 && c.saves > 0) {
    const double mtbf_s = c.mtbf_hours * 3600;
    const double cost_s = c.blocking_s / static_cast<double>(c.saves);
    c.optimal_interval_s = std::sqrt(2 * cost_s * mtbf_s);
    if (c.interval_s > 0) {
      c.expected_overhead_share = cost_s / c.interval_s + c.interval_s / (2 * mtbf_s);
      c.expected_lost_s_per_failure =
          c.interval_s / 2 + (c.restart_delay_s > 0 ? c.restart_delay_s : 0);
    }
  }
  report.counters.clear();
  for (NameId id : order) report.counters.push_back(counters[id]);
  std::sort(report.counters.begin(), report.counters.end(),
            [](const Report::Counter& a, const Report::Counter& b) { return a.name < b.name; });
}

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

void Session::SetAcceptance(std::string_view metric, double target, double value,
                            bool higher_is_better) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Acceptance& a = impl_->report.acceptance;
  a.metric = std::string(metric);
  a.target = target;
  a.value = value;
  a.higher_is_better = higher_is_better;
  a.passed = higher_is_better ? value >= target : value <= target;
}

absl::StatusOr<Report> Session::Finish() {
  if (impl_ == nullptr || impl_->finished) {
    return absl::FailedPreconditionError("trainscope session already finished");
  }
  Impl& s = *impl_;
  {
    std::vector<std::pair<int, std::function<void()>>> hooks;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      hooks = s.finish_hooks;
    }
    for (auto& [id, hook] : hooks) hook();  // unlocked: hooks may record into the session
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
  s.DrainOnce();
  s.finished = true;

  Report::Events& events = s.report.events;
  events.threads = static_cast<int>(s.entries.size());
  events.buffer_bytes_per_thread =
      s.entries.empty() ? 0 : static_cast<int64_t>(s.entries.front().buffer->bytes());
  events.recorder_bytes = events.buffer_bytes_per_thread * events.threads;
  for (size_t i = 0; i < s.entries.size(); ++i) {
    events.dropped += static_cast<int64_t>(s.entries[i].buffer->dropped());
    events.recorded += static_cast<int64_t>(s.threads[i].events.size());
  }
  core::ThreadRegistry::Get().EndSession();

  analysis::RunClock clock;
  clock.process_start_ns = s.process_start.monotonic_ns;
  clock.finish_ns = finish_ns;
  clock.process_start_unix_s = s.process_start.unix_s;
  clock.submit_unix_s = s.submit_unix_s;
  if (s.device_status == "collected") {
    clock.window_first_step = s.options.profile_start_step;
    clock.window_end_step = s.options.profile_stop_step;
  }
  analysis::Timeline timeline = s.BuildTimeline();
  Report::DeviceTimeline& device = s.report.device_timeline;
  device.status = s.device_status;
  if (s.collector != nullptr) {
    if (absl::Status stopped = s.collector->Stop(); !stopped.ok()) {
      device.status = fmt::format("collected, then failed to stop: {}",
                                  std::string(stopped.message()));
    }
    s.collector->AppendTo(&timeline);
    timeline.Sort();
    const cupti::CollectorStats stats = s.collector->stats();
    device.records = stats.records;
    device.dropped = stats.dropped;
    device.kernels = stats.kernels;
    s.collector.reset();
  }
  // Tag device work with its launching phase and step before it is written.
  const analysis::LaunchAttribution launches = analysis::AttributeLaunches(&timeline);
  if (device.kernels > 0 && trace_ok(s)) {
    s.trace_status.Update(s.trace->AppendDeviceIntervals(timeline));
  }
  for (const auto& [phase, ns] : launches.busy_by_phase) {
    device.busy_s_by_phase.emplace_back(phase, ns / 1e9);
  }
  std::lock_guard<std::mutex> lock(s.mu);  // SetConfig/SetAcceptance may race
  analysis::AnalyzeRun(timeline, clock, s.options.warmup_steps, &s.report);
  s.SummarizeMemoryAndCounters();
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
