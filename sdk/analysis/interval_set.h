// sdk/analysis/interval_set.h: sets of time as sorted, disjoint intervals.
//
// The building block of the idle and phase analyses: the union of busy
// intervals, the gaps between them, the part of a gap a phase covers.
//
//   IntervalSet busy = IntervalSet::FromUnsorted(spans);
//   IntervalSet idle = IntervalSet::Range(t0, t1).Subtract(busy);
//
//   IntervalSet::Builder builder;  // spans read from a sorted timeline
//   for (...) builder.Add(span);
//   IntervalSet busy = std::move(builder).Build();
#ifndef TRAINSCOPE_SDK_ANALYSIS_INTERVAL_SET_H_
#define TRAINSCOPE_SDK_ANALYSIS_INTERVAL_SET_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "trainscope/clock.h"

namespace trainscope::analysis {

class IntervalSet {
 public:
  using Span = std::pair<TimestampNs, TimestampNs>;  // [first, second)

  IntervalSet() = default;
  // The set holding [start, end) (empty if end <= start).
  static IntervalSet Range(TimestampNs start, TimestampNs end);
  // The union of arbitrary spans (any order, may overlap). O(n log n);
  // O(n) when they are already in start order.
  static IntervalSet FromUnsorted(std::vector<Span> spans);
  // The same, sorting `*spans` in place and leaving them there: a caller
  // that refills one buffer keeps its room.
  static IntervalSet FromSpans(std::vector<Span>* spans);

  // The union of spans added one by one, merged as they arrive: when they
  // come in start order (as from a sorted Timeline) it stores only the
  // merged result and never sorts. Spans that start before an earlier one
  // are kept aside and sorted in by Build(), so any order is correct.
  class Builder {
   public:
    void Add(Span span);
    // Spans added, empty ones included.
    int64_t count() const { return count_; }
    IntervalSet Build() &&;

   private:
    std::vector<Span> merged_;  // as spans_: sorted, disjoint
    std::vector<Span> late_;    // out-of-order spans, for Build()
    TimestampNs last_start_ = 0;
    int64_t count_ = 0;
  };

  // Set operations, each linear in the sizes of both sets.
  IntervalSet Intersect(const IntervalSet& other) const;
  IntervalSet Subtract(const IntervalSet& other) const;
  IntervalSet Union(const IntervalSet& other) const;

  // Total covered time.
  TimestampNs Length() const;
  // Covered time within [start, end). O(log n + spans in range).
  TimestampNs LengthWithin(TimestampNs start, TimestampNs end) const;

  const std::vector<Span>& spans() const { return spans_; }
  bool empty() const { return spans_.empty(); }

 private:
  std::vector<Span> spans_;  // sorted, disjoint, non-empty, non-touching
};

}  // namespace trainscope::analysis

#endif  // TRAINSCOPE_SDK_ANALYSIS_INTERVAL_SET_H_
