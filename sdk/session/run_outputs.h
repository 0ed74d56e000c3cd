// sdk/session/run_outputs.h: the files a live session writes as it goes,
// trace.json with its windows and steps.jsonl, and at Finish report.json
// and the summary. Internal.
//
// One owner: the drainer thread, and Finish after it joined. The fold
// feeds it through two callbacks, StepFolded and DeviceReleased; the
// drainer gives it the drained events. Memory: the trace windows' and the
// steps writer's, bounded by their options (docs/architecture.md,
// "Memory").
#ifndef TRAINSCOPE_SDK_SESSION_RUN_OUTPUTS_H_
#define TRAINSCOPE_SDK_SESSION_RUN_OUTPUTS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "sdk/export/steps_file.h"
#include "sdk/export/trace_windows.h"
#include "sdk/export/trace_writer.h"
#include "sdk/ground/timeline.h"
#include "trainscope/recorder.h"
#include "trainscope/report.h"
#include "trainscope/session.h"

namespace trainscope {

// "report.json", or "report-rank3.json" when the run has several ranks.
inline std::string RankedFile(const Options& o, std::string_view stem,
                              std::string_view extension = "json") {
  return o.world_size > 1 ? fmt::format("{}-rank{}.{}", stem, o.rank, extension)
                          : fmt::format("{}.{}", stem, extension);
}

class RunOutputs {
 public:
  // Opens trace.json (with the windows it keeps) and steps.jsonl, as
  // options.sinks ask. Errors: the writers', naming the file.
  absl::Status Open(const Options& options, int64_t pid);

  // The fold's callbacks: a step's row is final (steps.jsonl; the trace
  // windows may close one), and device work the fold has passed (the
  // trace windows keep what falls in theirs).
  void StepFolded(const Report::Step& row);
  void DeviceReleased(const ground::Timeline& released);

  // The drainer's. Whether drained events are wanted (trace windows open).
  bool keeps_events() const { return windows_ != nullptr; }
  bool writes_trace() const { return trace_ != nullptr; }
  void NameThread(uint32_t os_tid, std::string_view name);
  void AddEvents(uint32_t os_tid, const Event* events, size_t count,
                 const exporter::TraceWriter::ThreadIdOf& thread_id_of);
  void ForgetThread(uint32_t os_tid);
  // After a drain: the steps file's rows to the writer; the windows that
  // are complete written, and trace.json republished when `publish`. An
  // error stops that file and is returned by Close.
  void AfterDrain();
  void WriteWindows(bool publish);

  // Finish's: the trace's last windows and the steps file closed, their
  // figures into report->trace and report->steps_file. Errors: the first
  // of either file's.
  absl::Status Close(Report* report);
  // report.json and the summary, as options.sinks ask. Errors: report.json's.
  static absl::Status WriteReport(const Options& options, const Report& report);

 private:
  std::unique_ptr<exporter::TraceWriter> trace_;
  std::unique_ptr<exporter::TraceWindows> windows_;  // with trace_: what it keeps
  absl::Status trace_status_;                        // the first trace error
  std::unique_ptr<exporter::StepsWriter> steps_;
  absl::Status steps_status_;  // the first steps-file error
};

}  // namespace trainscope

#endif  // TRAINSCOPE_SDK_SESSION_RUN_OUTPUTS_H_
