// `trainscope tune loader`: the sweep of loader settings, its knee, the
// table, the co-load verdict and the knee's JSON. See tune.h.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "fmt/format.h"
#include "sdk/ground/json_fields.h"
#include "sdk/ground/json_writer.h"
#include "sdk/tuning/objectives.h"
#include "sdk/tuning/tune.h"
#include "sdk/tuning/tune_parts.h"

namespace trainscope::tuning {

using tune_parts::Bad;
using tune_parts::BaseSpec;
using tune_parts::kInf;
using tune_parts::MedianOf;
using tune_parts::Repeats;

absl::StatusOr<ExperimentSpec> LoaderSpec(const TuneOptions& o, const LoaderOptions& l) {
  if (absl::Status s = CheckCommand(o, {"workers"}, {"prefetch", "pin"}); !s.ok()) return s;
  const std::vector<std::string> found = Placeholders(o.command);
  const bool with_prefetch = std::find(found.begin(), found.end(), "prefetch") != found.end();
  const bool with_pin = std::find(found.begin(), found.end(), "pin") != found.end();
  if (l.workers.empty()) return Bad(o, "--workers: give the worker counts to try");
  if (with_prefetch && l.prefetch.empty()) return Bad(o, "--prefetch: give the depths to try");
  if (with_pin && l.pin.empty()) return Bad(o, "--pin: give 0, 1 or 0,1");
  for (int w : l.workers) {
    if (w < 0) return Bad(o, fmt::format("--workers: {} is negative", w));
  }
  for (int p : l.prefetch) {
    if (p < 1) return Bad(o, fmt::format("--prefetch: {} is below 1", p));
  }
  for (int p : l.pin) {
    if (p != 0 && p != 1) return Bad(o, fmt::format("--pin: {} is not 0 (off) or 1 (on)", p));
  }
  // The loader's objectives: the time to the target, or the throughput.
  const Objective* objective = FindObjective(l.objective);
  if (objective == nullptr || (objective->id != ObjectiveId::kTimeToTarget &&
                               objective->id != ObjectiveId::kSteadySamplesPerS)) {
    return Bad(o, fmt::format("--objective={}: expected {} or {}", l.objective,
                              ObjectiveInfo(ObjectiveId::kTimeToTarget).name,
                              ObjectiveInfo(ObjectiveId::kSteadySamplesPerS).name));
  }
  std::vector<int> workers = l.workers, prefetch = with_prefetch ? l.prefetch : std::vector<int>{0},
                   pin = with_pin ? l.pin : std::vector<int>{0};
  for (std::vector<int>* list : {&workers, &prefetch, &pin}) {
    std::sort(list->begin(), list->end());
    list->erase(std::unique(list->begin(), list->end()), list->end());
  }
  ExperimentSpec spec = BaseSpec(o);
  for (int w : workers) {
    for (int p : prefetch) {
      for (int pinned : pin) {
        VariantSpec v;
        v.name = with_prefetch ? fmt::format("w{}p{}", w, p) : fmt::format("w{}", w);
        if (pinned == 1 && pin.size() > 1) v.name += "-pin";
        v.values.emplace_back("workers", std::to_string(w));
        if (with_prefetch) v.values.emplace_back("prefetch", std::to_string(p));
        if (with_pin) v.values.emplace_back("pin", std::to_string(pinned));
        spec.variants.push_back(std::move(v));
      }
    }
  }
  if (spec.variants.size() < 2) return Bad(o, "--workers/--prefetch: give two settings or more");
  spec.objective = objective->id;
  spec.hypothesis =
      fmt::format("more loader workers{}{} {} than {}, up to a knee past which they do not pay",
                  with_prefetch ? " or a deeper prefetch" : "",
                  with_pin && pin.size() > 1 ? " or pinned batches" : "",
                  objective->id == ObjectiveId::kTimeToTarget ? "reach the quality target sooner"
                                                              : "give a higher steady throughput",
                  spec.variants[0].name);
  spec.repeats = Repeats(o, spec.variants.size(), 4);
  // Workers make single steps jitter (a batch a moment late) while the
  // throughput doubles, and hold batches in memory by design: the tail and
  // the memory are not rollbacks here; --max_rss_mb bounds the memory.
  spec.rollback.p99_step_time = 10;
  spec.rollback.peak_memory = 10;
  spec.notes = {{"knee",
                 "the fewest workers (then the shallowest prefetch) within the threshold "
                 "of the best setting"},
                {"rollback",
                 "p99 step time and peak memory are not rollbacks (workers add "
                 "jitter and hold batches by design); --max_rss_mb bounds memory"}};
  if (absl::Status s = CheckSpec(spec, "tune loader"); !s.ok()) return s;
  return spec;
}

namespace {

// Setting `v`'s row, less the verdict: its {workers}, {prefetch} and
// {pin}, its trials and failures, and its medians (a failed trial counts
// as the worst objective; `lower`: lower is better).
LoaderRow SettingRow(const ExperimentSpec& spec, const std::vector<Trial>& trials, size_t v,
                     bool lower) {
  const VariantSpec& vs = spec.variants[v];
  LoaderRow r;
  r.variant = vs.name;
  for (const auto& [name, value] : vs.values) {
    int n = 0;
    if (!absl::SimpleAtoi(value, &n)) continue;
    if (name == "workers") r.workers = n;
    if (name == "prefetch") r.prefetch = n;
    if (name == "pin") r.pin = n == 1;
  }
  const int vi = static_cast<int>(v);
  for (const Trial& t : trials) {
    if (t.variant != vi) continue;
    ++r.trials;
    r.failures += t.failed;
  }
  r.objective = MedianOf(
      trials, vi, [&](const Trial& t) { return ObjectiveValue(spec.objective, t); }, true,
      lower ? kInf : 0);
  r.data_wait_share = MedianOf(
      trials, vi, [](const Trial& t) { return t.data_wait_share; }, false, 0);
  r.cpu_s = MedianOf(
      trials, vi, [](const Trial& t) { return t.cpu_s; }, false, 0);
  const double peak = MedianOf(
      trials, vi, [](const Trial& t) { return t.peak_memory_bytes; }, false, 0);
  r.peak_rss_mb = std::isnan(peak) ? 0 : peak / (1 << 20);
  return r;
}

// The verdict on a setting (`c`, its comparison with `baseline`): whether
// it is accepted, and why it cannot be the knee when it cannot.
void JudgeSetting(const Comparison& c, const LoaderRow& baseline, const LoaderOptions& l,
                  bool lower, LoaderRow* r) {
  const bool clear = c.clears_threshold && c.p_adjusted < VerdictOptions().alpha;
  r->accepted = clear && c.rollbacks.empty();
  const double gain = lower ? 1 - c.ratio : c.ratio - 1;
  const double width = c.ci_high - c.ci_low;
  if (c.failures > 0 && c.failures > baseline.failures) {
    r->rejected = fmt::format("more failures ({} of {})", c.failures, c.trials);
  } else if (l.max_rss_mb > 0 && r->peak_rss_mb > static_cast<double>(l.max_rss_mb)) {
    r->rejected =
        fmt::format("peak memory {:.0f} MiB past --max_rss_mb={}", r->peak_rss_mb, l.max_rss_mb);
  } else if (clear && width > gain) {
    r->rejected = fmt::format("unstable: its interval ({:.3f} to {:.3f}) is wider than its gain",
                              c.ci_low, c.ci_high);
  } else if (!c.rollbacks.empty()) {
    r->rejected = c.rollbacks.front();
  } else if (!r->accepted) {
    r->rejected = "no gain beyond the noise";
  }
}

// The best eligible row: the baseline unless a setting not rejected does
// better.
int BestSetting(const std::vector<LoaderRow>& rows, bool lower) {
  auto better = [&](double a, double b) { return lower ? a < b : a > b; };
  int best = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].rejected.empty() &&
        better(rows[i].objective, rows[static_cast<size_t>(best)].objective)) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

// The first row, in the spec's order (the least first), not rejected and
// within `threshold` of the best's objective; the baseline when none is.
int Knee(const std::vector<LoaderRow>& rows, int best, double threshold, bool lower) {
  const double best_objective = rows[static_cast<size_t>(best)].objective;
  const double bound = lower ? best_objective * (1 + threshold) : best_objective * (1 - threshold);
  for (size_t i = 0; i < rows.size(); ++i) {
    const LoaderRow& r = rows[i];
    if (!r.rejected.empty()) continue;
    if (lower ? r.objective <= bound : r.objective >= bound) return static_cast<int>(i);
  }
  return 0;
}

// The knee's sentence.
std::string KneeReason(const LoaderKnee& k, double threshold, bool lower) {
  const LoaderRow& knee = k.rows[static_cast<size_t>(k.knee)];
  const LoaderRow& base = k.rows[0];
  if (k.knee == 0) {
    return fmt::format(
        "the knee is {}: no setting gains beyond the noise and the {:g}% "
        "threshold; more workers cost CPU and memory for nothing here",
        base.variant, 100 * threshold);
  }
  const double gain = lower ? base.objective / knee.objective : knee.objective / base.objective;
  return fmt::format("the knee is {}: {:.2f}x {}'s {}, within {:g}% of the best ({}){}",
                     knee.variant, gain, base.variant, lower ? "speed to target" : "throughput",
                     100 * threshold, k.rows[static_cast<size_t>(k.best)].variant,
                     k.best != k.knee ? "; the larger settings add CPU and memory, not speed" : "");
}

}  // namespace

