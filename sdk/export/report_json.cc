// report.json writer and reader. See report_json.h.
#include "sdk/export/report_json.h"

#include <simdjson.h>

#include "fmt/format.h"
#include "sdk/export/report_fields.h"
#include "sdk/ground/files.h"
#include "sdk/ground/json_fields.h"
#include "sdk/ground/json_writer.h"

namespace trainscope::exporter {

std::string ReportToJson(const Report& r) {
  ground::JsonWriter j(ground::JsonWriter::kPretty);
  ground::json_fields::Writer writer(&j);
  j.BeginObject();
  report_fields::DescribeReport(r, writer);
  j.EndObject();
  std::string out = j.Take();
  out.push_back('\n');
  return out;
}

absl::StatusOr<Report> ParseReportJson(std::string_view json, std::string_view source) {
  simdjson::dom::parser parser;
  absl::StatusOr<simdjson::dom::object> top =
      ground::json_fields::ParseTopObject(parser, json, source);
  if (!top.ok()) return top.status();
  absl::Status status;
  Report r;
  ground::json_fields::Reader reader(*top, "", source, &status);
  // The version first: a newer report may lack what this reader expects.
  reader.Field("schema_version", r.schema_version, report_fields::kRequired);
  if (!status.ok()) return status;
  if (r.schema_version > kReportSchemaVersion || r.schema_version < 1) {
    return absl::FailedPreconditionError(
        fmt::format("{}: schema_version {} is not one this trainscope (reads up to {}) understands",
                    source, r.schema_version, kReportSchemaVersion));
  }
  report_fields::DescribeReport(r, reader);
  if (!status.ok()) return status;
  if (r.idle.share < 0 || r.idle.share > 1) {
    return absl::InvalidArgumentError(
        fmt::format("{}: field 'idle.share' is {}, outside 0..1", source, r.idle.share));
  }
  return r;
}

absl::StatusOr<Report> ReadReportFile(const std::string& path) {
  absl::StatusOr<std::string> content = ground::ReadFileToString(path);
  if (!content.ok()) return content.status();
  return ParseReportJson(*content, path);
}

}  // namespace trainscope::exporter
