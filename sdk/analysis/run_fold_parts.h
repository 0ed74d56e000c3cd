// sdk/analysis/run_fold_parts.h: what RunFold keeps between segments (the
// step log, the queue of intervals waiting at the front, the step tags)
// and the sums it folds into. Internal to run_fold.cc; a header of its own
// so that the fold's file holds the fold. Memory bounds: run_fold.h.
#ifndef TRAINSCOPE_SDK_ANALYSIS_RUN_FOLD_PARTS_H_
#define TRAINSCOPE_SDK_ANALYSIS_RUN_FOLD_PARTS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "sdk/analysis/model.h"
#include "sdk/analysis/quantile_sketch.h"
#include "sdk/analysis/run_fold.h"
#include "sdk/analysis/step_analysis.h"

namespace trainscope::analysis::fold {

inline constexpr TimestampNs kMaxTime = std::numeric_limits<TimestampNs>::max();
inline constexpr size_t kRunIntervals = 16384;  // the most intervals a run takes

// Idle figures summed over segments of time.
struct IdleSums {
  TimestampNs window = 0;
  TimestampNs busy = 0;
  TimestampNs idle = 0;
  std::array<TimestampNs, kIdleCauseCount> cause{};
  GapFold gaps;  // the idle spans' lengths, steps and causes, in time order
  bool empty() const { return window == 0; }
  void Add(const IdleBreakdown& b) {
    window += b.window_ns;
    busy += b.busy_ns;
    idle += b.idle_ns;
    for (int c = 0; c < kIdleCauseCount; ++c) cause[c] += b.cause_ns[c];
  }
  void Add(const IdleSums& o) {
    window += o.window;
    busy += o.busy;
    idle += o.idle;
    for (int c = 0; c < kIdleCauseCount; ++c) cause[c] += o.cause[c];
    gaps.Append(o.gaps);  // `o` comes after this
  }
};

// Per busy source: the step window's idle so far (committed), the idle
// after the newest step's end, which joins the window only if another step
// begins (tail), and, while no step has come, the idle since process start.
struct ModeSums {
  IdleSums committed, tail, nostep;
};
enum Mode { kHostMode = 0, kDeviceMode = 1, kModes = 2 };

// A step that arrived and is not yet behind the watermark.
struct OpenStep {
  StepSpan span;
  bool in_window = false;
  std::array<TimestampNs, kPhaseCount> phase_ns{};
  TimestampNs idle_ns = 0;
  std::array<TimestampNs, kIdleCauseCount> cause_ns{};
};

// Steps in start order, for warmup and steady-state throughput, in bounded
// memory. Up to 2 x exact_steps steps it keeps every step and gives exactly
// SummarizeSteps's answer. Past that it keeps the first exact_steps + 3
// steps and sketches of the step times, and the auto rule becomes: warmup
// ends before the first run of 3 consecutive steps, among the first
// exact_steps, each within 1.25x the median step time of the steps after
// the first exact_steps (in a run of more than 2 x exact_steps steps those
// are more than half the run: the same reference the short rule takes from
// the second half); if none, exact_steps steps. Median step time is then
// within QuantileSketch::kRelativeError.
class StepLog {
 public:
  StepLog(size_t exact_steps, size_t exact_values, int64_t warmup_override)
      : exact_steps_(std::max<size_t>(exact_steps, 4)),
        warmup_override_(warmup_override),
        all_(exact_values),
        after_prefix_(exact_values),
        after_override_(exact_values) {}

  void Add(const StepSpan& step) {
    const double ms = (step.end_ns - step.start_ns) / 1e6;
    if (count_ == 0 || step.start_ns < first_start_) first_start_ = step.start_ns;
    if (count_ == 0 || step.start_ns >= last_start_) {
      last_start_ = step.start_ns;
      last_end_ = step.end_ns;
    }
    if (warmup_override_ >= 0) {
      if (count_ < warmup_override_) samples_before_override_ += step.samples;
      if (count_ == warmup_override_) override_start_ = step.start_ns;
      if (count_ >= warmup_override_) after_override_.Add(ms);
    }
    ++count_;
    total_samples_ += step.samples;
    all_.Add(ms);
    if (!long_) {
      steps_.push_back(step);
      if (steps_.size() <= 2 * exact_steps_) return;
      long_ = true;
      for (size_t i = exact_steps_; i < steps_.size(); ++i) after_prefix_.Add(Ms(steps_[i]));
      steps_.resize(exact_steps_ + 3);
      steps_.shrink_to_fit();
      return;
    }
    after_prefix_.Add(ms);
  }

