// HTA's temporal and idle-time breakdowns. See hta_breakdown.h.
#include "sdk/analysis/hta_breakdown.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <unordered_map>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace trainscope::analysis {
namespace {

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}
bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// A row's times as HTA sees them. pandas holds each ts and dur as the
// double nearest its text: NanosToMicros of the exact nanoseconds the reader
// keeps. When the ts column is float64 (facts.round_to_us), HTA's parser
// (hta/common/trace_parser.py: round_down_time_stamps) computes end = ts +
// dur in float64 at the full epoch-sized magnitude, where doubles are 0.25
// us apart near 1.7e15 us, so the sum can land on the next whole
// microsecond; then it takes ceil(ts) and floor(end). Otherwise times stay as
// written: the breakdowns add ts + dur (again) only after subtracting the
// smallest ts (hta/common/trace.py: _align_all_ranks), where the float64
// sum is exact to far below a nanosecond.
class HtaClock {
 public:
  explicit HtaClock(bool round_to_us) : round_(round_to_us) {}
  // The start of a row (or a launch call, a step) that starts at `ns`.
  TimestampNs Start(TimestampNs ns) const {
    if (!round_ || ns % 1000 == 0) return ns;
    return static_cast<TimestampNs>(std::ceil(NanosToMicros(ns))) * 1000;
  }
  // The end of the row [start_ns, end_ns).
  TimestampNs End(TimestampNs start_ns, TimestampNs end_ns) const {
    const TimestampNs dur_ns = end_ns - start_ns;
    if (!round_ || (start_ns % 1000 == 0 && dur_ns % 1000 == 0)) return end_ns;
    const double end_us = NanosToMicros(start_ns) + NanosToMicros(dur_ns);
    return static_cast<TimestampNs>(std::floor(end_us)) * 1000;
  }

 private:
  bool round_;
};

// A union in HTA's way (a row opens a new group only if it starts after
// every earlier row's end): its span and covered time.
struct UnionResult {
  TimestampNs first_start = 0;
  TimestampNs last_end = 0;
  TimestampNs covered = 0;
  bool empty = true;
};

double Round2(double v) { return std::round(v * 100.0) / 100.0; }

}  // namespace

KernelClass ClassifyKernel(std::string_view name) {
  if (StartsWith(name, "nccl") || StartsWith(name, "hip") || StartsWith(name, "hccl") ||
      Contains(name, "ncclKernel")) {
    return KernelClass::kCommunication;
  }
  if (StartsWith(name, "Memcpy") || StartsWith(name, "hipMemcpy") || StartsWith(name, "Memset") ||
      StartsWith(name, "hipMemset") || StartsWith(name, "dma")) {
    return KernelClass::kMemory;
  }
  constexpr std::array<std::string_view, 9> kNotComputePrefixes = {
      "nccl", "Stream Wait Event", "runFunction", "hip", "job_exe", "packet", "pe_exe",
      "hccl", "cpum_exe_subgraph"};
  for (std::string_view prefix : kNotComputePrefixes) {
    if (StartsWith(name, prefix)) return KernelClass::kOther;
  }
  if (StartsWith(name, "collective_subgraph_execution") || Contains(name, "Memcpy") ||
      Contains(name, "Memset") || Contains(name, "dma") || Contains(name, "Sync") ||
      (StartsWith(name, "cuda") && Contains(name.substr(4), "LaunchKernel"))) {
    return KernelClass::kOther;
  }
  return KernelClass::kComputation;
}

namespace {

// ---- The one-pass path, for a timeline in start order (as ImportTrace
// leaves it). Rounding starts up to whole microseconds keeps that order, so
// HTA's stable sorts by start would leave its table as it is: every row can
// be folded in as it is read (running unions, per-stream sums) and nothing
// is stored or sorted. A timeline out of start order is stable-sorted by
// start first, which is the order HTA's own stable sorts give its table.

// One look at every interval: whether starts never decrease, and the launch
// calls' count and largest correlation id (to size LaunchTable).
struct CallScan {
  bool sorted = true;
  int64_t calls = 0;
  int64_t max_id = -1;
};
CallScan ScanCalls(const Timeline& timeline) {
  CallScan scan;
  TimestampNs previous = std::numeric_limits<TimestampNs>::min();
  for (const Interval& i : timeline.intervals()) {
    scan.sorted &= i.start_ns >= previous;
    previous = i.start_ns;
    if (i.kind == IntervalKind::kRuntimeCall && i.value >= 0) {
      ++scan.calls;
      scan.max_id = std::max(scan.max_id, i.value);
    }
  }
  return scan;
}

// The kept launch calls by correlation id: how many, and the start of the
// last one in trace order. CUPTI's ids are dense, so a table indexed by id
// when that costs little memory, else a hash map reserved up front.
class LaunchTable {
 public:
  struct Launch {
    int64_t kept = 0;
    TimestampNs last_ns = 0;
  };
  explicit LaunchTable(const CallScan& scan) : dense_(scan.max_id < 4 * scan.calls + 4096) {
    if (dense_) {
      table_.resize(static_cast<size_t>(scan.max_id + 1));
    } else {
      map_.reserve(static_cast<size_t>(scan.calls));
    }
  }
  void Add(int64_t id, TimestampNs start) {  // id >= 0
    Launch& launch = dense_ ? table_[static_cast<size_t>(id)] : map_[id];
    ++launch.kept;
    launch.last_ns = start;
  }
  // The launch with this id if a kept call has it, else null.
  const Launch* Find(int64_t id) const {
    if (id < 0) return nullptr;
    if (dense_) {
      if (static_cast<size_t>(id) >= table_.size()) return nullptr;
      const Launch& launch = table_[static_cast<size_t>(id)];
      return launch.kept > 0 ? &launch : nullptr;
    }
    auto it = map_.find(id);
    return it == map_.end() ? nullptr : &it->second;
  }

