// Medians, bootstrap intervals, the rank test and Holm. See statistics.h.
#include "sdk/tuning/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <utility>

namespace trainscope::tuning {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The median of v[0..n), reordering it.
double MedianInPlace(double* v, size_t n) {
  if (n == 0) return std::numeric_limits<double>::quiet_NaN();
  const size_t mid = n / 2;
  std::nth_element(v, v + mid, v + n);
  const double upper = v[mid];
  if (n % 2 == 1) return upper;
  const double lower = *std::max_element(v, v + mid);
  if (std::isinf(lower) && std::isinf(upper)) return lower == upper ? upper : 0;
  if (std::isinf(upper)) return upper;  // half the trials failed: the median failed
  return (lower + upper) / 2;
}

// The standard normal's upper tail.
double NormalTail(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

}  // namespace

double Median(std::vector<double> values) { return MedianInPlace(values.data(), values.size()); }

double RatioOfMedians(double median_a, double median_b) {
  const bool a_inf = std::isinf(median_a), b_inf = std::isinf(median_b);
  if ((a_inf && b_inf) || (median_a == 0 && median_b == 0)) return 1;
  if (a_inf || median_b == 0) return 0;
  if (b_inf || median_a == 0) return kInf;
  return median_b / median_a;
}

Interval BootstrapRatioOfMedians(const std::vector<double>& a, const std::vector<double>& b,
                                 double level, int resamples, uint64_t seed) {
  if (a.empty() || b.empty()) return {0, kInf};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick_a(0, a.size() - 1), pick_b(0, b.size() - 1);
  std::vector<double> ratios(static_cast<size_t>(std::max(resamples, 1)));
  std::vector<double> draw(std::max(a.size(), b.size()));
  for (double& ratio : ratios) {
    for (size_t i = 0; i < a.size(); ++i) draw[i] = a[pick_a(rng)];
    const double median_a = MedianInPlace(draw.data(), a.size());
    for (size_t i = 0; i < b.size(); ++i) draw[i] = b[pick_b(rng)];
    const double median_b = MedianInPlace(draw.data(), b.size());
    ratio = RatioOfMedians(median_a, median_b);
  }
  std::sort(ratios.begin(), ratios.end());
  const double tail = (1 - level) / 2;
  auto at = [&](double q) {
    const double pos = q * static_cast<double>(ratios.size() - 1);
    const size_t i = static_cast<size_t>(std::floor(pos));
    const size_t j = std::min(i + 1, ratios.size() - 1);
    if (std::isinf(ratios[i]) || std::isinf(ratios[j])) return ratios[pos - i < 0.5 ? i : j];
    return ratios[i] + (pos - static_cast<double>(i)) * (ratios[j] - ratios[i]);
  };
  return {at(tail), at(1 - tail)};
}

double MannWhitneyP(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t na = a.size(), nb = b.size(), n = na + nb;
  if (na == 0 || nb == 0) return 1;
  // Pool, sort, and give ties their mid-rank; doubled, so every rank is an
  // integer (ranks 1..n -> 2..2n, a tie of ranks r..s -> r + s).
  std::vector<std::pair<double, bool>> pooled;  // value, from a
  pooled.reserve(n);
  for (double v : a) pooled.emplace_back(v, true);
  for (double v : b) pooled.emplace_back(v, false);
  std::sort(pooled.begin(), pooled.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<int64_t> rank2(n);
  double tie_term = 0;  // sum of (t^3 - t) over tie groups
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j + 1 < n && pooled[j + 1].first == pooled[i].first) ++j;
    for (size_t k = i; k <= j; ++k) rank2[k] = static_cast<int64_t>(i + 1 + j + 1);
    const double t = static_cast<double>(j - i + 1);
    tie_term += t * t * t - t;
    i = j + 1;
  }
  int64_t observed = 0;  // doubled rank sum of a
  for (size_t k = 0; k < n; ++k) {
    if (pooled[k].second) observed += rank2[k];
  }
  const int64_t expected = static_cast<int64_t>(na * (n + 1));  // doubled
  const int64_t distance = std::llabs(observed - expected);

  if (n <= 60) {
    // ways[k][s]: subsets of k of the ranks seen so far with doubled sum s.
    const int64_t max_sum = static_cast<int64_t>(n * (n + 1));
    std::vector<std::vector<double>> ways(na + 1, std::vector<double>(max_sum + 1, 0.0));
    ways[0][0] = 1;
    for (size_t i = 0; i < n; ++i) {
      const int64_t r = rank2[i];
      for (size_t k = std::min(na, i + 1); k >= 1; --k) {
        std::vector<double>& to = ways[k];
        const std::vector<double>& from = ways[k - 1];
        for (int64_t s = max_sum; s >= r; --s) to[s] += from[s - r];
      }
    }
    double extreme = 0, total = 0;
    for (int64_t s = 0; s <= max_sum; ++s) {
      const double w = ways[na][s];
      if (w == 0) continue;
      total += w;
      if (std::llabs(s - expected) >= distance) extreme += w;
    }
    return std::min(1.0, extreme / total);
  }
  // Normal approximation of U = R_a - na (na + 1) / 2, with ties.
  const double dn = static_cast<double>(n);
  const double variance = static_cast<double>(na) * static_cast<double>(nb) / 12.0 *
                          ((dn + 1) - tie_term / (dn * (dn - 1)));
  if (variance <= 0) return 1;
  const double z = (static_cast<double>(distance) / 2 - 0.5) / std::sqrt(variance);
  return std::min(1.0, 2 * NormalTail(std::max(z, 0.0)));
}

double SmallestRankTestP(int na, int nb) {
  if (na <= 0 || nb <= 0) return 1;
  // C(na + nb, na) as a product of ratios; a double holds it for any
  // sample an experiment runs (it overflows to inf only past ~1000 a side,
  // where 2 / inf is the right 0).
  double arrangements = 1;
  for (int k = 1; k <= na; ++k) {
    arrangements = arrangements * static_cast<double>(nb + k) / static_cast<double>(k);
  }
  return std::min(1.0, 2 / arrangements);
}

int MinimumRepeats(int comparisons, double alpha) {
  const int m = std::max(comparisons, 1);
  int n = 1;
  while (n < 1000 && !(m * SmallestRankTestP(n, n) < alpha)) ++n;
  return n;
}

std::vector<double> HolmAdjust(const std::vector<double>& p) {
  const size_t m = p.size();
  std::vector<size_t> order(m);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return p[x] < p[y]; });
  std::vector<double> adjusted(m);
  double running = 0;
  for (size_t i = 0; i < m; ++i) {
    const double value = std::min(1.0, static_cast<double>(m - i) * p[order[i]]);
    running = std::max(running, value);
    adjusted[order[i]] = running;
  }
  return adjusted;
}

}  // namespace trainscope::tuning
