// sdk/export/report_fields.h: report.json's fields, named once.
//
// DescribeReport lists every field of report.json, in file order, with its
// key, the Report member it holds and whether older reports may lack it.
// The writer, the reader (report_json.cc) and the schema test (every key
// of docs/report-schema.md is one of these and round-trips) are visitors
// of this one list, so a field cannot be written and never read, or
// documented and never written.
//
// The visitor vocabulary, and what reading does with the flags, is
// sdk/ground/json_fields.h. R = Report (reading) or const Report (writing).
#ifndef TRAINSCOPE_SDK_EXPORT_REPORT_FIELDS_H_
#define TRAINSCOPE_SDK_EXPORT_REPORT_FIELDS_H_

#include "sdk/ground/json_fields.h"
#include "trainscope/report.h"

namespace trainscope::exporter::report_fields {

using ground::json_fields::kAbsentOk;
using ground::json_fields::kEmptyIsNull;
using ground::json_fields::kRequired;

template <typename R, typename V>
void DescribeReport(R& r, V& v) {
  v.Field("schema_version", r.schema_version, kRequired);
  v.Object("run", kRequired, [&] {
    v.Field("name", r.run.name, kRequired);
    v.Field("code_version", r.run.code_version, kRequired);
    v.Field("data_version", r.run.data_version, kRequired);
    v.Field("started_at", r.run.started_at, kRequired);
    v.Field("host", r.run.host, kRequired);
    v.Field("pid", r.run.pid, kRequired);
    v.Field("rank", r.run.rank, kRequired);
    v.Field("world_size", r.run.world_size, kAbsentOk);
  });
  v.Object("environment", kRequired, [&] {
    v.Field("accelerator", r.environment.accelerator, kRequired);
    v.Field("accelerator_count", r.environment.accelerator_count, kRequired);
    v.Field("accelerator_status", r.environment.accelerator_status, kRequired);
    v.Field("cpu_model", r.environment.cpu_model, kRequired);
    v.Field("cpu_count", r.environment.cpu_count, kRequired);
    v.Field("container_image", r.environment.container_image, kRequired);
    v.Field("os", r.environment.os, kRequired);
    v.Field("trainscope_version", r.environment.trainscope_version, kRequired);
    v.Field("nvtx_compiled", r.environment.nvtx_compiled, kRequired);
  });
  v.Object("resource_request", kRequired, [&] {
    v.Field("accelerators", r.resource_request.accelerators, kRequired);
    v.Field("cpus", r.resource_request.cpus, kRequired);
    v.Field("memory_gib", r.resource_request.memory_gib, kRequired);
    v.Field("description", r.resource_request.description, kRequired);
  });
  v.Strings("config", r.config, kRequired);
  v.Object("timing", kRequired, [&] {
    v.Field("queue_delay_s", r.timing.queue_delay_s, kRequired);
    v.Field("startup_s", r.timing.startup_s, kRequired);
    v.Field("warmup_steps", r.timing.warmup_steps, kRequired);
    v.Field("warmup_rule", r.timing.warmup_rule, kRequired);
    v.Field("total_s", r.timing.total_s, kRequired);
    v.Field("steps", r.timing.steps, kRequired);
    v.Field("steps_s", r.timing.steps_s, kRequired);
  });
  v.Object("throughput", kRequired, [&] {
    v.Field("steady_steps", r.throughput.steady_steps, kRequired);
    v.Field("steady_steps_per_s", r.throughput.steady_steps_per_s, kRequired);
    v.Field("steady_samples_per_s", r.throughput.steady_samples_per_s, kRequired);
    v.Field("median_step_ms", r.throughput.median_step_ms, kRequired);
  });
  v.Field("resource_hours", r.resource_hours, kRequired);
  v.Keyed("phases", "<phase>", kRequired, r.phases, &PhaseStat::phase, [&](auto& p) {
    v.Field("steps", p.steps, kRequired);
    v.Field("median_ms", p.median_ms, kRequired);
    v.Field("p90_ms", p.p90_ms, kRequired);
    v.Field("max_ms", p.max_ms, kRequired);
    v.Field("total_s", p.total_s, kRequired);
    v.Field("share_of_steps", p.share_of_steps, kRequired);
  });
  v.Object("idle", kRequired, [&] {
    v.Field("share", r.idle.share, kRequired);
    v.Field("idle_s", r.idle.idle_s, kRequired);
    v.Field("window_s", r.idle.window_s, kRequired);
    v.Field("busy_source", r.idle.busy_source, kRequired);
    v.Numbers("by_cause", r.idle.by_cause, kRequired);
    v.Field("top_cause", r.idle.top_cause, kRequired);
  });
  v.Object("gaps", kAbsentOk, [&] {  // added to version 2
    v.Field("count", r.gaps.count, kRequired);
    v.Field("largest_ms", r.gaps.largest_ms, kRequired);
    v.Array("histogram", r.gaps.histogram, [&](auto& bucket) {
      v.Field("label", bucket.label, kRequired);
      v.Field("count", bucket.count, kRequired);
      v.Field("total_ms", bucket.total_ms, kRequired);
    });
    v.Array("largest", r.gaps.largest, [&](auto& gap) {
      v.Field("start_s", gap.start_s, kRequired);
      v.Field("duration_ms", gap.duration_ms, kRequired);
      v.Field("step", gap.step, kRequired);
      v.Field("cause", gap.cause, kRequired);
    });
  });
  // Added to version 1 after its first release.
  v.Object("device_timeline", kAbsentOk, [&] {
    v.Field("status", r.device_timeline.status, kRequired);
    v.Field("records", r.device_timeline.records, kRequired);
    v.Field("dropped", r.device_timeline.dropped, kRequired);
    v.Field("kernels", r.device_timeline.kernels, kRequired);
    // Written since 2026-12-07.
    v.Field("incomplete_buffers", r.device_timeline.incomplete_buffers, kAbsentOk);
    v.Field("launches_unmatched", r.device_timeline.launches_unmatched, kAbsentOk);
    v.Numbers("busy_s_by_phase", r.device_timeline.busy_s_by_phase, kRequired);
    v.Object("hta", kAbsentOk, [&] {  // written since 2026-12-07
      auto& h = r.device_timeline.hta;
      v.Field("rows", h.rows, kRequired);
      v.Field("kernel_s", h.kernel_s, kRequired);
      v.Field("idle_s", h.idle_s, kRequired);
      v.Field("compute_s", h.compute_s, kRequired);
      v.Field("non_compute_s", h.non_compute_s, kRequired);
      v.Array("idle_by_stream", h.idle_by_stream, [&](auto& stream) {
        v.Field("stream", stream.stream, kRequired);
        v.Field("host_wait_s", stream.host_wait_s, kRequired);
        v.Field("kernel_wait_s", stream.kernel_wait_s, kRequired);
        v.Field("other_s", stream.other_s, kRequired);
      });
      v.Field("late_rows", h.late_rows, kRequired);
    });
  });
  v.Object("utilization", kAbsentOk, [&] {
    v.Field("allocated_device_hours", r.utilization.allocated_device_hours, kRequired);
    v.Field("busy_device_hours", r.utilization.busy_device_hours, kRequired);
    v.Field("samples_per_busy_device_s", r.utilization.samples_per_busy_device_s, kRequired);
  });
  v.Object("events", kRequired, [&] {
    v.Field("recorded", r.events.recorded, kRequired);
    v.Field("dropped", r.events.dropped, kRequired);
    v.Field("threads", r.events.threads, kRequired);
    v.Field("buffer_bytes_per_thread", r.events.buffer_bytes_per_thread, kRequired);
    v.Field("recorder_bytes", r.events.recorder_bytes, kRequired);
    v.Field("late", r.events.late, kAbsentOk);  // absent before version 2
    // Absent in reports written before the TSC clock.
    v.Field("clock", r.events.clock, kAbsentOk);
    v.Field("tsc_hz", r.events.tsc_hz, kAbsentOk);
    v.Field("clock_calibrations", r.events.clock_calibrations, kAbsentOk);
    v.Field("clock_max_error_ns", r.events.clock_max_error_ns, kAbsentOk);
  });
  v.Object("trace", kAbsentOk, [&] {  // absent before version 2
    v.Field("windows_written", r.trace.windows_written, kRequired);
    v.Field("windows_dropped", r.trace.windows_dropped, kRequired);
    v.Field("first_window_step", r.trace.first_window_step, kRequired);
    v.Field("first_window_steps", r.trace.first_window_steps, kRequired);
    v.Array("slowest", r.trace.slowest, [&](auto& slow) {
      v.Field("step", slow.index, kRequired);
      v.Field("duration_ms", slow.duration_ms, kRequired);
    });
    v.Field("bytes", r.trace.bytes, kRequired);
  });
  v.Object("steps_file", kAbsentOk, [&] {  // written since 2026-12-07
    v.Field("rows", r.steps_file.rows, kRequired);
    v.Field("rows_dropped", r.steps_file.rows_dropped, kRequired);
  });
  v.Object("overhead", kRequired, [&] {
    v.Field("per_scope_ns", r.overhead.per_scope_ns, kRequired);
    v.Field("estimated_share", r.overhead.estimated_share, kRequired);
  });
  v.Object("memory", kAbsentOk, [&] {
    v.Field("source", r.memory.source, kRequired);
    v.Field("peak_bytes", r.memory.peak_bytes, kRequired);
    v.Field("last_bytes", r.memory.last_bytes, kRequired);
    v.Field("reserved_peak_bytes", r.memory.reserved_peak_bytes, kAbsentOk);  // since 2026-12-07
    v.Field("reserved_last_bytes", r.memory.reserved_last_bytes, kAbsentOk);
  });
  v.Keyed("counters", "<name>", kAbsentOk, r.counters, &Report::Counter::name, [&](auto& c) {
    v.Field("samples", c.samples, kRequired);
    v.Field("min", c.min, kRequired);
    v.Field("max", c.max, kRequired);
    v.Field("mean", c.mean, kRequired);
    // Written since 2026-12-07.
    v.Array(
        "series", c.series,
        [&](auto& w) {
          v.Field("start_s", w.start_s, kRequired);
          v.Field("end_s", w.end_s, kRequired);
          v.Field("samples", w.samples, kRequired);
          v.Field("min", w.min, kRequired);
          v.Field("max", w.max, kRequired);
          v.Field("mean", w.mean, kRequired);
        },
        kAbsentOk);
  });
  // Written since 2026-12-07.
  v.Keyed("loaders", "<name>", kAbsentOk, r.loaders, &Report::Loader::name, [&](auto& l) {
    v.Field("kind", l.kind, kRequired);
    v.Field("workers", l.workers, kRequired);
    v.Field("prefetch", l.prefetch, kRequired);
    v.Field("pin_memory", l.pin_memory, kRequired);
    v.Field("batch_size", l.batch_size, kRequired);
    v.Field("batches", l.batches, kRequired);
    v.Field("cpu_s", l.cpu_s, kRequired);
    v.Field("cpu_ms_per_batch", l.cpu_ms_per_batch, kRequired);
    v.Field("cpu_cores", l.cpu_cores, kRequired);
    v.Field("queue_samples", l.queue_samples, kRequired);
    v.Field("queue_depth_mean", l.queue_depth_mean, kRequired);
    v.Field("queue_depth_max", l.queue_depth_max, kRequired);
  });
  v.Object("checkpoint", kAbsentOk, [&] {
    auto& c = r.checkpoint;
    v.Field("saves", c.saves, kRequired);
    v.Field("failed", c.failed, kRequired);
    v.Field("blocking_s", c.blocking_s, kRequired);
    v.Field("blocking_max_s", c.blocking_max_s, kRequired);
    v.Field("persist_s", c.persist_s, kRequired);
    v.Field("bytes", c.bytes, kRequired);
    v.Field("persist_bytes_per_s", c.persist_bytes_per_s, kRequired);
    v.Field("resumed_from_step", c.resumed_from_step, kRequired);
    v.Field("recomputed_steps", c.recomputed_steps, kRequired);
    v.Field("restore_s", c.restore_s, kRequired);
    v.Field("restart_delay_s", c.restart_delay_s, kRequired);
    v.Field("mtbf_hours", c.mtbf_hours, kRequired);
    v.Field("interval_s", c.interval_s, kRequired);
    v.Field("optimal_interval_s", c.optimal_interval_s, kRequired);
    v.Field("expected_overhead_share", c.expected_overhead_share, kRequired);
    v.Field("expected_lost_s_per_failure", c.expected_lost_s_per_failure, kRequired);
  });
  v.Object("distributed", kAbsentOk, [&] {
    v.Field("backend", r.distributed.backend, kRequired);
    v.Ints("missing_ranks", r.distributed.missing_ranks, kRequired);
    v.Field("error", r.distributed.error, kRequired);
    // Written since 2026-12-05.
    v.Field("device_sync_s", r.distributed.device_sync_s, kAbsentOk);
    v.Field("device_sync_late", r.distributed.device_sync_late, kAbsentOk);
  });
  // Written since 2026-12-06; null: no request was recorded.
  v.Nullable("serving", r.serving, [&](auto& s) {
    v.Field("requests", s.requests, kRequired);
    v.Field("p50_ms", s.p50_ms, kRequired);
    v.Field("p90_ms", s.p90_ms, kRequired);
    v.Field("p99_ms", s.p99_ms, kRequired);
    v.Field("max_ms", s.max_ms, kRequired);
    v.Field("requests_per_s", s.requests_per_s, kRequired);
  });
  // Written since 2026-12-07; null: no curve was written.
  v.Nullable("loss_curve", r.loss_curve, [&](auto& c) {
    v.Field("file", c.file, kRequired);
    v.Field("points", c.points, kRequired);
    v.Field("nonfinite", c.nonfinite, kRequired);
    v.Field("skipped", c.skipped, kRequired);
    v.Field("last", c.last, kRequired);
    v.Field("lines_lost", c.lines_lost, kRequired);
  });
  // Written since 2026-12-07; null: the program did not say it failed.
  v.Nullable("failure", r.failure, [&](auto& f) {
    v.Field("kind", f.kind, kRequired);
    v.Field("message", f.message, kRequired);
    v.Field("step", f.step, kRequired);
    v.Field("at_s", f.at_s, kRequired);
  });
  v.Object("acceptance", kRequired, [&] {
    v.Field("metric", r.acceptance.metric, kEmptyIsNull);
    v.Field("target", r.acceptance.target, kRequired);
    v.Field("value", r.acceptance.value, kRequired);
    v.Field("higher_is_better", r.acceptance.higher_is_better, kRequired);
    v.Field("passed", r.acceptance.passed, kRequired);
    // Written since 2026-12-05.
    v.Field("evaluations", r.acceptance.evaluations, kAbsentOk);
    v.Field("time_to_target_s", r.acceptance.time_to_target_s, kAbsentOk);
    v.Field("time_to_target_from_first_step_s", r.acceptance.time_to_target_from_first_step_s,
            kAbsentOk);
  });
  v.Field("recommendation", r.recommendation, kRequired);
}

}  // namespace trainscope::exporter::report_fields

#endif  // TRAINSCOPE_SDK_EXPORT_REPORT_FIELDS_H_
