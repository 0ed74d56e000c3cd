// An experiment's spec, parsed and checked. See experiment.h and
// docs/experiments.md, "The spec". Each object of the spec is a table of
// its keys, each with the function that reads it; the tables' order is the
// order in which errors are found.
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
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

// One key's value as its reader sees it: `e` is nullptr when the key is
// absent; `where` names the spec and `path` the key ("curve.widen",
// "variants[1]") in errors.
struct Value {
  const element* e;
  std::string_view where;
  std::string path;

  absl::Status Bad(std::string_view what) const { return tuning::Bad(where, path, what); }
  absl::Status Bad(std::string_view under, std::string_view what) const {
    return tuning::Bad(where, path + std::string(under), what);
  }
};

// A key of an object of the spec and the function that reads its value
// into T (the spec, a variant, its rollback limits, its curve check).
template <typename T>
struct KeyReader {
  std::string_view key;
  absl::Status (*read)(const Value& value, T* into);
};

// Reads `object` by `table`: a key not in it is an error naming the key;
// then each key of the table in order, absent ones too (their reader
// decides: a default stays, or "required"). `prefix` is the object's path
// and a dot ("curve."), "" for the top.
template <typename T, size_t N>
absl::Status ReadObject(simdjson::dom::object object, std::string_view where,
                        const std::string& prefix, const KeyReader<T> (&table)[N], T* into) {
  for (auto field : object) {
    const bool known = std::any_of(std::begin(table), std::end(table),
                                   [&](const KeyReader<T>& k) { return k.key == field.key; });
    if (!known) return Bad(where, prefix + std::string(field.key), "unknown key");
  }
  for (const KeyReader<T>& k : table) {
    element e;
    const bool present = object[k.key].get(e) == simdjson::SUCCESS;
    const Value value{present ? &e : nullptr, where, prefix + std::string(k.key)};
    if (absl::Status s = k.read(value, into); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// An object read by `table`, its path the value's.
template <typename T, size_t N>
absl::Status ReadNested(const Value& value, const KeyReader<T> (&table)[N], T* into) {
  simdjson::dom::object object;
  if (value.e->get_object().get(object) != simdjson::SUCCESS) {
    return value.Bad("must be an object");
  }
  return ReadObject(object, value.where, value.path + ".", table, into);
}

absl::StatusOr<std::vector<std::string>> Strings(const Value& value) {
  simdjson::dom::array array;
  if (value.e->get_array().get(array) != simdjson::SUCCESS) {
    return value.Bad("must be an array of strings");
  }
  std::vector<std::string> out;
  for (element item : array) {
    std::string_view text;
    if (item.get_string().get(text) != simdjson::SUCCESS) {
      return value.Bad("must be an array of strings");
    }
    out.emplace_back(text);
  }
  return out;
}

// An object of strings, in file order ("env", "notes", "values").
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> StringPairs(const Value& value) {
  simdjson::dom::object object;
  if (value.e->get_object().get(object) != simdjson::SUCCESS) {
    return value.Bad("must be an object of strings");
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (auto field : object) {
    std::string_view text;
    if (field.value.get_string().get(text) != simdjson::SUCCESS) {
      return value.Bad("." + std::string(field.key), "must be a string");
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

// A number into the member `member` of T, when present: an integer
// member takes only whole numbers.
template <auto member, typename T>
absl::Status Number(const Value& value, T* into) {
  if (value.e == nullptr) return absl::OkStatus();  // the default stays
  const element& e = *value.e;
  double number = 0;
  if (e.is_int64()) {
    number = static_cast<double>(int64_t(e));
  } else if (e.is_uint64()) {
    number = static_cast<double>(uint64_t(e));
  } else if (e.get_double().get(number) != simdjson::SUCCESS) {
    return value.Bad("must be a number");
  }
  auto& out = into->*member;
  if constexpr (std::is_integral_v<std::remove_reference_t<decltype(out)>>) {
    if (number != std::floor(number)) return value.Bad("must be an integer");
  }
  out = static_cast<std::remove_reference_t<decltype(out)>>(number);
  return absl::OkStatus();
}

// Number, then at least `least` (with the default too).
template <auto member, int least, typename T>
absl::Status NumberAtLeast(const Value& value, T* into) {
  if (absl::Status s = Number<member>(value, into); !s.ok()) return s;
  if (!(into->*member >= least)) return value.Bad(fmt::format("must be >= {}", least));
  return absl::OkStatus();
}

// ---- a variant ---------------------------------------------------------

// A variant as it is read: its spec, and the variants before it (whose
// names it must not repeat).
struct VariantRead {
  VariantSpec variant;
  const std::vector<VariantSpec>* before;
};

absl::Status VariantName(const Value& value, VariantRead* into) {
  std::string_view text;
  if (value.e == nullptr || value.e->get_string().get(text) != simdjson::SUCCESS || text.empty()) {
    return value.Bad("required: a non-empty string");
  }
  for (const VariantSpec& v : *into->before) {
    if (v.name == text) return value.Bad(fmt::format("\"{}\" is used twice", text));
  }
  into->variant.name = std::string(text);
  return absl::OkStatus();
}

absl::Status VariantArgs(const Value& value, VariantRead* into) {
  if (value.e == nullptr) return absl::OkStatus();
  absl::StatusOr<std::vector<std::string>> args = Strings(value);
  if (!args.ok()) return args.status();
  into->variant.args = *std::move(args);
  return absl::OkStatus();
}

absl::Status VariantEnv(const Value& value, VariantRead* into) {
  if (value.e == nullptr) return absl::OkStatus();
  auto env = StringPairs(value);
  if (!env.ok()) return env.status();
  into->variant.env = *std::move(env);
  return absl::OkStatus();
}

absl::Status VariantValues(const Value& value, VariantRead* into) {
  if (value.e == nullptr) return absl::OkStatus();
  auto values = StringPairs(value);
  if (!values.ok()) return values.status();
  for (const auto& [name, text] : *values) {
    if (!PlaceholderName(name) || name == "out" || name == "repeat") {
      return value.Bad("." + name,
                       "must be a placeholder's name: lower-case letters, digits and _, not "
                       "\"out\" or \"repeat\" (the engine's own)");
    }
  }
  into->variant.values = *std::move(values);
  return absl::OkStatus();
}

constexpr KeyReader<VariantRead> kVariantKeys[] = {
    {"name", VariantName},
    {"args", VariantArgs},
    {"env", VariantEnv},
    {"values", VariantValues},
};

// ---- the rollback limits and the curve check ---------------------------

constexpr KeyReader<RollbackLimits> kRollbackKeys[] = {
    {"failure_rate", NumberAtLeast<&RollbackLimits::failure_rate, 0>},
    {"p99_step_time", NumberAtLeast<&RollbackLimits::p99_step_time, 0>},
    {"resource_hours_per_accepted", NumberAtLeast<&RollbackLimits::resource_hours_per_accepted, 0>},
    {"peak_memory", NumberAtLeast<&RollbackLimits::peak_memory, 0>},
};

absl::Status CurveFile(const Value& value, CurveSpec* into) {
  std::string_view text;
  if (value.e == nullptr || value.e->get_string().get(text) != simdjson::SUCCESS || text.empty() ||
      text.find('/') != std::string_view::npos) {
    return value.Bad("required: the curve's file name in each trial's output directory");
  }
  into->file = std::string(text);
  return absl::OkStatus();
}

absl::Status CurveValue(const Value& value, CurveSpec* into) {
  if (value.e == nullptr) return absl::OkStatus();
  std::string_view text;
  if (value.e->get_string().get(text) != simdjson::SUCCESS || text.empty()) {
    return value.Bad("must be a non-empty string (the key of the value)");
  }
  into->value = std::string(text);
  return absl::OkStatus();
}

absl::Status CurveShare(const Value& value, CurveSpec* into) {
  if (absl::Status s = NumberAtLeast<&CurveSpec::max_outside, 0>(value, into); !s.ok()) return s;
  if (into->max_outside >= 1) return value.Bad("must be below 1 (a share)");
  return absl::OkStatus();
}

constexpr KeyReader<CurveSpec> kCurveKeys[] = {
    {"file", CurveFile},
    {"value", CurveValue},
    {"window_steps", NumberAtLeast<&CurveSpec::window_steps, 1>},
    {"widen", NumberAtLeast<&CurveSpec::widen, 0>},
    {"floor", NumberAtLeast<&CurveSpec::floor, 0>},
    {"max_outside", CurveShare},
};

// ---- the spec ----------------------------------------------------------

absl::Status Hypothesis(const Value& value, ExperimentSpec* into) {
  std::string_view text;
  if (value.e == nullptr || value.e->get_string().get(text) != simdjson::SUCCESS || text.empty()) {
    return value.Bad("required: a non-empty string saying what should improve");
  }
  into->hypothesis = std::string(text);
  return absl::OkStatus();
}

absl::Status Command(const Value& value, ExperimentSpec* into) {
  if (value.e == nullptr) {
    return value.Bad("required: the program and its arguments, an array of strings");
  }
  absl::StatusOr<std::vector<std::string>> command = Strings(value);
  if (!command.ok()) return command.status();
  if (command->empty()) return value.Bad("must name a program");
  into->command = *std::move(command);
  return absl::OkStatus();
}

absl::Status Variants(const Value& value, ExperimentSpec* into) {
  simdjson::dom::array variants;
  if (value.e == nullptr || value.e->get_array().get(variants) != simdjson::SUCCESS) {
    return value.Bad("required: an array of {\"name\", \"args\", \"env\"}");
  }
  for (element v : variants) {
    VariantRead read{{}, &into->variants};
    const Value item{&v, value.where, fmt::format("variants[{}]", into->variants.size())};
    if (absl::Status s = ReadNested(item, kVariantKeys, &read); !s.ok()) return s;
    into->variants.push_back(std::move(read.variant));
  }
  if (into->variants.size() < 2) return value.Bad("needs a baseline and at least one variant");
  return absl::OkStatus();
}

// The objective's name, looked up once (objectives.h).
absl::Status ObjectiveKey(const Value& value, ExperimentSpec* into) {
  if (value.e == nullptr) return absl::OkStatus();
  std::string_view text;
  const Objective* objective =
      value.e->get_string().get(text) == simdjson::SUCCESS ? FindObjective(text) : nullptr;
  if (objective == nullptr) return value.Bad("must be " + ObjectiveChoices());
  into->objective = objective->id;
  return absl::OkStatus();
}

absl::Status Sequential(const Value& value, ExperimentSpec* into) {
  if (value.e != nullptr && value.e->get_bool().get(into->sequential) != simdjson::SUCCESS) {
    return value.Bad("must be true or false");
  }
  return absl::OkStatus();
}

absl::Status Rollback(const Value& value, ExperimentSpec* into) {
  return value.e == nullptr ? absl::OkStatus() : ReadNested(value, kRollbackKeys, &into->rollback);
}

absl::Status Notes(const Value& value, ExperimentSpec* into) {
  if (value.e == nullptr) return absl::OkStatus();
  auto notes = StringPairs(value);
  if (!notes.ok()) return notes.status();
  into->notes = *std::move(notes);
  return absl::OkStatus();
}

absl::Status Curve(const Value& value, ExperimentSpec* into) {
  return value.e == nullptr ? absl::OkStatus() : ReadNested(value, kCurveKeys, &into->curve);
}

constexpr KeyReader<ExperimentSpec> kSpecKeys[] = {
    {"hypothesis", Hypothesis},
    {"command", Command},
    {"variants", Variants},
    {"objective", ObjectiveKey},
    {"sequential", Sequential},
    {"threshold", Number<&ExperimentSpec::threshold>},
    {"trial_timeout_s", Number<&ExperimentSpec::trial_timeout_s>},
    {"level", Number<&ExperimentSpec::level>},
    {"repeats", Number<&ExperimentSpec::repeats>},
    {"min_repeats", Number<&ExperimentSpec::min_repeats>},
    {"resamples", Number<&ExperimentSpec::resamples>},
    {"seed", Number<&ExperimentSpec::seed>},
    {"rollback", Rollback},
    {"notes", Notes},
    {"curve", Curve},
};

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
  ExperimentSpec spec;
  if (absl::Status s = ReadObject(object, where, "", kSpecKeys, &spec); !s.ok()) return s;
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
