// Quantiles in bounded memory. See quantile_sketch.h.
#include "sdk/analysis/quantile_sketch.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace trainscope::analysis {
static_assert(0.5 / (1 << QuantileSketch::kSubBucketBits) <= QuantileSketch::kRelativeError,
              "a bucket's midpoint is within kRelativeError of its values");

QuantileSketch::QuantileSketch(size_t exact_limit) : exact_limit_(exact_limit) {}

double QuantileSketch::BucketValue(int bucket) {
  const int exponent = (bucket >> kSubBucketBits) + kMinExponent;
  const int sub = bucket & ((1 << kSubBucketBits) - 1);
  return std::ldexp(1.0 + (sub + 0.5) / (1 << kSubBucketBits), exponent);
}

void QuantileSketch::ToBuckets() {
  exact_mode_ = false;
  buckets_.assign(kMaxBuckets, 0);
  for (double v : exact_) AddToBucket(v, 1);
  std::vector<double>().swap(exact_);
}

void QuantileSketch::Merge(const QuantileSketch& other) {
  if (other.count_ == 0) return;
  if (count_ == 0) {
    min_ = other.min_;
    max_ = other.max_;
  } else {
    min_ = std::min(min_, other.min_);
    max_ = std::max(max_, other.max_);
  }
  count_ += other.count_;
  sum_ += other.sum_;
  if (exact_mode_ && other.exact_mode_ && exact_.size() + other.exact_.size() <= exact_limit_) {
    exact_.insert(exact_.end(), other.exact_.begin(), other.exact_.end());
    sorted_ = false;
    return;
  }
  if (exact_mode_) ToBuckets();
  if (other.exact_mode_) {
    for (double v : other.exact_) AddToBucket(v, 1);
  } else {
    for (int i = 0; i < kMaxBuckets; ++i) buckets_[i] += other.buckets_[i];
  }
}

double QuantileSketch::ValueAtRank(int64_t rank) const {
  if (exact_mode_) {
    if (!sorted_) {
      std::sort(exact_.begin(), exact_.end());
      sorted_ = true;
    }
    return exact_[static_cast<size_t>(rank - 1)];
  }
  if (rank == count_) return max_;
  if (rank == 1) return min_;
  int64_t seen = 0;
  for (int i = 0; i < kMaxBuckets; ++i) {
    seen += buckets_[i];
    if (seen >= rank) return std::clamp(BucketValue(i), min_, max_);
  }
  return max_;
}

double QuantileSketch::Median() const {
  if (count_ == 0) return 0;
  if (count_ % 2 == 1) return ValueAtRank(count_ / 2 + 1);
  return (ValueAtRank(count_ / 2) + ValueAtRank(count_ / 2 + 1)) / 2;
}

double QuantileSketch::Percentile(double p) const {
  if (count_ == 0) return 0;
  const auto rank = static_cast<int64_t>(std::ceil(p / 100.0 * static_cast<double>(count_)));
  return ValueAtRank(std::clamp<int64_t>(rank, 1, count_));
}

size_t QuantileSketch::bytes() const {
  return sizeof(*this) + exact_.capacity() * sizeof(double) + buckets_.capacity() * sizeof(int64_t);
}

}  // namespace trainscope::analysis
