// experiment.json, written and read back. See experiment.h; the fields
// that round-trip are listed once, in experiment_fields.h.
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "sdk/ground/files.h"
#include "sdk/ground/json_fields.h"
#include "sdk/ground/json_writer.h"
#include "sdk/tuning/experiment.h"
#include "sdk/tuning/experiment_fields.h"

namespace trainscope::tuning {
namespace {

using simdjson::dom::element;

void WriteWorkload(ground::JsonWriter& j, const std::optional<Workload>& w) {
  if (!w) {
    j.Null();
    return;
  }
  j.BeginObject();
  j.Key("model").String(w->model);
  j.Key("code_version").String(w->code_version);
  j.Key("data_version").String(w->data_version);
  j.Key("host").String(w->host);
  j.Key("accelerator").String(w->accelerator);
  j.Key("accelerator_count").Int(w->accelerator_count);
  j.Key("world_size").Int(w->world_size);
  j.Key("cpu_model").String(w->cpu_model);
  j.Key("os").String(w->os);
  j.Key("container_image").String(w->container_image);
  j.Key("trainscope_version").String(w->trainscope_version);
  if (w->batch_size.empty()) {
    j.Key("batch_size").Null();
  } else {
    j.Key("batch_size").String(w->batch_size);
  }
  j.Key("quality").BeginObject();
  j.Key("metric").String(w->quality_metric);
  j.Key("target").Number(w->quality_target);
  j.Key("higher_is_better").Bool(w->higher_is_better);
  j.EndObject();
  j.Key("config").BeginObject();
  for (const auto& [k, value] : w->config) j.Key(k).String(value);
  j.EndObject();
  j.EndObject();
}

// The JSON document in the file at `path`, parsed by `parser` (which owns
// it). Errors: the read error, or InvalidArgument naming the path.
absl::StatusOr<element> ParseFile(const std::string& path, simdjson::dom::parser& parser) {
  absl::StatusOr<std::string> text = ground::ReadFileToString(path);
  if (!text.ok()) return text.status();
  element root;
  if (auto error = parser.parse(*text).get(root); error != simdjson::SUCCESS) {
    return ground::json_fields::DocumentError(error, path, *text);
  }
  return root;
}

// The recorded experiment's variants when it was written for `spec`: the
// same hypothesis, command, schedule (seed and repeats: what a resume goes
// on with) and each variant's args, env and values (what its trials ran
// with). Errors: InvalidArgument naming `path` when it is not an
// experiment.json or another spec's.
absl::StatusOr<simdjson::dom::array> VariantsOfSameSpec(element root, const std::string& path,
                                                        const ExperimentSpec& spec) {
  std::string_view hypothesis;
  simdjson::dom::array variants, command;
  if (root["hypothesis"].get_string().get(hypothesis) != simdjson::SUCCESS ||
      root["variants"].get_array().get(variants) != simdjson::SUCCESS ||
      root["spec"]["command"].get_array().get(command) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(fmt::format("{}: not an experiment.json", path));
  }
  std::vector<std::string> recorded_command;
  for (element c : command) {
    std::string_view arg;
    if (c.get_string().get(arg) == simdjson::SUCCESS) recorded_command.emplace_back(arg);
  }
  int64_t seed = 0, repeats = 0;
  const bool same_schedule =
      root["spec"]["seed"].get_int64().get(seed) == simdjson::SUCCESS &&
      root["spec"]["repeats"].get_int64().get(repeats) == simdjson::SUCCESS &&
      static_cast<uint64_t>(seed) == spec.seed && repeats == spec.repeats;
  bool same_variants = variants.size() == spec.variants.size();
  for (size_t i = 0; same_variants && i < spec.variants.size(); ++i) {
    simdjson::dom::object object;
    if (variants.at(i).get_object().get(object) != simdjson::SUCCESS) break;
    VariantSpec recorded;
    absl::Status ignored;
    ground::json_fields::Reader reader(object, "variants[]", path, &ignored);
    experiment_fields::DescribeVariant(recorded, false, reader);
    const VariantSpec& v = spec.variants[i];
    same_variants = recorded.args == v.args && recorded.env == v.env && recorded.values == v.values;
  }
  if (hypothesis != spec.hypothesis || recorded_command != spec.command || !same_schedule ||
      !same_variants) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: an experiment of another spec (hypothesis, command, seed, repeats or variants "
        "differ); resume needs the same spec, or start a new experiment with -o",
        path));
  }
  return variants;
}

