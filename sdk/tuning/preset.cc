// The configuration an experiment keeps, with the workload it was measured
// on, and its Polyaxon preset. See experiment.h.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_replace.h"
#include "fmt/format.h"
#include "sdk/export/report_json.h"
#include "sdk/ground/json_writer.h"
#include "sdk/tuning/experiment.h"

namespace trainscope::tuning {
namespace {

// A YAML double-quoted scalar (JSON string syntax is valid YAML).
std::string Yaml(std::string_view text) {
  std::string out;
  ground::AppendJsonString(&out, text);
  return out;
}

}  // namespace

// The workload of variant `v`'s first successful trial, if any.
std::optional<Workload> WorkloadOf(const std::vector<Trial>& trials, int v) {
  for (const Trial& t : trials) {
    if (t.variant != v || t.failed) continue;
    absl::StatusOr<Report> r = exporter::ReadReportFile(t.output_dir + "/report.json");
    if (!r.ok()) continue;
    Workload w;
    w.model = r->run.name;
    w.code_version = r->run.code_version;
    w.data_version = r->run.data_version;
    w.host = r->run.host;
    w.world_size = r->run.world_size;
    w.accelerator = r->environment.accelerator;
    w.accelerator_count = r->environment.accelerator_count;
    w.cpu_model = r->environment.cpu_model;
    w.os = r->environment.os;
    w.container_image = r->environment.container_image;
    w.trainscope_version = r->environment.trainscope_version;
    w.quality_metric = r->acceptance.metric;
    w.quality_target = r->acceptance.target;
    w.higher_is_better = r->acceptance.higher_is_better;
    w.config = r->config;
    for (const auto& [k, value] : r->config) {
      if (k == "batch_size") w.batch_size = value;
    }
    return w;
  }
  return std::nullopt;
}

Preset MakePreset(const ExperimentSpec& spec, const std::vector<Trial>& trials,
                  const Verdict& verdict) {
  Preset p;
  int chosen = 0;
  for (size_t v = 0; v < spec.variants.size(); ++v) {
    if (verdict.accepted && spec.variants[v].name == *verdict.accepted) {
      chosen = static_cast<int>(v);
    }
  }
  const VariantSpec& v = spec.variants[static_cast<size_t>(chosen)];
  p.variant = v.name;
  p.changed = chosen != 0;
  p.justified_by = verdict.reason;
  p.argv = TrialArgv(spec, v, "{out}", /*repeat=*/0);  // a seed: the first round's
  p.env = v.env;
  p.workload = WorkloadOf(trials, chosen);
  p.polyaxon = PolyaxonPreset(spec, p);
  return p;
}

std::string PolyaxonPreset(const ExperimentSpec& spec, const Preset& preset) {
  auto polyaxon_arg = [](std::string arg) {
    for (size_t at = arg.find("{out}"); at != std::string::npos; at = arg.find("{out}", at)) {
      arg.replace(at, 5, "{{ globals.run_outputs_path }}");
    }
    return Yaml(arg);
  };
  std::string y = fmt::format("# trainscope experiment preset: {}\n# hypothesis: {}\n",
                              preset.variant, spec.hypothesis);
  y += "# " + preset.justified_by + "\n";
  if (preset.workload) {
    const Workload& w = *preset.workload;
    const std::string on = w.accelerator_count > 0
                               ? fmt::format("{} x {}", w.accelerator_count, w.accelerator)
                               : fmt::format("CPU only ({})", w.accelerator);
    y += fmt::format("# workload: {} ({}), data {}, {}, batch size {}, world size {}\n", w.model,
                     w.code_version, w.data_version, on,
                     w.batch_size.empty() ? "unstated" : w.batch_size, w.world_size);
  }
  y += "version: 1.1\nkind: operation\nisPreset: true\npatchStrategy: post_merge\n";
  y += "runPatch:\n  container:\n";
  if (!preset.argv.empty()) y += "    command: [" + Yaml(preset.argv[0]) + "]\n";
  y += "    args: [";
  for (size_t i = 1; i < preset.argv.size(); ++i) {
    y += (i > 1 ? ", " : "") + polyaxon_arg(preset.argv[i]);
  }
  y += "]\n";
  if (!preset.env.empty()) {
    y += "    env:\n";
    for (const auto& [k, value] : preset.env) {
      y += "      - name: " + Yaml(k) + "\n        value: " + Yaml(value) + "\n";
    }
  }
  return y;
}

}  // namespace trainscope::tuning
