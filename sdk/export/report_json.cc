// report.json writer and reader. See report_json.h.
#include "sdk/export/report_json.h"

#include <simdjson.h>

#include <limits>

#include "fmt/format.h"
#include "sdk/ground/files.h"
#include "sdk/ground/json_writer.h"

namespace trainscope::exporter {

std::string ReportToJson(const Report& r) {
  ground::JsonWriter j(ground::JsonWriter::kPretty);
  j.BeginObject();
  j.Key("schema_version").Int(r.schema_version);
  j.Key("run").BeginObject();
  j.Key("name").String(r.run.name);
  j.Key("code_version").String(r.run.code_version);
  j.Key("data_version").String(r.run.data_version);
  j.Key("started_at").String(r.run.started_at);
  j.Key("host").String(r.run.host);
  j.Key("pid").Int(r.run.pid);
  j.Key("rank").Int(r.run.rank);
  j.Key("world_size").Int(r.run.world_size);
  j.EndObject();

  j.Key("environment").BeginObject();
  j.Key("accelerator").String(r.environment.accelerator);
  j.Key("accelerator_count").Int(r.environment.accelerator_count);
  j.Key("accelerator_status").String(r.environment.accelerator_status);
  j.Key("cpu_model").String(r.environment.cpu_model);
  j.Key("cpu_count").Int(r.environment.cpu_count);
  j.Key("container_image").String(r.environment.container_image);
  j.Key("os").String(r.environment.os);
  j.Key("trainscope_version").String(r.environment.trainscope_version);
  j.Key("nvtx_compiled").Bool(r.environment.nvtx_compiled);
  j.EndObject();

  j.Key("resource_request").BeginObject();
  j.Key("accelerators").Int(r.resource_request.accelerators);
  j.Key("cpus").Number(r.resource_request.cpus);
  j.Key("memory_gib").Number(r.resource_request.memory_gib);
  j.Key("description").String(r.resource_request.description);
  j.EndObject();

  j.Key("config").BeginObject();
  for (const auto& [key, value] : r.config) j.Key(key).String(value);
  j.EndObject();

  j.Key("timing").BeginObject();
  j.Key("queue_delay_s").Number(r.timing.queue_delay_s);
  j.Key("startup_s").Number(r.timing.startup_s);
  j.Key("warmup_steps").Int(r.timing.warmup_steps);
  j.Key("warmup_rule").String(r.timing.warmup_rule);
  j.Key("total_s").Number(r.timing.total_s);
  j.Key("steps").Int(r.timing.steps);
  j.Key("steps_s").Number(r.timing.steps_s);
  j.EndObject();

  j.Key("throughput").BeginObject();
  j.Key("steady_steps").Int(r.throughput.steady_steps);
  j.Key("steady_steps_per_s").Number(r.throughput.steady_steps_per_s);
  j.Key("steady_samples_per_s").Number(r.throughput.steady_samples_per_s);
  j.Key("median_step_ms").Number(r.throughput.median_step_ms);
  j.EndObject();

  j.Key("resource_hours").Number(r.resource_hours);

  j.Key("phases").BeginObject();
  for (const PhaseStat& p : r.phases) {
    j.Key(p.phase).BeginObject();
    j.Key("steps").Int(p.steps);
    j.Key("median_ms").Number(p.median_ms);
    j.Key("p90_ms").Number(p.p90_ms);
    j.Key("max_ms").Number(p.max_ms);
    j.Key("total_s").Number(p.total_s);
    j.Key("share_of_steps").Number(p.share_of_steps);
    j.EndObject();
  }
  j.EndObject();

  j.Key("idle").BeginObject();
  j.Key("share").Number(r.idle.share);
  j.Key("idle_s").Number(r.idle.idle_s);
  j.Key("window_s").Number(r.idle.window_s);
  j.Key("busy_source").String(r.idle.busy_source);
  j.Key("by_cause").BeginObject();
  for (const auto& [cause, seconds] : r.idle.by_cause) j.Key(cause).Number(seconds);
  j.EndObject();
  j.Key("top_cause").String(r.idle.top_cause);
  j.EndObject();

  j.Key("device_timeline").BeginObject();
  j.Key("status").String(r.device_timeline.status);
  j.Key("records").Int(r.device_timeline.records);
  j.Key("dropped").Int(r.device_timeline.dropped);
  j.Key("kernels").Int(r.device_timeline.kernels);
  j.Key("busy_s_by_phase").BeginObject();
  for (const auto& [phase, s] : r.device_timeline.busy_s_by_phase) j.Key(phase).Number(s);
  j.EndObject();
  j.EndObject();

  j.Key("utilization").BeginObject();
  j.Key("allocated_device_hours").Number(r.utilization.allocated_device_hours);
  j.Key("busy_device_hours").Number(r.utilization.busy_device_hours);
  j.Key("samples_per_busy_device_s").Number(r.utilization.samples_per_busy_device_s);
  j.EndObject();

  j.Key("events").BeginObject();
  j.Key("recorded").Int(r.events.recorded);
  j.Key("dropped").Int(r.events.dropped);
  j.Key("threads").Int(r.events.threads);
  j.Key("buffer_bytes_per_thread").Int(r.events.buffer_bytes_per_thread);
  j.Key("recorder_bytes").Int(r.events.recorder_bytes);
  j.Key("late").Int(r.events.late);
  j.Key("clock").String(r.events.clock);
  j.Key("tsc_hz").Number(r.events.tsc_hz);
  j.Key("clock_calibrations").Int(r.events.clock_calibrations);
  j.Key("clock_max_error_ns").Int(r.events.clock_max_error_ns);
  j.EndObject();

  j.Key("trace").BeginObject();
  j.Key("windows_written").Int(r.trace.windows_written);
  j.Key("windows_dropped").Int(r.trace.windows_dropped);
  j.Key("first_window_step").Int(r.trace.first_window_step);
  j.Key("first_window_steps").Int(r.trace.first_window_steps);
  j.Key("slowest").BeginArray();
  for (const Report::Trace::SlowStep& slow : r.trace.slowest) {
    j.BeginObject();
    j.Key("step").Int(slow.index);
    j.Key("duration_ms").Number(slow.duration_ms);
    j.EndObject();
  }
  j.EndArray();
  j.Key("bytes").Int(r.trace.bytes);
  j.EndObject();

  j.Key("overhead").BeginObject();
  j.Key("per_scope_ns").Number(r.overhead.per_scope_ns);
  j.Key("estimated_share").Number(r.overhead.estimated_share);
  j.EndObject();

  j.Key("memory").BeginObject();
  j.Key("source").String(r.memory.source);
  j.Key("peak_bytes").Int(r.memory.peak_bytes);
  j.Key("last_bytes").Int(r.memory.last_bytes);
  j.EndObject();

  j.Key("counters").BeginObject();
  for (const Report::Counter& c : r.counters) {
    j.Key(c.name).BeginObject();
    j.Key("samples").Int(c.samples);
    j.Key("min").Int(c.min);
    j.Key("max").Int(c.max);
    j.Key("mean").Number(c.mean);
    j.EndObject();
  }
  j.EndObject();

  {
    const Report::Checkpoint& c = r.checkpoint;
    j.Key("checkpoint").BeginObject();
    j.Key("saves").Int(c.saves);
    j.Key("failed").Int(c.failed);
    j.Key("blocking_s").Number(c.blocking_s);
    j.Key("blocking_max_s").Number(c.blocking_max_s);
    j.Key("persist_s").Number(c.persist_s);
    j.Key("bytes").Int(static_cast<int64_t>(c.bytes));
    j.Key("persist_bytes_per_s").Number(c.persist_bytes_per_s);
    j.Key("resumed_from_step").Int(c.resumed_from_step);
    j.Key("recomputed_steps").Int(c.recomputed_steps);
    j.Key("restore_s").Number(c.restore_s);
    j.Key("restart_delay_s").Number(c.restart_delay_s);
    j.Key("mtbf_hours").Number(c.mtbf_hours);
    j.Key("interval_s").Number(c.interval_s);
    j.Key("optimal_interval_s").Number(c.optimal_interval_s);
    j.Key("expected_overhead_share").Number(c.expected_overhead_share);
    j.Key("expected_lost_s_per_failure").Number(c.expected_lost_s_per_failure);
    j.EndObject();
  }

  j.Key("distributed").BeginObject();
  j.Key("backend").String(r.distributed.backend);
  j.Key("missing_ranks").BeginArray();
  for (int rank : r.distributed.missing_ranks) j.Int(rank);
  j.EndArray();
  j.Key("error").String(r.distributed.error);
  j.Key("device_sync_s").Number(r.distributed.device_sync_s);
  j.Key("device_sync_late").Int(r.distributed.device_sync_late);
  j.EndObject();

  if (r.serving) {
    const Report::Serving& v = *r.serving;
    j.Key("serving").BeginObject();
    j.Key("requests").Int(v.requests);
    j.Key("p50_ms").Number(v.p50_ms);
    j.Key("p90_ms").Number(v.p90_ms);
    j.Key("p99_ms").Number(v.p99_ms);
    j.Key("max_ms").Number(v.max_ms);
    j.Key("requests_per_s").Number(v.requests_per_s);
    j.EndObject();
  } else {
    j.Key("serving").Null();
  }

  j.Key("acceptance").BeginObject();
  if (r.acceptance.metric.empty()) {
    j.Key("metric").Null();
  } else {
    j.Key("metric").String(r.acceptance.metric);
  }
  j.Key("target").Number(r.acceptance.target);
  j.Key("value").Number(r.acceptance.value);
  j.Key("higher_is_better").Bool(r.acceptance.higher_is_better);
  j.Key("passed").Bool(r.acceptance.passed);
  j.Key("evaluations").Int(r.acceptance.evaluations);
  j.Key("time_to_target_s").Number(r.acceptance.time_to_target_s);
  j.Key("time_to_target_from_first_step_s").Number(r.acceptance.time_to_target_from_first_step_s);
  j.EndObject();

  j.Key("recommendation").String(r.recommendation);
  j.EndObject();
  std::string out = j.Take();
  out.push_back('\n');
  return out;
}

namespace {

using simdjson::dom::element;
using simdjson::dom::object;

// Reads fields of one JSON object, remembering the first error with the
// field's full dotted path.
class FieldReader {
 public:
  FieldReader(object obj, std::string path, std::string_view source, absl::Status* status)
      : obj_(obj), path_(std::move(path)), source_(source), status_(status) {}