// Appends the trials of the recorded variant `index` (`v`), which must be
// the spec's. Errors: InvalidArgument naming `path` and the field.
absl::Status ReadVariantTrials(element v, int index, const std::string& path,
                               const ExperimentSpec& spec, std::vector<Trial>* trials) {
  std::string_view name;
  if (v["name"].get_string().get(name) != simdjson::SUCCESS ||
      name != spec.variants[static_cast<size_t>(index)].name) {
    return absl::InvalidArgumentError(fmt::format("{}: variants[{}] is not \"{}\" of the spec",
                                                  path, index,
                                                  spec.variants[static_cast<size_t>(index)].name));
  }
  simdjson::dom::array list;
  if (v["trials"].get_array().get(list) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(fmt::format("{}: variants[{}].trials missing", path, index));
  }
  absl::Status status;
  size_t k = 0;
  for (element e : list) {
    simdjson::dom::object object;
    const std::string where = fmt::format("variants[{}].trials[{}]", index, k++);
    if (e.get_object().get(object) != simdjson::SUCCESS) {
      return absl::InvalidArgumentError(fmt::format("{}: {} is not an object", path, where));
    }
    Trial t;
    t.variant = index;
    ground::json_fields::Reader reader(object, where, path, &status);
    experiment_fields::DescribeTrial(t, reader);
    if (!status.ok()) return status;
    trials->push_back(std::move(t));
  }
  return absl::OkStatus();
}

// Sorts the trials into run order, which must be 0 to n - 1. Errors:
// InvalidArgument naming `path`.
absl::Status SortIntoRunOrder(const std::string& path, std::vector<Trial>* trials) {
  std::sort(trials->begin(), trials->end(),
            [](const Trial& a, const Trial& b) { return a.order < b.order; });
  for (size_t k = 0; k < trials->size(); ++k) {
    if ((*trials)[k].order != static_cast<int>(k)) {
      return absl::InvalidArgumentError(
          fmt::format("{}: trial orders are not 0 to {}", path, trials->size() - 1));
    }
  }
  return absl::OkStatus();
}

absl::Status Malformed(const std::string& path, std::string_view field) {
  return absl::InvalidArgumentError(fmt::format("{}: {}: missing or malformed", path, field));
}

// The verdict object of an experiment.json of schema_version 1. Errors:
// InvalidArgument naming `path` for another file or schema.
absl::StatusOr<simdjson::dom::object> VerdictOfSchema1(element root, const std::string& path) {
  int64_t schema = 0;
  simdjson::dom::object verdict;
  if (root["schema_version"].get_int64().get(schema) != simdjson::SUCCESS ||
      root["verdict"].get_object().get(verdict) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(fmt::format("{}: not an experiment.json", path));
  }
  if (schema != 1) {
    return absl::InvalidArgumentError(
        fmt::format("{}: schema_version {}: this trainscope reads 1", path, schema));
  }
  return verdict;
}