LoaderKnee FindKnee(const ExperimentSpec& spec, const ExperimentResult& result,
                    const LoaderOptions& l) {
  const bool lower = spec.lower_is_better();
  const std::vector<Comparison>& comparisons = result.verdict.comparisons;
  LoaderKnee k;
  for (size_t v = 0; v < spec.variants.size(); ++v) {
    LoaderRow r = SettingRow(spec, result.trials, v, lower);
    if (v == 0) {
      r.accepted = true;  // the baseline is always a candidate
    } else if (v - 1 < comparisons.size()) {
      JudgeSetting(comparisons[v - 1], k.rows[0], l, lower, &r);
    }
    k.rows.push_back(r);
  }
  k.best = BestSetting(k.rows, lower);
  k.knee = Knee(k.rows, k.best, spec.threshold, lower);
  k.reason = KneeReason(k, spec.threshold, lower);
  return k;
}

std::string LoaderTable(const ExperimentSpec& spec, const LoaderKnee& k) {
  // A rate's unit heads its column; a time's name does, with its unit in
  // each cell.
  const Objective& objective = ObjectiveInfo(spec.objective);
  const bool rate = !objective.lower_is_better;
  std::string out = fmt::format("\n  {:<8} {:>16} {:>10} {:>8} {:>9} {:>9}  {}\n", "setting",
                                rate ? objective.unit : objective.label, "input wait", "CPU s",
                                "peak MiB", "failures", "");
  for (size_t i = 0; i < k.rows.size(); ++i) {
    const LoaderRow& r = k.rows[i];
    std::string note = static_cast<int>(i) == k.knee ? "<- knee" : "";
    if (static_cast<int>(i) == k.best && k.best != k.knee) note = "best";
    if (!r.rejected.empty()) note = "rejected: " + r.rejected;
    const std::string value = !std::isfinite(r.objective) || r.objective == 0
                                  ? std::string("never")
                                  : (rate ? fmt::format("{:.{}f}", r.objective, objective.decimals)
                                          : ObjectiveText(spec.objective, r.objective));
    out += fmt::format("  {:<8} {:>16} {:>9.1f}% {:>8.2f} {:>9.1f} {:>5} of {}  {}\n", r.variant,
                       value, 100 * r.data_wait_share, r.cpu_s, r.peak_rss_mb, r.failures, r.trials,
                       note);
  }
  out += "\n" + k.reason + "\n";
  return out;
}

