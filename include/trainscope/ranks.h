// trainscope/ranks.h: the cross-rank straggler report of a distributed run.
//
//   absl::StatusOr<std::string> text = trainscope::RanksReport("out/run");
//
// Reads every rank's report in a directory (report-rank<R>.json, as
// Session writes them when Options::world_size > 1, or <sub>/report.json)
// and says which rank is slowest, by how much, and how much sync wait it
// causes on the others; ranks without a report, or that a survivor saw
// fail, are listed as missing. `trainscope ranks DIR` prints the same.
#ifndef TRAINSCOPE_RANKS_H_
#define TRAINSCOPE_RANKS_H_

#include <string>

#include "absl/status/statusor.h"

namespace trainscope {

// How RanksReport writes: a text table, or JSON.
enum class RanksFormat { kText, kJson };

// The straggler report for the reports in `dir`, as text or as JSON (with
// `slowest_rank`, `lag_ms`, `wait_caused_s`, `missing_ranks` and a row per
// rank). Errors: NotFound naming `dir` when it holds no report; a report's
// read or parse error, naming the file. Cost: reads every report.
absl::StatusOr<std::string> RanksReport(const std::string& dir,
                                        RanksFormat format = RanksFormat::kText);

}  // namespace trainscope

#endif  // TRAINSCOPE_RANKS_H_