 private:
  bool dense_;
  std::vector<Launch> table_;
  std::unordered_map<int64_t, Launch> map_;
};

// Per name id, computed once: a trace has few distinct kernel names, and
// ClassifyKernel's string rules on every row cost a quarter of the time.
class NameFacts {
 public:
  explicit NameFacts(const Timeline& timeline) : timeline_(timeline) {}
  bool IsComputation(uint32_t id) { return Get(id) & kComputation; }
  bool IsSyncName(uint32_t id) { return Get(id) & kSyncName; }  // "Event/Context Sync"

 private:
  static constexpr uint8_t kKnown = 1, kComputation = 2, kSyncName = 4;
  uint8_t Get(uint32_t id) {
    if (id >= bits_.size()) bits_.resize(id + 1, 0);
    if (bits_[id] == 0) {
      const std::string& name = timeline_.name(id);
      bits_[id] = kKnown;
      if (ClassifyKernel(name) == KernelClass::kComputation) bits_[id] |= kComputation;
      if (name == "Event Sync" || name == "Context Sync") bits_[id] |= kSyncName;
    }
    return bits_[id];
  }
  const Timeline& timeline_;
  std::vector<uint8_t> bits_;
};

// Union() fed one span at a time, in start order.
class RunningUnion {
 public:
  void Add(TimestampNs start, TimestampNs end) {
    if (empty_) {
      empty_ = false;
      first_start_ = group_start_ = start;
      group_end_ = running_max_ = end;
      return;
    }
    if (start > running_max_) {
      covered_ += group_end_ - group_start_;
      group_start_ = start;
      group_end_ = end;
    } else {
      group_start_ = std::min(group_start_, start);
      group_end_ = std::max(group_end_, end);
    }
    running_max_ = std::max(running_max_, end);
  }
  UnionResult Result() const {
    UnionResult result;
    if (empty_) return result;
    return {first_start_, group_end_, covered_ + group_end_ - group_start_, false};
  }

 private:
  bool empty_ = true;
  TimestampNs first_start_ = 0, group_start_ = 0, group_end_ = 0, running_max_ = 0;
  TimestampNs covered_ = 0;
};

// One stream's idle-time sweep (see ComputeWithSorts), a row at a time.
struct StreamSweep {
  int64_t stream = 0;
  bool any = false;
  TimestampNs previous_end = 0;                     // of the previous row, not a running max
  std::array<double, 3> sums = {0, 0, 0};           // host_wait, kernel_wait, other
  std::array<bool, 3> seen = {false, false, true};  // the first kernel counts as "other"
  void Add(TimestampNs start, TimestampNs end, std::optional<TimestampNs> launch_ns,
           double delay_ns) {
    if (any) {
      const TimestampNs gap = start - previous_end;
      int category = 2;
      if (launch_ns && *launch_ns > previous_end) {
        category = 0;
      } else if (static_cast<double>(gap) < delay_ns) {
        category = 1;
      }
      sums[category] += static_cast<double>(gap);
      seen[category] = true;
    }
    any = true;
    previous_end = end;
  }
};

// The state of the one pass: every kept row goes through Emit.
class OnePass {
 public:
  OnePass(const Timeline& timeline, double delay_ns)
      : timeline_(timeline), delay_ns_(delay_ns), names_(timeline) {}
  NameFacts& names() { return names_; }
  void Emit(const Interval& i, TimestampNs start, TimestampNs end,
            std::optional<TimestampNs> launch_ns) {
    ++rows_;
    const int64_t stream = timeline_.tracks()[i.track].tid;
    if (stream == -1) return;
    all_.Add(start, end);
    if (names_.IsComputation(i.name)) compute_.Add(start, end);
    if (IsDeviceKind(i.kind)) SweepOf(i.track, stream).Add(start, end, launch_ns, delay_ns_);
  }
  HtaBreakdown Finish() const;

