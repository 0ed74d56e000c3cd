// sdk/html/ranks_page.h: the HTML page of a distributed run's ranks, what
// `trainscope html DIR` writes for a folder of per-rank reports
// (report-rank<R>.json, or a directory per rank).
//
// Sections: the straggler verdict (the slowest rank, its lag a step, the
// sync wait it causes on the others; missing or failed ranks); each
// rank's median compute and sync time a step; each rank's step time over
// the run (from its steps file, at most kMaxRankPoints points a rank: each
// the mean of consecutive steps); the table `trainscope ranks` prints.
#ifndef TRAINSCOPE_SDK_HTML_RANKS_PAGE_H_
#define TRAINSCOPE_SDK_HTML_RANKS_PAGE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace trainscope::html {

inline constexpr int64_t kMaxRankPoints = 1000;

// The page for the ranks of `dir`. Memory: the straggler report's (it
// reads every rank's rows: trainscope/ranks.h) and 2 x kMaxRankPoints
// points a rank. Errors: RanksReport's (NotFound naming `dir` when it holds
// no per-rank report; a file's read error, naming it); FailedPrecondition
// when built without Chart.js.
absl::StatusOr<std::string> RanksPage(const std::string& dir);

}  // namespace trainscope::html

#endif  // TRAINSCOPE_SDK_HTML_RANKS_PAGE_H_
