// The page frame. See page.h.
#include "sdk/html/page.h"

#include <string>
#include <string_view>

namespace trainscope::html {

// cmake/TrainscopeEmbed.cmake generates these (generated/chart_js.cc).
extern const unsigned char kChartJs[];
extern const unsigned long kChartJsSize;

namespace {

constexpr std::string_view kStyle = R"css(
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1200px; color: #1b1f24; padding: 0 16px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #d8dee4; }
.verdict { background: #fff8c5; border-left: 4px solid #d4a72c; padding: 8px 12px; margin: 12px 0; }
.note { color: #57606a; font-size: 13px; }
table { border-collapse: collapse; font-size: 13px; } td, th { padding: 3px 10px 3px 0; text-align: left; vertical-align: top; }
th { color: #57606a; font-weight: 600; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.grid { display: grid; grid-template-columns: 1fr 1fr; gap: 24px; } .chart { position: relative; height: 320px; }
code { background: #f6f8fa; padding: 1px 4px; border-radius: 4px; }
)css";

// Helpers every page kind uses: the data, text-only elements, tables, and a
// check that each chart drew (for the browser tests and a reader's eyes).
constexpr std::string_view kCommonScript = R"js(
'use strict';
const TS = {
  data: JSON.parse(document.getElementById('trainscope-data').textContent),
  errors: [],
  // An element with text (never markup) and children.
  el(tag, text, attrs) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  },
  section(title, note) {
    const s = TS.el('section');
    s.appendChild(TS.el('h2', title));
    if (note) s.appendChild(TS.el('p', note, {class: 'note'}));
    document.getElementById('content').appendChild(s);
    return s;
  },
  table(parent, head, rows, numeric) {
    const t = TS.el('table');
    const tr = TS.el('tr');
    head.forEach(h => tr.appendChild(TS.el('th', h)));
    t.appendChild(tr);
    rows.forEach(r => {
      const row = TS.el('tr');
      r.forEach((v, k) => row.appendChild(TS.el('td', v, numeric && numeric[k] ? {class: 'num'} : {})));
      t.appendChild(row);
    });
    parent.appendChild(t);
    return t;
  },
  charts: [],
  chart(parent, config, id) {
    const box = TS.el('div', null, {class: 'chart'});
    const canvas = TS.el('canvas', null, {id: id});
    box.appendChild(canvas);
    parent.appendChild(box);
    config.options = Object.assign({animation: false, responsive: true, maintainAspectRatio: false}, config.options || {});
    TS.charts.push(new Chart(canvas, config));
  },
  // The histogram of gap lengths: each bucket's count and total time, on
  // two logarithmic axes.
  gapChart(parent, labels, counts, totals_ms) {
    TS.chart(parent, {type: 'bar', data: {labels: labels, datasets: [
        {label: 'gaps', data: counts, backgroundColor: '#4e79a7', yAxisID: 'y'},
        {label: 'their total ms', data: totals_ms, backgroundColor: '#f28e2b', yAxisID: 'total'}]},
        options: {scales: {y: {type: 'logarithmic', title: {display: true, text: 'gaps'}},
                           total: {type: 'logarithmic', position: 'right',
                                   grid: {drawOnChartArea: false},
                                   title: {display: true, text: 'total ms'}}}}}, 'chart-gaps');
  },
  // What HTA's two charts show, for the section's note.
  htaNote: 'Idle: no stream ran anything. host_wait: the launch came after the stream ran dry ' +
      '(the host is late); kernel_wait: under 30 us between queued kernels (launch latency); ' +
      'other: the rest.',
  // HTA's temporal breakdown (one stacked bar) and idle time by stream:
  // streams [{stream, host_wait, kernel_wait, other}], all in `unit`.
  htaCharts(parent, compute, nonCompute, idle, streams, unit) {
    TS.chart(parent, {type: 'bar', data: {labels: ['kernel time'], datasets: [
        {label: 'compute', data: [compute], backgroundColor: TS.palette[4]},
        {label: 'non-compute', data: [nonCompute], backgroundColor: TS.palette[0]},
        {label: 'idle', data: [idle], backgroundColor: TS.palette[2]}]},
        options: {indexAxis: 'y', scales: {x: {stacked: true, title: {display: true, text: unit}},
                                           y: {stacked: true}}}}, 'chart-hta-temporal');
    const cats = ['host_wait', 'kernel_wait', 'other'];
    TS.chart(parent, {type: 'bar', data: {labels: streams.map(x => 'stream ' + x.stream),
        datasets: cats.map((c, k) => ({label: c, data: streams.map(x => x[c]),
                                       backgroundColor: TS.palette[k + 1]}))},
        options: {scales: {x: {stacked: true}, y: {stacked: true,
                           title: {display: true, text: 'idle ' + unit}}}}}, 'chart-hta-streams');
    parent.setAttribute('data-streams', String(streams.length));
  },
  ms(v) { return v === null || v === undefined ? '' : (v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(2) : v.toFixed(3)); },
  palette: ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac', '#1b9e77', '#7570b3'],
};
window.addEventListener('error', e => TS.errors.push(String(e.message)));
// After the page's code: how many charts drew something, for the tests.
function finish() {
  let drawn = 0;
  for (const c of TS.charts) {
    const ctx = c.canvas.getContext('2d');
    const pixels = ctx.getImageData(0, 0, c.canvas.width, c.canvas.height).data;
    for (let k = 3; k < pixels.length; k += 4) { if (pixels[k] !== 0) { drawn++; break; } }
  }
  document.body.setAttribute('data-charts', String(TS.charts.length));
  document.body.setAttribute('data-charts-drawn', String(drawn));
  document.body.setAttribute('data-errors', String(TS.errors.length));
  if (TS.errors.length) document.body.setAttribute('data-error-text', TS.errors.join(' | '));
  document.body.setAttribute('data-rendered', 'yes');
}
)js";

}  // namespace

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

std::string Page(std::string_view title, std::string_view data_json, std::string_view script) {
  const std::string safe_title = EscapeHtml(title);
  std::string page;
  page.reserve(kChartJsSize + data_json.size() + script.size() + 16384);
  page += "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  page += "<meta name=\"generator\" content=\"trainscope html\">\n<title>";
  page += safe_title;
  page += "</title>\n<style>";
  page += kStyle;
  page += "</style>\n</head>\n<body>\n<h1 id=\"title\">";
  page += safe_title;
  page += "</h1>\n<div id=\"content\"></div>\n";
  page += "<script type=\"application/json\" id=\"trainscope-data\">";
  page += ScriptSafeJson(data_json);
  page += "</script>\n<script>";
  page.append(reinterpret_cast<const char*>(kChartJs),
              kChartJsSize);  // Debian's chart.min.js holds no "</script"
  page += "</script>\n<script>";
  page += kCommonScript;
  // An exception in the page's code is counted (data-errors), and the page
  // still says it finished, so that a test sees the error, not a timeout.
  page += "try {\n";
  page += script;
  page += "\n} catch (e) { TS.errors.push(String(e)); }\nfinish();\n</script>\n</body>\n</html>\n";
  return page;
}

}  // namespace trainscope::html
