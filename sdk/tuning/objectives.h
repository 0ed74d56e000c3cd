// sdk/tuning/objectives.h: what an experiment can minimise or maximise,
// named once. A spec names its objective as text (the spec's "objective",
// experiment.json's spec.objective, `tune loader --objective`); the text
// is looked up here once, where it is parsed, and the spec holds the
// ObjectiveId from then on: which way is better, its words in the verdict,
// its unit and the trial's value are this table's, never a comparison of
// names.
#ifndef TRAINSCOPE_SDK_TUNING_OBJECTIVES_H_
#define TRAINSCOPE_SDK_TUNING_OBJECTIVES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace trainscope::tuning {

struct Trial;  // experiment.h

// The objectives: each the index of its row in the table (objectives.cc),
// in the order ObjectiveChoices lists them.
enum class ObjectiveId : uint8_t {
  kTimeToTarget,
  kSteadySamplesPerS,
  kMedianStepMs,
  kLatencyP50Ms,
  kLatencyP90Ms,
  kLatencyP99Ms,
};

// One row of the table: all that differs between objectives.
struct Objective {
  ObjectiveId id;
  const char* name;      // in specs and experiment.json ("time_to_target")
  const char* label;     // in the verdict's sentences ("time to target")
  bool lower_is_better;  // false: a rate, higher is better
  // A request latency (report serving, Session::RecordLatency): its tail
  // is the requests' p99 latency, not the steps' p99 time.
  bool serving;
  const char* unit;                     // printed after a value ("s", "samples/s", "ms")
  int decimals;                         // digits printed after the point
  std::optional<double> Trial::*field;  // the trial's value
};

// The row of `id`. Cost: an index.
const Objective& ObjectiveInfo(ObjectiveId id);

// The objective named `name`; nullptr when none is (the caller says where
// and lists ObjectiveChoices()). Cost: a scan of the six names; the only
// comparison of objective names.
const Objective* FindObjective(std::string_view name);

// Every name, quoted, for an error: "\"time_to_target\", ... or
// \"latency_p99_ms\"".
std::string ObjectiveChoices();

// A trial's value of objective `id`; empty when the trial has none (it
// failed, or never reached the target).
std::optional<double> ObjectiveValue(ObjectiveId id, const Trial& trial);

// `value` in the objective's unit ("12.345 s", "1024.0 samples/s",
// "3.250 ms"); "-" when empty.
std::string ObjectiveText(ObjectiveId id, std::optional<double> value);

}  // namespace trainscope::tuning

#endif  // TRAINSCOPE_SDK_TUNING_OBJECTIVES_H_