  // A section added after schema 1 was first released: absent is fine.
  FieldReader OptionalChild(std::string_view key) {
    if (!valid_ || IsNull(key) || !Has(key)) {
      return FieldReader(object(), Path(key), source_, status_, /*valid=*/false);
    }
    return Child(key);
  }
  bool Has(std::string_view key) {
    element e;
    return valid_ && obj_[key].get(e) == simdjson::SUCCESS;
  }
  FieldReader Child(std::string_view key) {
    object child;
    if (Get(key, "an object", [&](element e) { return e.get_object().get(child); })) {
      return FieldReader(child, Path(key), source_, status_);
    }
    return FieldReader(object(), Path(key), source_, status_, /*valid=*/false);
  }
  void String(std::string_view key, std::string* out) {
    std::string_view v;
    if (Get(key, "a string", [&](element e) { return e.get_string().get(v); })) out->assign(v);
  }
  template <typename Int>
  void Integer(std::string_view key, Int* out) {
    int64_t v = 0;
    if (Get(key, "an integer", [&](element e) { return e.get_int64().get(v); })) {
      *out = static_cast<Int>(v);
    }
  }
  // A null number reads as NaN: the writer emits null for non-finite values.
  void Number(std::string_view key, double* out) {
    if (valid_ && IsNull(key)) {
      *out = std::numeric_limits<double>::quiet_NaN();
      return;
    }
    double v = 0;
    if (Get(key, "a number", [&](element e) { return e.get_double().get(v); })) *out = v;
  }
  void OptionalNumber(std::string_view key, std::optional<double>* out) {
    if (!valid_ || IsNull(key)) return;
    double v = 0;
    Number(key, &v);
    *out = v;
  }
  void Bool(std::string_view key, bool* out) {
    bool v = false;
    if (Get(key, "a boolean", [&](element e) { return e.get_bool().get(v); })) *out = v;
  }
  void OptionalBool(std::string_view key, std::optional<bool>* out) {
    if (!valid_ || IsNull(key)) return;
    bool v = false;
    Bool(key, &v);
    *out = v;
  }
  bool IsNull(std::string_view key) {
    if (!valid_) return true;
    element e;
    return obj_[key].get(e) == simdjson::SUCCESS && e.is_null();
  }
  object raw() const { return obj_; }
  bool valid() const { return valid_; }
  std::string Path(std::string_view key) const {
    return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
  }
  void Fail(std::string_view key, std::string_view problem) {
    if (status_->ok()) {
      *status_ =
          absl::InvalidArgumentError(fmt::format("{}: field '{}' {}", source_, Path(key), problem));
    }
  }

