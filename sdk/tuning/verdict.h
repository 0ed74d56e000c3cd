// The verdict of an experiment: which variant, if any, beats the baseline
// beyond the noise and the practical threshold without making a rollback
// condition worse; and, for sequential designs, whether more repeats can
// still change the answer.
//
// A variant is accepted only when all of these hold against the baseline
// (variants[0]):
//   1. the whole bootstrap interval of the ratio of medians clears the
//      threshold in the better direction (ratio <= 1 - threshold when lower
//      is better, >= 1 + threshold when higher is better);
//   2. the Mann-Whitney test, Holm-adjusted across the variants, gives
//      p < alpha;
//   3. no rollback condition is worse: failure rate, p99 step time,
//      resource-hours per accepted result, peak memory (RollbackLimits),
//      and no veto (VariantOutcomes::vetoes: its training curve);
//   4. at least one of its trials succeeded.
// Among accepted variants the one with the best ratio wins.
//
// Memory: O(variants * trials) for the comparisons; BootstrapRatioOfMedians'
// resamples while it runs.
#ifndef TRAINSCOPE_SDK_TUNING_VERDICT_H_
#define TRAINSCOPE_SDK_TUNING_VERDICT_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace trainscope::tuning {

// One trial's outcome, as the verdict reads it. `objective` holds the
// measured value of the objective; a failed trial's is ignored (the worst
// value stands in for it). NaN in a rollback metric means unknown.
struct TrialOutcome {
  double objective = 0;
  bool failed = false;
  // The tail the rollback watches (RollbackLimits::p99_step_time): the p99
  // step time, or a serving run's p99 latency (VerdictOptions::tail_name).
  double p99_step_ms = std::numeric_limits<double>::quiet_NaN();
  double resource_hours = std::numeric_limits<double>::quiet_NaN();
  double peak_memory_bytes = std::numeric_limits<double>::quiet_NaN();
};

struct VariantOutcomes {
  std::string name;
  std::vector<TrialOutcome> trials;
  // Conditions found worse outside the trials' metrics (the training-curve
  // check, curves.h), a phrase each: each rolls the variant back.
  std::vector<std::string> vetoes;
};

// How much worse a rollback metric may get, relative to the baseline's,
// before the variant is rolled back. Failure rate: an absolute increase of
// the share of failed trials. The per-trial metrics (p99 step time, peak
// memory) compare medians and must also differ beyond the noise (the rank
// test at alpha); resource-hours per accepted result is one figure per
// variant (all trials' resource-hours over those that reached the result).
struct RollbackLimits {
  double failure_rate = 0.0;    // any more failures than the baseline
  double p99_step_time = 0.05;  // median over trials of the p99 step time
  double resource_hours_per_accepted = 0.02;
  double peak_memory = 0.10;  // median over trials of the peak memory
};

struct VerdictOptions {
  bool lower_is_better = true;  // time to target, latency: true; throughput: false
  double threshold = 0.02;      // the practical difference, relative
  double level = 0.95;          // of the bootstrap interval
  int resamples = 10000;
  double alpha = 0.05;  // for the Holm-adjusted rank test
  uint64_t seed = 1;
  RollbackLimits rollback;
  std::string objective_name = "time to target";  // for the reason sentences
  // What TrialOutcome::p99_step_ms holds, for the rollback's sentence: the
  // p99 step time, or for serving objectives the p99 request latency.
  std::string tail_name = "the p99 step time";
};

struct Comparison {
  std::string variant;
  double ratio = 1;  // median(variant) / median(baseline)
  double ci_low = 0, ci_high = 0;
  double p_value = 1;     // Mann-Whitney, two-sided
  double p_adjusted = 1;  // Holm across the variants
  int failures = 0, trials = 0;
  bool clears_threshold = false;       // the whole interval beyond the threshold
  std::vector<std::string> rollbacks;  // what got worse, a phrase each
  bool accepted = false;
  std::string reason;  // one sentence
};

struct Verdict {
  std::optional<std::string> accepted;  // the winning variant's name
  std::string reason;                   // a sentence a reader understands
  std::vector<Comparison> comparisons;  // one per variant after the baseline
};

// Decides. `variants[0]` is the baseline; fewer than two variants, or a
// variant with no trials, gives no acceptance and says why. Cost: one
// bootstrap and one rank test per variant.
Verdict Decide(const std::vector<VariantOutcomes>& variants, const VerdictOptions& options);

// Sequential stopping: after each round of trials, whether more repeats can
// still change the answer.
struct SequentialOptions {
  int min_repeats = 3;   // per variant, before any early stop
  int max_repeats = 10;  // per variant: the budget
};
enum class Continue { kYes, kStopDecided, kStopBudget };

// kStopDecided when, with at least min_repeats trials each, every variant is
// either accepted (at the stricter interim level 1 - alpha/2 for its
// interval) or plainly not going to be: its interval lies wholly short of
// the threshold, or its ratio is not even half the threshold better after
// half the budget. kStopBudget at max_repeats. `repeats` counts the trials
// of the variant with the fewest.
Continue ShouldContinue(const std::vector<VariantOutcomes>& variants, const VerdictOptions& options,
                        const SequentialOptions& sequential);

// The per-trial values the tests compare: the objective, or the worst value
// for a failed trial (+inf when lower is better, 0 otherwise).
std::vector<double> ObjectiveValues(const VariantOutcomes& variant, bool lower_is_better);

}  // namespace trainscope::tuning

#endif  // TRAINSCOPE_SDK_TUNING_VERDICT_H_
