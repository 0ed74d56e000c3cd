// RunNotes: see run_notes.h.
#include "sdk/session/run_notes.h"

#include <algorithm>
#include <cmath>

#include "fmt/format.h"
#include "sdk/ground/locks.h"

namespace trainscope {

void RunNotes::SetConfig(std::string_view key, std::string_view value) {
  ground::MutexLock lock(&mu_);
  for (auto& [k, v] : config_) {
    if (k == key) {
      v = std::string(value);
      return;
    }
  }
  config_.emplace_back(std::string(key), std::string(value));
}

void RunNotes::SetQualityTarget(std::string_view metric, double target, bool higher_is_better) {
  ground::MutexLock lock(&mu_);
  Acceptance& a = acceptance_;
  if (a.metric != metric) {
    a = Acceptance{};
    target_met_ns_ = 0;
    a.metric = std::string(metric);
  }
  a.target = target;
  a.higher_is_better = higher_is_better;
  if (a.value) a.passed = higher_is_better ? *a.value >= target : *a.value <= target;
}

absl::Status RunNotes::RecordQuality(std::string_view metric, double value, TimestampNs now) {
  ground::MutexLock lock(&mu_);
  Acceptance& a = acceptance_;
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
    if (*a.passed && target_met_ns_ == 0) target_met_ns_ = now;
  }
  return absl::OkStatus();
}

void RunNotes::AddLatency(double seconds, TimestampNs now) {
  ground::MutexLock lock(&mu_);
  const auto arrival = now - static_cast<TimestampNs>(seconds * 1e9);
  if (latency_ms_.count() == 0 || arrival < first_arrival_ns_) first_arrival_ns_ = arrival;
  last_latency_ns_ = now;
  latency_ms_.Add(seconds * 1e3);
}

void RunNotes::AddMemorySample(int64_t step, MemorySample sample, std::string_view source,
                               TimestampNs now) {
  ground::MutexLock lock(&mu_);
  samples_[step] = sample;
  // Here too, not only with the step's row: a sample that came after its
  // row (the first, or after fold_delay_ms) still counts in the peak.
  memory_.peak_bytes = std::max(memory_.peak_bytes, sample.peak);
  memory_.reserved_peak_bytes = std::max(memory_.reserved_peak_bytes, sample.reserved_peak);
  memory_.source = std::string(source);
  last_memory_ns_.store(now, std::memory_order_release);
  memory_sampled_.store(true, std::memory_order_release);
  if (samples_.size() > kMemoryKept) {  // samples of steps that never came
    samples_.erase(
        std::min_element(samples_.begin(), samples_.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; }));
  }
}

void RunNotes::SetDistributedBackend(std::string_view backend) {
  ground::MutexLock lock(&mu_);
  distributed_.backend = std::string(backend);
}

void RunNotes::NoteMissingRanks(const std::vector<int>& ranks, std::string_view error) {
  ground::MutexLock lock(&mu_);
  std::vector<int>& missing = distributed_.missing_ranks;
  for (int r : ranks) {
    if (std::find(missing.begin(), missing.end(), r) == missing.end()) missing.push_back(r);
  }
  std::sort(missing.begin(), missing.end());
  if (!error.empty()) distributed_.error = std::string(error);
}

void RunNotes::AddStepSyncTime(int64_t step, TimestampNs ns, double seconds) {
  ExpectDeviceSync();
  ground::MutexLock lock(&mu_);
  distributed_.device_sync_s += seconds;
  if (device_sync_.size() >= kDeviceSyncWaiting) {
    ++distributed_.device_sync_late;
    return;
  }
  device_sync_.emplace_back(step, ns);
}

void RunNotes::NoteCheckpointSave(double blocking_s, double persist_s, uint64_t bytes,
                                  bool committed, TimestampNs now) {
  ground::MutexLock lock(&mu_);
  Report::Checkpoint& c = checkpoint_;
  if (!committed) {
    ++c.failed;
    return;
  }
  ++c.saves;
  c.blocking_s += blocking_s;
  c.blocking_max_s = std::max(c.blocking_max_s, blocking_s);
  c.persist_s += persist_s;
  c.bytes += bytes;
  last_save_ns_ = now;
  if (c.saves == 1) first_save_ns_ = now;
}

void RunNotes::NoteResume(int64_t from_step, int64_t interrupted_at_step, double restore_s) {
  ground::MutexLock lock(&mu_);
  checkpoint_.resumed_from_step = from_step;
  checkpoint_.recomputed_steps =
      interrupted_at_step > from_step ? interrupted_at_step - from_step : 0;
  checkpoint_.restore_s = restore_s;
}

