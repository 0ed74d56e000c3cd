// The page of a tuning experiment. See experiment_page.h.
#include "sdk/html/experiment_page.h"

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "sdk/html/page.h"

namespace trainscope::html {

// The page's own code (experiment.js): the verdict, each variant's ratio
// to the baseline with its interval, the trials.
extern const unsigned char kExperimentJs[];
extern const unsigned long kExperimentJsSize;

absl::StatusOr<std::string> ExperimentPage(std::string_view path,
                                           std::string_view experiment_json) {
  if (absl::Status need = NeedChartJs(); !need.ok()) return need;
  return Page("trainscope \u00b7 experiment " + std::string(path), experiment_json,
              EmbeddedText(kExperimentJs, kExperimentJsSize));
}

}  // namespace trainscope::html
