#include "sdk/tuning/curves.h"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>

#include "fmt/format.h"

namespace trainscope::tuning {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Windows past this are not kept: a curve of more steps than this many
// windows' worth is checked over its first kMaxWindows windows.
constexpr size_t kMaxWindows = 1 << 20;

}  // namespace

absl::StatusOr<TrialCurve> ReadCurve(const std::string& path, const CurveSpec& spec) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(fmt::format("{}: no curve file", path));
  TrialCurve curve;
  std::vector<double> sums;
  std::vector<int64_t> counts;
  simdjson::dom::parser parser;
  std::string line;
  int64_t number = 0;
  const int64_t window = std::max<int64_t>(1, spec.window_steps);
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    const bool last_without_newline = in.eof();
    auto bad = [&](std::string_view what) -> absl::Status {
      return absl::InvalidArgumentError(fmt::format("{}:{}: {}", path, number, what));
    };
    simdjson::dom::element row;
    if (parser.parse(line).get(row) != simdjson::SUCCESS || !row.is_object()) {
      if (last_without_newline) break;  // cut short by a crash
      return bad("not a JSON object");
    }
    int64_t step = 0;
    if (row["step"].get_int64().get(step) != simdjson::SUCCESS || step < 0) {
      return bad("\"step\" must be an integer >= 0");
    }
    simdjson::dom::element value;
    if (row[spec.value].get(value) != simdjson::SUCCESS) {
      return bad(fmt::format("no \"{}\"", spec.value));
    }
    double v = kNaN;
    if (!value.is_null() && value.get_double().get(v) != simdjson::SUCCESS) {
      return bad(fmt::format("\"{}\" must be a number or null", spec.value));
    }
    bool skipped = false;
    if (row["skipped"].get_bool().get(skipped) == simdjson::SUCCESS && skipped) ++curve.skipped;
    ++curve.points;
    curve.last_step = std::max(curve.last_step, step);
    if (!std::isfinite(v)) {
      ++curve.nonfinite;
      continue;
    }
    const auto w = static_cast<size_t>(step / window);
    if (w >= kMaxWindows) continue;
    if (w >= sums.size()) {
      sums.resize(w + 1, 0);
      counts.resize(w + 1, 0);
    }
    sums[w] += v;
    ++counts[w];
  }
  if (curve.last_step >= 0) {
    sums.resize(std::min(kMaxWindows, static_cast<size_t>(curve.last_step / window) + 1), 0);
    counts.resize(sums.size(), 0);
  }
  curve.means.resize(sums.size(), kNaN);
  for (size_t w = 0; w < sums.size(); ++w) {
    if (counts[w] > 0) curve.means[w] = sums[w] / static_cast<double>(counts[w]);
  }
  return curve;
}

std::vector<CurveCheck> CheckCurves(const std::vector<std::string>& names,
                                    const std::vector<std::vector<TrialCurve>>& curves,
                                    const CurveSpec& spec) {
  std::vector<CurveCheck> checks;
  size_t windows = 0;
  for (const auto& variant : curves) {
    for (const TrialCurve& c : variant) windows = std::max(windows, c.means.size());
  }
  // The baseline's band per window; NaN where fewer than two trials have a value.
  std::vector<double> lo(windows, kNaN), hi(windows, kNaN);
  const std::vector<TrialCurve> none;
  const std::vector<TrialCurve>& base = curves.empty() ? none : curves[0];
  for (size_t w = 0; w < windows; ++w) {
    double mn = std::numeric_limits<double>::infinity(), mx = -mn, sum = 0;
    int n = 0;
    for (const TrialCurve& c : base) {
      if (w >= c.means.size() || std::isnan(c.means[w])) continue;
      mn = std::min(mn, c.means[w]);
      mx = std::max(mx, c.means[w]);
      sum += c.means[w];
      ++n;
    }
    if (n < 2) continue;
    const double margin =
        std::max(spec.widen * (mx - mn), spec.floor * std::fabs(sum / static_cast<double>(n)));
    lo[w] = mn - margin;
    hi[w] = mx + margin;
  }
  for (size_t v = 0; v < curves.size(); ++v) {
    CurveCheck check;
    check.variant = v < names.size() ? names[v] : fmt::format("variant {}", v);
    check.trials = static_cast<int>(curves[v].size());
    for (const TrialCurve& c : curves[v]) {
      check.nonfinite += c.nonfinite;
      check.skipped += c.skipped;
    }
    if (v > 0 && !curves[v].empty()) {
      for (size_t w = 0; w < windows; ++w) {
        if (std::isnan(lo[w])) continue;
        double sum = 0;
        int n = 0, reaching = 0;  // trials with a finite value here; trials that got this far
        for (const TrialCurve& c : curves[v]) {
          if (w >= c.means.size()) continue;  // it ended before
          ++reaching;
          if (w < c.means.size() && !std::isnan(c.means[w])) {
            sum += c.means[w];
            ++n;
          }
        }
        if (reaching == 0) continue;
        ++check.windows;
        const bool outside = n == 0 || sum / n < lo[w] || sum / n > hi[w];
        if (!outside) continue;
        ++check.outside;
        if (check.first_outside_step < 0) {
          check.first_outside_step =
              static_cast<int64_t>(w) * std::max<int64_t>(1, spec.window_steps);
        }
      }
      const double share =
          check.windows > 0 ? static_cast<double>(check.outside) / check.windows : 0;
      check.flagged = share > spec.max_outside;
      if (check.flagged) {
        check.phrase = fmt::format(
            "its {} curve left the baseline's noise band in {} of {} windows of {} steps (from "
            "step {})",
            spec.value, check.outside, check.windows, spec.window_steps, check.first_outside_step);
      }
    }
    checks.push_back(std::move(check));
  }
  return checks;
}

}  // namespace trainscope::tuning
