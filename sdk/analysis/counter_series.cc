#include "sdk/analysis/counter_series.h"

#include <algorithm>

namespace trainscope::analysis {

void CounterSeries::Add(int64_t t_ns, int64_t value) {
  if (last_ < 0) first_ns_ = t_ns;
  const int64_t since = std::max<int64_t>(0, t_ns - first_ns_);
  int64_t index = since / width_ns_;
  while (index >= kWindows) {
    Merge();
    index = since / width_ns_;
  }
  Slot& s = slots_[static_cast<size_t>(index)];
  if (s.samples == 0) {
    s.min = s.max = value;
  } else {
    s.min = std::min(s.min, value);
    s.max = std::max(s.max, value);
  }
  ++s.samples;
  s.sum += static_cast<double>(value);
  last_ = std::max(last_, static_cast<int>(index));
}

void CounterSeries::Merge() {
  for (int i = 0; i < kWindows / 2; ++i) {
    const Slot& a = slots_[2 * i];
    const Slot& b = slots_[2 * i + 1];
    Slot m;
    m.samples = a.samples + b.samples;
    m.sum = a.sum + b.sum;
    if (a.samples > 0 && b.samples > 0) {
      m.min = std::min(a.min, b.min);
      m.max = std::max(a.max, b.max);
    } else {
      const Slot& only = a.samples > 0 ? a : b;
      m.min = only.min;
      m.max = only.max;
    }
    slots_[i] = m;
  }
  for (int i = kWindows / 2; i < kWindows; ++i) slots_[i] = Slot{};
  last_ = last_ < 0 ? -1 : last_ / 2;
  width_ns_ *= 2;
}

std::vector<Report::Counter::Window> CounterSeries::Windows(int64_t origin_ns) const {
  std::vector<Report::Counter::Window> out;
  for (int i = 0; i <= last_; ++i) {
    const Slot& s = slots_[static_cast<size_t>(i)];
    Report::Counter::Window w;
    w.start_s = static_cast<double>(first_ns_ - origin_ns + i * width_ns_) / 1e9;
    w.end_s = static_cast<double>(first_ns_ - origin_ns + (i + 1) * width_ns_) / 1e9;
    w.samples = s.samples;
    if (s.samples > 0) {
      w.min = s.min;
      w.max = s.max;
      w.mean = s.sum / static_cast<double>(s.samples);
    }
    out.push_back(w);
  }
  return out;
}

}  // namespace trainscope::analysis
