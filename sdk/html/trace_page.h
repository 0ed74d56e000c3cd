// sdk/html/trace_page.h: the HTML page of one PyTorch-profiler trace (or
// one trainscope wrote), what `trainscope html TRACE.json[.gz]` writes.
//
// It renders `trainscope analyze --format=json`'s document
// (sdk/analyze/analysis_report.h; docs/gap-analysis.md explains each field)
// as sections: what the trace holds; a few steps on a zoomable timeline
// (analysis::TimelineViewToJson's JSON); HTA's temporal breakdown and its
// idle time by stream; the compute's idle time by cause; the gaps by length and
// the longest of them; each stream's busy share. The page's size does not
// depend on the trace's: the analysis is a few KB whatever was read, the
// timeline at most its max_boxes boxes (about 35 bytes each).
#ifndef TRAINSCOPE_SDK_HTML_TRACE_PAGE_H_
#define TRAINSCOPE_SDK_HTML_TRACE_PAGE_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace trainscope::html {

// The page for the analysis document `analysis_json` of the trace at
// `trace_path` (its name titles the page), with `timeline_json` (empty:
// the section says there is none). Cost: copies. Errors:
// FailedPrecondition when this program was built without Chart.js.
absl::StatusOr<std::string> TracePage(std::string_view trace_path, std::string_view analysis_json,
                                      std::string_view timeline_json = {});

}  // namespace trainscope::html

#endif  // TRAINSCOPE_SDK_HTML_TRACE_PAGE_H_
