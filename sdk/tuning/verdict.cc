// The experiment's verdict and sequential stopping. See verdict.h.
#include "sdk/tuning/verdict.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "sdk/tuning/statistics.h"

namespace trainscope::tuning {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The known (not NaN) values of one metric.
template <typename Field>
std::vector<double> Known(const VariantOutcomes& v, Field field) {
  std::vector<double> known;
  for (const TrialOutcome& t : v.trials) {
    if (!std::isnan(t.*field)) known.push_back(t.*field);
  }
  return known;
}

int Failures(const VariantOutcomes& v) {
  return static_cast<int>(std::count_if(v.trials.begin(), v.trials.end(),
                                        [](const TrialOutcome& t) { return t.failed; }));
}

// Resource-hours spent per trial that reached its result (failed trials
// cost too); +inf when none did, NaN when no trial knew its cost.
double ResourceHoursPerAccepted(const VariantOutcomes& v) {
  double hours = 0;
  int known = 0, accepted = 0;
  for (const TrialOutcome& t : v.trials) {
    if (!std::isnan(t.resource_hours)) {
      hours += t.resource_hours;
      ++known;
    }
    if (!t.failed) ++accepted;
  }
  if (known == 0) return std::numeric_limits<double>::quiet_NaN();
  return accepted == 0 ? kInf : hours / accepted;
}

std::string Percent(double fraction) {
  const double pct = 100 * std::fabs(fraction);
  return pct >= 10 ? fmt::format("{:.0f}%", pct) : fmt::format("{:.2g}%", pct);
}

std::string Ratio(double r) { return std::isinf(r) ? "inf" : fmt::format("{:.3f}", r); }

// What got worse in `v` against the baseline `b`, a phrase each.
std::vector<std::string> Rollbacks(const VariantOutcomes& b, const VariantOutcomes& v,
                                   const VerdictOptions& options) {
  const RollbackLimits& limits = options.rollback;
  const double alpha = options.alpha;
  std::vector<std::string> worse;
  const int fb = Failures(b), fv = Failures(v);
  const double rate_b = b.trials.empty() ? 0 : static_cast<double>(fb) / b.trials.size();
  const double rate_v = v.trials.empty() ? 0 : static_cast<double>(fv) / v.trials.size();
  if (rate_v > rate_b + limits.failure_rate + 1e-12) {
    worse.push_back(fmt::format("its failure rate rose from {} of {} to {} of {} trials", fb,
                                b.trials.size(), fv, v.trials.size()));
  }
  // Worse by more than the limit; for per-trial metrics also beyond the
  // noise (the rank test at alpha), so an A/A is never rolled back on its
  // tail.
  auto relative = [&](double base, double value, double limit, const char* what, const char* unit,
                      double scale, double p) {
    if (std::isnan(base) || std::isnan(value) || !(value > base * (1 + limit)) || !(p < alpha)) {
      return;
    }
    if (std::isinf(value)) {
      worse.push_back(fmt::format("{} is unbounded (no trial reached the result)", what));
      return;
    }
    worse.push_back(fmt::format("{} rose {} ({:.3g} to {:.3g} {})", what,
                                base > 0 ? Percent(value / base - 1) : std::string("from 0"),
                                base / scale, value / scale, unit));
  };
  auto per_trial = [&](double TrialOutcome::*field, double limit, const char* what,
                       const char* unit, double scale) {
    const std::vector<double> kb = Known(b, field), kv = Known(v, field);
    relative(Median(kb), Median(kv), limit, what, unit, scale, MannWhitneyP(kb, kv));
  };
  per_trial(&TrialOutcome::p99_step_ms, limits.p99_step_time, options.tail_name.c_str(), "ms", 1);
  relative(ResourceHoursPerAccepted(b), ResourceHoursPerAccepted(v),
           limits.resource_hours_per_accepted, "resource-hours per accepted result", "h", 1, 0);
  per_trial(&TrialOutcome::peak_memory_bytes, limits.peak_memory, "peak memory", "MB", 1e6);
  return worse;
}

bool Better(double ratio, const VerdictOptions& o, double margin) {
  return o.lower_is_better ? ratio <= 1 - margin : ratio >= 1 + margin;
}

}  // namespace

