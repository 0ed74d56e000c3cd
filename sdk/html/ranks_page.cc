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

}  // namespace

// The page's own code (ranks.js): the straggler verdict, each rank's
// compute and sync, each rank's step time over the run.
extern const unsigned char kRanksJs[];
extern const unsigned long kRanksJsSize;

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
  return Page("trainscope \u00b7 ranks of " + dir, data, EmbeddedText(kRanksJs, kRanksJsSize));
}

}  // namespace trainscope::html
