// The objectives' table. See objectives.h.
#include "sdk/tuning/objectives.h"

#include <iterator>

#include "fmt/format.h"
#include "sdk/tuning/experiment.h"

namespace trainscope::tuning {
namespace {

// name, label, lower is better, serving, unit, decimals, the trial's value.
constexpr Objective kObjectives[] = {
    {ObjectiveId::kTimeToTarget, "time_to_target", "time to target", true, false, "s", 3,
     &Trial::time_to_target_s},
    {ObjectiveId::kSteadySamplesPerS, "steady_samples_per_s", "steady samples/s", false, false,
     "samples/s", 1, &Trial::steady_samples_per_s},
    {ObjectiveId::kMedianStepMs, "median_step_ms", "median step time", true, false, "ms", 3,
     &Trial::median_step_ms},
    {ObjectiveId::kLatencyP50Ms, "latency_p50_ms", "p50 latency", true, true, "ms", 3,
     &Trial::latency_p50_ms},
    {ObjectiveId::kLatencyP90Ms, "latency_p90_ms", "p90 latency", true, true, "ms", 3,
     &Trial::latency_p90_ms},
    {ObjectiveId::kLatencyP99Ms, "latency_p99_ms", "p99 latency", true, true, "ms", 3,
     &Trial::latency_p99_ms},
};

// Each row sits at its id's index.
constexpr bool InIdOrder() {
  for (size_t i = 0; i < std::size(kObjectives); ++i) {
    if (static_cast<size_t>(kObjectives[i].id) != i) return false;
  }
  return true;
}
static_assert(InIdOrder(), "kObjectives: each row at the index of its id");

}  // namespace

const Objective& ObjectiveInfo(ObjectiveId id) { return kObjectives[static_cast<size_t>(id)]; }

const Objective* FindObjective(std::string_view name) {
  for (const Objective& o : kObjectives) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

std::string ObjectiveChoices() {
  std::string names;
  for (size_t i = 0; i < std::size(kObjectives); ++i) {
    names += fmt::format("{}\"{}\"",
                         i == 0                           ? ""
                         : i + 1 < std::size(kObjectives) ? ", "
                                                          : " or ",
                         kObjectives[i].name);
  }
  return names;
}

std::optional<double> ObjectiveValue(ObjectiveId id, const Trial& trial) {
  return trial.*(ObjectiveInfo(id).field);
}

std::string ObjectiveText(ObjectiveId id, std::optional<double> value) {
  if (!value) return "-";
  const Objective& o = ObjectiveInfo(id);
  return fmt::format("{:.{}f} {}", *value, o.decimals, o.unit);
}

}  // namespace trainscope::tuning