std::vector<double> ObjectiveValues(const VariantOutcomes& variant, bool lower_is_better) {
  std::vector<double> values;
  values.reserve(variant.trials.size());
  for (const TrialOutcome& t : variant.trials) {
    values.push_back(t.failed ? (lower_is_better ? kInf : 0.0) : t.objective);
  }
  return values;
}

namespace {

// Variant `v` (the `index`th) against the baseline by the numbers: the
// ratio of medians, its bootstrap interval, the rank test, whether the
// interval lies beyond the threshold, and what got worse.
Comparison Compare(const VariantOutcomes& base, const std::vector<double>& base_values,
                   const VariantOutcomes& v, size_t index, const VerdictOptions& o) {
  Comparison c;
  c.variant = v.name;
  c.trials = static_cast<int>(v.trials.size());
  c.failures = Failures(v);
  const std::vector<double> values = ObjectiveValues(v, o.lower_is_better);
  c.ratio = RatioOfMedians(Median(base_values), Median(values));
  const Interval ci =
      BootstrapRatioOfMedians(base_values, values, o.level, o.resamples, o.seed + index);
  c.ci_low = ci.low;
  c.ci_high = ci.high;
  c.p_value = MannWhitneyP(base_values, values);
  c.clears_threshold = Better(o.lower_is_better ? c.ci_high : c.ci_low, o, o.threshold);
  c.rollbacks = Rollbacks(base, v, o);
  c.rollbacks.insert(c.rollbacks.end(), v.vetoes.begin(), v.vetoes.end());
  return c;
}

// How the variant's median moved against the baseline's, in words: "time
// to target 12% lower than base's", "never reached its result", or, when
// both medians are infinite or both 0, that there is no comparison.
std::string Moved(const Comparison& c, const VariantOutcomes& base,
                  const std::vector<double>& base_values, const VariantOutcomes& v,
                  const VerdictOptions& o) {
  const double change = c.ratio - 1;
  // Both medians infinite (most trials of each side never reached the
  // result) or both 0: their ratio of 1 compares nothing.
  const double base_median = Median(base_values);
  const double median = Median(ObjectiveValues(v, o.lower_is_better));
  const bool no_comparison =
      (std::isinf(base_median) && std::isinf(median)) || (base_median == 0 && median == 0);
  return no_comparison ? fmt::format("both medians of {} are {}: no comparison", o.objective_name,
                                     std::isinf(median) ? "infinite" : "0")
         : std::isinf(c.ratio) || c.ratio == 0
             ? "never reached its result"
             : fmt::format("{} {} {} than {}'s", o.objective_name, Percent(change),
                           change < 0 ? "lower" : "higher", base.name);
}

// The comparison's reason, and whether the variant is accepted: it has
// trials, not all failed, its interval clears the threshold, nothing
// rolls it back and the rank test (Holm-adjusted, `several` variants)
// reaches alpha.
void Judge(const VariantOutcomes& base, const std::vector<double>& base_values,
           const VariantOutcomes& v, const VerdictOptions& o, bool several, Comparison* c) {
  const std::string level = fmt::format("{:g}%", 100 * o.level);
  const std::string threshold = Percent(o.threshold);
  const std::string numbers = fmt::format(
      "ratio of medians {}, {} interval {} to {}; rank test p = {:.3g}{}", Ratio(c->ratio), level,
      Ratio(c->ci_low), Ratio(c->ci_high), c->p_adjusted, several ? " after Holm" : "");
  const std::string moved = Moved(*c, base, base_values, v, o);
  if (c->trials == 0) {
    c->reason = fmt::format("{} has no trials", c->variant);
  } else if (c->failures == c->trials) {
    c->reason = fmt::format("{} failed every trial ({} of {})", c->variant, c->failures, c->trials);
    for (const std::string& r : v.vetoes) c->reason += "; also " + r;
  } else if (!c->clears_threshold) {
    const bool worse =
        o.lower_is_better ? c->ci_low >= 1 + o.threshold : c->ci_high <= 1 - o.threshold;
    c->reason = fmt::format(
        "{}: {} ({}); {}", c->variant, moved, numbers,
        worse ? std::string("worse beyond the noise")
              : fmt::format("the interval does not lie wholly beyond the {} threshold in the "
                            "better direction: no gain beyond the noise",
                            threshold));
    for (const std::string& r : c->rollbacks) c->reason += "; also " + r;
  } else if (!c->rollbacks.empty()) {
    std::string what;
    for (const std::string& r : c->rollbacks) what += (what.empty() ? "" : ", and ") + r;
    c->reason = fmt::format("{} is rolled back: {} ({}: {})", c->variant, what, moved, numbers);
  } else if (!(c->p_adjusted < o.alpha)) {
    c->reason = fmt::format("{}: {} ({}), but the rank test does not reach p < {:g}", c->variant,
                            moved, numbers, o.alpha);
  } else {
    c->accepted = true;
    c->reason =
        fmt::format("{}: {} ({}): beyond the {} threshold, and no rollback condition got worse",
                    c->variant, moved, numbers, threshold);
  }
}

}  // namespace