std::string CoLoadVerdict(const LoaderKnee& quiet, const LoaderKnee& loaded,
                          ObjectiveId objective) {
  const bool lower = ObjectiveInfo(objective).lower_is_better;
  // The gain is what the best setting adds over the baseline, in the
  // objective's units (samples/s, or seconds to target saved): on a shared
  // host extra workers take their CPU from the other jobs, so the ratio to
  // a baseline that suffers too can even grow while the work won shrinks.
  auto added = [&](const LoaderKnee& k) {
    const double base = k.rows[0].objective;
    const double best = k.rows[static_cast<size_t>(k.best)].objective;
    return lower ? base - best : best - base;
  };
  auto ratio = [&](const LoaderKnee& k) {
    const double base = k.rows[0].objective;
    const double best = k.rows[static_cast<size_t>(k.best)].objective;
    return lower ? base / best : best / base;
  };
  const std::string unit = std::string(" ") + ObjectiveInfo(objective).unit;
  const std::string& q = quiet.rows[static_cast<size_t>(quiet.knee)].variant;
  const std::string& c = loaded.rows[static_cast<size_t>(loaded.knee)].variant;
  const double aq = added(quiet), ac = added(loaded);
  if (!std::isfinite(aq) || !std::isfinite(ac)) {
    return fmt::format("{}; no gain to compare: a baseline never reached its result",
                       q == c ? fmt::format("the knee stays at {} under co-load", q)
                              : fmt::format("the knee moved from {} to {} under co-load", q, c));
  }
  const std::string moved = q == c
                                ? fmt::format("the knee stays at {} under co-load", q)
                                : fmt::format("the knee moved from {} to {} under co-load", q, c);
  const std::string numbers = fmt::format(
      "{:+.4g}{} quiet, {:+.4g}{} co-loaded; {:.2f}x and {:.2f}x each sweep's own "
      "baseline",
      aq, unit, ac, unit, ratio(quiet), ratio(loaded));
  const std::string gains =
      ac < aq ? fmt::format(
                    "the best gain shrank by {:.0f}% ({}): a gain measured on a quiet "
                    "host does not hold when other jobs share it",
                    aq > 0 ? 100 * (1 - ac / aq) : 0.0, numbers)
              : fmt::format("the best gain held ({})", numbers);
  return moved + "; " + gains;
}

