// sdk/html/run_page.h: the HTML page of one trainscope run (its
// report.json and steps.jsonl), what `trainscope html OUT_DIR` writes.
//
// Sections: the baseline record with the verdict, the recommendation and
// its next steps (docs links and the tune_* or experiment command that
// would test it); a few steps on a zoomable timeline, from the run's
// trace.json; per-step stacked bars of the phases (every step, or
// buckets of consecutive steps with each bucket's fastest and slowest step
// kept when there are more than kMaxBars); idle time per step split by its
// top cause; the histogram of gap lengths; the longest gaps with step and
// cause; HTA's device breakdowns when the run had device records; the
// phase table. docs/html-report.md says how to read each and act on it.
#ifndef TRAINSCOPE_SDK_HTML_RUN_PAGE_H_
#define TRAINSCOPE_SDK_HTML_RUN_PAGE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace trainscope::html {

// At most this many bars (buckets of steps) per chart, whatever the run's
// length.
inline constexpr int64_t kMaxBars = 1000;

// The page for the run whose report is at `report_path`, with the rows of
// `steps_path` (empty, or a file that does not exist: the charts of steps
// say there are none). Memory: the report and kMaxBars to 2 x kMaxBars
// buckets of about 200 bytes; the steps file is streamed (a block at a
// time). `timeline_json` is analysis::TimelineViewToJson's for the run's
// trace; when it is empty the section says `timeline_note` instead (why
// there is none). Cost: one pass over the steps file. Errors: the
// readers', naming the file (and line) at fault; FailedPrecondition when
// this program was built without Chart.js.
absl::StatusOr<std::string> RunPage(const std::string& report_path, const std::string& steps_path,
                                    std::string_view timeline_json = {},
                                    std::string_view timeline_note = {});

}  // namespace trainscope::html

#endif  // TRAINSCOPE_SDK_HTML_RUN_PAGE_H_
