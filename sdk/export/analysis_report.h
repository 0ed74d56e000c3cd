// sdk/export/analysis_report.h: `trainscope analyze` output, as JSON and as
// text, for one trace and for a folder of per-rank traces.
//
// The JSON holds an object "hta" with "temporal_breakdown_us" and
// "idle_time_breakdown_us", shaped like the entries of HTA's own output,
// beside trainscope's gap analysis ("gaps"). docs/gap-analysis.md explains
// every field.
#ifndef TRAINSCOPE_SDK_EXPORT_ANALYSIS_REPORT_H_
#define TRAINSCOPE_SDK_EXPORT_ANALYSIS_REPORT_H_

#include <string>
#include <vector>

#include "sdk/analysis/trace_analysis.h"
#include "sdk/kineto/trace_import.h"

namespace trainscope::exporter {

// One analysed trace: where it came from and what was found.
struct AnalyzedTrace {
  std::string path;
  int64_t rank = 0;
  kineto::ReadStats read;
  int64_t kernels = 0, memcpys = 0, memsets = 0, runtime_calls = 0, sync_calls = 0, steps = 0;
  double parse_s = 0;
  analysis::HtaTraceFacts facts;
  analysis::TraceAnalysis analysis;
};

// Renders one trace (pretty JSON / a text report).
std::string AnalysisToJson(const AnalyzedTrace& trace);
std::string AnalysisToText(const AnalyzedTrace& trace);

// Renders several ranks: a per-rank table and the cross-rank summary.
std::string RanksToJson(const std::vector<AnalyzedTrace>& ranks);
std::string RanksToText(const std::vector<AnalyzedTrace>& ranks);

}  // namespace trainscope::exporter

#endif  // TRAINSCOPE_SDK_EXPORT_ANALYSIS_REPORT_H_
