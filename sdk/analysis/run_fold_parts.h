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
#include "sdk/analysis/warmup.h"

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
struct SourceIdle {
  IdleSums committed, tail, nostep;
};
// The busy sources the fold follows until the run's is known (kAuto's
// choice: device activity once any has come, else host compute phases).
inline constexpr std::array<BusySource, 2> kFoldedSources = {BusySource::kHostPhases,
                                                             BusySource::kDevice};
struct IdleBySource {
  std::array<SourceIdle, 2> sums;  // by kFoldedSources order
  SourceIdle& operator[](BusySource source) { return sums[source == BusySource::kDevice]; }
  const SourceIdle& operator[](BusySource source) const {
    return sums[source == BusySource::kDevice];
  }
  SourceIdle* begin() { return sums.data(); }
  SourceIdle* end() { return sums.data() + sums.size(); }
};

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
// SummarizeSteps's answer. Past that it keeps the steps WarmupRule has not
// decided on (at most WarmupRule's 11) and sketches of the step times: the
// warmup and the throughput are exact, the median step time within
// QuantileSketch::kRelativeError.
class StepLog {
 public:
  StepLog(size_t exact_steps, size_t exact_values, int64_t warmup_override)
      : exact_steps_(std::max<size_t>(exact_steps, 4)),
        warmup_override_(warmup_override),
        rule_(warmup_override),
        all_(exact_values),
        steady_(exact_values) {
    undecided_.reserve(kUndecided + 1);
  }

  void Add(const StepSpan& step) {
    if (count_ == 0 || step.start_ns < first_start_) first_start_ = step.start_ns;
    if (count_ == 0 || step.start_ns >= last_start_) {
      last_start_ = step.start_ns;
      last_end_ = step.end_ns;
    }
    ++count_;
    total_samples_ += step.samples;
    all_.Add(Ms(step));
    rule_.Add(step.end_ns - step.start_ns);
    if (rule_.decided()) {
      undecided_.push_back(step);
      Settle(rule_, &undecided_, &warmup_samples_, &steady_, &steady_start_, &steady_samples_);
    } else {
      undecided_.push_back(step);
      const int64_t before = rule_.settled_before();
      size_t k = 0;
      for (; k < undecided_.size() && count_ - static_cast<int64_t>(undecided_.size() - k) < before;
           ++k) {
        warmup_samples_ += undecided_[k].samples;
      }
      undecided_.erase(undecided_.begin(), undecided_.begin() + static_cast<std::ptrdiff_t>(k));
    }
    if (!long_) {
      steps_.push_back(step);
      if (steps_.size() <= 2 * exact_steps_) return;
      long_ = true;
      steps_.clear();
      steps_.shrink_to_fit();
    }
  }

  int64_t count() const { return count_; }
  TimestampNs first_start() const { return first_start_; }
  TimestampNs last_end() const { return last_end_; }

  StepStats Summarize() const {
    if (!long_) return SummarizeSteps(steps_, warmup_override_);
    WarmupRule rule = rule_;
    rule.Finish();
    std::vector<StepSpan> undecided = undecided_;
    int64_t warmup_samples = warmup_samples_;
    QuantileSketch steady = steady_;
    TimestampNs steady_start = steady_start_;
    int64_t steady_samples = steady_samples_;
    Settle(rule, &undecided, &warmup_samples, &steady, &steady_start, &steady_samples);

    StepStats stats;
    const int64_t n = count_;
    stats.warmup_steps = rule.warmup();
    stats.warmup_rule = rule.Describe();
    // With every step in warmup there is no steady state; measure all steps.
    const bool all = stats.warmup_steps >= n;
    stats.steady_steps = all ? n : n - stats.warmup_steps;
    const TimestampNs first_start = all ? first_start_ : steady_start;
    const int64_t samples = all ? total_samples_ : steady_samples;
    stats.median_step_ms = all ? all_.Median() : steady.Median();
    const double span_s = (last_end_ - first_start) / 1e9;
    if (span_s > 0) {
      stats.steady_steps_per_s = stats.steady_steps / span_s;
      stats.steady_samples_per_s = samples / span_s;
    }
    return stats;
  }

 private:
  static constexpr size_t kUndecided = WarmupRule::kRun + WarmupRule::kFollowing;
  static double Ms(const StepSpan& s) { return (s.end_ns - s.start_ns) / 1e6; }

  // Once `rule` is decided: the undecided steps (the last undecided->size()
  // of rule.steps()) go to the warmup or the steady figures.
  static void Settle(const WarmupRule& rule, std::vector<StepSpan>* undecided,
                     int64_t* warmup_samples, QuantileSketch* steady, TimestampNs* steady_start,
                     int64_t* steady_samples) {
    int64_t position = rule.steps() - static_cast<int64_t>(undecided->size());
    for (const StepSpan& step : *undecided) {
      if (position++ < rule.warmup()) {
        *warmup_samples += step.samples;
        continue;
      }
      if (steady->count() == 0) *steady_start = step.start_ns;
      steady->Add(Ms(step));
      *steady_samples += step.samples;
    }
    undecided->clear();
  }