  int64_t count() const { return count_; }
  TimestampNs first_start() const { return first_start_; }
  TimestampNs last_end() const { return last_end_; }

  StepStats Summarize() const {
    if (!long_) return SummarizeSteps(steps_, warmup_override_);
    StepStats stats;
    const int64_t n = count_;
    const auto m = static_cast<int64_t>(exact_steps_);
    if (warmup_override_ >= 0) {
      stats.warmup_steps = std::min(warmup_override_, n);
      stats.warmup_rule = fmt::format("fixed: {} step(s) by option", stats.warmup_steps);
    } else {
      const double limit = 1.25 * after_prefix_.Median();
      stats.warmup_steps = m;
      for (int64_t k = 0; k <= m; ++k) {
        bool settled = true;
        for (int64_t i = k; i < k + 3; ++i) settled = settled && Ms(steps_[i]) <= limit;
        if (settled) {
          stats.warmup_steps = k;
          break;
        }
      }
      stats.warmup_rule = fmt::format(
          "auto: steps before the first run of 3 consecutive steps each within 1.25x the "
          "median step time of the steps after the first {0} (at most {0} steps; the run had "
          "more than {1} steps)",
          m, 2 * m);
    }
    const int64_t first = stats.warmup_steps < n ? stats.warmup_steps : 0;
    stats.steady_steps = n - first;
    TimestampNs first_start = 0;
    int64_t samples = total_samples_;
    if (first == 0) {
      first_start = steps_[0].start_ns;
      stats.median_step_ms = all_.Median();
    } else if (first <= m) {
      first_start = steps_[first].start_ns;
      QuantileSketch steady = after_prefix_;
      for (int64_t i = 0; i < m; ++i) {
        if (i < first) {
          samples -= steps_[i].samples;
        } else {
          steady.Add(Ms(steps_[i]));
        }
      }
      stats.median_step_ms = steady.Median();
    } else {  // a fixed warmup longer than the exact prefix
      first_start = override_start_;
      samples -= samples_before_override_;
      stats.median_step_ms = after_override_.Median();
    }
    const double span_s = (last_end_ - first_start) / 1e9;
    if (span_s > 0) {
      stats.steady_steps_per_s = stats.steady_steps / span_s;
      stats.steady_samples_per_s = samples / span_s;
    }
    return stats;
  }

 private:
  static double Ms(const StepSpan& s) { return (s.end_ns - s.start_ns) / 1e6; }