 private:
  FieldReader(object obj, std::string path, std::string_view source, absl::Status* status,
              bool valid)
      : obj_(obj), path_(std::move(path)), source_(source), status_(status), valid_(valid) {}

  template <typename Fn>
  bool Get(std::string_view key, std::string_view type, Fn&& read) {
    if (!valid_) return false;
    element e;
    if (obj_[key].get(e) != simdjson::SUCCESS) {
      Fail(key, "is missing");
      return false;
    }
    if (read(e) != simdjson::SUCCESS) {
      Fail(key, fmt::format("is not {}", type));
      return false;
    }
    return true;
  }

  object obj_;
  std::string path_;
  std::string_view source_;
  absl::Status* status_;
  bool valid_ = true;
};

void ReadPairs(FieldReader reader, std::vector<std::pair<std::string, std::string>>* out,
               std::string_view key) {
  if (!reader.valid()) return;
  for (auto field : reader.raw()) {
    std::string_view value;
    if (field.value.get_string().get(value) != simdjson::SUCCESS) {
      reader.Fail(field.key, fmt::format("(in {}) is not a string", key));
      return;
    }
    out->emplace_back(std::string(field.key), std::string(value));
  }
}

// An object of numbers, in file order ({"data_wait": 1.5, ...}).
void ReadNumbers(FieldReader reader, std::vector<std::pair<std::string, double>>* out) {
  if (!reader.valid()) return;
  for (auto field : reader.raw()) {
    double value = 0;
    if (field.value.get_double().get(value) != simdjson::SUCCESS) {
      reader.Fail(field.key, "is not a number");
      return;
    }
    out->emplace_back(std::string(field.key), value);
  }
}

}  // namespace

absl::StatusOr<Report> ParseReportJson(std::string_view json, std::string_view source) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  element root;
  if (auto error = parser.parse(padded).get(root); error != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(
        fmt::format("{}: not valid JSON ({})", source, simdjson::error_message(error)));
  }
  object top;
  if (root.get_object().get(top) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(fmt::format("{}: the top level is not an object", source));
  }
  absl::Status status;
  Report r;
  FieldReader doc(top, "", source, &status);
  doc.Integer("schema_version", &r.schema_version);
  if (!status.ok()) return status;
  if (r.schema_version > kReportSchemaVersion || r.schema_version < 1) {
    return absl::FailedPreconditionError(
        fmt::format("{}: schema_version {} is not one this trainscope (reads up to {}) understands",
                    source, r.schema_version, kReportSchemaVersion));
  }
  FieldReader run = doc.Child("run");
  run.String("name", &r.run.name);
  run.String("code_version", &r.run.code_version);
  run.String("data_version", &r.run.data_version);
  run.String("started_at", &r.run.started_at);
  run.String("host", &r.run.host);
  run.Integer("pid", &r.run.pid);
  run.Integer("rank", &r.run.rank);

