// The run's one warm-up rule. See warmup.h.
#include "sdk/analysis/warmup.h"

#include <algorithm>
#include <array>

#include "fmt/format.h"

namespace trainscope::analysis {

WarmupRule::WarmupRule(int64_t fixed) : fixed_(fixed) {
  if (fixed_ == 0) warmup_ = 0;
}

bool WarmupRule::Settled(int following) const {
  if (following == 0) return true;
  // Sorted by insertion (at most kFollowing values).
  std::array<int64_t, kFollowing> after{};
  for (int i = 0; i < following; ++i) {
    const int64_t value = Held(candidate_ + kRun + i);
    int k = i;
    for (; k > 0 && after[k - 1] > value; --k) after[k] = after[k - 1];
    after[k] = value;
  }
  // The median as step_analysis.h's Median: the mean of the middle two.
  const double median =
      following % 2 == 1
          ? static_cast<double>(after[following / 2])
          : (static_cast<double>(after[following / 2 - 1]) + after[following / 2]) / 2;
  for (int64_t i = candidate_; i < candidate_ + kRun; ++i) {
    if (static_cast<double>(Held(i)) > kSlack * median) return false;
  }
  return true;
}

void WarmupRule::Add(int64_t duration_ns) {
  const int64_t position = count_++;
  if (decided()) return;
  if (fixed_ >= 0) {
    if (position + 1 >= fixed_) warmup_ = fixed_;
    return;
  }
  held_[position % kHeld] = duration_ns;
  if (position - candidate_ + 1 < kHeld) return;  // candidate_'s steps not all here
  if (Settled(kFollowing)) {
    warmup_ = candidate_;
  } else if (++candidate_ >= kLatest) {
    warmup_ = kLatest;
  }
}

void WarmupRule::Finish() {
  if (decided()) return;
  if (fixed_ >= 0) {
    warmup_ = std::min(fixed_, count_);
    return;
  }
  if (count_ < kRun) {
    warmup_ = 0;
    return;
  }
  for (; candidate_ + kRun < count_ && candidate_ < kLatest; ++candidate_) {
    if (Settled(static_cast<int>(count_ - candidate_ - kRun))) break;
  }
  warmup_ = candidate_;
}

std::string WarmupRule::Describe() const {
  if (fixed_ >= 0)
    return fmt::format("fixed: {} step(s) by option", warmup_ < 0 ? fixed_ : warmup_);
  return fmt::format(
      "auto: steps before the first {} consecutive steps each within {}x the median step time "
      "of the {} steps after them (at most {} steps)",
      kRun, kSlack, kFollowing, kLatest);
}

}  // namespace trainscope::analysis
