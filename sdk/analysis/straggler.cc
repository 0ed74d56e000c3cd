// Cross-rank straggler analysis. See straggler.h.
#include "sdk/analysis/straggler.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <utility>

#include "fmt/format.h"
#include "sdk/analysis/quantile_sketch.h"

namespace trainscope::analysis {
namespace {

// Quantiles of values of either sign: QuantileSketch keeps positive ones
// only, so the negative ones go, negated, into a second sketch. Memory: two
// sketches.
class SignedSketch {
 public:
  explicit SignedSketch(size_t exact_limit) : positive_(exact_limit), negative_(exact_limit) {}

  void Add(double value) {
    if (value > 0) {
      positive_.Add(value);
    } else if (value < 0) {
      negative_.Add(-value);
    } else {
      ++zeros_;
    }
  }

  // As QuantileSketch::Median.
  double Median() const {
    const int64_t n = negative_.count() + zeros_ + positive_.count();
    if (n == 0) return 0;
    if (n % 2 == 1) return ValueAtRank(n / 2 + 1);
    return (ValueAtRank(n / 2) + ValueAtRank(n / 2 + 1)) / 2;
  }

 private:
  // The value of rank `rank` (1-based) of a sketch, through its nearest-rank
  // Percentile: p = 100 (rank - 1/2) / count rounds up to `rank`.
  static double At(const QuantileSketch& s, int64_t rank) {
    return s.Percentile(100.0 * (static_cast<double>(rank) - 0.5) / static_cast<double>(s.count()));
  }
  // Negative values, zeros, positive ones, in ascending order.
  double ValueAtRank(int64_t rank) const {
    const int64_t negatives = negative_.count();
    if (rank <= negatives) return -At(negative_, negatives - rank + 1);
    if (rank <= negatives + zeros_) return 0;
    return At(positive_, rank - negatives - zeros_);
  }

  QuantileSketch positive_, negative_;
  int64_t zeros_ = 0;
};

// The median of `values`, reordering them (mean of the two middle values
// for an even count, as Median in step_analysis.h). 0 when empty.
double MedianInPlace(std::vector<double>* values) {
  std::vector<double>& v = *values;
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2 == 1) return *mid;
  return (*std::max_element(v.begin(), mid) + *mid) / 2;
}

double ComputeMs(const Report::Step& s) { return std::max(0.0, s.duration_ms - s.sync_ms); }

// One rank's rows as a walk reads them: the row at its head, and the head's
// place in the order rows are matched in, (run, index): a run of increasing
// indices ends at a row whose index is not above the one before.
struct Cursor {
  explicit Cursor(StepRows* rows, int64_t limit = -1) : rows(rows), limit(limit) {}

  StepRows* rows;
  int64_t limit;     // rows it may read; -1: all
  int64_t read = 0;  // rows read, the head included
  int64_t run = 0;
  int64_t last_index = 0;
  bool ended = false;
  Report::Step head;

