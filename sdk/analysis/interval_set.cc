// Sorted disjoint interval sets. See interval_set.h.
#include "sdk/analysis/interval_set.h"

#include <algorithm>

namespace trainscope::analysis {

IntervalSet IntervalSet::Range(TimestampNs start, TimestampNs end) {
  IntervalSet set;
  if (end > start) set.spans_.emplace_back(start, end);
  return set;
}

IntervalSet IntervalSet::FromUnsorted(std::vector<Span> spans) { return FromSpans(&spans); }

IntervalSet IntervalSet::FromSpans(std::vector<Span>* spans) {
  // Spans taken from a sorted Timeline arrive in start order: skip the sort.
  auto by_start = [](const Span& a, const Span& b) { return a.first < b.first; };
  if (!std::is_sorted(spans->begin(), spans->end(), by_start)) {
    std::sort(spans->begin(), spans->end(), by_start);
  }
  IntervalSet set;
  set.spans_.reserve(spans->size());
  for (const Span& span : *spans) {
    if (span.second <= span.first) continue;
    if (!set.spans_.empty() && span.first <= set.spans_.back().second) {
      set.spans_.back().second = std::max(set.spans_.back().second, span.second);
    } else {
      set.spans_.push_back(span);
    }
  }
  return set;
}

void IntervalSet::Builder::Add(Span span) {
  ++count_;
  if (span.second <= span.first) return;
  if (!merged_.empty() && span.first < last_start_) {
    late_.push_back(span);
    return;
  }
  last_start_ = span.first;
  if (!merged_.empty() && span.first <= merged_.back().second) {
    merged_.back().second = std::max(merged_.back().second, span.second);
  } else {
    merged_.push_back(span);
  }
}

IntervalSet IntervalSet::Builder::Build() && {
  if (late_.empty()) {
    IntervalSet set;
    set.spans_ = std::move(merged_);
    return set;
  }
  // An unsorted timeline (the fold's segments, nested ranges): the merged
  // spans are a valid input too.
  late_.insert(late_.end(), merged_.begin(), merged_.end());
  return FromUnsorted(std::move(late_));
}

IntervalSet IntervalSet::Intersect(const IntervalSet& other) const {
  IntervalSet out;
  out.spans_.reserve(std::min(spans_.size() + other.spans_.size(), 2 * spans_.size() + 1));
  size_t i = 0;
  size_t j = 0;
  while (i < spans_.size() && j < other.spans_.size()) {
    const TimestampNs start = std::max(spans_[i].first, other.spans_[j].first);
    const TimestampNs end = std::min(spans_[i].second, other.spans_[j].second);
    if (start < end) out.spans_.emplace_back(start, end);
    if (spans_[i].second < other.spans_[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

IntervalSet IntervalSet::Subtract(const IntervalSet& other) const {
  IntervalSet out;
  out.spans_.reserve(spans_.size() + other.spans_.size());
  size_t j = 0;
  for (const Span& span : spans_) {
    TimestampNs cursor = span.first;
    while (j < other.spans_.size() && other.spans_[j].second <= cursor) ++j;
    size_t k = j;
    while (k < other.spans_.size() && other.spans_[k].first < span.second) {
      if (other.spans_[k].first > cursor) {
        out.spans_.emplace_back(cursor, other.spans_[k].first);
      }
      cursor = std::max(cursor, other.spans_[k].second);
      ++k;
    }
    if (cursor < span.second) out.spans_.emplace_back(cursor, span.second);
  }
  return out;
}

IntervalSet IntervalSet::Union(const IntervalSet& other) const {
  if (other.empty()) return *this;
  if (empty()) return other;
  IntervalSet out;
  out.spans_.reserve(spans_.size() + other.spans_.size());
  size_t i = 0;
  size_t j = 0;
  while (i < spans_.size() || j < other.spans_.size()) {
    const bool mine =
        j == other.spans_.size() || (i < spans_.size() && spans_[i].first <= other.spans_[j].first);
    const Span& span = mine ? spans_[i++] : other.spans_[j++];
    if (!out.spans_.empty() && span.first <= out.spans_.back().second) {
      out.spans_.back().second = std::max(out.spans_.back().second, span.second);
    } else {
      out.spans_.push_back(span);
    }
  }
  return out;
}

TimestampNs IntervalSet::Length() const {
  TimestampNs total = 0;
  for (const Span& span : spans_) total += span.second - span.first;
  return total;
}

TimestampNs IntervalSet::LengthWithin(TimestampNs start, TimestampNs end) const {
  auto it = std::upper_bound(spans_.begin(), spans_.end(), start,
                             [](TimestampNs t, const Span& s) { return t < s.second; });
  TimestampNs total = 0;
  for (; it != spans_.end() && it->first < end; ++it) {
    total += std::min(end, it->second) - std::max(start, it->first);
  }
  return total;
}

}  // namespace trainscope::analysis
