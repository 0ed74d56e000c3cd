// sdk/html/experiment_page.h: the HTML page of a tuning experiment, what
// `trainscope html experiment.json` writes.
//
// Sections: the verdict (the variant accepted, or why none) with the
// hypothesis; each variant's ratio to the baseline with its bootstrap
// interval and the practical threshold around 1; each trial's objective
// value per variant, failures counted; the comparisons table (ratio,
// interval, Holm-adjusted p, trials, failures, the sentence); the preset
// the experiment justified. docs/experiments.md explains the fields.
#ifndef TRAINSCOPE_SDK_HTML_EXPERIMENT_PAGE_H_
#define TRAINSCOPE_SDK_HTML_EXPERIMENT_PAGE_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace trainscope::html {

// The page for `experiment_json`, the text of the experiment.json at
// `path`, which the caller has read and checked (tuning::ReadExperiment):
// the page's code walks its fields as docs/experiments.md lists them.
// Cost: a copy; the file is O(variants x repeats). Errors:
// FailedPrecondition when built without Chart.js.
absl::StatusOr<std::string> ExperimentPage(std::string_view path, std::string_view experiment_json);

}  // namespace trainscope::html

#endif  // TRAINSCOPE_SDK_HTML_EXPERIMENT_PAGE_H_
