// sdk/html/page.h: one self-contained HTML page, the frame every report
// kind of `trainscope html` shares.
//
// The page needs nothing but itself: no network, no CDN. Its data is one
// JSON document inside <script type="application/json">, with every '<',
// '>' and '&' written as \u003c, \u003e, \u0026, so that no input (a kernel
// named "</script><script>...") can end the element; the page's code reads
// it with JSON.parse and puts every name into the page as text
// (textContent), never as markup. Chart.js (Debian libjs-chart.js) is
// inlined, embedded in the program at build time.
#ifndef TRAINSCOPE_SDK_HTML_PAGE_H_
#define TRAINSCOPE_SDK_HTML_PAGE_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace trainscope::html {

// True when Chart.js was found at build time and is embedded.
bool HaveChartJs();

// OK, or FailedPrecondition saying how to get Chart.js into the build.
absl::Status NeedChartJs();

// `text` for HTML text or a quoted attribute: & < > " ' escaped.
std::string EscapeHtml(std::string_view text);

// `json` safe inside a <script> element: '<', '>' and '&' as \u escapes
// (they only occur inside JSON strings, where the escapes mean the same).
std::string ScriptSafeJson(std::string_view json);

// The text of a file embedded at build time (sdk/html/embed.cmake): the
// `<symbol>` and `<symbol>Size` that cmake/TrainscopeEmbed.cmake defines.
inline std::string_view EmbeddedText(const unsigned char* bytes, unsigned long size) {
  return {reinterpret_cast<const char*>(bytes), size};
}

// The whole page: `title` (escaped) in <title> and the heading, the
// shared style (page.css), `data_json` as the data element (made
// script-safe here), Chart.js, the shared helpers (common.js) and
// `script`, the page kind's own code (run.js, trace.js, ...).
// `timeline_json` (analysis::TimelineViewToJson's), when not empty, is a
// second data element that TS.timeline draws. Cost: a copy of each
// (Chart.js is about 200 KB).
std::string Page(std::string_view title, std::string_view data_json, std::string_view script,
                 std::string_view timeline_json = {});

}  // namespace trainscope::html

#endif  // TRAINSCOPE_SDK_HTML_PAGE_H_
