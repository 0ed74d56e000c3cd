// `trainscope analyze`: the gap analysis of a trace (Kineto or trainscope's
// own), with HTA's two breakdowns beside it. See commands.h.
#include <cstdio>

#include "absl/flags/flag.h"
#include "sdk/analysis/hta_breakdown.h"
#include "sdk/cli/commands.h"
#include "sdk/export/json_writer.h"
#include "sdk/kineto/trace_import.h"
#include "fmt/format.h"


namespace trainscope::cli {
namespace {

void WriteHta(const analysis::HtaBreakdown& hta, exporter::JsonWriter& j) {
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

}  // namespace

int RunAnalyze(const std::vector<std::string>& args, const std::string& format) {
  if (args.size() != 1) {
    std::fprintf(stderr, "usage: trainscope analyze [--format=text|json] TRACE.json[.gz]\n");
    return kExitUsage;
  }
  absl::StatusOr<kineto::ImportedTrace> trace = kineto::ImportTrace(args[0]);
  if (!trace.ok()) {
    std::fprintf(stderr, "trainscope analyze: %s\n", std::string(trace.status().message()).c_str());
    return kExitBadInput;
  }
  const analysis::HtaBreakdown hta = analysis::ComputeHtaBreakdown(trace->timeline, trace->hta);
  if (format == "json") {
    exporter::JsonWriter j(exporter::JsonWriter::kPretty);
    j.BeginObject();
    j.Key("trace").String(trace->path);
    j.Key("rank").Int(trace->rank.value_or(0));
    j.Key("hta").BeginObject();
    WriteHta(hta, j);
    j.Key("rules").BeginObject();
    j.Key("profiler_steps").Int(trace->hta.profiler_steps);
    j.Key("last_step_dropped").Bool(trace->hta.profiler_steps >= 2);
    j.Key("whole_microseconds").Bool(trace->hta.round_to_us);
    j.Key("device_rows").Int(hta.rows);
    j.EndObject();
    j.EndObject();
    j.EndObject();
    std::printf("%s\n", j.str().c_str());
    return kExitOk;
  }
  std::printf("%s", fmt::format("{}: rank {}, {} kernels, {} copies, {} sets on {} tracks\n",
                                trace->path, trace->rank.value_or(0), trace->kernels,
                                trace->memcpys, trace->memsets, trace->timeline.tracks().size())
                        .c_str());
  const auto& t = hta.temporal;
  std::printf("%s", fmt::format("HTA temporal breakdown (us): idle {:.0f}, compute {:.0f}, "
                                "non-compute {:.0f}, kernel span {:.0f}\n",
                                t.idle_us, t.compute_us, t.non_compute_us, t.kernel_us)
                        .c_str());
  for (const analysis::HtaStreamIdle& row : hta.idle_by_stream) {
    std::printf("%s", fmt::format("  stream {:>4} {:<12} {:>14.2f} us\n", row.stream,
                                  row.category, row.idle_us)
                          .c_str());
  }
  return kExitOk;
}

}  // namespace trainscope::cli