 private:
  // Tracks with the same stream id (on other devices) share one sweep, as
  // HTA groups by stream alone; sweeps are in order of first kernel.
  StreamSweep& SweepOf(uint32_t track, int64_t stream) {
    if (track >= stream_of_track_.size()) stream_of_track_.resize(track + 1, -1);
    int32_t& index = stream_of_track_[track];
    if (index < 0) {
      for (size_t k = 0; k < sweeps_.size() && index < 0; ++k) {
        if (sweeps_[k].stream == stream) index = static_cast<int32_t>(k);
      }
      if (index < 0) {
        index = static_cast<int32_t>(sweeps_.size());
        sweeps_.push_back(StreamSweep{stream});
      }
    }
    return sweeps_[static_cast<size_t>(index)];
  }
  const Timeline& timeline_;
  double delay_ns_;
  NameFacts names_;
  std::vector<int32_t> stream_of_track_;  // grows with the tracks seen
  std::vector<StreamSweep> sweeps_;
  RunningUnion all_, compute_;
  int64_t rows_ = 0;
};

HtaBreakdown OnePass::Finish() const {
  HtaBreakdown result;
  result.rows = rows_;
  const UnionResult busy = all_.Result();
  if (!busy.empty) {
    const double kernel_us = (busy.last_end - busy.first_start) / 1000.0;
    const double idle_us = kernel_us - busy.covered / 1000.0;
    const double compute_us = compute_.Result().covered / 1000.0;
    result.temporal = {idle_us, compute_us, kernel_us - compute_us - idle_us, kernel_us};
  }
  constexpr std::array<const char*, 3> kNames = {"host_wait", "kernel_wait", "other"};
  for (const StreamSweep& sweep : sweeps_) {
    const double total = sweep.sums[0] + sweep.sums[1] + sweep.sums[2];
    for (int c = 0; c < 3; ++c) {
      if (!sweep.seen[c]) continue;
      result.idle_by_stream.push_back({sweep.stream, kNames[c], Round2(sweep.sums[c] / 1000.0),
                                       total != 0 ? sweep.sums[c] / total : 0});
    }
  }
  return result;
}

// What HTA makes of an interval: no row, a row it takes for a host one (no
// launch to look up), or a device row, whose launch call it looks up.
enum class RowUse : uint8_t { kNone, kHostRow, kDeviceRow };
RowUse UseOf(const Interval& i, const Timeline& timeline, NameFacts& names) {
  if (!IsDeviceKind(i.kind) && i.kind != IntervalKind::kSyncCall) return RowUse::kNone;
  const Track& track = timeline.tracks()[i.track];
  if (track.kind != TrackKind::kDeviceStream) return RowUse::kNone;
  if ((track.tid >= 0 && i.value >= 0) || names.IsSyncName(i.name)) return RowUse::kDeviceRow;
  return RowUse::kHostRow;
}

HtaBreakdown ComputeInOnePass(const Timeline& timeline, const HtaTraceFacts& facts,
                              double consecutive_kernel_delay_us, const CallScan& scan) {
  const HtaClock hta_clock(facts.round_to_us);
  const bool cut = facts.profiler_steps >= 2;
  const TimestampNs last_step = cut ? hta_clock.Start(facts.last_step_start_ns) : 0;
  auto kept_host_row = [&](TimestampNs start) { return !cut || start < last_step; };
  LaunchTable launches(scan);
  for (const Interval& i : timeline.intervals()) {
    if (i.kind != IntervalKind::kRuntimeCall || i.value < 0) continue;
    const TimestampNs start = hta_clock.Start(i.start_ns);
    if (kept_host_row(start)) launches.Add(i.value, start);
  }
  const std::optional<TimestampNs> first_event =
      facts.first_event_ns && kept_host_row(hta_clock.Start(*facts.first_event_ns))
          ? std::optional<TimestampNs>(hta_clock.Start(*facts.first_event_ns))
          : std::nullopt;
  OnePass pass(timeline, consecutive_kernel_delay_us * 1000.0);
  for (const Interval& i : timeline.intervals()) {
    const RowUse use = UseOf(i, timeline, pass.names());
    if (use == RowUse::kNone) continue;
    const TimestampNs start = hta_clock.Start(i.start_ns);
    const TimestampNs end = hta_clock.End(i.start_ns, i.end_ns);
    if (use == RowUse::kHostRow) {
      if (kept_host_row(start)) pass.Emit(i, start, end, std::nullopt);
      continue;
    }
    const LaunchTable::Launch* launch = launches.Find(i.value);
    std::optional<TimestampNs> launch_ns;
    if (launch) {
      launch_ns = launch->last_ns;
    } else if (i.value >= 0) {
      launch_ns = first_event;  // HTA's fallback: the row of index 0
    }
    // HTA's iteration cut: a row survives once per kept launch call.
    const int64_t copies = cut ? (launch ? launch->kept : 0) : 1;
    for (int64_t c = 0; c < copies; ++c) pass.Emit(i, start, end, launch_ns);
  }
  return pass.Finish();
}
}  // namespace

