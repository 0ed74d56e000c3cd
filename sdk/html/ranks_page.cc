// The page of a distributed run's ranks. See ranks_page.h.
#include "sdk/html/ranks_page.h"

#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "sdk/export/rank_files.h"
#include "sdk/export/report_json.h"
#include "sdk/export/steps_file.h"
#include "sdk/ground/json_writer.h"
#include "sdk/html/page.h"
#include "trainscope/ranks.h"

namespace trainscope::html {
namespace {

// One rank's step times in at most 2 x kMaxRankPoints points: when full,
// neighbours merge and a point takes twice the steps.
class Series {
 public:
  void Add(int64_t step, double ms) {
    if (points_.empty() || points_.back().count >= per_point_) {
      if (points_.size() == 2 * static_cast<size_t>(kMaxRankPoints)) Halve();
      points_.push_back({step, 0, 0});
    }
    points_.back().sum_ms += ms;
    ++points_.back().count;
  }
  void Write(ground::JsonWriter& j) const {
    j.Key("steps").BeginArray();
    for (const Point& p : points_) j.Int(p.first);
    j.EndArray();
    j.Key("mean_ms").BeginArray();
    for (const Point& p : points_) j.Number(p.sum_ms / static_cast<double>(p.count));
    j.EndArray();
    j.Key("per_point").Int(per_point_);
  }

 private:
  struct Point {
    int64_t first;
    double sum_ms;
    int64_t count;
  };
  void Halve() {
    size_t out = 0;
    for (size_t k = 0; k + 1 < points_.size(); k += 2) {
      points_[out] = points_[k];
      points_[out].sum_ms += points_[k + 1].sum_ms;
      points_[out].count += points_[k + 1].count;
      ++out;
    }
    points_.resize(out);
    per_point_ *= 2;
  }
  std::vector<Point> points_;
  int64_t per_point_ = 1;
};

constexpr std::string_view kRanksScript = R"js(
const d = TS.data;
const r = d.report;
const overview = TS.section('Ranks', r.ranks_reporting + ' of ' + r.world_size + ' ranks reported; ' +
    r.common_steps + ' steps on every rank.');
overview.id = 'ranks';
overview.setAttribute('data-ranks', String(r.ranks.length));
const ms = v => TS.ms(v);
overview.appendChild(TS.el('p', r.straggler
    ? '\u2192 rank ' + r.slowest_rank + ' is the straggler: ' + ms(r.lag_ms) + ' ms a step behind ' +
      'the others, who waited ' + r.wait_caused_s.toFixed(2) + ' s for it (' +
      (100 * r.wait_share).toFixed(0) + '% of their step time). Look at that rank\'s page: its ' +
      'input, its host, its GPU (docs/distributed.md).'
    : '\u2192 no straggler' + (r.slowest_rank !== null && r.slowest_rank >= 0
        ? ': the slowest, rank ' + r.slowest_rank + ', is ' + ms(Math.abs(r.lag_ms)) +
          ' ms a step behind, under 5% of a step'
        : ' to name: fewer than two ranks with common steps'),
    {class: 'verdict', id: 'verdict'}));
if (r.missing_ranks.length || r.errors.length) {
  overview.appendChild(TS.el('p', 'missing ranks: ' + (r.missing_ranks.join(', ') || 'none') +
      (r.errors.length ? '; errors: ' + r.errors.join(' | ') : ''), {id: 'missing'}));
}
const labels = r.ranks.map(x => 'rank ' + x.rank);
TS.chart(overview, {type: 'bar', data: {labels: labels, datasets: [
    {label: 'compute ms (median a step)', data: r.ranks.map(x => x.median_compute_ms),
     backgroundColor: TS.palette[0], stack: 's'},
    {label: 'sync ms (median a step)', data: r.ranks.map(x => x.median_sync_ms),
     backgroundColor: TS.palette[1], stack: 's'}]},
    options: {scales: {x: {stacked: true}, y: {stacked: true, title: {display: true, text: 'ms'}}}}},
    'chart-ranks');
TS.table(overview, ['rank', 'steps', 'step ms', 'compute ms', 'sync ms', 'sync total s', 'slowest'],
    r.ranks.map(x => [x.rank, x.steps, ms(x.median_step_ms), ms(x.median_compute_ms),
                      ms(x.median_sync_ms), x.total_sync_s.toFixed(3), x.times_slowest]),
    [true, true, true, true, true, true, true]).id = 'rank-table';

if (d.series.length) {
  const most = Math.max(...d.series.map(s => s.per_point));
  const over = TS.section('Step time over the run, per rank', most > 1
      ? 'Each point the mean of ' + most + ' consecutive steps at most.' : 'A point a step.');
  TS.chart(over, {type: 'line', data: {datasets: d.series.map((s, k) => ({
      label: 'rank ' + s.rank, data: s.steps.map((x, i) => ({x: x, y: s.mean_ms[i]})),
      borderColor: TS.palette[k % TS.palette.length], pointRadius: 0, borderWidth: 1}))},
      options: {scales: {x: {type: 'linear', title: {display: true, text: 'step'}},
                         y: {title: {display: true, text: 'step ms'}}}}}, 'chart-rank-steps');
}
)js";

}  // namespace

absl::StatusOr<std::string> RanksPage(const std::string& dir) {
  if (absl::Status need = NeedChartJs(); !need.ok()) return need;
  absl::StatusOr<std::string> report = RanksReport(dir, RanksFormat::kJson);
  if (!report.ok()) return report.status();
  std::error_code error;
  ground::JsonWriter series;
  series.BeginArray();
  for (const std::string& file : exporter::FindRankReports(dir, &error)) {
    absl::StatusOr<Report> rank = exporter::ReadReportFile(file);
    if (!rank.ok()) return rank.status();
    Series points;
    absl::Status read = exporter::ForEachStepRow(exporter::StepsFileForReport(file),
                                                 [&points](const Report::Step& row) {
                                                   points.Add(row.index, row.duration_ms);
                                                   return true;
                                                 });
    if (!read.ok()) return read;
    series.BeginObject().Key("rank").Int(rank->run.rank);
    points.Write(series);
    series.EndObject();
  }
  series.EndArray();
  std::string data = "{\"report\":" + *report + ",\"series\":" + series.str() + "}";
  return Page("trainscope \u00b7 ranks of " + dir, data, kRanksScript);
}

}  // namespace trainscope::html
