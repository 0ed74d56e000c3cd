// sdk/export/rank_files.h: where a distributed run's per-rank reports are,
// and the trace beside a report.
#ifndef TRAINSCOPE_SDK_EXPORT_RANK_FILES_H_
#define TRAINSCOPE_SDK_EXPORT_RANK_FILES_H_

#include <string>
#include <system_error>
#include <vector>

namespace trainscope::exporter {

// The report files of `dir`'s ranks, in name order with numbers as numbers
// (rank2 before rank10): report-rank<R>.json in it, and report.json or
// report-rank<R>.json one level down (a directory per rank). `error` is
// set when `dir` cannot be listed (and cleared otherwise). Never throws.
// Cost: one listing of `dir` and of each directory in it, a stat each.
std::vector<std::string> FindRankReports(const std::string& dir, std::error_code* error);

// The trace that goes with a report file: out/report.json -> out/trace.json,
// report-rank3.json -> trace-rank3.json; the .json.gz beside it when only
// that exists (a trace gzipped after the run). Cost: a stat.
std::string TraceFileForReport(const std::string& report_path);

}  // namespace trainscope::exporter

#endif  // TRAINSCOPE_SDK_EXPORT_RANK_FILES_H_