  size_t exact_steps_;
  int64_t warmup_override_;
  bool long_ = false;
  std::vector<StepSpan> steps_;  // every step, or the first exact_steps + 3
  int64_t count_ = 0;
  int64_t total_samples_ = 0;
  TimestampNs first_start_ = 0;
  TimestampNs last_start_ = 0;
  TimestampNs last_end_ = 0;
  QuantileSketch all_;
  QuantileSketch after_prefix_;  // step times after the first exact_steps (long mode)
  QuantileSketch after_override_;
  int64_t samples_before_override_ = 0;
  TimestampNs override_start_ = 0;
};

// A queue taken from the front, mostly in bulk: a vector and the index of
// its first element. The taken prefix is erased once it is half the vector,
// so each element moves at most once more (amortised O(1)), and nothing is
// allocated once the vector has its room (std::deque allocates a block
// every two or ten elements here). Its room: at most twice the most
// elements ever held at once, plus 1024 (taken ones not yet erased).
template <typename T>
class FrontQueue {
 public:
  using iterator = typename std::vector<T>::iterator;
  using const_iterator = typename std::vector<T>::const_iterator;
  iterator begin() { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  iterator end() { return items_.end(); }
  const_iterator begin() const { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  const_iterator end() const { return items_.end(); }
  size_t size() const { return items_.size() - head_; }
  bool empty() const { return head_ == items_.size(); }
  T& operator[](size_t i) { return items_[head_ + i]; }
  T& front() { return items_[head_]; }
  const T& front() const { return items_[head_]; }
  T& back() { return items_.back(); }
  void push_back(const T& value) { items_.push_back(value); }
  iterator insert(iterator at, const T& value) { return items_.insert(at, value); }
  void pop_front() {
    ++head_;
    Compact();
  }
  // Takes [begin(), to) off the front.
  void erase_front(iterator to) {
    head_ = static_cast<size_t>(to - items_.begin());
    Compact();
  }

 private:
  void Compact() {
    if (head_ == items_.size()) {
      items_.clear();
      head_ = 0;
    } else if (head_ >= 1024 && 2 * head_ >= items_.size()) {
      items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }
  std::vector<T> items_;
  size_t head_ = 0;
};

// Time a step's sync and data_wait ranges carry, by step index, until the
// step's row. The indices come about in order, so most live in a window of
// consecutive indices, grown at the back and taken from the front: no
// hashing, and the rows read it in the order the ranges wrote it. An index
// behind the window or more than kAhead past its start goes to a map.
// Memory: 24 bytes an index the window spans (at most kAhead, taken from
// the front as rows are written), 40 a map entry; Trim bounds the tags.
struct Tagged {
  TimestampNs sync_ns = 0;
  TimestampNs data_wait_ns = 0;
};
class TagTable {
 public:
  static constexpr int64_t kAhead = 65536;

  // The tags of `step`, added if absent.
  Tagged& operator[](int64_t step) {
    if (window_.empty()) base_ = step;
    if (step >= base_ && step - base_ < kAhead) {
      while (base_ + static_cast<int64_t>(window_.size()) <= step) window_.push_back(Slot());
      Slot& slot = window_[static_cast<size_t>(step - base_)];
      if (!slot.used) {
        slot.used = true;
        ++used_;
      }
      return slot.tag;
    }
    return others_[step];
  }

  // Removes the tags of `step`; all zero if it had none.
  Tagged Take(int64_t step) {
    Tagged tag;
    if (step >= base_ && step < base_ + static_cast<int64_t>(window_.size())) {
      Slot& slot = window_[static_cast<size_t>(step - base_)];
      if (slot.used) {
        tag = slot.tag;
        slot = Slot();
        --used_;
      }
      PopUnused(step);  // rows come in about index order
    }
    if (!others_.empty()) {
      if (auto it = others_.find(step); it != others_.end()) {
        tag.sync_ns += it->second.sync_ns;
        tag.data_wait_ns += it->second.data_wait_ns;
        others_.erase(it);
      }
    }
    return tag;
  }

  // Steps with tags held.
  size_t size() const { return used_ + others_.size(); }

  // Keeps the tags of the newest `keep` indices (steps still to come have
  // the larger ones) and drops the rest: the tags of steps that never came.
  void Trim(size_t keep, std::vector<int64_t>* scratch) {
    if (size() <= keep) return;
    std::vector<int64_t>& keys = *scratch;
    keys.clear();
    for (size_t k = 0; k < window_.size(); ++k) {
      if (window_[k].used) keys.push_back(base_ + static_cast<int64_t>(k));
    }
    for (const auto& [index, tag] : others_) keys.push_back(index);
    std::nth_element(keys.begin(), keys.end() - static_cast<std::ptrdiff_t>(keep), keys.end());
    const int64_t oldest_kept = *(keys.end() - static_cast<std::ptrdiff_t>(keep));
    for (const int64_t index : keys) {
      if (index >= oldest_kept) continue;
      if (index >= base_ && index < base_ + static_cast<int64_t>(window_.size())) {
        window_[static_cast<size_t>(index - base_)] = Slot();
        --used_;
      } else {
        others_.erase(index);
      }
    }
    PopUnused(std::numeric_limits<int64_t>::max());
  }

 private:
  struct Slot {
    Tagged tag;
    bool used = false;
  };
  // Takes unused slots off the front, up to index `up_to`.
  void PopUnused(int64_t up_to) {
    while (!window_.empty() && base_ <= up_to && !window_.front().used) {
      window_.pop_front();
      ++base_;
    }
  }
  int64_t base_ = 0;  // the index of window_[0]
  size_t used_ = 0;   // window slots holding tags
  FrontQueue<Slot> window_;
  absl::flat_hash_map<int64_t, Tagged> others_;
};

// Held intervals' flags.
inline constexpr uint8_t kAttributed = 1;   // launch attribution ran on it
inline constexpr uint8_t kLaunchFound = 2;  // and found the launching phase

}  // namespace trainscope::analysis::fold

#endif  // TRAINSCOPE_SDK_ANALYSIS_RUN_FOLD_PARTS_H_