HtaBreakdown ComputeHtaBreakdown(const Timeline& timeline, const HtaTraceFacts& facts,
                                 double consecutive_kernel_delay_us) {
  const CallScan scan = ScanCalls(timeline);
  if (scan.sorted) return ComputeInOnePass(timeline, facts, consecutive_kernel_delay_us, scan);
  Timeline sorted = timeline;
  std::stable_sort(sorted.mutable_intervals().begin(), sorted.mutable_intervals().end(),
                   [](const Interval& a, const Interval& b) { return a.start_ns < b.start_ns; });
  return ComputeInOnePass(sorted, facts, consecutive_kernel_delay_us, ScanCalls(sorted));
}

struct HtaFold::Impl {
  Impl(const Timeline& names, TimestampNs horizon_ns, double delay_us)
      : timeline(names), launch_horizon_ns(horizon_ns), pass(names, delay_us * 1000.0) {}

  // Folds one row: ComputeInOnePass's loop body, without the cut.
  void Fold(const Interval& i) {
    if (i.start_ns < last_folded) ++late;
    last_folded = std::max(last_folded, i.start_ns);
    if (UseOf(i, timeline, pass.names()) == RowUse::kHostRow) {
      pass.Emit(i, i.start_ns, i.end_ns, std::nullopt);
      return;
    }
    auto call = calls.find(i.value);
    pass.Emit(i, i.start_ns, i.end_ns,
              call == calls.end() ? std::nullopt : std::optional<TimestampNs>(call->second));
  }
  // Folds the held rows that start before `horizon` (all of the first
  // `at_least`), in start order.
  void FoldBefore(TimestampNs horizon, size_t at_least) {
    std::stable_sort(rows.begin(), rows.end(),
                     [](const Interval& a, const Interval& b) { return a.start_ns < b.start_ns; });
    size_t n = 0;
    while (n < rows.size() && (n < at_least || rows[n].start_ns < horizon)) Fold(rows[n++]);
    rows.erase(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(n));
  }

  const Timeline& timeline;
  TimestampNs launch_horizon_ns;
  OnePass pass;
  std::vector<Interval> rows;  // added, not yet folded
  // Launch calls by correlation id (the start of the latest added), and in
  // the order added, to forget them.
  absl::flat_hash_map<int64_t, TimestampNs> calls;
  std::deque<std::pair<TimestampNs, int64_t>> call_order;
  TimestampNs last_folded = std::numeric_limits<TimestampNs>::min();
  int64_t late = 0;
};

HtaFold::HtaFold(const Timeline& names, TimestampNs launch_horizon_ns,
                 double consecutive_kernel_delay_us)
    : impl_(std::make_unique<Impl>(names, launch_horizon_ns, consecutive_kernel_delay_us)) {}

HtaFold::~HtaFold() = default;

void HtaFold::Add(const Interval& interval) {
  Impl& s = *impl_;
  if (interval.kind == IntervalKind::kRuntimeCall) {
    if (interval.value < 0) return;
    s.calls[interval.value] = interval.start_ns;
    s.call_order.emplace_back(interval.start_ns, interval.value);
    return;
  }
  if (UseOf(interval, s.timeline, s.pass.names()) == RowUse::kNone) return;
  s.rows.push_back(interval);
  if (s.rows.size() > kMaxHeldRows) {
    s.FoldBefore(std::numeric_limits<TimestampNs>::min(), kMaxHeldRows / 2);
  }
}

void HtaFold::Advance(TimestampNs horizon) {
  Impl& s = *impl_;
  s.FoldBefore(horizon, 0);
  if (horizon < std::numeric_limits<TimestampNs>::min() + s.launch_horizon_ns) return;
  const TimestampNs forget = horizon - s.launch_horizon_ns;
  while (!s.call_order.empty() && s.call_order.front().first < forget) {
    const auto [start, id] = s.call_order.front();
    auto it = s.calls.find(id);
    if (it != s.calls.end() && it->second == start) s.calls.erase(it);
    s.call_order.pop_front();
  }
}

HtaBreakdown HtaFold::Finish() {
  impl_->FoldBefore(std::numeric_limits<TimestampNs>::max(), impl_->rows.size());
  return impl_->pass.Finish();
}

int64_t HtaFold::late_rows() const { return impl_->late; }

size_t HtaFold::held_rows() const { return impl_->rows.size(); }

size_t HtaFold::held_calls() const { return impl_->call_order.size(); }

}  // namespace trainscope::analysis