  FieldReader env = doc.Child("environment");
  env.String("accelerator", &r.environment.accelerator);
  env.Integer("accelerator_count", &r.environment.accelerator_count);
  env.String("accelerator_status", &r.environment.accelerator_status);
  env.String("cpu_model", &r.environment.cpu_model);
  env.Integer("cpu_count", &r.environment.cpu_count);
  env.String("container_image", &r.environment.container_image);
  env.String("os", &r.environment.os);
  env.String("trainscope_version", &r.environment.trainscope_version);
  env.Bool("nvtx_compiled", &r.environment.nvtx_compiled);

  FieldReader request = doc.Child("resource_request");
  request.Integer("accelerators", &r.resource_request.accelerators);
  request.Number("cpus", &r.resource_request.cpus);
  request.Number("memory_gib", &r.resource_request.memory_gib);
  request.String("description", &r.resource_request.description);

  ReadPairs(doc.Child("config"), &r.config, "config");

  FieldReader timing = doc.Child("timing");
  timing.OptionalNumber("queue_delay_s", &r.timing.queue_delay_s);
  timing.Number("startup_s", &r.timing.startup_s);
  timing.Integer("warmup_steps", &r.timing.warmup_steps);
  timing.String("warmup_rule", &r.timing.warmup_rule);
  timing.Number("total_s", &r.timing.total_s);
  timing.Integer("steps", &r.timing.steps);
  timing.Number("steps_s", &r.timing.steps_s);

