// sdk/tuning/experiment_fields.h: the fields of experiment.json that are
// written and read back, named once.
//
// DescribeSpec (the "spec" object), DescribeVariant (each of
// "variants[]") and DescribeTrial (each of "variants[].trials[]") list
// their fields in file order; the writer
// (ExperimentJson) and the reader (ReadExperiment, ReadExperimentTrials)
// in experiment_json.cc are visitors of these lists, and
// tests/tuning_test.cc checks that docs/experiments.md names each one. The
// vocabulary, and what a reader does with the flags, is
// sdk/ground/json_fields.h. Only the spec's command, objective and
// rollback and a variant's name are required; every other field may be
// absent (an older file reads as its default). A field of the wrong type
// fails, naming its path. S = ExperimentSpec / VariantSpec / Trial, or
// their const forms for writing.
#ifndef TRAINSCOPE_SDK_TUNING_EXPERIMENT_FIELDS_H_
#define TRAINSCOPE_SDK_TUNING_EXPERIMENT_FIELDS_H_

#include <string>
#include <type_traits>

#include "sdk/ground/json_fields.h"
#include "sdk/tuning/experiment.h"
#include "sdk/tuning/objectives.h"

namespace trainscope::tuning::experiment_fields {

using ground::json_fields::kAbsentOk;
using ground::json_fields::kRequired;

// The spec's objective: its name in the file (objectives.h), looked up
// once when read; a name that is none is an error naming the field and
// the names there are.
template <typename S, typename V>
void DescribeObjective(S& spec, V& v) {
  std::string name = ObjectiveInfo(spec.objective).name;
  v.Field("objective", name, kRequired);
  if constexpr (!std::is_const_v<S>) {
    if (const Objective* objective = FindObjective(name); objective != nullptr) {
      spec.objective = objective->id;
    } else {
      v.Check("objective", false, "is \"" + name + "\", not " + ObjectiveChoices());
    }
  }
}

template <typename S, typename V>
void DescribeSpec(S& spec, V& v) {
  v.List("command", spec.command, kRequired);
  DescribeObjective(spec, v);
  v.WriteOnly("lower_is_better", spec.lower_is_better());
  v.Field("repeats", spec.repeats, kAbsentOk);
  v.Field("sequential", spec.sequential, kAbsentOk);
  v.Field("min_repeats", spec.min_repeats, kAbsentOk);
  v.Field("threshold", spec.threshold, kAbsentOk);
  v.Field("level", spec.level, kAbsentOk);
  v.Field("resamples", spec.resamples, kAbsentOk);
  v.Field("trial_timeout_s", spec.trial_timeout_s, kAbsentOk);
  v.Field("seed", spec.seed, kAbsentOk);
  v.Object("rollback", kRequired, [&] {
    v.Field("failure_rate", spec.rollback.failure_rate, kAbsentOk);
    v.Field("p99_step_time", spec.rollback.p99_step_time, kAbsentOk);
    v.Field("resource_hours_per_accepted", spec.rollback.resource_hours_per_accepted, kAbsentOk);
    v.Field("peak_memory", spec.rollback.peak_memory, kAbsentOk);
  });
  v.Strings("notes", spec.notes, kAbsentOk);  // absent before 2026-12-06
  v.ObjectOrNull("curve", spec.curve.file.empty(), kAbsentOk, [&] {
    v.Field("file", spec.curve.file, kAbsentOk);
    v.Field("value", spec.curve.value, kAbsentOk);
    v.Field("window_steps", spec.curve.window_steps, kAbsentOk);
    v.Field("widen", spec.curve.widen, kAbsentOk);
    v.Field("floor", spec.curve.floor, kAbsentOk);
    v.Field("max_outside", spec.curve.max_outside, kAbsentOk);
  });
}

// One of "variants[]", less its trials (DescribeTrial).
template <typename S, typename V>
void DescribeVariant(S& variant, bool baseline, V& v) {
  v.Field("name", variant.name, kRequired);
  v.WriteOnly("baseline", baseline);
  v.List("args", variant.args, kAbsentOk);
  v.Strings("env", variant.env, kAbsentOk);
  v.Strings("values", variant.values, kAbsentOk);  // absent before 2026-12-07
}

template <typename T, typename V>
void DescribeTrial(T& t, V& v) {
  v.Field("order", t.order, kAbsentOk);
  v.Field("round", t.round, kAbsentOk);
  v.Field("failed", t.failed, kAbsentOk);
  v.Field("failure", t.failure, kAbsentOk);
  v.Field("out_of_memory", t.out_of_memory, kAbsentOk);  // absent before 2026-12-07
  v.Field("exit_code", t.exit_code, kAbsentOk);
  v.Field("timed_out", t.timed_out, kAbsentOk);
  v.Field("time_to_target_s", t.time_to_target_s, kAbsentOk);
  v.Field("steady_samples_per_s", t.steady_samples_per_s, kAbsentOk);
  v.Field("median_step_ms", t.median_step_ms, kAbsentOk);
  v.Field("p99_step_ms", t.p99_step_ms, kAbsentOk);
  v.Field("idle_share", t.idle_share, kAbsentOk);
  v.Field("idle_top_cause", t.idle_top_cause, kAbsentOk);
  v.Field("data_wait_share", t.data_wait_share, kAbsentOk);  // absent before 2026-12-07
  v.Field("cpu_s", t.cpu_s, kAbsentOk);                      // absent before 2026-12-07
  v.Field("resource_hours", t.resource_hours, kAbsentOk);
  v.Field("peak_memory_bytes", t.peak_memory_bytes, kAbsentOk);
  // Absent before 2026-12-06.
  v.Field("latency_p50_ms", t.latency_p50_ms, kAbsentOk);
  v.Field("latency_p90_ms", t.latency_p90_ms, kAbsentOk);
  v.Field("latency_p99_ms", t.latency_p99_ms, kAbsentOk);
  v.Field("requests_per_s", t.requests_per_s, kAbsentOk);
  v.Field("wall_s", t.wall_s, kAbsentOk);
  v.Field("cpu_mhz", t.cpu_mhz, kAbsentOk);
  v.Field("load_1m", t.load_1m, kAbsentOk);
  // Absent before 2026-12-06.
  v.Field("gpu_sm_clock_mhz_min", t.gpu_sm_clock_mhz_min, kAbsentOk);
  v.Field("gpu_temperature_c_max", t.gpu_temperature_c_max, kAbsentOk);
  v.Field("gpu_clock_events", t.gpu_clock_events, kAbsentOk);
  v.Field("output_dir", t.output_dir, kAbsentOk);
  v.ObjectOrNull("curve", t.curve_points < 0, kAbsentOk, [&] {
    v.Field("points", t.curve_points, kAbsentOk);
    v.Field("nonfinite", t.curve_nonfinite, kAbsentOk);
    v.Field("skipped", t.curve_skipped, kAbsentOk);
  });
}

}  // namespace trainscope::tuning::experiment_fields

#endif  // TRAINSCOPE_SDK_TUNING_EXPERIMENT_FIELDS_H_
