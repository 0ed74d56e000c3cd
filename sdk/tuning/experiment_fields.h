// sdk/tuning/experiment_fields.h: the fields of experiment.json that are
// written and read back, named once.
//
// DescribeSpec (the "spec" object), DescribeVariant (each of
// "variants[]") and DescribeTrial (each of "variants[].trials[]") list
// their fields in file order; the writer
// (ExperimentJson) and the reader (ReadExperiment, ReadExperimentTrials)
// in experiment_json.cc are visitors of these lists, and
// tests/tuning_test.cc checks that docs/experiments.md names each one. A
// reader takes an absent field as its default (files written before it
// was added), and fails on one of the wrong type, naming its path.
//
// A visitor V provides, each taking the key first:
//   Field(key, T& value)        T: std::string, bool, double, int, int64_t,
//                               uint64_t, std::optional<double>,
//                               std::optional<std::string>
//   Written(key, bool value)    derived from the others; written, not read
//   List(key, std::vector<std::string>&)         an array of strings
//   Pairs(key, std::vector<std::pair<string, string>>&)  keys that are data
//   Object(key, bool null, fn())  an object; written as null when `null`,
//                               and read only when present and not null
// with S = ExperimentSpec / Trial, or their const forms for writing.
#ifndef TRAINSCOPE_SDK_TUNING_EXPERIMENT_FIELDS_H_
#define TRAINSCOPE_SDK_TUNING_EXPERIMENT_FIELDS_H_

#include "sdk/tuning/experiment.h"

namespace trainscope::tuning::experiment_fields {

template <typename S, typename V>
void DescribeSpec(S& spec, V& v) {
  v.List("command", spec.command);
  v.Field("objective", spec.objective);
  v.Written("lower_is_better", spec.lower_is_better());
  v.Field("repeats", spec.repeats);
  v.Field("sequential", spec.sequential);
  v.Field("min_repeats", spec.min_repeats);
  v.Field("threshold", spec.threshold);
  v.Field("level", spec.level);
  v.Field("resamples", spec.resamples);
  v.Field("trial_timeout_s", spec.trial_timeout_s);
  v.Field("seed", spec.seed);
  v.Object("rollback", false, [&] {
    v.Field("failure_rate", spec.rollback.failure_rate);
    v.Field("p99_step_time", spec.rollback.p99_step_time);
    v.Field("resource_hours_per_accepted", spec.rollback.resource_hours_per_accepted);
    v.Field("peak_memory", spec.rollback.peak_memory);
  });
  v.Pairs("notes", spec.notes);  // absent before 2026-12-06
  v.Object("curve", spec.curve.file.empty(), [&] {
    v.Field("file", spec.curve.file);
    v.Field("value", spec.curve.value);
    v.Field("window_steps", spec.curve.window_steps);
    v.Field("widen", spec.curve.widen);
    v.Field("floor", spec.curve.floor);
    v.Field("max_outside", spec.curve.max_outside);
  });
}

// One of "variants[]", less its trials (DescribeTrial).
template <typename S, typename V>
void DescribeVariant(S& variant, bool baseline, V& v) {
  v.Field("name", variant.name);
  v.Written("baseline", baseline);
  v.List("args", variant.args);
  v.Pairs("env", variant.env);
}

template <typename T, typename V>
void DescribeTrial(T& t, V& v) {
  v.Field("order", t.order);
  v.Field("round", t.round);
  v.Field("failed", t.failed);
  v.Field("failure", t.failure);
  v.Field("exit_code", t.exit_code);
  v.Field("timed_out", t.timed_out);
  v.Field("time_to_target_s", t.time_to_target_s);
  v.Field("steady_samples_per_s", t.steady_samples_per_s);
  v.Field("median_step_ms", t.median_step_ms);
  v.Field("p99_step_ms", t.p99_step_ms);
  v.Field("idle_share", t.idle_share);
  v.Field("idle_top_cause", t.idle_top_cause);
  v.Field("resource_hours", t.resource_hours);
  v.Field("peak_memory_bytes", t.peak_memory_bytes);
  // Absent before 2026-12-06.
  v.Field("latency_p50_ms", t.latency_p50_ms);
  v.Field("latency_p90_ms", t.latency_p90_ms);
  v.Field("latency_p99_ms", t.latency_p99_ms);
  v.Field("requests_per_s", t.requests_per_s);
  v.Field("wall_s", t.wall_s);
  v.Field("cpu_mhz", t.cpu_mhz);
  v.Field("load_1m", t.load_1m);
  // Absent before 2026-12-06.
  v.Field("gpu_sm_clock_mhz_min", t.gpu_sm_clock_mhz_min);
  v.Field("gpu_temperature_c_max", t.gpu_temperature_c_max);
  v.Field("gpu_clock_events", t.gpu_clock_events);
  v.Field("output_dir", t.output_dir);
  v.Object("curve", t.curve_points < 0, [&] {
    v.Field("points", t.curve_points);
    v.Field("nonfinite", t.curve_nonfinite);
    v.Field("skipped", t.curve_skipped);
  });
}

}  // namespace trainscope::tuning::experiment_fields

#endif  // TRAINSCOPE_SDK_TUNING_EXPERIMENT_FIELDS_H_
