// `trainscope tune`: experiments built from the user's own command. See
// tune.h. Here: the checks of the command, amp, and the parts every
// subcommand shares (tune_parts.h); batch is tune_batch.cc, the loader and
// its knee tune_loader.cc, the co-load tune_coload.cc.
#include "sdk/tuning/tune.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "fmt/format.h"
#include "sdk/tuning/objectives.h"
#include "sdk/tuning/statistics.h"
#include "sdk/tuning/tune_parts.h"

namespace trainscope::tuning {

namespace tune_parts {

absl::Status Bad(const TuneOptions& o, const std::string& what) {
  return absl::InvalidArgumentError(fmt::format("tune {}: {}", o.subcommand, what));
}

ExperimentSpec BaseSpec(const TuneOptions& o) {
  ExperimentSpec spec;
  spec.command = o.command;
  spec.trial_timeout_s = o.trial_timeout_s;
  spec.threshold = o.threshold;
  spec.seed = o.seed;
  return spec;
}

int Repeats(const TuneOptions& o, size_t variants, int floor) {
  if (o.repeats > 0) return o.repeats;
  return std::max(floor, MinimumRepeats(static_cast<int>(variants) - 1, VerdictOptions().alpha));
}

double MedianOf(const std::vector<Trial>& trials, int variant,
                const std::function<std::optional<double>(const Trial&)>& field, bool failed_too,
                double failed_value) {
  std::vector<double> values;
  for (const Trial& t : trials) {
    if (t.variant != variant) continue;
    if (t.failed) {
      if (failed_too) values.push_back(failed_value);
      continue;
    }
    if (std::optional<double> v = field(t)) values.push_back(*v);
  }
  return Median(values);  // NaN for none
}

}  // namespace tune_parts

using tune_parts::Bad;
using tune_parts::BaseSpec;
using tune_parts::Repeats;

namespace {

bool IdentifierChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

std::string Braced(const std::string& name) { return "{" + name + "}"; }

// argv[0] as execvp would find it: itself when it has a '/', else the
// first PATH entry holding it. "" when none does.
std::string FindProgram(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    const std::string candidate =
        (dir.empty() ? std::string(".") : std::string(dir)) + "/" + program;
    struct stat st = {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;  // as execvp chooses: the first executable file
    }
  }
  return "";
}

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : i + 1 < names.size() ? ", " : " and ") + Braced(names[i]);
  }
  return out;
}

}  // namespace

std::vector<std::string> Placeholders(const std::vector<std::string>& command) {
  std::vector<std::string> found;
  for (const std::string& arg : command) {
    for (size_t open = arg.find('{'); open != std::string::npos; open = arg.find('{', open + 1)) {
      size_t end = open + 1;
      while (end < arg.size() && IdentifierChar(arg[end])) ++end;
      if (end == open + 1 || end >= arg.size() || arg[end] != '}') continue;
      std::string name = arg.substr(open + 1, end - open - 1);
      if (name[0] >= '0' && name[0] <= '9') continue;
      if (std::find(found.begin(), found.end(), name) == found.end()) found.push_back(name);
    }
  }
  return found;
}

absl::Status CheckCommand(const TuneOptions& o, const std::vector<std::string>& required,
                          const std::vector<std::string>& optional) {
  std::vector<std::string> known = required;
  known.insert(known.end(), optional.begin(), optional.end());
  known.emplace_back("out");
  known.emplace_back("repeat");
  if (o.command.empty() || o.command[0].empty()) {
    return Bad(o, fmt::format("no command: give the program to tune after --, with {} where it "
                              "takes the value (trainscope tune {} [flags] -- ./train {}=...)",
                              Join(required), o.subcommand,
                              required.empty() ? "--flag" : "--" + required[0]));
  }
  const std::vector<std::string> found = Placeholders(o.command);
  for (const std::string& name : found) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return Bad(o, fmt::format("the command has {}, which is not a placeholder of tune {} "
                                "(it knows {})",
                                Braced(name), o.subcommand, Join(known)));
    }
  }
  for (const std::string& name : required) {
    if (std::find(found.begin(), found.end(), name) == found.end()) {
      return Bad(o, fmt::format("the command has no {}: put it where your program takes that "
                                "value (for example --{}={}); each trial gets its own",
                                Braced(name), name, Braced(name)));
    }
  }
  const std::string program = FindProgram(o.command[0]);
  struct stat st = {};
  if (program.empty() || stat(program.c_str(), &st) != 0) {
    return Bad(o, fmt::format("{}: no such program{}", o.command[0],
                              o.command[0].find('/') == std::string::npos ? " on PATH" : ""));
  }
  if (S_ISDIR(st.st_mode) || access(program.c_str(), X_OK) != 0) {
    return Bad(o, fmt::format("{}: not an executable program", o.command[0]));
  }
  return absl::OkStatus();
}

// ---- amp -------------------------------------------------------------

absl::StatusOr<ExperimentSpec> AmpSpec(const TuneOptions& o, const AmpOptions& amp) {
  if (absl::Status s = CheckCommand(o, {"precision"}, {}); !s.ok()) return s;
  if (amp.precisions.empty()) return Bad(o, "--precisions: give at least one precision to try");
  ExperimentSpec spec = BaseSpec(o);
  spec.variants.push_back({amp.baseline, {}, {}, {{"precision", amp.baseline}}});
  for (const std::string& p : amp.precisions) {
    if (p.empty() || p.find_first_of(" /{}") != std::string::npos) {
      return Bad(o, fmt::format("--precisions: \"{}\" is not a name", p));
    }
    std::string name = p == amp.baseline ? p + "-aa" : p;
    for (const VariantSpec& v : spec.variants) {
      if (v.name == name) return Bad(o, fmt::format("--precisions: {} is named twice", p));
    }
    spec.variants.push_back({name, {}, {}, {{"precision", p}}});
  }
  spec.hypothesis =
      fmt::format("{} reach{} the quality target sooner than {}, with {} loss curve",
                  absl::StrJoin(amp.precisions, " or "), amp.precisions.size() > 1 ? "" : "es",
                  amp.baseline, amp.precisions.size() > 1 ? "the same" : "the same");
  spec.objective = ObjectiveId::kTimeToTarget;
  spec.repeats = Repeats(o, spec.variants.size(), 5);
  spec.curve.file = "loss.jsonl";  // Session::RecordLoss's
  spec.curve.value = "loss";
  spec.curve.window_steps = amp.curve_window;
  spec.notes = {{"baseline", amp.baseline},
                {"curve", "Session::RecordLoss's loss.jsonl against the baseline seeds' band"},
                {"seed", "{repeat}: repeat k of every precision sees seed k"}};
  if (absl::Status s = CheckSpec(spec, "tune amp"); !s.ok()) return s;
  return spec;
}

}  // namespace trainscope::tuning
