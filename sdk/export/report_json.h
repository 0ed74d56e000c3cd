// sdk/export/report_json.h: report.json, written and read back.
//
// The schema is docs/report-schema.md; the writer and reader here are its
// reference. The CLI's `summary` reads a report with ReadReportFile.
#ifndef TRAINSCOPE_SDK_EXPORT_REPORT_JSON_H_
#define TRAINSCOPE_SDK_EXPORT_REPORT_JSON_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "trainscope/report.h"

namespace trainscope::exporter {

// Renders `report` as pretty-printed JSON.
std::string ReportToJson(const Report& report);

// Parses report JSON. `source` names it in errors ("out/report.json: field
// 'timing.total_s' is missing"). Errors: InvalidArgument for malformed JSON
// (with simdjson's reason) or a missing / mistyped field; FailedPrecondition
// for a schema_version newer than this SDK reads.
absl::StatusOr<Report> ParseReportJson(std::string_view json, std::string_view source);

// Reads and parses a report file. Errors as ParseReportJson, or the file's
// open/read error naming the path.
absl::StatusOr<Report> ReadReportFile(const std::string& path);

}  // namespace trainscope::exporter

#endif  // TRAINSCOPE_SDK_EXPORT_REPORT_JSON_H_