void RunNotes::NoteFailure(RunFailure failure) {
  ground::MutexLock lock(&mu_);
  failure_ = std::move(failure);
}

absl::Status RunNotes::SetLoader(const LoaderSettings& settings) {
  ground::MutexLock lock(&mu_);
  auto it = std::find_if(loaders_.begin(), loaders_.end(),
                         [&](const Report::Loader& l) { return l.name == settings.name; });
  if (it == loaders_.end()) {
    if (loaders_.size() >= static_cast<size_t>(Report::kMaxLoaders)) {
      return absl::ResourceExhaustedError(
          fmt::format("RecordLoader({}): {} loaders are recorded already, the most a report keeps",
                      settings.name, Report::kMaxLoaders));
    }
    it = loaders_.emplace(loaders_.end());
  }
  it->name = settings.name;
  it->kind = settings.kind;
  it->workers = settings.workers;
  it->prefetch = settings.prefetch;
  it->pin_memory = settings.pin_memory;
  it->batch_size = settings.batch_size;
  return absl::OkStatus();
}

int RunNotes::AddFinishHook(std::function<void()> hook) {
  ground::MutexLock lock(&mu_);
  finish_hooks_.emplace_back(++next_hook_, std::move(hook));
  return next_hook_;
}

void RunNotes::RemoveFinishHook(int id) {
  ground::MutexLock lock(&mu_);
  finish_hooks_.erase(std::remove_if(finish_hooks_.begin(), finish_hooks_.end(),
                                     [&](const auto& h) { return h.first == id; }),
                      finish_hooks_.end());
}

std::vector<std::function<void()>> RunNotes::FinishHooks() const {
  ground::MutexLock lock(&mu_);
  std::vector<std::function<void()>> hooks;
  hooks.reserve(finish_hooks_.size());
  for (const auto& [id, hook] : finish_hooks_) hooks.push_back(hook);
  return hooks;
}

void RunNotes::JoinMemory(Report::Step* row) {
  // A run that never samples memory skips the lock, a row at a time.
  if (!memory_sampled()) return;
  ground::MutexLock lock(&mu_);
  auto it = samples_.find(row->index);
  if (it == samples_.end()) return;
  const MemorySample& s = it->second;
  row->memory_bytes = s.current;
  row->peak_memory_bytes = s.peak;
  memory_.peak_bytes = std::max(memory_.peak_bytes, s.peak);
  memory_.last_bytes = s.current;
  memory_.reserved_peak_bytes = std::max(memory_.reserved_peak_bytes, s.reserved_peak);
  memory_.reserved_last_bytes = s.reserved;
  samples_.erase(it);
}

bool RunNotes::TakeDeviceSync(std::vector<std::pair<int64_t, TimestampNs>>* taken) {
  ground::MutexLock lock(&mu_);
  if (device_sync_.empty()) return false;
  taken->swap(device_sync_);
  return true;
}

void RunNotes::CountLateDeviceSync(int64_t late) {
  ground::MutexLock lock(&mu_);
  distributed_.device_sync_late += late;
}

void RunNotes::FillReport(TimestampNs process_start_ns, Report* report) const {
  ground::MutexLock lock(&mu_);
  report->config = config_;
  report->acceptance = acceptance_;
  if (target_met_ns_ != 0) {
    Acceptance& a = report->acceptance;
    a.time_to_target_s = (target_met_ns_ - process_start_ns) / 1e9;
    if (report->timing.steps > 0) {
      a.time_to_target_from_first_step_s = *a.time_to_target_s - report->timing.startup_s;
    }
  }
  report->memory = memory_;
  report->distributed = distributed_;
  report->checkpoint = checkpoint_;
  if (checkpoint_.saves >= 2) {
    report->checkpoint.interval_s =
        (last_save_ns_ - first_save_ns_) / 1e9 / static_cast<double>(checkpoint_.saves - 1);
  }
  report->failure = failure_;
  report->loaders = loaders_;
  if (latency_ms_.count() > 0) {
    Report::Serving& serving = report->serving.emplace();
    serving.requests = latency_ms_.count();
    serving.p50_ms = latency_ms_.Percentile(50);
    serving.p90_ms = latency_ms_.Percentile(90);
    serving.p99_ms = latency_ms_.Percentile(99);
    serving.max_ms = latency_ms_.max();
    const double span_s = (last_latency_ns_ - first_arrival_ns_) / 1e9;
    serving.requests_per_s = span_s > 0 ? serving.requests / span_s : 0;
  }
}

}  // namespace trainscope
