// The page of one trace. See trace_page.h.
#include "sdk/html/trace_page.h"

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "sdk/html/page.h"

namespace trainscope::html {

// The page's own code (trace.js): analyze's document (TS.data), section by
// section.
extern const unsigned char kTraceJs[];
extern const unsigned long kTraceJsSize;

absl::StatusOr<std::string> TracePage(std::string_view trace_path, std::string_view analysis_json,
                                      std::string_view timeline_json) {
  if (absl::Status need = NeedChartJs(); !need.ok()) return need;
  const size_t slash = trace_path.rfind('/');
  const std::string_view name =
      slash == std::string_view::npos ? trace_path : trace_path.substr(slash + 1);
  return Page("trainscope \u00b7 " + std::string(name), analysis_json,
              EmbeddedText(kTraceJs, kTraceJsSize), timeline_json);
}

}  // namespace trainscope::html