Verdict Decide(const std::vector<VariantOutcomes>& variants, const VerdictOptions& o) {
  Verdict verdict;
  if (variants.size() < 2) {
    verdict.reason = "nothing to compare: an experiment needs a baseline and a variant";
    return verdict;
  }
  const VariantOutcomes& base = variants[0];
  const std::vector<double> base_values = ObjectiveValues(base, o.lower_is_better);
  std::vector<double> p_values;
  for (size_t i = 1; i < variants.size(); ++i) {
    verdict.comparisons.push_back(Compare(base, base_values, variants[i], i, o));
    p_values.push_back(verdict.comparisons.back().p_value);
  }
  const std::vector<double> adjusted = HolmAdjust(p_values);
  const Comparison* best = nullptr;
  for (size_t i = 0; i < verdict.comparisons.size(); ++i) {
    Comparison& c = verdict.comparisons[i];
    c.p_adjusted = adjusted[i];
    Judge(base, base_values, variants[i + 1], o, verdict.comparisons.size() > 1, &c);
    if (c.accepted && (best == nullptr || Better(c.ratio / best->ratio, o, 0))) best = &c;
  }
  if (best != nullptr) {
    verdict.accepted = best->variant;
    verdict.reason = fmt::format("accepted {}", best->reason);
  } else {
    std::string why;
    for (const Comparison& c : verdict.comparisons) why += (why.empty() ? "" : "; ") + c.reason;
    verdict.reason = fmt::format("no variant accepted, {} stays: {}", base.name, why);
  }
  return verdict;
}

Continue ShouldContinue(const std::vector<VariantOutcomes>& variants, const VerdictOptions& o,
                        const SequentialOptions& sequential) {
  size_t repeats = std::numeric_limits<size_t>::max();
  for (const VariantOutcomes& v : variants) repeats = std::min(repeats, v.trials.size());
  if (variants.size() < 2) return Continue::kStopDecided;
  if (repeats >= static_cast<size_t>(sequential.max_repeats)) return Continue::kStopBudget;
  if (repeats < static_cast<size_t>(sequential.min_repeats)) return Continue::kYes;
  VerdictOptions interim = o;
  interim.level = 1 - (1 - o.level) / 2;  // a stricter interval at interim looks
  const Verdict v = Decide(variants, interim);
  const bool past_half = 2 * repeats >= static_cast<size_t>(sequential.max_repeats);
  for (const Comparison& c : v.comparisons) {
    if (c.accepted) continue;
    const bool short_of_threshold =
        !Better(o.lower_is_better ? c.ci_low : c.ci_high, o, o.threshold);
    const bool not_half_way = past_half && !Better(c.ratio, o, o.threshold / 2);
    if (!short_of_threshold && !not_half_way) return Continue::kYes;
  }
  return Continue::kStopDecided;
}

}  // namespace trainscope::tuning
