// sdk/analyze/analysis_report.h: `trainscope analyze`'s output, as JSON and
// as text, for one trace and for a folder of per-rank traces.
//
// The JSON holds an object "hta" with "temporal_breakdown_us" and
// "idle_time_breakdown_us", shaped like the entries of HTA's own output,
// beside trainscope's gap analysis ("gaps"). docs/gap-analysis.md explains
// every field.
#ifndef TRAINSCOPE_SDK_ANALYZE_ANALYSIS_REPORT_H_
#define TRAINSCOPE_SDK_ANALYZE_ANALYSIS_REPORT_H_

#include <string>
#include <vector>

#include "sdk/analyze/analyze.h"

namespace trainscope::analyze {

// Renders one trace (pretty JSON / a text report).
std::string AnalysisToJson(const AnalyzedTrace& trace);
std::string AnalysisToText(const AnalyzedTrace& trace);

// Renders several ranks: a per-rank table and the cross-rank summary.
std::string RanksToJson(const std::vector<AnalyzedTrace>& ranks);
std::string RanksToText(const std::vector<AnalyzedTrace>& ranks);

}  // namespace trainscope::analyze

#endif  // TRAINSCOPE_SDK_ANALYZE_ANALYSIS_REPORT_H_