  FieldReader throughput = doc.Child("throughput");
  throughput.Integer("steady_steps", &r.throughput.steady_steps);
  throughput.Number("steady_steps_per_s", &r.throughput.steady_steps_per_s);
  throughput.Number("steady_samples_per_s", &r.throughput.steady_samples_per_s);
  throughput.Number("median_step_ms", &r.throughput.median_step_ms);

  doc.Number("resource_hours", &r.resource_hours);

  FieldReader phases = doc.Child("phases");
  if (phases.valid()) {
    for (auto field : phases.raw()) {
      PhaseStat stat;
      stat.phase = std::string(field.key);
      object obj;
      if (field.value.get_object().get(obj) != simdjson::SUCCESS) {
        phases.Fail(field.key, "is not an object");
        break;
      }
      FieldReader p(obj, phases.Path(field.key), source, &status);
      p.Integer("steps", &stat.steps);
      p.Number("median_ms", &stat.median_ms);
      p.Number("p90_ms", &stat.p90_ms);
      p.Number("max_ms", &stat.max_ms);
      p.Number("total_s", &stat.total_s);
      p.Number("share_of_steps", &stat.share_of_steps);
      r.phases.push_back(std::move(stat));
    }
  }

  FieldReader idle = doc.Child("idle");
  idle.Number("share", &r.idle.share);
  idle.Number("idle_s", &r.idle.idle_s);
  idle.Number("window_s", &r.idle.window_s);
  idle.String("busy_source", &r.idle.busy_source);
  idle.String("top_cause", &r.idle.top_cause);
  ReadNumbers(idle.Child("by_cause"), &r.idle.by_cause);
  if (status.ok() && (r.idle.share < 0 || r.idle.share > 1)) {
    return absl::InvalidArgumentError(
        fmt::format("{}: field 'idle.share' is {}, outside 0..1", source, r.idle.share));
  }

