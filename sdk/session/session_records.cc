// What a run tells its Session as it goes: memory samples, distributed
// facts, checkpoint saves, configuration, quality and latencies. Each
// validates its arguments and notes them in the session's RunNotes
// (run_notes.h) or its LossFile. See trainscope/session.h.
#include <algorithm>
#include <cmath>

#include "sdk/session/session_impl.h"

namespace trainscope {

void Session::RecordStepMemory(int64_t step, int64_t current_bytes, int64_t peak_bytes,
                               std::string_view source, int64_t reserved_bytes,
                               int64_t reserved_peak_bytes) {
  // A peak, when sampled (-1: not), is never below the present.
  if (peak_bytes >= 0) peak_bytes = std::max(peak_bytes, current_bytes);
  if (reserved_peak_bytes >= 0) reserved_peak_bytes = std::max(reserved_peak_bytes, reserved_bytes);
  impl_->notes.AddMemorySample(
      step, {current_bytes, peak_bytes, reserved_bytes, reserved_peak_bytes}, source, NowNs());
}

void Session::SetDistributedBackend(std::string_view backend) {
  impl_->notes.SetDistributedBackend(backend);
}

void Session::NoteMissingRanks(const std::vector<int>& ranks, std::string_view error) {
  impl_->notes.NoteMissingRanks(ranks, error);
}

void Session::NoteCheckpointSave(double blocking_s, double persist_s, uint64_t bytes,
                                 bool committed) {
  impl_->notes.NoteCheckpointSave(blocking_s, persist_s, bytes, committed, NowNs());
}

void Session::ExpectStepSyncTimes() {
  if (impl_ != nullptr) impl_->notes.ExpectDeviceSync();
}

void Session::AddStepSyncTime(int64_t step, double seconds) {
  if (impl_ == nullptr || !(seconds >= 0)) return;
  impl_->notes.AddStepSyncTime(step, static_cast<TimestampNs>(seconds * 1e9), seconds);
}

void Session::NoteResume(int64_t from_step, int64_t interrupted_at_step, double restore_s) {
  impl_->notes.NoteResume(from_step, interrupted_at_step, restore_s);
}

int Session::AddFinishHook(std::function<void()> hook) {
  return impl_->notes.AddFinishHook(std::move(hook));
}

void Session::RemoveFinishHook(int id) {
  if (impl_ != nullptr) impl_->notes.RemoveFinishHook(id);
}

void Session::SetConfig(std::string_view key, std::string_view value) {
  impl_->notes.SetConfig(key, value);
}

void Session::SetQualityTarget(std::string_view metric, double target, bool higher_is_better) {
  impl_->notes.SetQualityTarget(metric, target, higher_is_better);
}

absl::Status Session::RecordQuality(std::string_view metric, double value) {
  return impl_->notes.RecordQuality(metric, value, NowNs());
}

absl::Status Session::RecordLatency(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) {
    return absl::InvalidArgumentError(fmt::format(
        "RecordLatency({}): a latency is a finite, non-negative number of seconds", seconds));
  }
  impl_->notes.AddLatency(seconds, NowNs());
  return absl::OkStatus();
}

absl::Status Session::RecordLoss(int64_t step, double value, bool skipped) {
  return impl_->loss->Append(step, value, skipped);
}

void Session::RecordOutOfMemory(std::string_view message) {
  const TimestampNs now = NowNs();
  RunFailure f;
  f.kind = "out_of_memory";
  f.message = std::string(message);
  f.step = internal::g_current_step.load(std::memory_order_relaxed);
  f.at_s = (now - impl_->process_start.monotonic_ns) / 1e9;
  impl_->notes.NoteFailure(std::move(f));
}

absl::Status Session::RecordLoader(const LoaderSettings& settings) {
  if (settings.name.empty()) return absl::InvalidArgumentError("RecordLoader: the name is empty");
  if (settings.workers < 0 || settings.prefetch < 0 || settings.batch_size < 0) {
    return absl::InvalidArgumentError(fmt::format(
        "RecordLoader({}): workers {}, prefetch {} and batch_size {} must not be negative",
        settings.name, settings.workers, settings.prefetch, settings.batch_size));
  }
  return impl_->notes.SetLoader(settings);
}

void Session::SetAcceptance(std::string_view metric, double target, double value,
                            bool higher_is_better) {
  SetQualityTarget(metric, target, higher_is_better);
  // Only a NaN is refused, and then the run simply did not reach its target.
  (void)RecordQuality(metric, value);
}

}  // namespace trainscope