  size_t exact_steps_;
  int64_t warmup_override_;
  bool long_ = false;
  std::vector<StepSpan> steps_;  // every step, until there are more than 2 x exact_steps
  int64_t count_ = 0;
  int64_t total_samples_ = 0;
  TimestampNs first_start_ = 0;
  TimestampNs last_start_ = 0;
  TimestampNs last_end_ = 0;
  WarmupRule rule_;
  std::vector<StepSpan> undecided_;  // the last steps the rule has not placed
  int64_t warmup_samples_ = 0;
  QuantileSketch all_;
  QuantileSketch steady_;  // step times after the warmup
  TimestampNs steady_start_ = 0;
  int64_t steady_samples_ = 0;
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

namespace trainscope::analysis {

// What the fold keeps between segments (run_fold.cc takes input into it,
// run_fold_segment.cc folds segments of it).
struct RunFold::Impl {
  Impl(const RunFoldOptions& o, const Timeline& input)
      : steps(o.exact_steps, o.exact_values, o.warmup_override), hta(input, o.launch_horizon_ns) {
    for (auto& sketch : phase_ms) sketch = QuantileSketch(o.exact_values);
  }

  // Intervals not yet behind the watermark, or launch history, in runs as
  // they arrived. A segment looks only at the runs whose earliest start is
  // before its end: the others lie wholly after it.
  struct Run {
    std::vector<Interval> intervals;
    std::vector<uint8_t> flags;  // parallel to intervals
    TimestampNs min_start = fold::kMaxTime;
    bool fresh = true;  // arrived after the last segment
  };
  std::vector<Run> runs;
  std::vector<Run> spare_runs;  // at most 2 emptied runs, their room kept
  size_t pending = 0;           // intervals in all runs
  // By start (ties in arrival order): a segment looks at the steps that
  // begin before its end only, and takes the done ones off the front.
  fold::FrontQueue<fold::OpenStep> open_steps;
  // The steps (kStep intervals) of the launch horizon, at most
  // kStepHistory: launch attribution's step-owner rule looks up the step
  // open at a call from a thread without ranges (launch_attribution.h).
  static constexpr size_t kStepHistory = 4096;
  fold::FrontQueue<Interval> step_history;
  fold::TagTable tagged;  // by step index, until the step's row

  bool steps_seen = false;
  bool device_seen = false;
  bool device_side_seen = false;  // device work, CUDA calls or syncs: the trace wants them
  bool window_known = false;      // an in-window step came: first_start/last_end hold
  bool window_closed = false;     // a step past window_end_step came
  TimestampNs window_first_start = 0;
  TimestampNs window_last_start = 0;
  TimestampNs window_last_end = 0;
  int64_t window_samples = 0;
  fold::IdleBySource idle;

  fold::StepLog steps;
  std::array<QuantileSketch, kPhaseCount> phase_ms;
  std::array<TimestampNs, kPhaseCount> phase_total_ns{};
  std::array<TimestampNs, kPhaseCount> phase_in_steps_ns{};
  std::array<bool, kPhaseCount> phase_seen{};
  TimestampNs in_steps_ns = 0;
  // Device busy time by launching phase; the last entry is "unattributed".
  std::array<TimestampNs, kPhaseCount + 1> device_busy_ns{};
  std::array<bool, kPhaseCount + 1> device_busy_seen{};
  bool first_row_written = false;
  // HTA's breakdowns of the device rows, fed as they are released.
  HtaFold hta;

  // Buffers each segment refills; their room stays for the next one.
  std::array<std::vector<IntervalSet::Span>, kPhaseCount> phase_spans;
  std::array<std::vector<IntervalSet::Span>, kPhaseCount + 1> device_spans;
  std::array<std::vector<IntervalSet::Span>, kIdleCauseCount> call_spans;
  std::vector<fold::OpenStep*> segment_steps;
  std::vector<TimestampNs> segment_starts;
  std::vector<TimestampNs> segment_ends;
  std::vector<int64_t> tag_keys;
  std::vector<int8_t> call_cause;      // GapAnalyzer::CallCause by name id, -1 until known
  std::vector<CauseSpan> cause_spans;  // IdleSets::by_start, its room kept

  Run& NewRun();  // a run at the end of runs, with a spare one's room
  TimestampNs CompactRun(const SegmentWork& work, Run* run);
};

}  // namespace trainscope::analysis

#endif  // TRAINSCOPE_SDK_ANALYSIS_RUN_FOLD_PARTS_H_
