// `trainscope ranks DIR`: the straggler report. See trainscope/ranks.h.
// Each rank's steps file is read twice through a StepRowReader, never held:
// for R ranks the memory is straggler.h's bound plus R readers' block
// (StepRowReader::kDefaultBlockBytes, 64 KiB) and longest line each (a few
// hundred bytes; 1 MiB at most), and one report at a time: about
// 280 KiB x R + 140 KiB, whatever the number of steps (bench/ranks_bench
// measures it). R files are open at once.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "fmt/format.h"
#include "sdk/analysis/straggler.h"
#include "sdk/export/rank_files.h"
#include "sdk/export/report_json.h"
#include "sdk/export/steps_file.h"
#include "sdk/ground/files.h"
#include "sdk/ground/json_writer.h"
#include "trainscope/ranks.h"

namespace trainscope {
namespace {

std::string ToJson(const analysis::StragglerReport& s) {
  ground::JsonWriter j(ground::JsonWriter::kPretty);
  j.BeginObject();
  j.Key("world_size").Int(s.world_size);
  j.Key("ranks_reporting").Int(static_cast<int64_t>(s.ranks.size()));
  j.Key("common_steps").Int(s.common_steps);
  j.Key("slowest_rank");
  if (s.slowest_rank >= 0) {
    j.Int(s.slowest_rank);
  } else {
    j.Null();
  }
  j.Key("straggler").Bool(s.straggler);
  j.Key("lag_ms").Number(s.lag_ms);
  j.Key("wait_caused_s").Number(s.wait_caused_s);
  j.Key("wait_share").Number(s.wait_share);
  j.Key("missing_ranks").BeginArray();
  for (int r : s.missing_ranks) j.Int(r);
  j.EndArray();
  j.Key("errors").BeginArray();
  for (const std::string& e : s.errors) j.String(e);
  j.EndArray();
  j.Key("ranks").BeginArray();
  for (const auto& r : s.ranks) {
    j.BeginObject();
    j.Key("rank").Int(r.rank);
    j.Key("steps").Int(r.steps);
    j.Key("median_step_ms").Number(r.median_step_ms);
    j.Key("median_compute_ms").Number(r.median_compute_ms);
    j.Key("median_sync_ms").Number(r.median_sync_ms);
    j.Key("total_sync_s").Number(r.total_sync_s);
    j.Key("times_slowest").Int(r.times_slowest);
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  return j.Take() + "\n";
}

std::string ToText(const analysis::StragglerReport& s) {
  std::string out = fmt::format("{} of {} ranks reported; {} steps on every rank\n", s.ranks.size(),
                                s.world_size, s.common_steps);
  out += fmt::format("{:>5} {:>7} {:>12} {:>15} {:>12} {:>13} {:>8}\n", "rank", "steps", "step ms",
                     "compute ms", "sync ms", "sync total s", "slowest");
  for (const auto& r : s.ranks) {
    out += fmt::format("{:>5} {:>7} {:>12.3f} {:>15.3f} {:>12.3f} {:>13.3f} {:>8}\n", r.rank,
                       r.steps, r.median_step_ms, r.median_compute_ms, r.median_sync_ms,
                       r.total_sync_s, r.times_slowest);
  }
  if (s.slowest_rank >= 0 && !s.straggler) {
    out += fmt::format(
        "no straggler: the ranks' compute differs by {:.3f} ms a step, under {:.0f}% of a step "
        "(slowest: rank {})\n",
        std::abs(s.lag_ms), 100 * analysis::kStragglerShare, s.slowest_rank);
  } else if (s.slowest_rank >= 0) {
    out += fmt::format(
        "slowest rank: {} (its compute is {:.3f} ms a step longer than the others' median); "
        "the others wait {:.3f} s for it in sync ({:.1f}% of their step time)\n",
        s.slowest_rank, s.lag_ms, s.wait_caused_s, 100 * s.wait_share);
  } else {
    out += "slowest rank: none (fewer than two ranks with common steps)\n";
  }
  if (!s.missing_ranks.empty()) {
    std::string list;
    for (int r : s.missing_ranks) list += (list.empty() ? "" : ", ") + std::to_string(r);
    out += fmt::format("missing ranks: {} (no report, or a survivor saw it fail)\n", list);
  }
  for (const std::string& e : s.errors) out += "error: " + e + "\n";
  return out;
}

// `status` with the report whose steps file it is about named.
absl::Status AboutStepsOf(const absl::Status& status, const std::string& report_file) {
  return absl::Status(status.code(), fmt::format("{} (the per-step rows of {})",
                                                 std::string(status.message()), report_file));
}

// A rank's steps file as StepRows: read a block at a time, never held.
// Errors name the steps file and its report.
class FileRows : public analysis::StepRows {
 public:
  FileRows(std::unique_ptr<exporter::StepRowReader> reader, std::string report_file)
      : reader_(std::move(reader)), report_file_(std::move(report_file)) {}
  absl::Status Rewind() override {
    absl::Status status = reader_->Rewind();
    return status.ok() ? status : AboutStepsOf(status, report_file_);
  }
  absl::StatusOr<bool> Next(Report::Step* row) override {
    absl::StatusOr<bool> got = reader_->Next(row);
    if (!got.ok()) return AboutStepsOf(got.status(), report_file_);
    return got;
  }

 private:
  std::unique_ptr<exporter::StepRowReader> reader_;
  std::string report_file_;
};

}  // namespace

absl::StatusOr<std::string> RanksReport(const std::string& dir, RanksFormat format) {
  const bool json = format == RanksFormat::kJson;
  std::error_code error;
  const std::vector<std::string> files = exporter::FindRankReports(dir, &error);
  if (error) {
    return absl::NotFoundError(fmt::format("cannot list {}: {}", dir, error.message()));
  }
  if (files.empty()) {
    return absl::NotFoundError(fmt::format(
        "{}: no per-rank reports (report-rank<R>.json, or <dir>/report.json per rank)", dir));
  }
  std::vector<analysis::RankInfo> ranks;
  std::vector<std::unique_ptr<FileRows>> sources;
  std::vector<analysis::StepRows*> rows;
  for (const std::string& file : files) {
    absl::StatusOr<Report> report = exporter::ReadReportFile(file);
    if (!report.ok()) return report.status();
    analysis::RankInfo r;
    r.rank = report->run.rank;
    r.world_size = report->run.world_size;
    r.missing_ranks = report->distributed.missing_ranks;
    r.error = report->distributed.error;
    r.source = file;
    for (const analysis::RankInfo& other : ranks) {
      if (other.rank == r.rank) {
        return absl::InvalidArgumentError(fmt::format(
            "{} and {} are both rank {}: one run per directory", other.source, file, r.rank));
      }
    }
    absl::StatusOr<std::unique_ptr<exporter::StepRowReader>> reader =
        exporter::StepRowReader::Open(exporter::StepsFileForReport(file));
    if (!reader.ok()) return AboutStepsOf(reader.status(), file);
    sources.push_back(std::make_unique<FileRows>(*std::move(reader), file));
    rows.push_back(sources.back().get());
    ranks.push_back(std::move(r));
  }
  const absl::StatusOr<analysis::StragglerReport> stragglers =
      analysis::AnalyzeStragglers(ranks, rows);
  if (!stragglers.ok()) return stragglers.status();
  return json ? ToJson(*stragglers) : ToText(*stragglers);
}

namespace exporter {
namespace {

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// "report-rank2.json" before "report-rank10.json": runs of digits compare
// as numbers (then, for "01" and "1", as text), the rest as text.
bool NaturalLess(std::string_view a, std::string_view b) {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      const size_t i0 = i, j0 = j;
      while (i < a.size() && digit(a[i])) ++i;
      while (j < b.size() && digit(b[j])) ++j;
      std::string_view x = a.substr(i0, i - i0), y = b.substr(j0, j - j0);
      x.remove_prefix(std::min(x.find_first_not_of('0'), x.size()));
      y.remove_prefix(std::min(y.find_first_not_of('0'), y.size()));
      if (x.size() != y.size()) return x.size() < y.size();
      if (x != y) return x < y;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  if (a.size() - i != b.size() - j) return a.size() - i < b.size() - j;
  return a < b;
}

bool IsRankReport(const std::string& name) {
  return name.size() > 16 && absl::StartsWith(name, "report-rank") && absl::EndsWith(name, ".json");
}

}  // namespace

std::string TraceFileForReport(const std::string& report_path) {
  const size_t slash = report_path.rfind('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  std::string name = report_path.substr(base);
  if (name.rfind("report", 0) == 0) name.replace(0, 6, "trace");
  const std::string trace = report_path.substr(0, base) + name;
  struct stat st;
  if (stat(trace.c_str(), &st) != 0 && stat((trace + ".gz").c_str(), &st) == 0) {
    return trace + ".gz";
  }
  return trace;
}

std::vector<std::string> FindRankReports(const std::string& dir, std::error_code* error) {
  *error = {};
  // ground::ListDir and stat(2): nothing here throws, whatever the
  // directory holds (std::filesystem's iterators throw on a failed step).
  if (DIR* d = opendir(dir.c_str())) {
    closedir(d);
  } else {
    *error = std::error_code(errno, std::generic_category());
    return {};
  }
  // "out/" as given by a shell's completion: out/report-rank0.json.
  const std::string base =
      dir.size() > 1 && dir.back() == '/' ? dir.substr(0, dir.size() - 1) : dir;
  std::vector<std::string> found;
  for (const std::string& name : ground::ListDir(base)) {
    const std::string path = base + "/" + name;
    struct stat st;
    if (stat(path.c_str(), &st) != 0) continue;
    if (S_ISREG(st.st_mode) && IsRankReport(name)) found.push_back(path);
    if (!S_ISDIR(st.st_mode)) continue;
    for (const std::string& sub : ground::ListDir(path)) {
      const std::string sub_path = path + "/" + sub;
      if ((sub == "report.json" || IsRankReport(sub)) && IsRegularFile(sub_path)) {
        found.push_back(sub_path);
      }
    }
  }
  std::sort(found.begin(), found.end(), NaturalLess);
  return found;
}

}  // namespace exporter

}  // namespace trainscope
