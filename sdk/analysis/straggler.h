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
//
// The ranks' rows are read as streams, side by side, twice (the second pass
// needs the slowest rank, which the first finds), never held: a week-long
// run's steps files are gigabytes. Rows are matched across ranks by step
// index within runs of increasing indices: a row whose index is not above
// the row before it starts the rank's next run (a loop that counts from 0
// each epoch), and the k-th runs of the ranks are matched with each other.
// For rows whose indices increase (a running count, as StepScope is given)
// that is matching by index. Medians are kept in QuantileSketches: exact
// up to StragglerOptions::exact_steps values, past that within
// QuantileSketch::kRelativeError (0.5%) of the exact median; counts, sums,
// times_slowest and wait_caused_s stay exact.
//
// Memory, whatever the number of steps: for R ranks, (3 R + 2) sketches of
// at most S = max(8 x exact_steps, 8 x QuantileSketch::kMaxBuckets) bytes
// (70 KiB at the default), 3 R doubles of scratch, and what the R StepRows
// hold (for exporter::StepRowReader: its block and longest line each).
#ifndef TRAINSCOPE_SDK_ANALYSIS_STRAGGLER_H_
#define TRAINSCOPE_SDK_ANALYSIS_STRAGGLER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/report.h"

namespace trainscope::analysis {

// What one rank's report says, apart from its steps.
struct RankInfo {
  int rank = 0;
  int world_size = 1;
  std::vector<int> missing_ranks;  // ranks this one saw fail
  std::string error;               // its failed collective, if any
  std::string source;              // the report file
};

// One rank's steps in memory, as its report has them.
struct RankSteps : RankInfo {
  std::vector<Report::Step> steps;
};

// One rank's rows, in file order, from the start as often as asked.
class StepRows {
 public:
  virtual ~StepRows() = default;
  // Starts over at the first row.
  virtual absl::Status Rewind() = 0;
  // The next row into *row: true; false past the last.
  virtual absl::StatusOr<bool> Next(Report::Step* row) = 0;
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

struct StragglerOptions {
  // Values each median keeps exactly before its sketch switches to buckets.
  size_t exact_steps = 8192;
};

// Compares the ranks' rows: `rows[k]` are the rows of `ranks[k]` (any
// order of ranks), each read from its start (Rewind) twice. Errors: the
// first a StepRows returns. Cost: every row
// read twice, O(R) per row, and O(R log R) per common step; memory as the
// header says.
absl::StatusOr<StragglerReport> AnalyzeStragglers(const std::vector<RankInfo>& ranks,
                                                  const std::vector<StepRows*>& rows,
                                                  const StragglerOptions& options = {});

// The same over steps in memory, with exact medians.
StragglerReport AnalyzeStragglers(const std::vector<RankSteps>& ranks);

}  // namespace trainscope::analysis

#endif  // TRAINSCOPE_SDK_ANALYSIS_STRAGGLER_H_