namespace {

// A loader row's fields in "<output>-knee.json", named once.
template <typename R, typename V>
void DescribeLoaderRow(R& r, V& v) {
  using ground::json_fields::kRequired;
  v.Field("variant", r.variant, kRequired);
  v.Field("workers", r.workers, kRequired);
  v.Field("prefetch", r.prefetch, kRequired);
  v.Field("pin", r.pin, kRequired);
  v.Field("trials", r.trials, kRequired);
  v.Field("failures", r.failures, kRequired);
  v.Field("objective", r.objective, kRequired);  // null: never reached the result
  v.Field("data_wait_share", r.data_wait_share, kRequired);
  v.Field("cpu_s", r.cpu_s, kRequired);
  v.Field("peak_rss_mb", r.peak_rss_mb, kRequired);
  v.Field("accepted", r.accepted, kRequired);
  v.Field("rejected", r.rejected, kRequired);
}

}  // namespace

std::string KneeJson(const ExperimentSpec& spec, const LoaderKnee& quiet, const LoaderKnee* loaded,
                     const std::string& verdict) {
  ground::JsonWriter j(ground::JsonWriter::kPretty);
  ground::json_fields::Writer writer(&j);
  auto knee = [&](const LoaderKnee& k) {
    j.BeginObject();
    j.Key("knee").String(k.rows[static_cast<size_t>(k.knee)].variant);
    j.Key("best").String(k.rows[static_cast<size_t>(k.best)].variant);
    j.Key("reason").String(k.reason);
    writer.Array("settings", k.rows, [&](const LoaderRow& r) { DescribeLoaderRow(r, writer); });
    j.EndObject();
  };
  j.BeginObject();
  j.Key("objective").String(ObjectiveInfo(spec.objective).name);
  j.Key("threshold").Number(spec.threshold);
  j.Key("quiet");
  knee(quiet);
  j.Key("coload");
  if (loaded != nullptr) {
    knee(*loaded);
  } else {
    j.Null();
  }
  j.Key("verdict").String(verdict);
  j.EndObject();
  return j.Take() + "\n";
}

}  // namespace trainscope::tuning
