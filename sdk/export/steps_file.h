// sdk/export/steps_file.h: steps.jsonl, one row per step, appended as the
// run goes.
//
// report.json keeps aggregates only, the same size for any run length; the
// per-step rows (Report::Step) go to steps.jsonl ("steps-rank<R>.jsonl" in a
// distributed run) beside it, one JSON object a line, in step start order:
//
//   {"step":12,"start_s":3.2041,"duration_ms":101.2,"samples":64,"sync_ms":0,
//    "data_wait_ms":12.5,"phases_ms":{"data_wait":12.5,"forward":40.1},
//    "idle_ms":13.0,"top_cause":"data_wait","memory_bytes":-1,
//    "peak_memory_bytes":-1}
//
// phases_ms lists the phases with time in the step. Lines are written whole
// (the writer flushes whole lines only), so after a crash every complete
// line is a row; a reader skips a last line without its newline.
// docs/report-schema.md documents each field.
#ifndef TRAINSCOPE_SDK_EXPORT_STEPS_FILE_H_
#define TRAINSCOPE_SDK_EXPORT_STEPS_FILE_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/report.h"

namespace trainscope::exporter {

// `row` as one line of steps.jsonl, newline included.
std::string StepRowToJsonLine(const Report::Step& row);
// The same, appended to `line` (no allocation once it has room).
void AppendStepRowJsonLine(std::string* line, const Report::Step& row);

// Parses one line (without its newline). `where` names it in errors
// ("out/steps.jsonl:12"). Errors: InvalidArgument for malformed JSON or a
// missing or mistyped field.
absl::StatusOr<Report::Step> ParseStepRow(std::string_view line, std::string_view where);

// Reads every complete row of a steps file. Errors: the open/read error
// naming the path, or the first bad line's. Memory: every row (about 200
// bytes each); for offline tools.
absl::StatusOr<std::vector<Report::Step>> ReadStepsFile(const std::string& path);

// Calls fn(row) for every complete row of a steps file, in file order,
// reading it a block at a time: memory is one block (1 MiB) and one line,
// whatever the file's length (a week-long run's is gigabytes). fn returns
// false to stop early. Errors: as ReadStepsFile's, and InvalidArgument
// naming the line for one longer than 1 MiB.
absl::Status ForEachStepRow(const std::string& path,
                            const std::function<bool(const Report::Step&)>& fn);

// The steps file that goes with a report file: out/report.json ->
// out/steps.jsonl, report-rank3.json -> steps-rank3.jsonl.
std::string StepsFileForReport(const std::string& report_path);

// Appends rows to a steps file. Not thread-safe.
class StepsWriter {
 public:
  // Creates (or truncates) `dir`/`file`. Errors name the path.
  static absl::StatusOr<std::unique_ptr<StepsWriter>> Open(const std::string& dir,
                                                           std::string_view file);
  ~StepsWriter();
  StepsWriter(const StepsWriter&) = delete;
  StepsWriter& operator=(const StepsWriter&) = delete;

  // Buffers one row. Cost: formatting; a write when the buffer passes
  // kBufferLimit (whole lines). Its error is kept for Flush and Close.
  void Append(const Report::Step& row);
  // Writes the buffered lines (one write, whole lines). Returns the first
  // error so far, naming the path.
  absl::Status Flush();
  // Flushes, fsyncs and closes. Idempotent.
  absl::Status Close();

  int64_t rows() const { return rows_; }
  const std::string& path() const { return path_; }

 private:
  StepsWriter() = default;
  std::string path_;
  int fd_ = -1;
  static constexpr size_t kBufferLimit = 1 << 20;
  static constexpr size_t kRowSlack = 16 << 10;  // room past the limit for one row
  std::string buffer_;  // kBufferLimit + kRowSlack once a row came; used_ of it written
  size_t used_ = 0;
  int64_t rows_ = 0;
  absl::Status status_;  // the first write error
};

}  // namespace trainscope::exporter

#endif  // TRAINSCOPE_SDK_EXPORT_STEPS_FILE_H_
