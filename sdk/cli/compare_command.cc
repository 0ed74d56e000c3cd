// `trainscope compare A B`: run against run, or experiment against
// experiment. Reports are compared side by side; where each side has
// repeats (a directory of runs) the experiment engine's rules give the
// verdict. Experiments are compared variant by variant, with the same
// rules on the trials of each variant, and their environments.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "sdk/cli/commands.h"
#include "sdk/export/report_json.h"
#include "sdk/ground/files.h"
#include "sdk/tuning/experiment.h"
#include "sdk/tuning/statistics.h"
#include "sdk/tuning/verdict.h"

namespace trainscope::cli {
namespace {

namespace fs = std::filesystem;

bool IsReportName(const std::string& name) {
  return name.rfind("report", 0) == 0 && name.size() > 5 &&
         name.compare(name.size() - 5, 5, ".json") == 0;
}

// The report files of a side: the file itself, or the report*.json files in
// a directory and in its subdirectories (one level: an experiment's trials).
std::vector<std::string> ReportFiles(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return {path};
  // ground::ListDir and non-throwing checks: an entry that cannot be read
  // is passed over, not a filesystem_error thrown.
  std::vector<std::string> files;
  const std::string base =
      path.size() > 1 && path.back() == '/' ? path.substr(0, path.size() - 1) : path;
  for (const std::string& name : ground::ListDir(base)) {
    const std::string entry = base + "/" + name;
    if (IsReportName(name) && fs::is_regular_file(entry, ec)) {
      files.push_back(entry);
    } else if (fs::is_directory(entry, ec)) {
      for (const std::string& inner : ground::ListDir(entry)) {
        if (IsReportName(inner) && fs::is_regular_file(entry + "/" + inner, ec)) {
          files.push_back(entry + "/" + inner);
        }
      }
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// What the file is, from its first bytes' keys: an experiment has a verdict.
bool LooksLikeExperiment(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return false;
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return false;
  char head[512] = {};
  const size_t n = std::fread(head, 1, sizeof(head) - 1, f);
  std::fclose(f);
  return std::string(head, n).find("\"hypothesis\"") != std::string::npos;
}

std::optional<double> MedianOf(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  return tuning::Median(values);
}

std::string Text(std::optional<double> v, const char* format) {
  return v ? fmt::format(fmt::runtime(format), *v) : std::string("-");
}

std::string RatioText(std::optional<double> a, std::optional<double> b) {
  if (!a || !b || *a == 0) return "";
  return fmt::format("{:.3f}", *b / *a);
}

// The differences between two flattened records, "key: a -> b" each.
std::vector<std::string> Differences(const std::vector<std::pair<std::string, std::string>>& a,
                                     const std::vector<std::pair<std::string, std::string>>& b) {
  std::map<std::string, std::pair<std::string, std::string>> both;
  for (const auto& [k, v] : a) both[k].first = v;
  for (const auto& [k, v] : b) both[k].second = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : both) {
    if (k == "host" || v.first == v.second) continue;
    out.push_back(fmt::format("{}: {} -> {}", k, v.first.empty() ? "(none)" : v.first,
                              v.second.empty() ? "(none)" : v.second));
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> RecordOf(const Report& r) {
  std::vector<std::pair<std::string, std::string>> out = {
      {"model", r.run.name},
      {"code_version", r.run.code_version},
      {"data_version", r.run.data_version},
      {"world_size", std::to_string(r.run.world_size)},
      {"accelerator", r.environment.accelerator},
      {"accelerator_count", std::to_string(r.environment.accelerator_count)},
      {"cpu_model", r.environment.cpu_model},
      {"os", r.environment.os},
      {"container_image", r.environment.container_image},
      {"trainscope_version", r.environment.trainscope_version},
      {"quality.metric", r.acceptance.metric},
      {"quality.target", r.acceptance.target ? fmt::format("{:g}", *r.acceptance.target) : ""}};
  for (const auto& [k, v] : r.config) out.emplace_back("config." + k, v);
  return out;
}

void PrintDifferences(const std::vector<std::string>& differences, const char* what) {
  if (differences.empty()) {
    std::printf("\n%s: the same on both sides\n", what);
    return;
  }
  std::printf("\n%s, where they differ:\n", what);
  for (const std::string& d : differences) std::printf("  %s\n", d.c_str());
}

// One row of the side-by-side table: a figure of a report, the format of
// its median, and whether B/A is shown.
struct Row {
  const char* name;
  const char* format;
  std::function<std::optional<double>(const Report&)> field;
  bool ratio;
};

// The figures compared, in the table's order.
std::vector<Row> ComparedRows() {
  return {
      {"time to target (s)", "{:.3f}",
       [](const Report& r) { return r.acceptance.time_to_target_s; }, true},
      {"steady samples/s", "{:.1f}",
       [](const Report& r) -> std::optional<double> {
         if (r.throughput.steady_steps == 0) return std::nullopt;
         return r.throughput.steady_samples_per_s;
       },
       true},
      {"median step (ms)", "{:.3f}",
       [](const Report& r) -> std::optional<double> {
         if (r.throughput.steady_steps == 0) return std::nullopt;
         return r.throughput.median_step_ms;
       },
       true},
      {"idle share (%)", "{:.1f}",
       [](const Report& r) { return std::optional(100 * r.idle.share); }, false},
      {"startup (s)", "{:.3f}", [](const Report& r) { return std::optional(r.timing.startup_s); },
       true},
      {"total (s)", "{:.3f}", [](const Report& r) { return std::optional(r.timing.total_s); },
       true},
      {"resource-hours", "{:.5f}", [](const Report& r) { return std::optional(r.resource_hours); },
       true},
      {"peak memory (MiB)", "{:.1f}",
       [](const Report& r) -> std::optional<double> {
         if (r.memory.peak_bytes < 0) return std::nullopt;
         return static_cast<double>(r.memory.peak_bytes) / (1 << 20);
       },
       true},
      {"quality value", "{:.4g}", [](const Report& r) { return r.acceptance.value; }, false},
  };
}

// The runs of each side, read: false (after saying why on stderr) when a
// side has no report or one does not read.
bool ReadSides(const std::string paths[2], std::vector<Report> sides[2]) {
  for (int s = 0; s < 2; ++s) {
    const std::vector<std::string> files = ReportFiles(paths[s]);
    if (files.empty()) {
      std::fprintf(stderr, "trainscope: %s: no report*.json in it or its subdirectories\n",
                   paths[s].c_str());
      return false;
    }
    for (const std::string& file : files) {
      absl::StatusOr<Report> r = exporter::ReadReportFile(file);
      if (!r.ok()) {
        std::fprintf(stderr, "trainscope: %s\n", std::string(r.status().message()).c_str());
        return false;
      }
      sides[s].push_back(*std::move(r));
    }
  }
  return true;
}

// The side-by-side table: each figure's median over a side's runs, B/A,
// the acceptance passed and the most frequent top idle cause.
void PrintSideBySide(const std::vector<Report> sides[2], bool repeats) {
  auto median = [&](int s, const Row& row) {
    std::vector<double> values;
    for (const Report& r : sides[s]) {
      if (std::optional<double> v = row.field(r)) values.push_back(*v);
    }
    return MedianOf(values);
  };
  std::printf("%-22s %16s %16s %8s\n", repeats ? "median over runs" : "", "A", "B", "B/A");
  for (const Row& row : ComparedRows()) {
    const std::optional<double> a = median(0, row), b = median(1, row);
    if (!a && !b) continue;
    std::printf("%-22s %16s %16s %8s\n", row.name, Text(a, row.format).c_str(),
                Text(b, row.format).c_str(), row.ratio ? RatioText(a, b).c_str() : "");
  }
  auto passed = [&](int s) {
    int n = 0;
    for (const Report& r : sides[s]) n += r.acceptance.passed.value_or(false);
    return fmt::format("{} of {}", n, sides[s].size());
  };
  std::printf("%-22s %16s %16s\n", "acceptance passed", passed(0).c_str(), passed(1).c_str());
  auto top_cause = [&](int s) {
    std::map<std::string, int> votes;
    for (const Report& r : sides[s]) ++votes[r.idle.top_cause.empty() ? "-" : r.idle.top_cause];
    return std::max_element(votes.begin(), votes.end(),
                            [](const auto& x, const auto& y) { return x.second < y.second; })
        ->first;
  };
  std::printf("%-22s %16s %16s\n", "top idle cause", top_cause(0).c_str(), top_cause(1).c_str());
}

// With repeats on both sides: the experiment engine's verdict, B against
// A, by time to target when every run has a target, else by steady
// samples/s.
void PrintVerdict(const std::vector<Report> sides[2]) {
  bool targets = true;
  for (int s = 0; s < 2; ++s) {
    for (const Report& r : sides[s]) targets = targets && r.acceptance.target.has_value();
  }
  tuning::VerdictOptions options;
  options.lower_is_better = targets;
  options.objective_name = targets ? "time to target" : "steady samples/s";
  std::vector<tuning::VariantOutcomes> outcomes = {{"A", {}, {}}, {"B", {}, {}}};
  for (int s = 0; s < 2; ++s) {
    for (const Report& r : sides[s]) {
      tuning::TrialOutcome t;
      const std::optional<double> value =
          targets ? r.acceptance.time_to_target_s
                  : (r.throughput.steady_steps > 0
                         ? std::optional<double>(r.throughput.steady_samples_per_s)
                         : std::nullopt);
      t.failed = !value || r.acceptance.passed == false;
      t.objective = value.value_or(0);
      t.resource_hours = r.resource_hours;
      if (r.memory.peak_bytes >= 0) t.peak_memory_bytes = static_cast<double>(r.memory.peak_bytes);
      outcomes[static_cast<size_t>(s)].trials.push_back(t);
    }
  }
  const tuning::Verdict verdict = tuning::Decide(outcomes, options);
  std::printf(
      "\nverdict, B against A by %s (the experiment's rules: %g%% bootstrap interval "
      "of the ratio of medians, rank test, %g%% threshold, rollback conditions):\n  %s\n",
      options.objective_name.c_str(), 100 * options.level, 100 * options.threshold,
      verdict.reason.c_str());
}

int CompareReports(const std::string& a_path, const std::string& b_path) {
  std::vector<Report> sides[2];
  const std::string paths[2] = {a_path, b_path};
  if (!ReadSides(paths, sides)) return kExitBadInput;
  std::printf("trainscope compare: A = %s (%zu run%s), B = %s (%zu run%s)\n\n", a_path.c_str(),
              sides[0].size(), sides[0].size() == 1 ? "" : "s", b_path.c_str(), sides[1].size(),
              sides[1].size() == 1 ? "" : "s");
  const bool repeats = sides[0].size() > 1 && sides[1].size() > 1;
  PrintSideBySide(sides, repeats);
  if (repeats) {
    PrintVerdict(sides);
  } else {
    std::printf(
        "\nOne run on a side: a side-by-side, no verdict. A verdict needs repeats: give a "
        "directory of runs on each side (report*.json in it or its subdirectories), or run "
        "`trainscope experiment`.\n");
  }
  PrintDifferences(Differences(RecordOf(sides[0].front()), RecordOf(sides[1].front())),
                   "the workload (first run of each side)");
  return kExitOk;
}

int CompareExperiments(const std::string& a_path, const std::string& b_path) {
  absl::StatusOr<tuning::ExperimentRecord> sides[2] = {tuning::ReadExperiment(a_path),
                                                       tuning::ReadExperiment(b_path)};
  for (const auto& side : sides) {
    if (!side.ok()) {
      std::fprintf(stderr, "trainscope: %s\n", std::string(side.status().message()).c_str());
      return kExitBadInput;
    }
  }
  const tuning::ExperimentRecord& a = *sides[0];
  const tuning::ExperimentRecord& b = *sides[1];
  std::printf("trainscope compare: A = %s, B = %s\n", a_path.c_str(), b_path.c_str());
  std::printf("hypothesis A: %s\n", a.spec.hypothesis.c_str());
  if (b.spec.hypothesis != a.spec.hypothesis) {
    std::printf("hypothesis B: %s\n", b.spec.hypothesis.c_str());
  }
  if (b.spec.objective != a.spec.objective) {
    std::printf(
        "\nThe objectives differ (A: %s, B: %s): only the verdicts and environments "
        "are compared.\n",
        tuning::ObjectiveInfo(a.spec.objective).name, tuning::ObjectiveInfo(b.spec.objective).name);
  }
  std::printf("\nverdict A%s: %s\nverdict B%s: %s\n", a.complete ? "" : " (incomplete)",
              a.reason.c_str(), b.complete ? "" : " (incomplete)", b.reason.c_str());
  const bool same_objective = b.spec.objective == a.spec.objective;
  if (same_objective) {
    const std::vector<tuning::VariantOutcomes> oa = tuning::Outcomes(a.spec, a.trials);
    const std::vector<tuning::VariantOutcomes> ob = tuning::Outcomes(b.spec, b.trials);
    const tuning::VerdictOptions options = tuning::VerdictOptionsOf(a.spec);
    std::printf("\n%s per variant, B against A (the same rules on each variant's trials):\n",
                options.objective_name.c_str());
    std::printf("  %-14s %14s %14s %24s %8s\n", "variant", "A median", "B median", "B/A [interval]",
                "p");
    for (const tuning::VariantOutcomes& va : oa) {
      auto match = std::find_if(ob.begin(), ob.end(), [&](const tuning::VariantOutcomes& v) {
        return v.name == va.name;
      });
      auto median = [&](const tuning::VariantOutcomes& v) {
        return MedianOf(tuning::ObjectiveValues(v, options.lower_is_better));
      };
      if (match == ob.end()) {
        std::printf("  %-14s %14s %14s\n", va.name.c_str(), Text(median(va), "{:.4g}").c_str(),
                    "(not in B)");
        continue;
      }
      tuning::VariantOutcomes left = va, right = *match;
      left.name = "A";
      right.name = "B";
      const tuning::Verdict v = tuning::Decide({left, right}, options);
      const tuning::Comparison& c = v.comparisons.front();
      std::printf("  %-14s %14s %14s %24s %8.3g  %s\n", va.name.c_str(),
                  Text(median(va), "{:.4g}").c_str(), Text(median(*match), "{:.4g}").c_str(),
                  fmt::format("{:.3f} [{:.3f}, {:.3f}]", c.ratio, c.ci_low, c.ci_high).c_str(),
                  c.p_value,
                  c.accepted           ? "B better beyond the noise"
                  : c.clears_threshold ? "B better, but a rollback condition"
                  : (options.lower_is_better ? c.ci_low >= 1 + options.threshold
                                             : c.ci_high <= 1 - options.threshold)
                      ? "B worse beyond the noise"
                      : "no difference beyond the noise");
    }
    for (const tuning::VariantOutcomes& vb : ob) {
      if (std::none_of(oa.begin(), oa.end(),
                       [&](const tuning::VariantOutcomes& v) { return v.name == vb.name; })) {
        std::printf("  %-14s %14s\n", vb.name.c_str(), "(only in B)");
      }
    }
  }
  PrintDifferences(Differences(a.environment, b.environment),
                   "the environment (each experiment's baseline record)");
  return kExitOk;
}

}  // namespace

int RunCompare(const std::vector<std::string>& args) {
  if (args.size() != 2) {
    std::fprintf(stderr,
                 "usage: trainscope compare A B   (two report.json files, two directories of "
                 "runs, or two experiment.json files)\n");
    return kExitUsage;
  }
  for (const std::string& path : args) {
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      std::fprintf(stderr, "trainscope: %s: no such file or directory\n", path.c_str());
      return kExitBadInput;
    }
  }
  const bool ea = LooksLikeExperiment(args[0]), eb = LooksLikeExperiment(args[1]);
  if (ea != eb) {
    std::fprintf(stderr, "trainscope: compare needs two of a kind: %s is %s, %s is %s\n",
                 args[0].c_str(), ea ? "an experiment" : "a report (or runs)", args[1].c_str(),
                 eb ? "an experiment" : "a report (or runs)");
    return kExitUsage;
  }
  return ea ? CompareExperiments(args[0], args[1]) : CompareReports(args[0], args[1]);
}

}  // namespace trainscope::cli
