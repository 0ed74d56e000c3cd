// Idle time and its causes. See gap_analyzer.h.
#include "sdk/analysis/gap_analyzer.h"

#include <algorithm>
#include <array>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "sdk/analysis/gap_lengths.h"
#include "sdk/analysis/interval_set.h"

namespace trainscope::analysis {
namespace {

using Spans = std::vector<IntervalSet::Span>;

// Cause indices (ground::IdleCause's order, the priority order).
constexpr int kDataWait = ground::IdleCauseIndex(IdleCause::kDataWait);
constexpr int kH2D = ground::IdleCauseIndex(IdleCause::kH2d);
constexpr int kSync = ground::IdleCauseIndex(IdleCause::kSync);
constexpr int kCheckpoint = ground::IdleCauseIndex(IdleCause::kCheckpoint);
constexpr int kEval = ground::IdleCauseIndex(IdleCause::kEval);
constexpr int kOtherPhase = ground::IdleCauseIndex(IdleCause::kOther);
constexpr int kCopyCall = ground::IdleCauseIndex(IdleCause::kCopyCall);
constexpr int kLaunch = ground::IdleCauseIndex(IdleCause::kLaunch);
constexpr int kCudaApi = ground::IdleCauseIndex(IdleCause::kCudaApi);
constexpr int kHost = ground::IdleCauseIndex(IdleCause::kHost);
constexpr int kOutside = ground::IdleCauseIndex(IdleCause::kOutsideStep);
constexpr int kCauseCount = kIdleCauseCount;
static_assert(kOutside == kCauseCount - 1 && kHost == kCauseCount - 2);

// One device track's busy time inside the window, as a running union that
// holds only the current merged span: a sorted timeline gives each track's
// spans in start order, so nothing is stored. A span out of that order
// marks the track for a recount from the timeline (TrackBusyNs).
class TrackUnion {
 public:
  TrackUnion(TimestampNs window_start, TimestampNs window_end)
      : window_start_(window_start), window_end_(window_end) {}
  void Add(TimestampNs start, TimestampNs end) {
    ++count_;
    if (end <= start) return;
    if (open_ && start < last_start_) out_of_order_ = true;
    last_start_ = start;
    if (open_ && start <= merged_.second) {
      merged_.second = std::max(merged_.second, end);
      return;
    }
    Close();
    merged_ = {start, end};
    open_ = true;
  }
  // The busy time within the window. Call once, after the last Add.
  TimestampNs Finish() {
    Close();
    return total_;
  }
  int64_t count() const { return count_; }
  bool out_of_order() const { return out_of_order_; }

