// RunOutputs: see run_outputs.h.
#include "sdk/session/run_outputs.h"

#include <cstdio>
#include <utility>

#include "sdk/export/report_json.h"
#include "sdk/export/summary.h"
#include "sdk/ground/files.h"

namespace trainscope {

absl::Status RunOutputs::Open(const Options& options, int64_t pid) {
  if (Writes(options.sinks, Sink::kTraceJson)) {
    auto opened = exporter::TraceWriter::Open(options.output_dir, RankedFile(options, "trace"),
                                              options.run_name, pid);
    if (!opened.ok()) return opened.status();
    trace_ = std::move(*opened);
    exporter::TraceWindowOptions kept;
    kept.first_steps = options.trace_first_steps;
    kept.warmup_steps = options.warmup_steps;
    kept.skip_first = options.trace_schedule.skip_first;
    kept.wait = options.trace_schedule.wait;
    kept.warmup = options.trace_schedule.warmup;
    kept.active = options.trace_schedule.active;
    kept.repeat = options.trace_schedule.repeat;
    kept.slowest_steps = options.trace_slowest_steps;
    kept.budget_bytes = options.trace_budget_bytes.value;
    windows_ = std::make_unique<exporter::TraceWindows>(trace_.get(), kept);
  }
  if (Writes(options.sinks, Sink::kReportJson)) {
    auto steps =
        exporter::StepsWriter::Open(options.output_dir, RankedFile(options, "steps", "jsonl"));
    if (!steps.ok()) return steps.status();
    steps_ = std::move(*steps);
  }
  return absl::OkStatus();
}

void RunOutputs::StepFolded(const Report::Step& row) {
  if (steps_ != nullptr) steps_->Append(row);
  if (windows_ != nullptr) windows_->StepFolded(row.index);
}

void RunOutputs::DeviceReleased(const ground::Timeline& released) {
  if (windows_ != nullptr) windows_->AddDevice(released);
}

void RunOutputs::NameThread(uint32_t os_tid, std::string_view name) {
  if (trace_ != nullptr) trace_->NameThread(os_tid, name);
}

void RunOutputs::AddEvents(uint32_t os_tid, const Event* events, size_t count,
                           const exporter::TraceWriter::ThreadIdOf& thread_id_of) {
  if (windows_ != nullptr) windows_->AddEvents(os_tid, events, count, thread_id_of);
}

void RunOutputs::ForgetThread(uint32_t os_tid) {
  if (windows_ != nullptr) windows_->ForgetThread(os_tid);
}

void RunOutputs::AfterDrain() {
  if (steps_ != nullptr && steps_status_.ok()) steps_status_.Update(steps_->Flush());
}

void RunOutputs::WriteWindows(bool publish) {
  if (windows_ != nullptr && trace_status_.ok()) {
    trace_status_.Update(windows_->Flush(publish, /*final=*/false));
  }
}

absl::Status RunOutputs::Close(Report* report) {
  absl::Status status = trace_status_;
  if (windows_ != nullptr && status.ok()) status.Update(windows_->Flush(true, /*final=*/true));
  if (windows_ != nullptr) {
    const exporter::TraceWindows::Stats& stats = windows_->stats();
    Report::Trace& t = report->trace;
    t.windows_written = stats.windows_written;
    t.windows_dropped = stats.windows_dropped;
    t.first_window_step = stats.first_window_step;
    t.first_window_steps = stats.first_window_steps;
    t.slowest.clear();
    for (const auto& slow : stats.slowest) t.slowest.push_back({slow.index, slow.duration_ms});
    t.bytes = static_cast<int64_t>(stats.bytes);
  }
  status.Update(steps_status_);
  if (steps_ != nullptr) {
    status.Update(steps_->Close());
    report->steps_file.rows_dropped = steps_->rows_dropped();
    report->steps_file.rows = steps_->rows() - report->steps_file.rows_dropped;
  }
  return status;
}

absl::Status RunOutputs::WriteReport(const Options& options, const Report& report) {
  absl::Status status;
  if (Writes(options.sinks, Sink::kReportJson)) {
    status = ground::WriteFileAtomically(
        fmt::format("{}/{}", options.output_dir, RankedFile(options, "report")),
        exporter::ReportToJson(report));
  }
  if (Writes(options.sinks, Sink::kSummary)) {
    const std::string summary = exporter::FormatSummary(report);
    std::fputs(summary.c_str(), options.summary_stream);
    if (Writes(options.sinks, Sink::kTraceJson | Sink::kReportJson)) {
      std::fprintf(
          options.summary_stream, "outputs: %s/%s%s\n", options.output_dir.c_str(),
          Writes(options.sinks, Sink::kTraceJson) ? (RankedFile(options, "trace") + " ").c_str()
                                                  : "",
          Writes(options.sinks, Sink::kReportJson)
              ? (RankedFile(options, "report") + " " + RankedFile(options, "steps", "jsonl"))
                    .c_str()
              : "");
    }
    std::fflush(options.summary_stream);
  }
  return status;
}

}  // namespace trainscope
