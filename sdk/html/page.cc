// The page frame. See page.h.
#include "sdk/html/page.h"

#include <string>
#include <string_view>

namespace trainscope::html {

// sdk/html/embed.cmake generates these (generated/html_k*.cc): Chart.js,
// the style and the helpers every page kind's script uses (TS: the data,
// text-only elements, tables, charts, the timeline, and TS.finish(), which
// marks how many charts drew, for the browser tests and a reader's eyes).
extern const unsigned char kChartJs[];
extern const unsigned long kChartJsSize;
extern const unsigned char kPageCss[];
extern const unsigned long kPageCssSize;
extern const unsigned char kCommonJs[];
extern const unsigned long kCommonJsSize;

bool HaveChartJs() { return kChartJsSize > 0; }

absl::Status NeedChartJs() {
  if (HaveChartJs()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "this trainscope was built without Chart.js: install Debian's libjs-chart.js and rebuild");
}

std::string EscapeHtml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string ScriptSafeJson(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  for (char c : json) {
    switch (c) {
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Page(std::string_view title, std::string_view data_json, std::string_view script,
                 std::string_view timeline_json) {
  const std::string safe_title = EscapeHtml(title);
  std::string page;
  page.reserve(kChartJsSize + kPageCssSize + kCommonJsSize + data_json.size() +
               timeline_json.size() + script.size() + 4096);
  page += "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  page += "<meta name=\"generator\" content=\"trainscope html\">\n<title>";
  page += safe_title;
  page += "</title>\n<style>\n";
  page += EmbeddedText(kPageCss, kPageCssSize);
  page += "</style>\n</head>\n<body>\n<h1 id=\"title\">";
  page += safe_title;
  page += "</h1>\n<div id=\"content\"></div>\n";
  page += "<script type=\"application/json\" id=\"trainscope-data\">";
  page += ScriptSafeJson(data_json);
  page += "</script>\n";
  if (!timeline_json.empty()) {
    page += "<script type=\"application/json\" id=\"trainscope-timeline\">";
    page += ScriptSafeJson(timeline_json);
    page += "</script>\n";
  }
  page += "<script>";
  // The embedded files hold no "</script" or "</style" (TrainscopeEmbed.cmake
  // refuses one).
  page += EmbeddedText(kChartJs, kChartJsSize);
  page += "</script>\n<script>\n";
  page += EmbeddedText(kCommonJs, kCommonJsSize);
  // An exception in the page's code is counted (data-errors), and the page
  // still says it finished, so that a test sees the error, not a timeout.
  page += "try {\n\n";
  page += script;
  page +=
      "\n} catch (e) { TS.errors.push(String(e)); }\nTS.finish();\n</script>\n</body>\n</html>\n";
  return page;
}

}  // namespace trainscope::html
