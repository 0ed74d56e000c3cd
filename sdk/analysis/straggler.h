// sdk/analysis/straggler.h: which rank holds the others back.
//
// In synchronous data parallelism every rank's step ends at the same
// collective, so step times look alike; the straggler shows in how the step
// splits. The rank with the most work outside kSync (its compute, input,
// launch) arrives last, and the others wait for it inside kSync. Per step
// present on every rank: compute_ms = duration_ms - sync_ms; the straggler
// is the rank with the largest median compute; its lag is the median, over
// steps, of its compute minus the median compute of the other ranks; the
// wait it causes is, summed over steps and other ranks, the part of their
// sync time it explains: min(their sync_ms, its compute - theirs), at least 0.
#ifndef TRAINSCOPE_SDK_ANALYSIS_STRAGGLER_H_
#define TRAINSCOPE_SDK_ANALYSIS_STRAGGLER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "trainscope/report.h"

namespace trainscope::analysis {

// One rank's steps, as its report has them.
struct RankSteps {
  int rank = 0;
  int world_size = 1;
  std::vector<Report::Step> steps;
  std::vector<int> missing_ranks;  // ranks this one saw fail
  std::string error;               // its failed collective, if any
  std::string source;              // the report file
};

struct StragglerReport {
  struct PerRank {
    int rank = 0;
    int64_t steps = 0;
    double median_step_ms = 0;
    double median_compute_ms = 0;  // step minus sync
    double median_sync_ms = 0;
    double total_sync_s = 0;
    int64_t times_slowest = 0;  // steps in which its compute was the largest
  };
  int world_size = 0;               // the largest any report states
  std::vector<PerRank> ranks;       // by rank
  std::vector<int> missing_ranks;   // no report, or named missing by a survivor
  std::vector<std::string> errors;  // "rank 1: <error>"
  int64_t common_steps = 0;         // steps present on every reporting rank
  int slowest_rank = -1;            // -1 with fewer than two ranks or no common step
  double lag_ms = 0;                // median per-step lag of the slowest rank
  double wait_caused_s = 0;         // sync time it causes on the others, summed
  double wait_share = 0;            // wait_caused_s / the others' total step time
  // Whether the lag matters: at least kStragglerShare of the slowest rank's
  // median step. Below it the ranks are balanced and slowest_rank is noise.
  bool straggler = false;
};

inline constexpr double kStragglerShare = 0.05;

// Compares the ranks' steps. Cost: O(ranks x steps log steps).
StragglerReport AnalyzeStragglers(const std::vector<RankSteps>& ranks);

}  // namespace trainscope::analysis

#endif  // TRAINSCOPE_SDK_ANALYSIS_STRAGGLER_H_
