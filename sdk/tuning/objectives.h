// sdk/tuning/objectives.h: what an experiment can minimise or maximise.
#ifndef TRAINSCOPE_SDK_TUNING_OBJECTIVES_H_
#define TRAINSCOPE_SDK_TUNING_OBJECTIVES_H_

#include <optional>
#include <string_view>

#include "sdk/tuning/experiment.h"

namespace trainscope::tuning {

// The objectives, each named here only: the spec's name, the verdict's
// words, the trial's field.
struct Objective {
  std::string_view name;
  const char* label;
  std::optional<double> Trial::*field;
};
inline constexpr Objective kObjectives[] = {
    {"time_to_target", "time to target", &Trial::time_to_target_s},
    {"steady_samples_per_s", "steady samples/s", &Trial::steady_samples_per_s},
    {"median_step_ms", "median step time", &Trial::median_step_ms},
    {"latency_p50_ms", "p50 latency", &Trial::latency_p50_ms},
    {"latency_p90_ms", "p90 latency", &Trial::latency_p90_ms},
    {"latency_p99_ms", "p99 latency", &Trial::latency_p99_ms},
};

// The objective named `name`; nullptr when there is none.
inline const Objective* FindObjective(std::string_view name) {
  for (const Objective& o : kObjectives) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

// A trial's value of the spec's objective; empty when the trial has none
// (it failed, or never reached the target). A spec whose objective is not
// one of kObjectives (ParseSpec refuses it) reads the median step time.
inline std::optional<double> ObjectiveOf(const ExperimentSpec& spec, const Trial& trial) {
  const Objective* o = FindObjective(spec.objective);
  return o != nullptr ? trial.*(o->field) : trial.median_step_ms;
}

}  // namespace trainscope::tuning

#endif  // TRAINSCOPE_SDK_TUNING_OBJECTIVES_H_
