// Cross-rank straggler analysis. See straggler.h.
#include "sdk/analysis/straggler.h"

#include <algorithm>
#include <map>
#include <set>

#include "fmt/format.h"
#include "sdk/analysis/step_analysis.h"

namespace trainscope::analysis {

StragglerReport AnalyzeStragglers(const std::vector<RankSteps>& input) {
  StragglerReport out;
  std::vector<const RankSteps*> ranks;
  for (const RankSteps& r : input) ranks.push_back(&r);
  std::sort(ranks.begin(), ranks.end(),
            [](const RankSteps* a, const RankSteps* b) { return a->rank < b->rank; });
  std::set<int> present, missing;
  for (const RankSteps* r : ranks) {
    out.world_size = std::max(out.world_size, r->world_size);
    present.insert(r->rank);
    for (int m : r->missing_ranks) missing.insert(m);
    if (!r->error.empty()) out.errors.push_back(fmt::format("rank {}: {}", r->rank, r->error));
  }
  out.world_size = std::max(out.world_size, static_cast<int>(present.size()));
  for (int rank = 0; rank < out.world_size; ++rank) {
    if (present.count(rank) == 0) missing.insert(rank);
  }
  out.missing_ranks.assign(missing.begin(), missing.end());

  // Steps every reporting rank has: index -> per-rank (duration, sync).
  std::map<int64_t, std::vector<const Report::Step*>> by_index;
  for (size_t k = 0; k < ranks.size(); ++k) {
    for (const Report::Step& step : ranks[k]->steps) {
      auto& row = by_index[step.index];
      row.resize(ranks.size(), nullptr);
      row[k] = &step;
    }
  }
  std::vector<std::vector<double>> compute(ranks.size()), sync(ranks.size()), total(ranks.size());
  std::vector<int64_t> times_slowest(ranks.size(), 0);
  std::vector<const std::vector<const Report::Step*>*> common;
  for (const auto& [index, row] : by_index) {
    if (row.size() != ranks.size() ||
        std::any_of(row.begin(), row.end(), [](const Report::Step* s) { return s == nullptr; })) {
      continue;
    }
    common.push_back(&row);
    size_t slowest = 0;
    for (size_t k = 0; k < ranks.size(); ++k) {
      compute[k].push_back(std::max(0.0, row[k]->duration_ms - row[k]->sync_ms));
      sync[k].push_back(row[k]->sync_ms);
      total[k].push_back(row[k]->duration_ms);
      if (compute[k].back() > compute[slowest].back()) slowest = k;
    }
    ++times_slowest[slowest];
  }
  out.common_steps = static_cast<int64_t>(common.size());

  for (size_t k = 0; k < ranks.size(); ++k) {
    StragglerReport::PerRank row;
    row.rank = ranks[k]->rank;
    row.steps = static_cast<int64_t>(ranks[k]->steps.size());
    std::vector<double> durations;
    for (const Report::Step& s : ranks[k]->steps) {
      durations.push_back(s.duration_ms);
      row.total_sync_s += s.sync_ms / 1e3;
    }
    row.median_step_ms = Median(durations);
    row.median_compute_ms = Median(compute[k]);
    row.median_sync_ms = Median(sync[k]);
    row.times_slowest = times_slowest[k];
    out.ranks.push_back(row);
  }
  if (ranks.size() < 2 || common.empty()) return out;

  size_t slowest = 0;
  for (size_t k = 1; k < ranks.size(); ++k) {
    const auto& a = out.ranks[k];
    const auto& b = out.ranks[slowest];
    if (a.median_compute_ms > b.median_compute_ms ||
        (a.median_compute_ms == b.median_compute_ms && a.times_slowest > b.times_slowest)) {
      slowest = k;
    }
  }
  out.slowest_rank = ranks[slowest]->rank;
  std::vector<double> lags;
  double others_total_ms = 0, caused_ms = 0;
  for (size_t step = 0; step < common.size(); ++step) {
    std::vector<double> others;
    for (size_t k = 0; k < ranks.size(); ++k) {
      if (k == slowest) continue;
      others.push_back(compute[k][step]);
      others_total_ms += total[k][step];
      caused_ms += std::clamp(compute[slowest][step] - compute[k][step], 0.0, sync[k][step]);
    }
    lags.push_back(compute[slowest][step] - Median(others));
  }
  out.lag_ms = Median(lags);
  out.wait_caused_s = caused_ms / 1e3;
  out.wait_share = others_total_ms > 0 ? caused_ms / others_total_ms : 0;
  out.straggler = out.lag_ms > kStragglerShare * out.ranks[slowest].median_step_ms;
  return out;
}

}  // namespace trainscope::analysis