  FieldReader device = doc.OptionalChild("device_timeline");
  device.String("status", &r.device_timeline.status);
  device.Integer("records", &r.device_timeline.records);
  device.Integer("dropped", &r.device_timeline.dropped);
  device.Integer("kernels", &r.device_timeline.kernels);
  ReadNumbers(device.Child("busy_s_by_phase"), &r.device_timeline.busy_s_by_phase);
  FieldReader use = doc.OptionalChild("utilization");
  use.Number("allocated_device_hours", &r.utilization.allocated_device_hours);
  use.Number("busy_device_hours", &r.utilization.busy_device_hours);
  use.Number("samples_per_busy_device_s", &r.utilization.samples_per_busy_device_s);

  FieldReader events = doc.Child("events");
  events.Integer("recorded", &r.events.recorded);
  events.Integer("dropped", &r.events.dropped);
  events.Integer("threads", &r.events.threads);
  events.Integer("buffer_bytes_per_thread", &r.events.buffer_bytes_per_thread);
  events.Integer("recorder_bytes", &r.events.recorder_bytes);
  if (events.Has("late")) events.Integer("late", &r.events.late);  // absent before schema 2
  if (events.Has("clock")) {  // absent in reports written before the TSC clock
    events.String("clock", &r.events.clock);
    events.Number("tsc_hz", &r.events.tsc_hz);
    events.Integer("clock_calibrations", &r.events.clock_calibrations);
    events.Integer("clock_max_error_ns", &r.events.clock_max_error_ns);
  }

  FieldReader trace = doc.OptionalChild("trace");  // absent before schema 2
  trace.Integer("windows_written", &r.trace.windows_written);
  trace.Integer("windows_dropped", &r.trace.windows_dropped);
  trace.Integer("first_window_step", &r.trace.first_window_step);
  trace.Integer("first_window_steps", &r.trace.first_window_steps);
  trace.Integer("bytes", &r.trace.bytes);
  if (trace.valid()) {
    simdjson::dom::array slowest;
    if (trace.raw()["slowest"].get_array().get(slowest) != simdjson::SUCCESS) {
      trace.Fail("slowest", "is not an array");
    } else {
      for (element e : slowest) {
        object obj;
        if (e.get_object().get(obj) != simdjson::SUCCESS) {
          trace.Fail("slowest", "holds a value that is not an object");
          break;
        }
        FieldReader step(obj, trace.Path("slowest[]"), source, &status);
        Report::Trace::SlowStep slow;
        step.Integer("step", &slow.index);
        step.Number("duration_ms", &slow.duration_ms);
        r.trace.slowest.push_back(slow);
      }
    }
  }

  FieldReader overhead = doc.Child("overhead");
  overhead.Number("per_scope_ns", &r.overhead.per_scope_ns);
  overhead.Number("estimated_share", &r.overhead.estimated_share);