 private:
  void Close() {
    if (!open_) return;
    const TimestampNs start = std::max(window_start_, merged_.first);
    const TimestampNs end = std::min(window_end_, merged_.second);
    if (end > start) total_ += end - start;
    open_ = false;
  }
  TimestampNs window_start_;
  TimestampNs window_end_;
  IntervalSet::Span merged_{0, 0};
  TimestampNs last_start_ = 0;
  TimestampNs total_ = 0;
  int64_t count_ = 0;
  bool open_ = false;
  bool out_of_order_ = false;
};

// The busy time of one device track within `window`, its spans in any order.
TimestampNs TrackBusyNs(const Timeline& timeline, uint32_t track, const IntervalSet& window) {
  Spans spans;
  for (const Interval& i : timeline.intervals()) {
    if (i.track == track && IsDeviceKind(i.kind)) spans.emplace_back(i.start_ns, i.end_ns);
  }
  return IntervalSet::FromUnsorted(std::move(spans)).Intersect(window).Length();
}

// What Analyze reads from the timeline, gathered in one pass. The builders
// merge as spans arrive, so a sorted timeline is never copied nor sorted.
struct Extracted {
  bool has_device = false;
  IntervalSet::Builder busy;
  IntervalSet::Builder in_steps;
  std::array<IntervalSet::Builder, kCauseCount> causes;
  std::vector<TrackUnion> tracks;  // by track index
  std::vector<std::pair<IntervalSet::Span, int64_t>> steps;
};

Extracted Extract(const Timeline& timeline, TimestampNs window_start, TimestampNs window_end,
                  BusySource source) {
  Extracted out;
  out.has_device = source == BusySource::kAuto
                       ? std::any_of(timeline.intervals().begin(), timeline.intervals().end(),
                                     [](const Interval& i) { return IsDeviceKind(i.kind); })
                       : source == BusySource::kDevice;
  out.tracks.assign(timeline.tracks().size(), TrackUnion(window_start, window_end));
  std::vector<int8_t> call_cause;  // CallCause by name id, -1 until known
  for (const Interval& i : timeline.intervals()) {
    const IntervalSet::Span span(i.start_ns, i.end_ns);
    // Busy time and causes count only within the window (idle is clipped to
    // it): what lies wholly outside is skipped. Steps and device tracks are
    // all listed, as before.
    const bool outside = i.end_ns <= window_start || i.start_ns >= window_end;
    if (i.kind == IntervalKind::kStep) {
      out.in_steps.Add(span);
      out.steps.emplace_back(span, i.step);
    } else if (IsDeviceKind(i.kind)) {
      if (out.has_device && !outside) out.busy.Add(span);
      out.tracks[i.track].Add(i.start_ns, i.end_ns);
    } else if (outside) {
      continue;
    } else if (i.kind == IntervalKind::kSyncCall) {
      out.causes[kSync].Add(span);
    } else if (i.kind == IntervalKind::kRuntimeCall) {
      // Matching the name on every call would cost half the pass; a trace
      // has only a few distinct call names.
      if (i.name >= call_cause.size()) call_cause.resize(i.name + 1, -1);
      if (call_cause[i.name] < 0) {
        call_cause[i.name] = static_cast<int8_t>(GapAnalyzer::CallCause(timeline.name(i.name)));
      }
      out.causes[call_cause[i.name]].Add(span);
    } else if (IsHostRange(i.kind)) {
      if (IsComputePhase(i.phase)) {
        if (!out.has_device) out.busy.Add(span);
      } else {
        out.causes[GapAnalyzer::PhaseCause(i.phase)].Add(span);
      }
    }
  }
  return out;
}

// Idle time cut where its cause changes: each piece is blamed on the first
// cause, in priority order, active over all of it (host inside a step,
// outside_step else). Sorted, disjoint; neighbours with one cause merged.
struct Piece {
  TimestampNs start = 0;
  TimestampNs end = 0;
  int cause = 0;
};

// Where each cause takes the blame: the union of the causes' sets, cut
// where the cause of highest priority changes. Sorted, disjoint, labelled.
using Blamed = CauseSpan;

// Builds that map for [lo, hi). Mostly the causes do not overlap (one
// thread's phases): the map is their spans merged by start, one pass with
// a cursor in each set, O(spans x causes present). Where two overlap, one
// sweep over the boundaries instead: each set is disjoint, so a cause is
// open or not, a bit in a mask, and the lowest bit open is blamed.
void BlameMap(const IdleSets& sets, TimestampNs lo, TimestampNs hi, std::vector<Blamed>* map) {
  using Span = IntervalSet::Span;
  constexpr TimestampNs kNever = std::numeric_limits<TimestampNs>::max();
  std::array<const Span*, kHost> first{};
  std::array<const Span*, kHost> at{};
  std::array<const Span*, kHost> stop{};
  std::array<int, kHost> cause_of{};
  int n = 0;
  for (int c = 0; c < kHost; ++c) {
    const std::vector<Span>& spans = sets.active[c].spans();
    if (spans.empty()) continue;
    first[n] = std::upper_bound(spans.begin(), spans.end(), lo,
                                [](TimestampNs t, const Span& x) { return t < x.second; }) -
               spans.begin() + spans.data();
    stop[n] = std::lower_bound(spans.begin(), spans.end(), hi,
                               [](const Span& x, TimestampNs t) { return x.first < t; }) -
              spans.begin() + spans.data();
    if (first[n] >= stop[n]) continue;
    cause_of[n++] = c;
  }
  map->clear();
  at = first;
  std::array<TimestampNs, kHost> next{};
  for (int k = 0; k < n; ++k) next[k] = at[k]->first;
  for (;;) {
    int best = 0;
    for (int k = 1; k < n; ++k) best = next[k] < next[best] ? k : best;
    if (n == 0 || next[best] == kNever) return;
    const Span span = *at[best];
    next[best] = ++at[best] != stop[best] ? at[best]->first : kNever;
    if (!map->empty() && span.first < map->back().end) break;  // an overlap
    map->push_back({span.first, span.second, cause_of[best]});
  }
  map->clear();
  at = first;
  uint32_t open = 0;  // bit k: cause_of[k] is open
  int top = -1;       // the cause blamed since `since`
  TimestampNs since = 0;
  for (;;) {
    // The next boundary: an open cause's end, or a closed one's next start.
    TimestampNs t = kNever;
    for (int k = 0; k < n; ++k) {
      if (at[k] == stop[k]) continue;
      const TimestampNs b = (open >> k & 1) != 0 ? at[k]->second : at[k]->first;
      t = b < t ? b : t;
    }
    if (t == kNever) break;
    for (int k = 0; k < n; ++k) {  // every set with a boundary at t
      if (at[k] == stop[k]) continue;
      if ((open >> k & 1) != 0) {
        if (at[k]->second != t) continue;
        open &= ~(1u << k);
        ++at[k];
      }
      // A set's spans never touch: a start at t after an end at t is
      // another set's.
      if (at[k] != stop[k] && at[k]->first == t) open |= 1u << k;
    }
    const int now = open == 0 ? -1 : cause_of[__builtin_ctz(open)];
    if (now == top) continue;
    if (top >= 0 && t > since) map->push_back({since, t, top});
    top = now;
    since = t;
  }
  if (top >= 0) map->push_back({since, kNever, top});  // a span that ends at kNever
}

// Idle time cut where its cause changes: one walk over the idle spans, the
// blame map and the steps, a cursor in each. O(idle spans + map + steps).
// Each piece goes to emit(start, end, cause), in time order; neighbours
// may share a cause.
template <typename Emit>
void Blame(const IntervalSet& idle, const IdleSets& sets, std::vector<Blamed>* scratch,
           Emit&& emit) {
  if (idle.empty()) return;
  const std::vector<Blamed>* map = &sets.by_start;  // merged already, if not empty
  if (map->empty()) {
    BlameMap(sets, idle.spans().front().first, idle.spans().back().second, scratch);
    map = scratch;
  }
  const std::vector<IntervalSet::Span>& steps = sets.in_steps.spans();
  size_t m = 0, s = 0;
  for (const auto& [start, end] : idle.spans()) {
    for (TimestampNs t = start; t < end;) {
      while (m < map->size() && (*map)[m].end <= t) ++m;
      TimestampNs until = end;
      if (m < map->size()) {
        if ((*map)[m].start <= t) {  // a cause is active at t
          until = std::min(end, (*map)[m].end);
          emit(t, until, (*map)[m].cause);
          t = until;
          continue;
        }
        until = std::min(end, (*map)[m].start);  // none until then: host or outside
      }
      while (s < steps.size() && steps[s].second <= t) ++s;
      int cause = kOutside;
      if (s < steps.size()) {
        if (steps[s].first <= t) {
          cause = kHost;
          until = std::min(until, steps[s].second);
        } else {
          until = std::min(until, steps[s].first);
        }
      }
      emit(t, until, cause);
      t = until;
    }
  }
}

// The pieces as a list, neighbours with one cause merged (DescribeGaps).
void Blame(const IntervalSet& idle, const IdleSets& sets, std::vector<Blamed>* map,
           std::vector<Piece>* pieces) {
  pieces->clear();
  Blame(idle, sets, map, [pieces](TimestampNs a, TimestampNs b, int cause) {
    if (!pieces->empty() && pieces->back().end == a && pieces->back().cause == cause) {
      pieces->back().end = b;
    } else {
      pieces->push_back({a, b, cause});
    }
  });
}

// Each step's idle time and causes: one sweep over the steps (by start) and
// the pieces. O(pieces + steps) when steps do not nest.
void PerStep(const std::vector<Piece>& pieces,
             const std::vector<std::pair<IntervalSet::Span, int64_t>>& steps,
             IdleBreakdown* result) {
  result->idle_per_step.resize(steps.size());
  size_t first = 0;  // the first piece ending after the current step's start
  for (size_t k = 0; k < steps.size(); ++k) {
    StepIdle& out = result->idle_per_step[k];
    out.step = steps[k].second;
    const auto [a, b] = steps[k].first;
    while (first < pieces.size() && pieces[first].end <= a) ++first;
    for (size_t j = first; a < b && j < pieces.size() && pieces[j].start < b; ++j) {
      const TimestampNs ns = std::min(b, pieces[j].end) - std::max(a, pieces[j].start);
      out.idle_ns += ns;
      out.by_cause[pieces[j].cause] += ns;
    }
  }
}

// Gap lengths: histogram and the longest ones with their step and cause.
void DescribeGaps(const IntervalSet& idle, const std::vector<Piece>& pieces,
                  const std::vector<std::pair<IntervalSet::Span, int64_t>>& steps,
                  IdleBreakdown* result) {
  for (const auto& [label, upper] : kGapBuckets) result->histogram.push_back({label, upper, 0, 0});
  std::vector<IntervalSet::Span> gaps = idle.spans();
  for (const auto& gap : gaps) {
    const TimestampNs length = gap.second - gap.first;
    result->largest_gap_ns = std::max(result->largest_gap_ns, length);
    for (GapBucket& bucket : result->histogram) {
      if (length < bucket.upper_ns) {
        ++bucket.count;
        bucket.total_ns += length;
        break;
      }
    }
  }
  auto step_at = [&steps](TimestampNs t) -> int64_t {
    auto it = std::upper_bound(steps.begin(), steps.end(), t,
                               [](TimestampNs v, const auto& s) { return v < s.first.first; });
    if (it == steps.begin()) return -1;
    --it;
    return t < it->first.second ? it->second : -1;
  };
  const size_t top = std::min<size_t>(kLongestGaps, gaps.size());
  std::partial_sort(gaps.begin(), gaps.begin() + top, gaps.end(), [](const auto& a, const auto& b) {
    return GapRanksBefore(a.second - a.first, a.first, b.second - b.first, b.first);
  });
  for (size_t g = 0; g < top; ++g) {
    Gap gap;
    gap.start_ns = gaps[g].first;
    gap.duration_ns = gaps[g].second - gaps[g].first;
    gap.step = step_at(gap.start_ns);
    // The gap is one idle span: the pieces inside it cover it.
    std::array<TimestampNs, kCauseCount> by_cause{};
    auto piece = std::lower_bound(pieces.begin(), pieces.end(), gaps[g].first,
                                  [](const Piece& p, TimestampNs t) { return p.start < t; });
    for (; piece != pieces.end() && piece->start < gaps[g].second; ++piece) {
      by_cause[piece->cause] += piece->end - piece->start;
    }
    TimestampNs best = -1;
    for (int c = 0; c < kCauseCount; ++c) {
      if (by_cause[c] > best) {
        best = by_cause[c];
        gap.cause = IdleCauseName(c);
      }
    }
    result->largest_gaps.push_back(gap);
  }
}

// What Tally and AnalyzeWithin share: the sums, per step, and the idle
// time and its pieces, which the gaps' descriptions need.
struct Tallied {
  bool keep_pieces = true;  // for DescribeGaps; Tally only sums them
  IntervalSet idle;
  std::vector<Piece> pieces;
  std::vector<Blamed> map;
};

void TallyInto(const IntervalSet& window, const IdleSets& sets, IdleBreakdown* result, Tallied* out,
               GapFold* gaps = nullptr) {
  out->idle = window.Subtract(sets.busy);  // busy time outside the window takes nothing
  result->window_ns = window.Length();
  result->idle_ns = out->idle.Length();
  result->busy_ns = result->window_ns - result->idle_ns;
  result->share =
      result->window_ns > 0 ? static_cast<double>(result->idle_ns) / result->window_ns : 0;
  result->gaps = static_cast<int64_t>(out->idle.spans().size());
  // Steps that nest (one ending after a later one) would hold the cursor
  // below back: each piece would look at every step inside the outer one.
  // PerStep takes them in one sweep over the pieces instead.
  bool nested = false;
  for (size_t k = 1; k < sets.steps.size() && !nested; ++k) {
    nested = sets.steps[k].first.second < sets.steps[k - 1].first.second;
  }
  if (out->keep_pieces || nested) {
    Blame(out->idle, sets, &out->map, &out->pieces);
    for (const Piece& piece : out->pieces) {
      result->cause_ns[piece.cause] += piece.end - piece.start;
      if (gaps != nullptr) gaps->Add(piece.start, piece.end, piece.cause, sets.steps);
    }
    PerStep(out->pieces, sets.steps, result);
    return;
  }
  // The same sums as the pieces arrive, without keeping them: each piece
  // into the steps it overlaps (sets.steps by start; a cursor past those
  // that ended, as PerStep's).
  const auto& steps = sets.steps;
  result->idle_per_step.resize(steps.size());
  for (size_t k = 0; k < steps.size(); ++k) result->idle_per_step[k].step = steps[k].second;
  size_t first = 0;
  // Mostly a piece lies inside the step at `first` and before the next
  // one's start: then it is one add. `fits_*` bound those pieces.
  TimestampNs fits_from = 1, fits_to = 0;  // none yet
  StepIdle* fits_step = nullptr;
  Blame(out->idle, sets, &out->map, [&](TimestampNs a, TimestampNs b, int cause) {
    result->cause_ns[cause] += b - a;
    if (gaps != nullptr) gaps->Add(a, b, cause, steps);
    if (a >= fits_from && b <= fits_to) {
      fits_step->idle_ns += b - a;
      fits_step->by_cause[cause] += b - a;
      return;
    }
    while (first < steps.size() && steps[first].first.second <= a) ++first;
    if (first < steps.size()) {
      fits_from = steps[first].first.first;
      fits_to = steps[first].first.second;
      if (first + 1 < steps.size()) fits_to = std::min(fits_to, steps[first + 1].first.first);
      fits_step = &result->idle_per_step[first];
    }
    for (size_t j = first; j < steps.size() && steps[j].first.first < b; ++j) {
      const TimestampNs ns = std::min(b, steps[j].first.second) - std::max(a, steps[j].first.first);
      if (ns <= 0) continue;  // a step that ended before, behind a longer one
      result->idle_per_step[j].idle_ns += ns;
      result->idle_per_step[j].by_cause[cause] += ns;
    }
  });
}

// Per device track, by (device, stream).
void DescribeStreams(const Timeline& timeline, const IntervalSet& window,
                     std::vector<TrackUnion>& tracks, IdleBreakdown* result) {
  for (uint32_t track = 0; track < tracks.size(); ++track) {
    if (tracks[track].count() == 0) continue;
    StreamActivity activity;
    activity.device = timeline.tracks()[track].pid;
    activity.stream = timeline.tracks()[track].tid;
    activity.intervals = tracks[track].count();
    // One pass when the track came in order and the window is one span.
    activity.busy_ns = tracks[track].out_of_order() || window.spans().size() > 1
                           ? TrackBusyNs(timeline, track, window)
                           : tracks[track].Finish();
    activity.busy_share =
        result->window_ns > 0 ? static_cast<double>(activity.busy_ns) / result->window_ns : 0;
    result->streams.push_back(activity);
  }
  std::sort(result->streams.begin(), result->streams.end(), [](const auto& a, const auto& b) {
    return std::tie(a.device, a.stream) < std::tie(b.device, b.stream);
  });
}

}  // namespace

std::string_view IdleCauseName(int cause) {
  return cause >= 0 && cause < kCauseCount ? ground::kIdleCauses[cause].name : "";
}

int GapAnalyzer::PhaseCause(Phase phase) {
  switch (phase) {
    case Phase::kDataWait:
      return kDataWait;
    case Phase::kHostToDevice:
      return kH2D;
    case Phase::kSync:
      return kSync;
    case Phase::kCheckpoint:
      return kCheckpoint;
    case Phase::kEval:
      return kEval;
    default:
      return kOtherPhase;
  }
}

int GapAnalyzer::CallCause(const std::string& name) {
  if (IsBlockingCall(name)) return kSync;
  const bool copy = name.rfind("cudaMemcpy", 0) == 0 || name.rfind("cuMemcpy", 0) == 0 ||
                    name.rfind("cudaMemset", 0) == 0 || name.rfind("cuMemset", 0) == 0;
  if (copy) return kCopyCall;
  if (name.find("Launch") != std::string::npos) return kLaunch;
  return kCudaApi;
}

bool GapAnalyzer::IsBlockingCall(const std::string& name) {
  if (name.find("Synchronize") != std::string::npos) return true;
  const bool copy = name.rfind("cudaMemcpy", 0) == 0 || name.rfind("cuMemcpy", 0) == 0 ||
                    name.rfind("cudaMemset", 0) == 0 || name.rfind("cuMemset", 0) == 0;
  return copy && name.find("Async") == std::string::npos;
}

IdleBreakdown GapAnalyzer::Analyze(const Timeline& timeline, TimestampNs window_start,
                                   TimestampNs window_end, BusySource source) {
  return AnalyzeWithin(timeline, IntervalSet::Range(window_start, window_end), source);
}

IdleBreakdown GapAnalyzer::Tally(const IntervalSet& window, const IdleSets& sets) {
  return Tally(window, sets, nullptr);
}

IdleBreakdown GapAnalyzer::Tally(const IntervalSet& window, const IdleSets& sets, GapFold* gaps) {
  IdleBreakdown result;
  thread_local Tallied scratch;  // its room stays for the next call
  scratch.keep_pieces = false;
  TallyInto(window, sets, &result, &scratch, gaps);
  return result;
}

void SortCauses(IdleBreakdown* idle) {
  idle->by_cause.clear();
  for (int c = 0; c < kCauseCount; ++c) {
    if (idle->cause_ns[c] > 0) idle->by_cause.emplace_back(IdleCauseName(c), idle->cause_ns[c]);
  }
  std::stable_sort(idle->by_cause.begin(), idle->by_cause.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
}

IdleBreakdown GapAnalyzer::AnalyzeWithin(const Timeline& timeline, const IntervalSet& window,
                                         BusySource source) {
  // The spans' bounds: what lies wholly outside them is skipped.
  const TimestampNs window_start = window.empty() ? 0 : window.spans().front().first;
  const TimestampNs window_end = window.empty() ? 0 : window.spans().back().second;
  Extracted extracted = Extract(timeline, window_start, window_end, source);
  IdleSets sets;
  sets.busy = std::move(extracted.busy).Build();
  for (int c = 0; c < kHost; ++c) sets.active[c] = std::move(extracted.causes[c]).Build();
  sets.in_steps = std::move(extracted.in_steps).Build();
  sets.steps = std::move(extracted.steps);
  std::sort(sets.steps.begin(), sets.steps.end());

  IdleBreakdown result;
  result.busy_source = extracted.has_device ? "device_activity" : "cpu_compute_phases";
  Tallied tallied;
  TallyInto(window, sets, &result, &tallied);
  SortCauses(&result);
  DescribeGaps(tallied.idle, tallied.pieces, sets.steps, &result);
  DescribeStreams(timeline, window, extracted.tracks, &result);
  return result;
}

}  // namespace trainscope::analysis
