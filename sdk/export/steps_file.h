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

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
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

// Reads a steps file's complete rows one at a time, in file order, a block
// at a time: for walking several files side by side (the ranks of a
// distributed run), which ForEachStepRow's callback cannot. The rows and
// errors are ForEachStepRow's. Memory: block_bytes (plus simdjson's
// padding), the longest line (at most 1 MiB) and a parser sized to it,
// whatever the file's length. Holds the file open.
//
//   absl::StatusOr<std::unique_ptr<StepRowReader>> reader = StepRowReader::Open(path);
//   Report::Step row;
//   for (;;) {
//     absl::StatusOr<bool> got = (*reader)->Next(&row);
//     if (!got.ok()) return got.status();
//     if (!*got) break;
//     ...
//   }
class StepRowReader {
 public:
  static constexpr size_t kDefaultBlockBytes = 64 << 10;

  // Opens `path`. Errors: the open error, naming the path.
  static absl::StatusOr<std::unique_ptr<StepRowReader>> Open(
      const std::string& path, size_t block_bytes = kDefaultBlockBytes);
  ~StepRowReader();
  StepRowReader(const StepRowReader&) = delete;
  StepRowReader& operator=(const StepRowReader&) = delete;

  // The next complete row into *row: true; false past the last (a last
  // line without its newline is not a row). Errors: the read error naming
  // the path, a bad line's (InvalidArgument "<path>:<line>: ..."), or
  // InvalidArgument for a line longer than 1 MiB; after one, Next returns
  // it again.
  absl::StatusOr<bool> Next(Report::Step* row);
  // Starts over at the first row. Errors: lseek's, naming the path.
  absl::Status Rewind();

  int64_t rows() const { return rows_; }  // returned since the start
  const std::string& path() const { return path_; }

 private:
  struct Parser;
  StepRowReader() = default;
  // The next line's bytes (newline excluded) into *line, padded for
  // simdjson: false at the end. Errors as Next's.
  absl::StatusOr<bool> NextLine(std::string_view* line);

  std::string path_;
  int fd_ = -1;
  std::string block_;    // block_bytes read at a time, then simdjson's padding
  size_t at_ = 0;        // the next unread byte of block_
  size_t got_ = 0;       // bytes of block_ read from the file
  std::string pending_;  // the start of a line the last block cut, padded
  size_t pending_size_ = 0;
  bool eof_ = false;
  int64_t line_no_ = 0;
  int64_t rows_ = 0;
  std::string where_;  // "<path>:<line>", rewritten for each line
  absl::Status status_;
  std::unique_ptr<Parser> parser_;
};

// The steps file that goes with a report file: out/report.json ->
// out/steps.jsonl, report-rank3.json -> steps-rank3.jsonl.
std::string StepsFileForReport(const std::string& report_path);

// Appends rows to a steps file. Rows are formatted on the caller's thread
// and written by a thread of the writer's own ("ts-steps"): a write the
// kernel holds back (dirty-page throttling once gigabytes are waiting for
// the disk) must not stall the session's drain, whose rings would then
// fill. Between the two, at most queue_bytes wait; rows that find no room
// are dropped whole and counted (rows_dropped), so every line in the file
// is a whole row. After a write error nothing more is written: the rows
// not written count as dropped, and a line the failed write cut is the
// file's last (a reader skips it). Memory: a buffer of kBufferLimit +
// kRowSlack, and the queue and the block being written, each at most
// queue_bytes while the disk falls behind and given back to 2 MiB once
// written. Append, Flush and Close are for one thread at a time.
class StepsWriter {
 public:
  static constexpr size_t kDefaultQueueBytes = 16 << 20;

  // Creates (or truncates) `dir`/`file` and starts the writing thread.
  // queue_bytes below kBufferLimit + kRowSlack is raised to it (a full
  // buffer must fit). Errors name the path.
  static absl::StatusOr<std::unique_ptr<StepsWriter>> Open(const std::string& dir,
                                                           std::string_view file,
                                                           size_t queue_bytes = kDefaultQueueBytes);
  ~StepsWriter();
  StepsWriter(const StepsWriter&) = delete;
  StepsWriter& operator=(const StepsWriter&) = delete;

  // Buffers one row. Cost: formatting; past kBufferLimit, a copy of the
  // buffered lines into the queue under a lock (no syscall but a wake-up).
  void Append(const Report::Step& row);
  // Queues the buffered lines for writing, without waiting for the write.
  // Returns the first error so far (a write's, naming the path).
  absl::Status Flush();
  // Queues the rest, waits until it is written, fsyncs, closes and stops
  // the thread. Idempotent.
  absl::Status Close();

  int64_t rows() const { return rows_; }  // appended
  // Rows dropped because the queue was full (the disk fell behind).
  int64_t rows_dropped() const;
  const std::string& path() const { return path_; }

 private:
  StepsWriter() = default;
  // Moves `lines` (`rows` whole rows) into the queue, or drops them.
  void Queue(std::string_view lines, int64_t rows);
  void WriteLoop();

  std::string path_;
  int fd_ = -1;
  size_t queue_bytes_ = kDefaultQueueBytes;
  static constexpr size_t kBufferLimit = 1 << 20;
  static constexpr size_t kRowSlack = 16 << 10;  // room past the limit for one row
  static constexpr size_t kKeptRoom = 2 << 20;   // room kept by an emptied queue
  std::string buffer_;  // kBufferLimit + kRowSlack once a row came; used_ of it written
  size_t used_ = 0;
  int64_t buffered_rows_ = 0;
  int64_t rows_ = 0;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<char> queued_;  // whole lines waiting for the thread (guarded)
  int64_t queued_rows_ = 0;   // guarded
  bool closing_ = false;      // guarded
  int64_t dropped_ = 0;       // guarded
  absl::Status status_;       // the first write error (guarded)
  std::thread thread_;
};

}  // namespace trainscope::exporter

#endif  // TRAINSCOPE_SDK_EXPORT_STEPS_FILE_H_