  if (run.Has("world_size")) run.Integer("world_size", &r.run.world_size);  // absent: 1
  FieldReader memory = doc.OptionalChild("memory");
  memory.String("source", &r.memory.source);
  memory.Integer("peak_bytes", &r.memory.peak_bytes);
  memory.Integer("last_bytes", &r.memory.last_bytes);
  FieldReader counters = doc.OptionalChild("counters");
  if (counters.valid()) {
    for (auto field : counters.raw()) {
      object obj;
      if (field.value.get_object().get(obj) != simdjson::SUCCESS) {
        counters.Fail(field.key, "is not an object");
        break;
      }
      FieldReader c(obj, counters.Path(field.key), source, &status);
      Report::Counter counter;
      counter.name = std::string(field.key);
      c.Integer("samples", &counter.samples);
      c.Integer("min", &counter.min);
      c.Integer("max", &counter.max);
      c.Number("mean", &counter.mean);
      r.counters.push_back(std::move(counter));
    }
  }
  FieldReader ckpt = doc.OptionalChild("checkpoint");
  {
    Report::Checkpoint& c = r.checkpoint;
    ckpt.Integer("saves", &c.saves);
    ckpt.Integer("failed", &c.failed);
    ckpt.Number("blocking_s", &c.blocking_s);
    ckpt.Number("blocking_max_s", &c.blocking_max_s);
    ckpt.Number("persist_s", &c.persist_s);
    ckpt.Integer("bytes", &c.bytes);
    ckpt.Number("persist_bytes_per_s", &c.persist_bytes_per_s);
    ckpt.Integer("resumed_from_step", &c.resumed_from_step);
    ckpt.Integer("recomputed_steps", &c.recomputed_steps);
    ckpt.Number("restore_s", &c.restore_s);
    ckpt.Number("restart_delay_s", &c.restart_delay_s);
    ckpt.Number("mtbf_hours", &c.mtbf_hours);
    ckpt.Number("interval_s", &c.interval_s);
    ckpt.Number("optimal_interval_s", &c.optimal_interval_s);
    ckpt.Number("expected_overhead_share", &c.expected_overhead_share);
    ckpt.Number("expected_lost_s_per_failure", &c.expected_lost_s_per_failure);
  }
  FieldReader distributed = doc.OptionalChild("distributed");
  distributed.String("backend", &r.distributed.backend);
  distributed.String("error", &r.distributed.error);
  if (distributed.valid() && distributed.Has("device_sync_s")) {  // written since 2026-12-05
    distributed.Number("device_sync_s", &r.distributed.device_sync_s);
    distributed.Integer("device_sync_late", &r.distributed.device_sync_late);
  }
  if (distributed.valid()) {
    simdjson::dom::array missing;
    if (distributed.raw()["missing_ranks"].get_array().get(missing) == simdjson::SUCCESS) {
      for (element e : missing) {
        int64_t rank = 0;
        if (e.get_int64().get(rank) != simdjson::SUCCESS) {
          distributed.Fail("missing_ranks", "holds a value that is not an integer");
          break;
        }
        r.distributed.missing_ranks.push_back(static_cast<int>(rank));
      }
    }
  }
  FieldReader serving = doc.OptionalChild("serving");  // written since 2026-12-06; null: none
  if (serving.valid()) {
    Report::Serving& v = r.serving.emplace();
    serving.Integer("requests", &v.requests);
    serving.Number("p50_ms", &v.p50_ms);
    serving.Number("p90_ms", &v.p90_ms);
    serving.Number("p99_ms", &v.p99_ms);
    serving.Number("max_ms", &v.max_ms);
    serving.Number("requests_per_s", &v.requests_per_s);
  }
  FieldReader acceptance = doc.Child("acceptance");
  if (!acceptance.IsNull("metric")) acceptance.String("metric", &r.acceptance.metric);
  acceptance.OptionalNumber("target", &r.acceptance.target);
  acceptance.OptionalNumber("value", &r.acceptance.value);
  acceptance.Bool("higher_is_better", &r.acceptance.higher_is_better);
  acceptance.OptionalBool("passed", &r.acceptance.passed);
  if (acceptance.valid() && acceptance.Has("time_to_target_s")) {  // written since 2026-12-05
    acceptance.Integer("evaluations", &r.acceptance.evaluations);
    acceptance.OptionalNumber("time_to_target_s", &r.acceptance.time_to_target_s);
    acceptance.OptionalNumber("time_to_target_from_first_step_s",
                              &r.acceptance.time_to_target_from_first_step_s);
  }

  doc.String("recommendation", &r.recommendation);
  if (!status.ok()) return status;
  return r;
}

absl::StatusOr<Report> ReadReportFile(const std::string& path) {
  absl::StatusOr<std::string> content = ground::ReadFileToString(path);
  if (!content.ok()) return content.status();
  return ParseReportJson(*content, path);
}

}  // namespace trainscope::exporter