// The spec as recorded: the hypothesis, the "spec" object and the
// variants. The command, the objective (which decides which way is
// better) and the rollback limits are required: without them it is a
// damaged file, not an older one. Errors: InvalidArgument naming `path`
// and the field.
absl::Status ReadRecordedSpec(element root, const std::string& path, ExperimentSpec* spec) {
  std::string_view hypothesis;
  if (root["hypothesis"].get_string().get(hypothesis) != simdjson::SUCCESS) {
    return Malformed(path, "hypothesis");
  }
  spec->hypothesis = std::string(hypothesis);
  simdjson::dom::object spec_object;
  if (root["spec"].get_object().get(spec_object) != simdjson::SUCCESS) {
    return Malformed(path, "spec");
  }
  absl::Status status;
  ground::json_fields::Reader spec_reader(spec_object, "spec", path, &status);
  experiment_fields::DescribeSpec(*spec, spec_reader);
  if (!status.ok()) return status;
  simdjson::dom::array list;
  if (root["variants"].get_array().get(list) != simdjson::SUCCESS) {
    return Malformed(path, "variants");
  }
  size_t index = 0;
  for (element v : list) {
    simdjson::dom::object object;
    std::string_view name;
    if (v.get_object().get(object) != simdjson::SUCCESS ||
        object["name"].get_string().get(name) != simdjson::SUCCESS) {
      return Malformed(path, "variants[].name");
    }
    VariantSpec& variant = spec->variants.emplace_back();
    ground::json_fields::Reader reader(object, fmt::format("variants[{}]", index++), path, &status);
    experiment_fields::DescribeVariant(variant, false, reader);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

// The record's verdict: whether the run completed, the variant accepted,
// the reason.
void ReadVerdict(element root, simdjson::dom::object verdict, ExperimentRecord* record) {
  bool complete = false;
  if (root["complete"].get_bool().get(complete) == simdjson::SUCCESS) record->complete = complete;
  std::string_view text;
  if (verdict["accepted"].get_string().get(text) == simdjson::SUCCESS) {
    record->accepted = std::string(text);
  }
  if (verdict["reason"].get_string().get(text) == simdjson::SUCCESS) {
    record->reason = std::string(text);
  }
}

// The environment object `e`, flattened into `out` as "key" (objects
// nested as "quality.target", "config.k") and its value as text.
void FlattenEnvironment(element e, const std::string& prefix,
                        std::vector<std::pair<std::string, std::string>>* out) {
  simdjson::dom::object object;
  if (e.get_object().get(object) != simdjson::SUCCESS) return;
  for (auto field : object) {
    const std::string key = prefix + std::string(field.key);
    switch (field.value.type()) {
      case simdjson::dom::element_type::OBJECT:
        FlattenEnvironment(field.value, key + ".", out);
        break;
      case simdjson::dom::element_type::STRING:
        out->emplace_back(key, std::string(std::string_view(field.value)));
        break;
      case simdjson::dom::element_type::NULL_VALUE:
        out->emplace_back(key, "null");
        break;
      default:
        out->emplace_back(key, simdjson::minify(field.value));
    }
  }
}

// "variants": each variant's fields and its trials, in run order.
void WriteVariants(ground::JsonWriter& j, const ExperimentSpec& spec,
                   const std::vector<Trial>& trials) {
  ground::json_fields::Writer writer(&j);
  j.Key("variants").BeginArray();
  for (size_t v = 0; v < spec.variants.size(); ++v) {
    j.BeginObject();
    experiment_fields::DescribeVariant(spec.variants[v], v == 0, writer);
    j.Key("trials").BeginArray();
    for (const Trial& t : trials) {
      if (t.variant != static_cast<int>(v)) continue;
      j.BeginObject();
      experiment_fields::DescribeTrial(t, writer);
      j.EndObject();
    }
    j.EndArray();
    j.EndObject();
  }
  j.EndArray();
}

// "verdict": the variant accepted, the reason, and each comparison.
void WriteVerdict(ground::JsonWriter& j, const Verdict& verdict) {
  j.Key("verdict").BeginObject();
  if (verdict.accepted) {
    j.Key("accepted").String(*verdict.accepted);
  } else {
    j.Key("accepted").Null();
  }
  j.Key("reason").String(verdict.reason);
  j.Key("comparisons").BeginArray();
  for (const Comparison& c : verdict.comparisons) {
    j.BeginObject();
    j.Key("variant").String(c.variant);
    j.Key("ratio").Number(c.ratio);
    j.Key("ci_low").Number(c.ci_low);
    j.Key("ci_high").Number(c.ci_high);
    j.Key("p_value").Number(c.p_value);
    j.Key("p_adjusted").Number(c.p_adjusted);
    j.Key("trials").Int(c.trials);
    j.Key("failures").Int(c.failures);
    j.Key("clears_threshold").Bool(c.clears_threshold);
    j.Key("rollbacks").BeginArray();
    for (const std::string& r : c.rollbacks) j.String(r);
    j.EndArray();
    j.Key("accepted").Bool(c.accepted);
    j.Key("reason").String(c.reason);
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
}

// "curves": the training-curve check per variant; null without one.
void WriteCurves(ground::JsonWriter& j, const ExperimentSpec& spec,
                 const std::vector<CurveCheck>& curves) {
  j.Key("curves");
  if (spec.curve.file.empty()) {
    j.Null();
    return;
  }
  j.BeginArray();
  for (const CurveCheck& c : curves) {
    j.BeginObject();
    j.Key("variant").String(c.variant);
    j.Key("trials").Int(c.trials);
    j.Key("windows").Int(c.windows);
    j.Key("outside").Int(c.outside);
    j.Key("first_outside_step");
    if (c.first_outside_step < 0) {
      j.Null();
    } else {
      j.Int(c.first_outside_step);
    }
    j.Key("nonfinite").Int(c.nonfinite);
    j.Key("skipped").Int(c.skipped);
    j.Key("flagged").Bool(c.flagged);
    j.EndObject();
  }
  j.EndArray();
}

// "preset": the configuration to keep and why.
void WritePreset(ground::JsonWriter& j, const Preset& p) {
  j.Key("preset").BeginObject();
  j.Key("variant").String(p.variant);
  j.Key("changed").Bool(p.changed);
  j.Key("justified_by").String(p.justified_by);
  j.Key("argv").BeginArray();
  for (const std::string& a : p.argv) j.String(a);
  j.EndArray();
  j.Key("env").BeginObject();
  for (const auto& [k, value] : p.env) j.Key(k).String(value);
  j.EndObject();
  j.Key("workload");
  WriteWorkload(j, p.workload);
  j.Key("polyaxon").String(p.polyaxon);
  j.EndObject();
}

}  // namespace

absl::StatusOr<std::vector<Trial>> ReadExperimentTrials(const std::string& path,
                                                        const ExperimentSpec& spec) {
  simdjson::dom::parser parser;
  absl::StatusOr<element> root = ParseFile(path, parser);
  if (!root.ok()) return root.status();
  absl::StatusOr<simdjson::dom::array> variants = VariantsOfSameSpec(*root, path, spec);
  if (!variants.ok()) return variants.status();
  std::vector<Trial> trials;
  int index = 0;
  for (element v : *variants) {
    if (absl::Status s = ReadVariantTrials(v, index++, path, spec, &trials); !s.ok()) return s;
  }
  if (absl::Status s = SortIntoRunOrder(path, &trials); !s.ok()) return s;
  return trials;
}

absl::StatusOr<ExperimentRecord> ReadExperiment(const std::string& path) {
  simdjson::dom::parser parser;
  absl::StatusOr<element> root = ParseFile(path, parser);
  if (!root.ok()) return root.status();
  absl::StatusOr<simdjson::dom::object> verdict = VerdictOfSchema1(*root, path);
  if (!verdict.ok()) return verdict.status();
  ExperimentRecord record;
  if (absl::Status s = ReadRecordedSpec(*root, path, &record.spec); !s.ok()) return s;
  ReadVerdict(*root, *verdict, &record);
  element environment;
  if ((*root)["environment"].get(environment) == simdjson::SUCCESS) {
    FlattenEnvironment(environment, "", &record.environment);
  }
  absl::StatusOr<std::vector<Trial>> trials = ReadExperimentTrials(path, record.spec);
  if (!trials.ok()) return trials.status();
  record.trials = *std::move(trials);
  return record;
}

std::string ExperimentJson(const ExperimentSpec& spec, const ExperimentResult& result) {
  ground::JsonWriter j(ground::JsonWriter::kPretty);
  ground::json_fields::Writer writer(&j);
  j.BeginObject();
  j.Key("schema_version").Int(1);
  j.Key("hypothesis").String(spec.hypothesis);
  j.Key("complete").Bool(result.complete);
  j.Key("gpu_covariates").String(result.gpu_covariates);
  j.Key("environment");  // the baseline record of the baseline's first successful trial
  WriteWorkload(j, result.baseline);
  j.Key("spec").BeginObject();
  experiment_fields::DescribeSpec(spec, writer);
  j.EndObject();
  WriteVariants(j, spec, result.trials);
  WriteVerdict(j, result.verdict);
  WriteCurves(j, spec, result.curves);
  WritePreset(j, result.preset);
  j.EndObject();
  std::string out = j.Take();
  out.push_back('\n');
  return out;
}

}  // namespace trainscope::tuning
