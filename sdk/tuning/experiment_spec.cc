// An experiment's spec, parsed and checked. See experiment.h and
// docs/experiments.md, "The spec".
#include <simdjson.h>

#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "sdk/ground/json_fields.h"
#include "sdk/tuning/experiment.h"
#include "sdk/tuning/objectives.h"
#include "sdk/tuning/statistics.h"

namespace trainscope::tuning {
namespace {

using simdjson::dom::element;

absl::Status Bad(std::string_view where, std::string_view key, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{}: {}: {}", where, key, what));
}

// Every key of `object` must be in `known`.
absl::Status OnlyKnownKeys(simdjson::dom::object object, std::string_view where,
                           const std::string& path, std::initializer_list<std::string_view> known) {
  for (auto field : object) {
    if (std::find(known.begin(), known.end(), field.key) == known.end()) {
      return Bad(where, path + std::string(field.key), "unknown key");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> Strings(element e, std::string_view where,
                                                 const std::string& key) {
  simdjson::dom::array array;
  if (e.get_array().get(array) != simdjson::SUCCESS) {
    return Bad(where, key, "must be an array of strings");
  }
  std::vector<std::string> out;
  for (element item : array) {
    std::string_view text;
    if (item.get_string().get(text) != simdjson::SUCCESS) {
      return Bad(where, key, "must be an array of strings");
    }
    out.emplace_back(text);
  }
  return out;
}

// An object of strings, in file order ("env", "notes", "values").
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> StringPairs(
    element e, std::string_view where, const std::string& key) {
  simdjson::dom::object object;
  if (e.get_object().get(object) != simdjson::SUCCESS) {
    return Bad(where, key, "must be an object of strings");
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (auto field : object) {
    std::string_view text;
    if (field.value.get_string().get(text) != simdjson::SUCCESS) {
      return Bad(where, key + "." + std::string(field.key), "must be a string");
    }
    out.emplace_back(std::string(field.key), std::string(text));
  }
  return out;
}

// A placeholder's name: a lower-case identifier.
bool PlaceholderName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return !(name[0] >= '0' && name[0] <= '9');
}

template <typename T>
absl::Status NumberField(simdjson::dom::object object, std::string_view key, std::string_view where,
                         const std::string& path, T* out) {
  element e;
  if (object[key].get(e) != simdjson::SUCCESS) return absl::OkStatus();  // default stays
  double value = 0;
  if (e.is_int64()) {
    value = static_cast<double>(int64_t(e));
  } else if (e.is_uint64()) {
    value = static_cast<double>(uint64_t(e));
  } else if (e.get_double().get(value) != simdjson::SUCCESS) {
    return Bad(where, path + std::string(key), "must be a number");
  }
  if constexpr (std::is_integral_v<T>) {
    if (value != std::floor(value))
      return Bad(where, path + std::string(key), "must be an integer");
  }
  *out = static_cast<T>(value);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ExperimentSpec> ParseSpec(std::string_view json, std::string_view where) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  element root;
  if (auto error = parser.parse(padded).get(root); error != simdjson::SUCCESS) {
    return ground::json_fields::DocumentError(error, where, json);
  }
  simdjson::dom::object object;
  if (root.get_object().get(object) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(fmt::format("{}: must be a JSON object", where));
  }
  if (absl::Status s =
          OnlyKnownKeys(object, where, "",
                        {"hypothesis", "command", "variants", "repeats", "objective", "threshold",
                         "trial_timeout_s", "seed", "sequential", "min_repeats", "level",
                         "resamples", "rollback", "curve", "notes"});
      !s.ok()) {
    return s;
  }
  ExperimentSpec spec;
  std::string_view text;
  if (object["hypothesis"].get_string().get(text) != simdjson::SUCCESS || text.empty()) {
    return Bad(where, "hypothesis", "required: a non-empty string saying what should improve");
  }
  spec.hypothesis = std::string(text);
  element e;
  if (object["command"].get(e) != simdjson::SUCCESS) {
    return Bad(where, "command", "required: the program and its arguments, an array of strings");
  }
  absl::StatusOr<std::vector<std::string>> command = Strings(e, where, "command");
  if (!command.ok()) return command.status();
  if (command->empty()) return Bad(where, "command", "must name a program");
  spec.command = *std::move(command);
  simdjson::dom::array variants;
  if (object["variants"].get_array().get(variants) != simdjson::SUCCESS) {
    return Bad(where, "variants", "required: an array of {\"name\", \"args\", \"env\"}");
  }
  std::set<std::string> names;
  int index = 0;
  for (element v : variants) {
    const std::string path = fmt::format("variants[{}].", index++);
    simdjson::dom::object vo;
    if (v.get_object().get(vo) != simdjson::SUCCESS) {
      return Bad(where, path.substr(0, path.size() - 1), "must be an object");
    }
    if (absl::Status s = OnlyKnownKeys(vo, where, path, {"name", "args", "env", "values"});
        !s.ok()) {
      return s;
    }
    VariantSpec variant;
    if (vo["name"].get_string().get(text) != simdjson::SUCCESS || text.empty()) {
      return Bad(where, path + "name", "required: a non-empty string");
    }
    variant.name = std::string(text);
    if (!names.insert(variant.name).second) {
      return Bad(where, path + "name", fmt::format("\"{}\" is used twice", variant.name));
    }
    if (vo["args"].get(e) == simdjson::SUCCESS) {
      absl::StatusOr<std::vector<std::string>> args = Strings(e, where, path + "args");
      if (!args.ok()) return args.status();
      variant.args = *std::move(args);
    }
    if (vo["env"].get(e) == simdjson::SUCCESS) {
      auto env = StringPairs(e, where, path + "env");
      if (!env.ok()) return env.status();
      variant.env = *std::move(env);
    }
    if (vo["values"].get(e) == simdjson::SUCCESS) {
      auto values = StringPairs(e, where, path + "values");
      if (!values.ok()) return values.status();
      for (const auto& [name, value] : *values) {
        if (!PlaceholderName(name) || name == "out" || name == "repeat") {
          return Bad(where, path + "values." + name,
                     "must be a placeholder's name: lower-case letters, digits and _, not "
                     "\"out\" or \"repeat\" (the engine's own)");
        }
      }
      variant.values = *std::move(values);
    }
    spec.variants.push_back(std::move(variant));
  }
  if (spec.variants.size() < 2) {
    return Bad(where, "variants", "needs a baseline and at least one variant");
  }
  if (object["objective"].get(e) == simdjson::SUCCESS) {
    const Objective* objective =
        e.get_string().get(text) == simdjson::SUCCESS ? FindObjective(text) : nullptr;
    if (objective == nullptr) return Bad(where, "objective", "must be " + ObjectiveChoices());
    spec.objective = objective->id;
  }
  if (object["sequential"].get(e) == simdjson::SUCCESS &&
      e.get_bool().get(spec.sequential) != simdjson::SUCCESS) {
    return Bad(where, "sequential", "must be true or false");
  }
  for (const auto& [key, out] : std::initializer_list<std::pair<std::string_view, double*>>{
           {"threshold", &spec.threshold},
           {"trial_timeout_s", &spec.trial_timeout_s},
           {"level", &spec.level}}) {
    if (absl::Status s = NumberField(object, key, where, "", out); !s.ok()) return s;
  }
  for (const auto& [key, out] :
       std::initializer_list<std::pair<std::string_view, int*>>{{"repeats", &spec.repeats},
                                                                {"min_repeats", &spec.min_repeats},
                                                                {"resamples", &spec.resamples}}) {
    if (absl::Status s = NumberField(object, key, where, "", out); !s.ok()) return s;
  }
  if (absl::Status s = NumberField(object, "seed", where, "", &spec.seed); !s.ok()) return s;
  if (object["rollback"].get(e) == simdjson::SUCCESS) {
    simdjson::dom::object ro;
    if (e.get_object().get(ro) != simdjson::SUCCESS) {
      return Bad(where, "rollback", "must be an object");
    }
    if (absl::Status s = OnlyKnownKeys(
            ro, where, "rollback.",
            {"failure_rate", "p99_step_time", "resource_hours_per_accepted", "peak_memory"});
        !s.ok()) {
      return s;
    }
    RollbackLimits& r = spec.rollback;
    for (const auto& [key, out] : std::initializer_list<std::pair<std::string_view, double*>>{
             {"failure_rate", &r.failure_rate},
             {"p99_step_time", &r.p99_step_time},
             {"resource_hours_per_accepted", &r.resource_hours_per_accepted},
             {"peak_memory", &r.peak_memory}}) {
      if (absl::Status s = NumberField(ro, key, where, "rollback.", out); !s.ok()) return s;
      if (*out < 0) return Bad(where, "rollback." + std::string(key), "must be >= 0");
    }
  }
  if (object["notes"].get(e) == simdjson::SUCCESS) {
    auto notes = StringPairs(e, where, "notes");
    if (!notes.ok()) return notes.status();
    spec.notes = *std::move(notes);
  }
  if (object["curve"].get(e) == simdjson::SUCCESS) {
    simdjson::dom::object co;
    if (e.get_object().get(co) != simdjson::SUCCESS)
      return Bad(where, "curve", "must be an object");
    if (absl::Status s =
            OnlyKnownKeys(co, where, "curve.",
                          {"file", "value", "window_steps", "widen", "floor", "max_outside"});
        !s.ok()) {
      return s;
    }
    CurveSpec& c = spec.curve;
    if (co["file"].get_string().get(text) != simdjson::SUCCESS || text.empty() ||
        text.find('/') != std::string_view::npos) {
      return Bad(where, "curve.file",
                 "required: the curve's file name in each trial's output directory");
    }
    c.file = std::string(text);
    if (co["value"].get(e) == simdjson::SUCCESS) {
      if (e.get_string().get(text) != simdjson::SUCCESS || text.empty()) {
        return Bad(where, "curve.value", "must be a non-empty string (the key of the value)");
      }
      c.value = std::string(text);
    }
    if (absl::Status s = NumberField(co, "window_steps", where, "curve.", &c.window_steps);
        !s.ok()) {
      return s;
    }
    if (c.window_steps < 1) return Bad(where, "curve.window_steps", "must be >= 1");
    for (const auto& [key, out] : std::initializer_list<std::pair<std::string_view, double*>>{
             {"widen", &c.widen}, {"floor", &c.floor}, {"max_outside", &c.max_outside}}) {
      if (absl::Status s = NumberField(co, key, where, "curve.", out); !s.ok()) return s;
      if (!(*out >= 0)) return Bad(where, "curve." + std::string(key), "must be >= 0");
    }
    if (c.max_outside >= 1) return Bad(where, "curve.max_outside", "must be below 1 (a share)");
  }
  if (absl::Status s = CheckSpec(spec, where); !s.ok()) return s;
  return spec;
}

absl::Status CheckSpec(const ExperimentSpec& spec, std::string_view where) {
  if (spec.command.empty()) return Bad(where, "command", "must name a program");
  if (spec.variants.size() < 2) {
    return Bad(where, "variants", "needs a baseline and at least one variant");
  }
  if (spec.repeats < 1) return Bad(where, "repeats", "must be >= 1");
  if (!(spec.threshold >= 0 && spec.threshold < 1)) {
    return Bad(where, "threshold", "must be from 0 to 1 (a relative difference)");
  }
  if (!(spec.trial_timeout_s > 0)) return Bad(where, "trial_timeout_s", "must be > 0");
  if (!(spec.level > 0.5 && spec.level < 1)) return Bad(where, "level", "must be in (0.5, 1)");
  if (spec.resamples < 100) return Bad(where, "resamples", "must be >= 100");
  // Refused before any trial runs: with too few repeats the rank test can
  // never reach its level, and the experiment could accept nothing.
  const int comparisons = static_cast<int>(spec.variants.size()) - 1;
  const double alpha = VerdictOptionsOf(spec).alpha;
  const int least = MinimumRepeats(comparisons, alpha);
  if (spec.repeats < least) {
    const double smallest = SmallestRankTestP(spec.repeats, spec.repeats);
    return Bad(where, "repeats",
               fmt::format("{} a variant can never be accepted: with {} trials a side the rank "
                           "test's smallest p is {:.3g}{}, not below {:g}; at least {} are needed",
                           spec.repeats, spec.repeats, smallest,
                           comparisons > 1 ? fmt::format(", {:.3g} after Holm's adjustment for {} "
                                                         "variants",
                                                         smallest * comparisons, comparisons)
                                           : std::string(),
                           alpha, least));
  }
  if (spec.min_repeats < 2 || spec.min_repeats > spec.repeats) {
    if (spec.sequential) return Bad(where, "min_repeats", "must be from 2 to repeats");
  }
  return absl::OkStatus();
}

}  // namespace trainscope::tuning
