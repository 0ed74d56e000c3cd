// Training curves of an experiment's trials, checked against the
// baseline's noise band: a variant that reaches the target sooner but
// trains differently (a numeric bug, a precision too low for the model) is
// flagged even when it is faster (the guide: "validate numerical behavior
// and convergence").
//
// A trial writes its curve as JSON lines in its output directory, one per
// step:  {"step": 12, "loss": 0.731}   ("loss": null when the value was
// not finite; "skipped": true when the optimizer step was skipped, as
// GradScaler does on inf/NaN). The key and the file name are the spec's.
//
// The check, per window of `window_steps` steps: each trial's curve is the
// mean of its finite values in the window. The band is the baseline
// trials' range there, [min, max], widened on both sides by `widen` times
// its width, and by at least `floor` times |the baseline's mean| (seeds
// that agree exactly leave no width). A window counts when at least two
// baseline trials have a value there. A variant's curve (the mean of its
// trials) is outside when it lies beyond the band, or when the baseline
// has values there and the variant has none that are finite. A variant is
// flagged when more than `max_outside` of its counted windows are outside.
//
// Memory: O(trials x steps / window_steps) window means; a curve file is
// streamed, never held.
#ifndef TRAINSCOPE_SDK_TUNING_CURVES_H_
#define TRAINSCOPE_SDK_TUNING_CURVES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trainscope::tuning {

struct CurveSpec {
  std::string file;            // in each trial's output directory; "" = no curve check
  std::string value = "loss";  // the key of the value in each line
  int64_t window_steps = 10;
  double widen = 0.5;        // of the band's width, on each side
  double floor = 0.01;       // the band's least half-width, of |baseline mean|
  double max_outside = 0.2;  // share of windows outside before the variant is flagged
};

// One trial's curve, reduced to window means.
struct TrialCurve {
  std::vector<double> means;  // per window from step 0; NaN where no finite value
  int64_t last_step = -1;     // the last step it reached
  int64_t points = 0;         // lines read
  int64_t nonfinite = 0;      // values that were null, NaN or infinite
  int64_t skipped = 0;        // lines with "skipped": true
};

// Reads a curve file. Errors: NotFound naming the path when it is missing;
// InvalidArgument naming the path and line for a line that is not a JSON
// object with an integer "step" >= 0 and a number or null under `value`
// (a last line cut short by a crash is ignored). Cost: one pass.
absl::StatusOr<TrialCurve> ReadCurve(const std::string& path, const CurveSpec& spec);

// The outcome of the check for one variant.
struct CurveCheck {
  std::string variant;
  int trials = 0;                      // with a readable curve
  int windows = 0;                     // compared
  int outside = 0;                     // of them, outside the band
  int64_t first_outside_step = -1;     // the first step of the first window outside
  int64_t nonfinite = 0, skipped = 0;  // over its trials
  bool flagged = false;
  std::string phrase;  // why it is flagged, for the verdict; "" if it is not
};

// Checks every variant after the baseline (curves[0]) against the
// baseline's band; the result has one entry per variant, the baseline's
// first (never flagged). Cost: O(trials x windows).
std::vector<CurveCheck> CheckCurves(const std::vector<std::string>& names,
                                    const std::vector<std::vector<TrialCurve>>& curves,
                                    const CurveSpec& spec);

}  // namespace trainscope::tuning

#endif  // TRAINSCOPE_SDK_TUNING_CURVES_H_
