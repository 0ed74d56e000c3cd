// The Timeline data model. See timeline.h.
#include "sdk/ground/timeline.h"

#include <algorithm>
#include <thread>
#include <utility>

namespace trainscope::ground {

double NanosToMicros(TimestampNs ns) {
  // Up to 2^53 the integer is exact in a double and one division rounds
  // once. Past it the whole microseconds (2^53 / 1000 to 2^53) are exact
  // and the fraction k/1000 is added. The rounding midpoints of that
  // magnitude are multiples of 2^-10, and k/1000 is either one of them (k a
  // multiple of 125: exact in a double) or at least 8/(1000 * 2^10) > 2^-17
  // away, far more than the 2^-54 error of the fraction's own rounding: the
  // sum rounds as the exact value would.
  constexpr TimestampNs kExact = TimestampNs{1} << 53;
  if (ns >= -kExact && ns <= kExact) return static_cast<double>(ns) / 1000.0;
  return static_cast<double>(ns / 1000) + static_cast<double>(ns % 1000) / 1000.0;
}

uint32_t Timeline::AddTrack(Track track) {
  tracks_.push_back(std::move(track));
  return static_cast<uint32_t>(tracks_.size() - 1);
}

uint32_t Timeline::FindOrAddTrack(TrackKind kind, int64_t pid, int64_t tid, std::string_view name) {
  for (size_t i = 0; i < tracks_.size(); ++i) {
    const Track& t = tracks_[i];
    if (t.kind == kind && t.pid == pid && t.tid == tid) return static_cast<uint32_t>(i);
  }
  return AddTrack(Track{kind, pid, tid, std::string(name)});
}

uint32_t NameTable::Intern(std::string_view name) {
  auto it = ids_.find(absl::string_view(name.data(), name.size()));
  if (it != ids_.end()) return it->second;
  const auto id = static_cast<uint32_t>(names_.size());
  names_.emplace_back(name);
  ids_.emplace(names_.back(), id);
  return id;
}

void Timeline::Sort(bool two_threads) {
  auto before = [](const Interval& a, const Interval& b) {
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    return a.end_ns > b.end_ns;
  };
  if (two_threads && intervals_.size() >= 20000) {
    // Each half sorted on a thread of its own, then merged: std::inplace_merge
    // takes equal elements from the first half first, so the order is
    // still the stable one.
    const auto middle = intervals_.begin() + static_cast<std::ptrdiff_t>(intervals_.size() / 2);
    std::thread second;
    try {
      second = std::thread([&] { std::stable_sort(middle, intervals_.end(), before); });
    } catch (...) {  // no thread: one sort below
    }
    if (second.joinable()) {
      std::stable_sort(intervals_.begin(), middle, before);
      second.join();
      std::inplace_merge(intervals_.begin(), middle, intervals_.end(), before);
      return;
    }
  }
  std::stable_sort(intervals_.begin(), intervals_.end(), before);
}

}  // namespace trainscope::ground
