// `trainscope analyze` output. See analysis_report.h.
#include "sdk/analyze/analysis_report.h"

#include <algorithm>
#include <iterator>

#include "fmt/format.h"
#include "sdk/analysis/step_analysis.h"
#include "sdk/ground/json_writer.h"

namespace trainscope::analyze {
namespace {

// Why a trace without device work has no HTA breakdown (text and JSON).
constexpr char kNoDeviceWork[] =
    "no GPU kernels, memory copies or sets in this trace; idle gaps are measured against "
    "trainscope's compute phases";

double Ms(TimestampNs ns) { return ns / 1e6; }
double Us(TimestampNs ns) { return ns / 1e3; }

void WriteHta(const analysis::HtaBreakdown& hta, ground::JsonWriter& j) {
  j.Key("temporal_breakdown_us").BeginObject();
  j.Key("idle_time(us)").Number(hta.temporal.idle_us);
  j.Key("compute_time(us)").Number(hta.temporal.compute_us);
  j.Key("non_compute_time(us)").Number(hta.temporal.non_compute_us);
  j.Key("kernel_time(us)").Number(hta.temporal.kernel_us);
  j.EndObject();
  j.Key("idle_time_breakdown_us").BeginArray();
  for (const analysis::HtaStreamIdle& row : hta.idle_by_stream) {
    j.BeginObject();
    j.Key("stream").Int(row.stream);
    j.Key("category").String(row.category);
    j.Key("idle_time").Number(row.idle_us);
    j.EndObject();
  }
  j.EndArray();
}

void WriteGaps(const analysis::TraceAnalysis& a, ground::JsonWriter& j) {
  const analysis::IdleBreakdown& idle = a.idle;
  j.BeginObject();
  j.Key("busy_source").String(idle.busy_source);
  j.Key("window_us").Number(Us(idle.window_ns));
  j.Key("step_windows").Int(a.step_windows);
  j.Key("busy_us").Number(Us(idle.busy_ns));
  j.Key("idle_us").Number(Us(idle.idle_ns));
  j.Key("idle_share").Number(idle.share);
  j.Key("gaps").Int(idle.gaps);
  j.Key("by_cause_us").BeginObject();
  for (const auto& [cause, ns] : idle.by_cause) j.Key(cause).Number(Us(ns));
  j.EndObject();
  j.Key("largest_gaps").BeginArray();
  for (const analysis::Gap& gap : idle.largest_gaps) {
    j.BeginObject();
    j.Key("start_us").Number(Us(gap.start_ns - a.window_start_ns));
    j.Key("duration_us").Number(Us(gap.duration_ns));
    j.Key("step").Int(gap.step);
    j.Key("cause").String(gap.cause);
    j.EndObject();
  }
  j.EndArray();
  j.Key("histogram").BeginArray();
  for (const analysis::GapBucket& bucket : idle.histogram) {
    j.BeginObject();
    j.Key("bucket").String(bucket.label);
    j.Key("count").Int(bucket.count);
    j.Key("total_us").Number(Us(bucket.total_ns));
    j.EndObject();
  }
  j.EndArray();
  j.Key("streams").BeginArray();
  for (const analysis::StreamActivity& s : idle.streams) {
    j.BeginObject();
    j.Key("device").Int(s.device);
    j.Key("stream").Int(s.stream);
    j.Key("intervals").Int(s.intervals);
    j.Key("busy_us").Number(Us(s.busy_ns));
    j.Key("busy_share").Number(s.busy_share);
    j.EndObject();
  }
  j.EndArray();
  std::vector<double> per_step_ms;
  for (const analysis::StepIdle& step : idle.idle_per_step) per_step_ms.push_back(Ms(step.idle_ns));
  j.Key("idle_per_step_ms").BeginObject();
  j.Key("steps").Int(static_cast<int64_t>(per_step_ms.size()));
  j.Key("median").Number(analysis::Median(per_step_ms));
  j.Key("p90").Number(analysis::Percentile(per_step_ms, 90));
  j.Key("max").Number(analysis::Percentile(per_step_ms, 100));
  j.EndObject();
  j.EndObject();
}

void WriteTrace(const AnalyzedTrace& t, ground::JsonWriter& j) {
  j.BeginObject();
  j.Key("trace").String(t.path);
  j.Key("rank").Int(t.rank);
  j.Key("events").BeginObject();
  j.Key("kernels").Int(t.kernels);
  j.Key("memcpys").Int(t.memcpys);
  j.Key("memsets").Int(t.memsets);
  j.Key("runtime_calls").Int(t.runtime_calls);
  j.Key("sync_calls").Int(t.sync_calls);
  j.Key("steps").Int(t.steps);
  j.EndObject();
  j.Key("parse").BeginObject();
  j.Key("json_bytes").Int(static_cast<int64_t>(t.read.bytes));
  j.Key("compressed").Bool(t.read.compressed);
  j.Key("seconds").Number(t.parse_s);
  j.Key("inflate_seconds").Number(t.read.inflate_s);
  j.Key("threads").Int(t.read.threads);
  j.Key("mb_per_s").Number(t.parse_s > 0 ? t.read.bytes / 1e6 / t.parse_s : 0);
  j.EndObject();
  j.Key("hta").BeginObject();
  if (!t.has_device_work()) j.Key("note").String(kNoDeviceWork);
  WriteHta(t.analysis.hta, j);
  j.Key("rules").BeginObject();
  j.Key("profiler_steps").Int(t.facts.profiler_steps);
  j.Key("last_step_dropped").Bool(t.facts.profiler_steps >= 2);
  j.Key("whole_microseconds").Bool(t.facts.round_to_us);
  j.Key("device_rows").Int(t.analysis.hta.rows);
  j.EndObject();
  j.EndObject();
  j.Key("gaps");
  WriteGaps(t.analysis, j);
  j.EndObject();
}

void Line(std::string* out, std::string text) {
  out->append(text);
  out->push_back('\n');
}

}  // namespace

std::string AnalysisToJson(const AnalyzedTrace& trace) {
  ground::JsonWriter j(ground::JsonWriter::kPretty);
  WriteTrace(trace, j);
  return j.Take() + "\n";
}

std::string AnalysisToText(const AnalyzedTrace& t) {
  std::string out;
  const analysis::IdleBreakdown& idle = t.analysis.idle;
  Line(&out, fmt::format("{}: rank {}; {} kernels, {} copies, {} sets, {} steps ({:.1f} MB of "
                         "JSON in {:.3f} s)",
                         t.path, t.rank, t.kernels, t.memcpys, t.memsets, t.steps,
                         t.read.bytes / 1e6, t.parse_s));
  Line(&out,
       fmt::format("{} idle: {:.1f}% of {:.1f} ms ({}), {} gaps, largest {:.3f} ms",
                   idle.busy_source == "device_activity" ? "GPU" : "compute", 100 * idle.share,
                   Ms(idle.window_ns), idle.busy_source, idle.gaps, Ms(idle.largest_gap_ns)));
  if (t.analysis.step_windows > 1) {
    Line(&out, fmt::format("  (over {} windows of consecutive steps; the time between them was "
                           "not recorded)",
                           t.analysis.step_windows));
  }
  for (const auto& [cause, ns] : idle.by_cause) {
    Line(&out, fmt::format("  {:<14} {:>12.3f} ms  {:>5.1f}% of idle", cause, Ms(ns),
                           idle.idle_ns > 0 ? 100.0 * ns / idle.idle_ns : 0));
  }
  if (!idle.largest_gaps.empty()) {
    Line(&out, "largest gaps (start from the window's start):");
    for (const analysis::Gap& gap : idle.largest_gaps) {
      Line(&out, fmt::format("  at {:>12.3f} ms  {:>10.3f} ms  step {:>5}  {}",
                             Ms(gap.start_ns - t.analysis.window_start_ns), Ms(gap.duration_ns),
                             gap.step, gap.cause));
    }
  }
  std::string histogram = "gap lengths:";
  for (const analysis::GapBucket& b : idle.histogram) {
    if (b.count > 0)
      histogram += fmt::format(" {} {}x ({:.3f} ms);", b.label, b.count, Ms(b.total_ns));
  }
  Line(&out, histogram);
  for (const analysis::StreamActivity& s : idle.streams) {
    Line(&out, fmt::format("  GPU {} stream {:>4}: {:>7} intervals, busy {:>10.3f} ms ({:.1f}%)",
                           s.device, s.stream, s.intervals, Ms(s.busy_ns), 100 * s.busy_share));
  }
  if (!t.has_device_work()) {
    Line(&out, fmt::format("HTA breakdowns: none ({})", kNoDeviceWork));
    return out;
  }
  const analysis::HtaTemporalBreakdown& h = t.analysis.hta.temporal;
  Line(&out,
       fmt::format("HTA temporal breakdown (us): idle {:.0f}, compute {:.0f}, non-compute "
                   "{:.0f}, kernel time {:.0f}{}",
                   h.idle_us, h.compute_us, h.non_compute_us, h.kernel_us,
                   t.facts.profiler_steps >= 2 ? " (last ProfilerStep dropped, as HTA does)" : ""));
  Line(&out, "HTA idle-time breakdown (us):");
  for (const analysis::HtaStreamIdle& row : t.analysis.hta.idle_by_stream) {
    Line(&out,
         fmt::format("  stream {:>4} {:<12} {:>14.2f}", row.stream, row.category, row.idle_us));
  }
  return out;
}

std::string RanksToJson(const std::vector<AnalyzedTrace>& ranks) {
  ground::JsonWriter j(ground::JsonWriter::kPretty);
  j.BeginObject();
  j.Key("ranks").BeginArray();
  for (const AnalyzedTrace& t : ranks) WriteTrace(t, j);
  j.EndArray();
  std::vector<double> shares;
  const AnalyzedTrace* idlest = nullptr;
  for (const AnalyzedTrace& t : ranks) {
    shares.push_back(t.analysis.idle.share);
    if (idlest == nullptr || t.analysis.idle.share > idlest->analysis.idle.share) idlest = &t;
  }
  j.Key("summary").BeginObject();
  j.Key("ranks").Int(static_cast<int64_t>(ranks.size()));
  j.Key("idle_share_min")
      .Number(shares.empty() ? 0 : *std::min_element(shares.begin(), shares.end()));
  j.Key("idle_share_median").Number(analysis::Median(shares));
  j.Key("idle_share_max")
      .Number(shares.empty() ? 0 : *std::max_element(shares.begin(), shares.end()));
  if (idlest != nullptr) j.Key("idlest_rank").Int(idlest->rank);
  j.EndObject();
  j.EndObject();
  return j.Take() + "\n";
}

std::string RanksToText(const std::vector<AnalyzedTrace>& ranks) {
  std::string out;
  Line(&out, fmt::format("{:>5} {:>9} {:>12} {:>14} {:>10}  {}", "rank", "kernels", "GPU idle",
                         "top cause", "parse s", "trace"));
  std::vector<double> shares;
  for (const AnalyzedTrace& t : ranks) {
    const auto& idle = t.analysis.idle;
    shares.push_back(idle.share);
    Line(&out,
         fmt::format("{:>5} {:>9} {:>11.1f}% {:>14} {:>10.3f}  {}", t.rank, t.kernels,
                     100 * idle.share, idle.by_cause.empty() ? "-" : idle.by_cause.front().first,
                     t.parse_s, t.path));
  }
  if (!ranks.empty()) {
    Line(&out, fmt::format("across {} ranks: GPU idle min {:.1f}%, median {:.1f}%, max {:.1f}%",
                           ranks.size(), 100 * *std::min_element(shares.begin(), shares.end()),
                           100 * analysis::Median(shares),
                           100 * *std::max_element(shares.begin(), shares.end())));
  }
  return out;
}

}  // namespace trainscope::analyze