  absl::Status Advance() {
    if (limit >= 0 && read >= limit) {
      ended = true;
      return absl::OkStatus();
    }
    absl::StatusOr<bool> got = rows->Next(&head);
    if (!got.ok()) return got.status();
    if (!*got) {
      ended = true;
      return absl::OkStatus();
    }
    if (read > 0 && head.index <= last_index) ++run;
    last_index = head.index;
    ++read;
    return absl::OkStatus();
  }
  bool Before(const Cursor& other) const {
    return run < other.run || (run == other.run && head.index < other.head.index);
  }
};

// Walks the ranks' rows side by side, from their start: on_row(k, row) for
// every row read of rank k, and on_common(cursors) for each step every rank
// has (the cursors' heads). Stops when one rank ends, or, with
// `to_the_end`, reads the others' remaining rows too. Errors: a StepRows'.
template <typename OnRow, typename OnCommon>
absl::Status Walk(std::vector<Cursor>* cursors, bool to_the_end, const OnRow& on_row,
                  const OnCommon& on_common) {
  std::vector<Cursor>& c = *cursors;
  auto advance = [&](size_t k) -> absl::Status {
    if (absl::Status status = c[k].Advance(); !status.ok()) return status;
    if (!c[k].ended) on_row(k, c[k].head);
    return absl::OkStatus();
  };
  for (size_t k = 0; k < c.size(); ++k) {
    if (absl::Status status = advance(k); !status.ok()) return status;
  }
  while (std::none_of(c.begin(), c.end(), [](const Cursor& x) { return x.ended; })) {
    size_t latest = 0;
    for (size_t k = 1; k < c.size(); ++k) {
      if (c[latest].Before(c[k])) latest = k;
    }
    bool common = true;
    for (size_t k = 0; k < c.size(); ++k) {
      if (!c[k].Before(c[latest])) continue;
      common = false;
      if (absl::Status status = advance(k); !status.ok()) return status;
    }
    if (!common) continue;
    on_common(c);
    for (size_t k = 0; k < c.size(); ++k) {
      if (absl::Status status = advance(k); !status.ok()) return status;
    }
  }
  for (size_t k = 0; to_the_end && k < c.size(); ++k) {
    while (!c[k].ended) {
      if (absl::Status status = advance(k); !status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

// The report's facts apart from the steps: world size, missing ranks and
// errors, from the ranks' reports (in rank order).
void Membership(const std::vector<const RankInfo*>& ranks, StragglerReport* out) {
  std::set<int> present, missing;
  for (const RankInfo* r : ranks) {
    out->world_size = std::max(out->world_size, r->world_size);
    present.insert(r->rank);
    for (int m : r->missing_ranks) missing.insert(m);
    if (!r->error.empty()) out->errors.push_back(fmt::format("rank {}: {}", r->rank, r->error));
  }
  out->world_size = std::max(out->world_size, static_cast<int>(present.size()));
  for (int rank = 0; rank < out->world_size; ++rank) {
    if (present.count(rank) == 0) missing.insert(rank);
  }
  out->missing_ranks.assign(missing.begin(), missing.end());
}

// The first pass, from the rows' start: each rank's row (steps, median step, total sync) over
// all its rows, and its median compute and sync and times_slowest over the
// common steps. The cursors keep how many rows each rank had.
absl::Status FirstPass(const std::vector<const RankInfo*>& ranks, std::vector<Cursor>* cursors,
                       const StragglerOptions& options, StragglerReport* out) {
  const size_t n = ranks.size();
  for (Cursor& c : *cursors) {
    if (absl::Status status = c.rows->Rewind(); !status.ok()) return status;
  }
  std::vector<QuantileSketch> step_ms(n, QuantileSketch(options.exact_steps));
  std::vector<QuantileSketch> compute_ms = step_ms, sync_ms = step_ms;
  out->ranks.assign(n, {});
  auto on_row = [&](size_t k, const Report::Step& s) {
    step_ms[k].Add(s.duration_ms);
    out->ranks[k].total_sync_s += s.sync_ms / 1e3;
  };
  auto on_common = [&](const std::vector<Cursor>& c) {
    size_t slowest = 0;
    for (size_t k = 0; k < n; ++k) {
      compute_ms[k].Add(ComputeMs(c[k].head));
      sync_ms[k].Add(c[k].head.sync_ms);
      if (ComputeMs(c[k].head) > ComputeMs(c[slowest].head)) slowest = k;
    }
    ++out->ranks[slowest].times_slowest;
    ++out->common_steps;
  };
  if (absl::Status status = Walk(cursors, /*to_the_end=*/true, on_row, on_common); !status.ok()) {
    return status;
  }
  for (size_t k = 0; k < n; ++k) {
    StragglerReport::PerRank& row = out->ranks[k];
    row.rank = ranks[k]->rank;
    row.steps = (*cursors)[k].read;
    row.median_step_ms = step_ms[k].Median();
    row.median_compute_ms = compute_ms[k].Median();
    row.median_sync_ms = sync_ms[k].Median();
  }
  return absl::OkStatus();
}

// The rank with the largest median compute (of equal ones, the one slowest
// most often, then the lowest rank), as an index into out.ranks.
size_t PickSlowest(const StragglerReport& out) {
  size_t slowest = 0;
  for (size_t k = 1; k < out.ranks.size(); ++k) {
    const auto& a = out.ranks[k];
    const auto& b = out.ranks[slowest];
    if (a.median_compute_ms > b.median_compute_ms ||
        (a.median_compute_ms == b.median_compute_ms && a.times_slowest > b.times_slowest)) {
      slowest = k;
    }
  }
  return slowest;
}

// The second pass, over the common steps of the rows the first pass read:
// the slowest rank's lag and the wait it causes on the others.
absl::Status SecondPass(size_t slowest, std::vector<Cursor>* cursors,
                        const StragglerOptions& options, StragglerReport* out) {
  for (Cursor& c : *cursors) {
    if (absl::Status status = c.rows->Rewind(); !status.ok()) return status;
    c = Cursor(c.rows, c.read);
  }
  SignedSketch lags(options.exact_steps);
  std::vector<double> others;
  others.reserve(cursors->size());
  double others_total_ms = 0, caused_ms = 0;
  auto on_common = [&](const std::vector<Cursor>& c) {
    others.clear();
    const double compute = ComputeMs(c[slowest].head);
    for (size_t k = 0; k < c.size(); ++k) {
      if (k == slowest) continue;
      others.push_back(ComputeMs(c[k].head));
      others_total_ms += c[k].head.duration_ms;
      caused_ms += std::clamp(compute - ComputeMs(c[k].head), 0.0, c[k].head.sync_ms);
    }
    lags.Add(compute - MedianInPlace(&others));
  };
  if (absl::Status status = Walk(
          cursors, /*to_the_end=*/false, [](size_t, const Report::Step&) {}, on_common);
      !status.ok()) {
    return status;
  }
  out->slowest_rank = out->ranks[slowest].rank;
  out->lag_ms = lags.Median();
  out->wait_caused_s = caused_ms / 1e3;
  out->wait_share = others_total_ms > 0 ? caused_ms / others_total_ms : 0;
  out->straggler = out->lag_ms > kStragglerShare * out->ranks[slowest].median_step_ms;
  return absl::OkStatus();
}

// A rank's steps in memory as StepRows.
class VectorRows : public StepRows {
 public:
  explicit VectorRows(const std::vector<Report::Step>* steps) : steps_(steps) {}
  absl::Status Rewind() override {
    at_ = 0;
    return absl::OkStatus();
  }
  absl::StatusOr<bool> Next(Report::Step* row) override {
    if (at_ == steps_->size()) return false;
    *row = (*steps_)[at_++];
    return true;
  }

 private:
  const std::vector<Report::Step>* steps_;
  size_t at_ = 0;
};

}  // namespace

absl::StatusOr<StragglerReport> AnalyzeStragglers(const std::vector<RankInfo>& input,
                                                  const std::vector<StepRows*>& rows,
                                                  const StragglerOptions& options) {
  std::vector<size_t> order(input.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return input[a].rank < input[b].rank; });
  std::vector<const RankInfo*> ranks;
  std::vector<Cursor> cursors;
  for (size_t k : order) {
    ranks.push_back(&input[k]);
    cursors.emplace_back(rows[k]);
  }
  StragglerReport out;
  Membership(ranks, &out);
  if (absl::Status status = FirstPass(ranks, &cursors, options, &out); !status.ok()) return status;
  if (ranks.size() < 2 || out.common_steps == 0) return out;
  if (absl::Status status = SecondPass(PickSlowest(out), &cursors, options, &out); !status.ok()) {
    return status;
  }
  return out;
}

StragglerReport AnalyzeStragglers(const std::vector<RankSteps>& ranks) {
  std::vector<RankInfo> info(ranks.begin(), ranks.end());
  std::vector<VectorRows> sources;
  sources.reserve(ranks.size());
  std::vector<StepRows*> rows;
  for (const RankSteps& r : ranks) rows.push_back(&sources.emplace_back(&r.steps));
  // Rows in memory: no read can fail, and the medians may as well be exact.
  StragglerOptions options;
  for (const RankSteps& r : ranks)
    options.exact_steps = std::max(options.exact_steps, r.steps.size());
  return *AnalyzeStragglers(info, rows, options);
}

}  // namespace trainscope::analysis
