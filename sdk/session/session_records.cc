// What a run tells its Session as it goes: memory samples, distributed
// facts, checkpoint saves, configuration, quality and latencies. See
// trainscope/session.h.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <mutex>

#include "sdk/ground/files.h"
#include "sdk/session/session_impl.h"

namespace trainscope {

void Session::RecordStepMemory(int64_t step, int64_t current_bytes, int64_t peak_bytes,
                               std::string_view source, int64_t reserved_bytes,
                               int64_t reserved_peak_bytes) {
  // A peak, when sampled (-1: not), is never below the present.
  if (peak_bytes >= 0) peak_bytes = std::max(peak_bytes, current_bytes);
  if (reserved_peak_bytes >= 0) reserved_peak_bytes = std::max(reserved_peak_bytes, reserved_bytes);
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto& memory = impl_->memory;
  memory[step] = {current_bytes, peak_bytes, reserved_bytes, reserved_peak_bytes};
  // Here too, not only with the step's row: a sample that came after its
  // row (the first, or after fold_delay_ms) still counts in the peak.
  Report::Memory& totals = impl_->report.memory;
  totals.peak_bytes = std::max(totals.peak_bytes, peak_bytes);
  totals.reserved_peak_bytes = std::max(totals.reserved_peak_bytes, reserved_peak_bytes);
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

absl::Status Session::RecordLoss(int64_t step, double value, bool skipped) {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> lock(s.loss_mu);
  if (s.loss_closed) {
    return absl::FailedPreconditionError("RecordLoss: the session has finished");
  }
  if (!s.loss_status.ok()) {
    ++s.loss_curve.lines_lost;
    return s.loss_status;
  }
  if (s.loss_file == nullptr) {
    s.loss_curve.file = RankedFile(s.options, "loss", "jsonl");
    s.loss_path = output_dir() + "/" + s.loss_curve.file;
    s.loss_file = std::fopen(s.loss_path.c_str(), "we");
    if (s.loss_file == nullptr) {
      s.loss_status = ground::ErrnoStatus(errno, "cannot create " + s.loss_path);
      ++s.loss_curve.lines_lost;
      return s.loss_status;
    }
    constexpr size_t kBuffer = 64 << 10;
    s.loss_buffer = std::make_unique<char[]>(kBuffer);
    std::setvbuf(s.loss_file, s.loss_buffer.get(), _IOFBF, kBuffer);
  }
  const bool finite = std::isfinite(value);
  char line[96];
  const int n =
      finite
          ? std::snprintf(line, sizeof(line), "{\"step\": %lld, \"loss\": %.9g%s}\n",
                          static_cast<long long>(step), value, skipped ? ", \"skipped\": true" : "")
          : std::snprintf(line, sizeof(line), "{\"step\": %lld, \"loss\": null%s}\n",
                          static_cast<long long>(step), skipped ? ", \"skipped\": true" : "");
  if (std::fwrite(line, 1, static_cast<size_t>(n), s.loss_file) != static_cast<size_t>(n)) {
    s.loss_status = ground::ErrnoStatus(errno, "cannot write " + s.loss_path);
    ++s.loss_curve.lines_lost;
    return s.loss_status;
  }
  ++s.loss_curve.points;
  s.loss_curve.nonfinite += finite ? 0 : 1;
  s.loss_curve.skipped += skipped ? 1 : 0;
  if (finite) s.loss_curve.last = value;
  return absl::OkStatus();
}

void Session::Impl::CloseLossCurve() {
  std::lock_guard<std::mutex> lock(loss_mu);
  loss_closed = true;
  if (loss_file != nullptr) {
    // What the buffer held and could not be written is lost with the file's
    // error: counted as lines whose writes failed, the exact number unknown,
    // so at least one.
    if (std::fclose(loss_file) != 0 && loss_status.ok()) {
      loss_status = ground::ErrnoStatus(errno, "cannot write " + loss_path);
      loss_curve.lines_lost = std::max<int64_t>(loss_curve.lines_lost, 1);
    }
    loss_file = nullptr;
    loss_buffer.reset();
  }
  if (!loss_curve.file.empty()) report.loss_curve = loss_curve;
}

void Session::RecordOutOfMemory(std::string_view message) {
  const TimestampNs now = NowNs();
  const int64_t step = internal::g_current_step.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(impl_->mu);
  RunFailure& f = impl_->report.failure.emplace();
  f.kind = "out_of_memory";
  f.message = std::string(message);
  f.step = step;
  f.at_s = (now - impl_->process_start.monotonic_ns) / 1e9;
}

absl::Status Session::RecordLoader(const LoaderSettings& settings) {
  if (settings.name.empty()) return absl::InvalidArgumentError("RecordLoader: the name is empty");
  if (settings.workers < 0 || settings.prefetch < 0 || settings.batch_size < 0) {
    return absl::InvalidArgumentError(fmt::format(
        "RecordLoader({}): workers {}, prefetch {} and batch_size {} must not be negative",
        settings.name, settings.workers, settings.prefetch, settings.batch_size));
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<Report::Loader>& loaders = impl_->loaders;
  auto it = std::find_if(loaders.begin(), loaders.end(),
                         [&](const Report::Loader& l) { return l.name == settings.name; });
  if (it == loaders.end()) {
    if (loaders.size() >= static_cast<size_t>(Report::kMaxLoaders)) {
      return absl::ResourceExhaustedError(
          fmt::format("RecordLoader({}): {} loaders are recorded already, the most a report keeps",
                      settings.name, Report::kMaxLoaders));
    }
    it = loaders.emplace(loaders.end());
  }
  it->name = settings.name;
  it->kind = settings.kind;
  it->workers = settings.workers;
  it->prefetch = settings.prefetch;
  it->pin_memory = settings.pin_memory;
  it->batch_size = settings.batch_size;
  return absl::OkStatus();
}

void Session::SetAcceptance(std::string_view metric, double target, double value,
                            bool higher_is_better) {
  SetQualityTarget(metric, target, higher_is_better);
  // Only a NaN is refused, and then the run simply did not reach its target.
  (void)RecordQuality(metric, value);
}

}  // namespace trainscope
