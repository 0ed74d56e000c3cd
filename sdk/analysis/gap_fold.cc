// GapFold: the gaps of a run folded piece by piece. See gap_analyzer.h.
#include <algorithm>
#include <iterator>
#include <tuple>
#include <utility>
#include <vector>

#include "sdk/analysis/gap_analyzer.h"
#include "sdk/analysis/gap_lengths.h"

namespace trainscope::analysis {

void GapFold::Add(TimestampNs a, TimestampNs b, int cause,
                  const std::vector<std::pair<IntervalSet::Span, int64_t>>& steps) {
  if (Open* current = Current(); current != nullptr && a == current->end) {
    current->end = b;  // the same gap, on from the piece before
    current->by_cause[cause] += b - a;
    return;
  }
  Open gap;
  gap.start = a;
  gap.end = b;
  gap.by_cause[cause] = b - a;
  // As DescribeGaps: the last step to begin at or before `a`, if `a` is
  // inside it.
  auto it = std::upper_bound(steps.begin(), steps.end(), a,
                             [](TimestampNs t, const auto& s) { return t < s.first.first; });
  if (it != steps.begin() && a < std::prev(it)->first.second) gap.step = std::prev(it)->second;
  if (!head_) {
    head_ = gap;
    return;
  }
  if (last_) Count(*last_, &counted_);
  last_ = gap;
}

void GapFold::Append(const GapFold& later) {
  if (!later.head_) return;
  Open* current = Current();
  const bool joined = current != nullptr && later.head_->start == current->end;
  if (joined) {
    current->end = later.head_->end;
    for (int c = 0; c < kIdleCauseCount; ++c) current->by_cause[c] += later.head_->by_cause[c];
  }
  if (!later.last_) {  // one gap in `later`: it stays open here
    if (!joined) {
      if (!head_) {
        head_ = later.head_;
      } else {
        if (last_) Count(*last_, &counted_);
        last_ = later.head_;
      }
    }
  } else {  // `later`'s head is complete; its last is the open one now
    if (joined) {
      if (last_) Count(*last_, &counted_);  // else the joined one is head_
    } else if (!head_) {
      head_ = later.head_;
    } else {
      if (last_) Count(*last_, &counted_);
      Count(*later.head_, &counted_);
    }
    last_ = later.last_;
  }
  const Counted& more = later.counted_;
  counted_.gaps += more.gaps;
  for (size_t k = 0; k < counted_.count.size(); ++k) {
    counted_.count[k] += more.count[k];
    counted_.total[k] += more.total[k];
  }
  std::vector<Gap>& top = counted_.largest;
  top.insert(top.end(), more.largest.begin(), more.largest.end());
  std::sort(top.begin(), top.end(), [](const Gap& x, const Gap& y) {
    return GapRanksBefore(x.duration_ns, x.start_ns, y.duration_ns, y.start_ns);
  });
  if (top.size() > kLongestGaps) top.resize(kLongestGaps);
}

void GapFold::Count(const Open& gap, Counted* into) {
  static_assert(std::tuple_size_v<decltype(Counted::count)> ==
                std::tuple_size_v<decltype(kGapBuckets)>);
  const TimestampNs length = gap.end - gap.start;
  ++into->gaps;
  for (size_t k = 0; k < kGapBuckets.size(); ++k) {
    if (length < kGapBuckets[k].second) {
      ++into->count[k];
      into->total[k] += length;
      break;
    }
  }
  std::vector<Gap>& top = into->largest;
  if (top.size() == kLongestGaps &&
      !GapRanksBefore(length, gap.start, top.back().duration_ns, top.back().start_ns)) {
    return;  // not among the longest
  }
  Gap kept;
  kept.start_ns = gap.start;
  kept.duration_ns = length;
  kept.step = gap.step;
  TimestampNs best = -1;
  for (int c = 0; c < kIdleCauseCount; ++c) {
    if (gap.by_cause[c] > best) {  // ties: the cause first in priority order, as DescribeGaps
      best = gap.by_cause[c];
      kept.cause = IdleCauseName(c);
    }
  }
  auto at = std::find_if(top.begin(), top.end(), [&](const Gap& x) {
    return GapRanksBefore(length, gap.start, x.duration_ns, x.start_ns);
  });
  top.insert(at, std::move(kept));
  if (top.size() > kLongestGaps) top.pop_back();
}

void GapFold::Describe(IdleBreakdown* out) const {
  Counted all = counted_;
  if (head_) Count(*head_, &all);
  if (last_) Count(*last_, &all);
  out->gaps = all.gaps;
  out->histogram.clear();
  for (size_t k = 0; k < kGapBuckets.size(); ++k) {
    out->histogram.push_back(
        {kGapBuckets[k].first, kGapBuckets[k].second, all.count[k], all.total[k]});
  }
  out->largest_gaps = all.largest;
  out->largest_gap_ns = all.largest.empty() ? 0 : all.largest.front().duration_ns;
}

}  // namespace trainscope::analysis
