// sdk/analysis/warmup.h: the run's one warm-up rule.
//
// The report's timing.warmup_steps, the steady figures the fold and the
// whole-run analysis compute after it, and the first steady window of
// trace.json all come from this class, fed the same step times in the same
// order: the trace's first steady window starts at the step where the
// report's warm-up ends.
//
// The auto rule is decided online, from the steps so far, so that a trace
// window can start there while the run goes on. Warm-up ends before the
// first step k such that steps k, k+1 and k+2 each take at most 1.25x the
// median time of the 8 steps after them (k+3 to k+10). Step k+10 decides
// candidate k; warm-up is at most 100 steps (decided by step 109 at the
// latest). When the run ends first, a candidate is judged against the
// following steps there are, and the last 3 steps against none (settled):
// a run of n >= 3 steps has at most n - 3 warm-up steps, one of fewer
// none. A fixed count (>= 0) is decided when that step arrives, and is
// all the steps of a run that ends first.
//
// Memory: 11 step times (kRun + kFollowing). Add is O(kFollowing log
// kFollowing); no allocation.
#ifndef TRAINSCOPE_SDK_ANALYSIS_WARMUP_H_
#define TRAINSCOPE_SDK_ANALYSIS_WARMUP_H_

#include <array>
#include <cstdint>
#include <string>

namespace trainscope::analysis {

class WarmupRule {
 public:
  static constexpr int kRun = 3;           // consecutive settled steps
  static constexpr int kFollowing = 8;     // steps whose median they are held to
  static constexpr double kSlack = 1.25;   // at most this x that median
  static constexpr int64_t kLatest = 100;  // the most warm-up steps

  // `fixed` >= 0: exactly that many steps (the run's warmup_steps option);
  // -1: the auto rule above.
  explicit WarmupRule(int64_t fixed = -1);

  // The next step's time, steps in start order. Every user passes
  // nanoseconds, so that all of them decide alike.
  void Add(int64_t duration_ns);
  // The end of the run: decides with the steps there are. Idempotent.
  void Finish();

  bool decided() const { return warmup_ >= 0; }
  // The number of warm-up steps once decided(), else -1.
  int64_t warmup() const { return warmup_; }
  // Steps before this position are warm-up whatever is decided later: the
  // warm-up once decided; before, every step so far under a fixed count,
  // the first candidate not yet refused under the auto rule.
  int64_t settled_before() const {
    if (decided()) return warmup_;
    return fixed_ >= 0 ? count_ : candidate_;
  }
  int64_t steps() const { return count_; }

  // The rule as the report writes it (timing.warmup_rule), for `steps` steps
  // once decided.
  std::string Describe() const;

 private:
  // Whether candidate_ holds, judged against its following steps held now.
  bool Settled(int following) const;
  int64_t Held(int64_t position) const { return held_[position % kHeld]; }

  static constexpr int kHeld = kRun + kFollowing;
  int64_t fixed_;
  int64_t count_ = 0;
  int64_t candidate_ = 0;  // the first position not yet refused
  int64_t warmup_ = -1;
  std::array<int64_t, kHeld> held_{};  // the times of positions candidate_ .. count_ - 1
};

}  // namespace trainscope::analysis

#endif  // TRAINSCOPE_SDK_ANALYSIS_WARMUP_H_
