// trainscope/torch/internal/device_timings.h: work timed on the device and
// read back without blocking (libtorch::ProcessGroup's NCCL collectives).
//
// Under NCCL, `work->wait()` only makes the current stream wait: the host
// returns at once, so a host range around a collective measures its
// enqueue. Events recorded on the stream before and after it measure the
// collective itself (the wait for the slowest rank included). They are
// read at a later step boundary, never waited for while training.
//
// Not for users (docs/architecture.md, "Layers"): namespace
// trainscope::libtorch::detail; it may change without notice.
#ifndef TRAINSCOPE_TORCH_INTERNAL_DEVICE_TIMINGS_H_
#define TRAINSCOPE_TORCH_INTERNAL_DEVICE_TIMINGS_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

namespace trainscope::libtorch::detail {

// Pairs of events (any type: CUDA events on the device, plain numbers in
// tests) queued with the step they belong to, and handed back with their
// elapsed time once complete. Not thread-safe. Memory: at most `capacity`
// x (sizeof(Events) + 8) bytes; an Add beyond that drops the oldest pair
// (dropped()). Cost: Add and each Poll step are O(1).
template <typename Events>
class DeviceTimings {
 public:
  explicit DeviceTimings(size_t capacity = 256) : capacity_(capacity == 0 ? 1 : capacity) {}

  // Queues `events` of step `step`.
  void Add(int64_t step, Events events) {
    if (pending_.size() == capacity_) {
      pending_.pop_front();
      ++dropped_;
    }
    pending_.emplace_back(step, std::move(events));
  }

  // Hands each complete pair to sink(step, seconds), oldest first, and
  // stops at the first still running: `elapsed(events)` returns its
  // seconds, or nullopt while the end has not happened (one stream
  // completes its work in order, so the later ones have not either).
  // Returns the pairs handed out.
  template <typename Elapsed, typename Sink>
  size_t Poll(Elapsed&& elapsed, Sink&& sink) {
    size_t handed = 0;
    while (!pending_.empty()) {
      const std::optional<double> seconds = elapsed(pending_.front().second);
      if (!seconds.has_value()) break;
      sink(pending_.front().first, *seconds);
      pending_.pop_front();
      ++handed;
    }
    return handed;
  }

  size_t pending() const { return pending_.size(); }
  int64_t dropped() const { return dropped_; }

 private:
  size_t capacity_;
  std::deque<std::pair<int64_t, Events>> pending_;
  int64_t dropped_ = 0;
};

}  // namespace trainscope::libtorch::detail

#endif  // TRAINSCOPE_TORCH_INTERNAL_DEVICE_TIMINGS_H_
