// sdk/analysis/quantile_sketch.h: quantiles of a stream of values in bounded
// memory.
//
// Exact while it holds at most `exact_limit` values (the same median and
// nearest-rank percentiles as step_analysis.h's Median and Percentile); past
// that it keeps counts in log-linear buckets, as HdrHistogram does: each
// power of two from 2^kMinExponent to 2^kMaxExponent is cut into
// 2^kSubBucketBits equal buckets, found from the bits of the double (no
// log), and a quantile is answered with its bucket's midpoint, within
// 2^-(kSubBucketBits + 1) (0.39%) of the exact value of that rank, inside
// the documented kRelativeError. Minimum, maximum, count and sum stay
// exact. Two sketches merge (Merge) as if every value had gone into one.
//
//   QuantileSketch per_step_ms;            // exact up to 8192 values
//   for (double ms : step_ms) per_step_ms.Add(ms);
//   double p90 = per_step_ms.Percentile(90);
//
// Memory: at most max(8 x exact_limit, 8 x kMaxBuckets) bytes plus a few
// words: values below kMinValue share the first bucket, values from
// 2^kMaxExponent (1.1e12, a millisecond count of 35 years) the last.
#ifndef TRAINSCOPE_SDK_ANALYSIS_QUANTILE_SKETCH_H_
#define TRAINSCOPE_SDK_ANALYSIS_QUANTILE_SKETCH_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace trainscope::analysis {

class QuantileSketch {
 public:
  // The relative error of every quantile once the sketch left exact mode.
  static constexpr double kRelativeError = 0.005;
  static constexpr int kSubBucketBits = 7;
  static constexpr int kMinExponent = -30;
  static constexpr int kMaxExponent = 40;
  // Values at or below this (and negative ones) count as the first bucket's
  // in bucket mode; in milliseconds, about a picosecond.
  static constexpr double kMinValue = 1.0 / (int64_t{1} << -kMinExponent);
  static constexpr int kMaxBuckets = (kMaxExponent - kMinExponent) << kSubBucketBits;

  explicit QuantileSketch(size_t exact_limit = 8192);

  // Adds one value. Cost: O(1); the switch from
  // exact to bucket mode costs O(exact_limit) once.
  void Add(double value);
  // Adds every value of `other`. The result is exact if both are and the
  // combined count fits in this sketch's exact_limit.
  void Merge(const QuantileSketch& other);

  int64_t count() const { return count_; }
  double sum() const { return sum_; }
  double min() const { return count_ > 0 ? min_ : 0; }
  double max() const { return count_ > 0 ? max_ : 0; }
  bool exact() const { return exact_mode_; }

  // The median: the middle value, or the mean of the two middle values for
  // an even count. 0 when empty.
  double Median() const;
  // The p-th percentile by nearest rank, p in (0, 100]; 100 is the exact
  // maximum. 0 when empty.
  double Percentile(double p) const;

  // Bytes held, for the memory bound.
  size_t bytes() const;

 private:
  // The value of rank `rank` (1-based) in sorted order.
  double ValueAtRank(int64_t rank) const;
  void ToBuckets();
  void AddToBucket(double value, int64_t count) { buckets_[BucketOf(value)] += count; }
  static int BucketOf(double value) {
    if (!(value > kMinValue)) return 0;  // NaN too
    if (value >= static_cast<double>(int64_t{1} << kMaxExponent)) return kMaxBuckets - 1;
    uint64_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    const int exponent = static_cast<int>((bits >> 52) & 0x7ff) - 1023;
    const auto sub =
        static_cast<int>((bits >> (52 - kSubBucketBits)) & ((1 << kSubBucketBits) - 1));
    return ((exponent - kMinExponent) << kSubBucketBits) | sub;
  }
  static double BucketValue(int bucket);

  size_t exact_limit_;
  bool exact_mode_ = true;
  mutable std::vector<double> exact_;  // sorted lazily by ValueAtRank
  mutable bool sorted_ = true;
  std::vector<int64_t> buckets_;  // by BucketOf, 0 .. kMaxBuckets - 1
  int64_t count_ = 0;
  double sum_ = 0;
  double min_ = 0;
  double max_ = 0;
};

// Inline: the fold adds (kPhaseCount + 3) values a step.
inline void QuantileSketch::Add(double value) {
  if (count_ == 0) {
    min_ = max_ = value;
  } else {
    min_ = value < min_ ? value : min_;
    max_ = value > max_ ? value : max_;
  }
  ++count_;
  sum_ += value;
  if (exact_mode_) {
    if (exact_.size() < exact_limit_) {
      if (!exact_.empty() && value < exact_.back()) sorted_ = false;
      exact_.push_back(value);
      return;
    }
    ToBuckets();
  }
  AddToBucket(value, 1);
}

}  // namespace trainscope::analysis

#endif  // TRAINSCOPE_SDK_ANALYSIS_QUANTILE_SKETCH_H_
