// The statistics an experiment's verdict rests on: medians, a bootstrap
// interval for the ratio of two medians, the Mann-Whitney U test and Holm's
// correction. Pure functions of their inputs (a seed where random); no
// LibTorch, no I/O.
//
// Failed trials enter as the worst value (+inf when lower is better, as
// MLPerf counts a run that never reaches its target): the median and the
// rank test handle them without special cases, and a median that is itself
// a failure makes the ratio infinite (or 0), never NaN.
//
// Memory: O(n_a + n_b) besides the caller's vectors, plus `resamples`
// doubles in BootstrapRatioOfMedians.
#ifndef TRAINSCOPE_SDK_TUNING_STATISTICS_H_
#define TRAINSCOPE_SDK_TUNING_STATISTICS_H_

#include <cstdint>
#include <vector>

namespace trainscope::tuning {

// The median of `values` (the mean of the middle two for an even count);
// NaN for none. Infinite values are ordered as usual. Cost: O(n).
double Median(std::vector<double> values);

// median_b / median_a, with the edge cases of failed trials made finite or
// infinite, never NaN: both infinite (or both 0) -> 1; a infinite or b 0 ->
// 0; b infinite or a 0 -> +inf.
double RatioOfMedians(double median_a, double median_b);

struct Interval {
  double low = 0;
  double high = 0;
};

// Percentile bootstrap interval for median(b) / median(a): each resample
// draws n_a values from `a` and n_b from `b` with replacement. `level` in
// (0, 1), e.g. 0.95; `resamples` >= 100. Deterministic for a given `seed`.
// With very few trials (n < 5) the interval is narrower than its level
// promises; the verdict also requires the rank test. Cost: O(resamples *
// (n_a + n_b)); 10,000 resamples of 10 + 10 trials take about 5 ms.
Interval BootstrapRatioOfMedians(const std::vector<double>& a, const std::vector<double>& b,
                                 double level, int resamples, uint64_t seed);

// Two-sided p-value of the Mann-Whitney U (Wilcoxon rank-sum) test of `a`
// against `b`. Ties (failed trials among them) take mid-ranks. Exact (the
// permutation distribution of the rank sum, by dynamic programming) when
// n_a + n_b <= 60; otherwise the normal approximation with the tie and
// continuity corrections. 1 when either sample is empty. Cost: exact,
// O(n_a * (n_a + n_b)^3) at most about 10^7 steps; approximate, O(n log n).
double MannWhitneyP(const std::vector<double>& a, const std::vector<double>& b);

// The smallest two-sided p-value MannWhitneyP can give for samples of
// sizes `na` and `nb`: 2 / C(na + nb, na), the two complete orderings, each
// of its exact permutation distribution's C(na + nb, na) arrangements
// (capped at 1; 1 when either is empty). Ties only raise it. Cost: O(na).
double SmallestRankTestP(int na, int nb);

// The fewest trials per variant with which one of `comparisons` variants,
// each tested against the baseline, can reach p < `alpha` after Holm's
// adjustment (whose smallest adjusted p is comparisons x the raw one): the
// least n with comparisons x SmallestRankTestP(n, n) < alpha. With fewer,
// no variant can be accepted whatever the trials measure. At 0.05: 4 for
// one variant, 5 for two to six, 6 for seven to 23. Cost: O(n^2).
int MinimumRepeats(int comparisons, double alpha);

// Holm's step-down adjustment of `p` (family-wise error across variants):
// adjusted values in the input's order, each capped at 1 and never below an
// earlier (smaller) one's. Cost: O(m log m).
std::vector<double> HolmAdjust(const std::vector<double>& p);

}  // namespace trainscope::tuning

#endif  // TRAINSCOPE_SDK_TUNING_STATISTICS_H_
