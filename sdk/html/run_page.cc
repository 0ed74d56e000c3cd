// The page of one run. See run_page.h.
#include "sdk/html/run_page.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "sdk/export/report_json.h"
#include "sdk/export/steps_file.h"
#include "sdk/ground/idle_cause.h"
#include "sdk/ground/json_writer.h"
#include "sdk/html/page.h"
#include "trainscope/phase.h"
#include "trainscope/report.h"

namespace trainscope::html {
namespace {

// Top causes beyond this many distinct names share the last column.
constexpr size_t kMaxCauses = 16;

// Consecutive steps in one bar: the mean of each phase, the fastest and
// slowest step, and idle time by each step's top cause.
struct Bar {
  int64_t first = 0, last = 0, count = 0;
  std::array<double, kPhaseCount> phase_ms{};
  double min_ms = 0, max_ms = 0;
  std::array<double, kMaxCauses> idle_ms{};
  void Merge(const Bar& o) {
    last = o.last;
    count += o.count;
    for (int p = 0; p < kPhaseCount; ++p) phase_ms[p] += o.phase_ms[p];
    min_ms = std::min(min_ms, o.min_ms);
    max_ms = std::max(max_ms, o.max_ms);
    for (size_t c = 0; c < kMaxCauses; ++c) idle_ms[c] += o.idle_ms[c];
  }
};

// Every step of the file in at most 2 x kMaxBars bars: when full, each pair
// of neighbours becomes one bar and a bar takes twice the steps.
class Bars {
 public:
  void Add(const Report::Step& row) {
    Bar one;
    one.first = one.last = row.index;
    one.count = 1;
    for (int p = 0; p < kPhaseCount; ++p) {
      one.phase_ms[p] = row.phase_ms[p];
      if (row.phase_ms[p] > 0) phase_seen_[p] = true;
    }
    one.min_ms = one.max_ms = row.duration_ms;
    if (row.idle_ms > 0) one.idle_ms[CauseIndex(row.top_cause)] = row.idle_ms;
    if (bars_.empty() || bars_.back().count >= per_bar_) {
      if (bars_.size() == 2 * static_cast<size_t>(kMaxBars)) Halve();
      bars_.push_back(one);
    } else {
      bars_.back().Merge(one);
    }
    ++steps_;
  }
  const std::vector<Bar>& bars() const { return bars_; }
  int64_t per_bar() const { return per_bar_; }
  int64_t steps() const { return steps_; }
  bool phase_seen(int p) const { return phase_seen_[p]; }
  const std::vector<std::string>& causes() const { return causes_; }

 private:
  void Halve() {
    for (size_t k = 0; k < bars_.size() / 2; ++k) {
      bars_[k] = bars_[2 * k];
      bars_[k].Merge(bars_[2 * k + 1]);
    }
    bars_.resize(bars_.size() / 2);
    per_bar_ *= 2;
  }
  size_t CauseIndex(const std::string& cause) {
    const std::string name = cause.empty() ? "unknown" : cause;
    for (size_t c = 0; c < causes_.size(); ++c) {
      if (causes_[c] == name) return c;
    }
    if (causes_.size() + 1 < kMaxCauses) {
      causes_.push_back(name);
      return causes_.size() - 1;
    }
    if (causes_.size() + 1 == kMaxCauses) causes_.push_back("other causes");
    return kMaxCauses - 1;
  }

  std::vector<Bar> bars_;
  int64_t per_bar_ = 1;
  int64_t steps_ = 0;
  std::array<bool, kPhaseCount> phase_seen_{};
  std::vector<std::string> causes_;
};

std::string Seconds(double s) {
  if (s >= 3600) return fmt::format("{:.2f} h", s / 3600);
  if (s >= 60) return fmt::format("{:.1f} min", s / 60);
  return fmt::format("{:.3g} s", s);
}

std::string Percent(double share) { return fmt::format("{:.1f}%", 100 * share); }

// The baseline record (docs/report-schema.md names each field), as label
// and value rows.
std::vector<std::pair<std::string, std::string>> Record(const Report& r) {
  std::vector<std::pair<std::string, std::string>> rows;
  auto row = [&rows](std::string label, std::string value) {
    if (!value.empty()) rows.emplace_back(std::move(label), std::move(value));
  };
  row("run", r.run.name);
  row("code version", r.run.code_version);
  row("data version", r.run.data_version);
  row("started", r.run.started_at);
  row("host", fmt::format("{} (pid {}{})", r.run.host, r.run.pid,
                          r.run.world_size > 1
                              ? fmt::format(", rank {} of {}", r.run.rank, r.run.world_size)
                              : ""));
  row("accelerator",
      r.environment.accelerator_count > 0
          ? fmt::format("{} x {}", r.environment.accelerator_count, r.environment.accelerator)
          : fmt::format("{} ({})", r.environment.accelerator, r.environment.accelerator_status));
  row("CPU", fmt::format("{} x {}", r.environment.cpu_count, r.environment.cpu_model));
  row("OS", r.environment.os);
  row("container image", r.environment.container_image);
  row("trainscope", r.environment.trainscope_version);
  row("resource request",
      fmt::format(
          "{} accelerator(s){}{}{}", r.resource_request.accelerators,
          r.resource_request.cpus > 0 ? fmt::format(", {} CPUs", r.resource_request.cpus) : "",
          r.resource_request.memory_gib > 0 ? fmt::format(", {} GiB", r.resource_request.memory_gib)
                                            : "",
          r.resource_request.description.empty() ? ""
                                                 : " (" + r.resource_request.description + ")"));
  row("queue delay", r.timing.queue_delay_s ? Seconds(*r.timing.queue_delay_s) : "not known");
  row("startup", Seconds(r.timing.startup_s));
  row("warmup", fmt::format("{} steps ({})", r.timing.warmup_steps, r.timing.warmup_rule));
  row("steps", fmt::format("{} in {}", r.timing.steps, Seconds(r.timing.steps_s)));
  row("steady throughput",
      fmt::format("{:.1f} steps/s, {:.1f} samples/s, median step {:.3f} ms",
                  r.throughput.steady_steps_per_s, r.throughput.steady_samples_per_s,
                  r.throughput.median_step_ms));
  row("total time", Seconds(r.timing.total_s));
  row("resource-hours", fmt::format("{:.4g}", r.resource_hours));
  row("idle", fmt::format("{} of the step window ({}){}", Percent(r.idle.share), r.idle.busy_source,
                          r.idle.top_cause.empty() ? "" : "; top cause " + r.idle.top_cause));
  row("device timeline", r.device_timeline.status);
  row("events", fmt::format("{} recorded, {} dropped ({})", r.events.recorded, r.events.dropped,
                            r.events.clock));
  const Acceptance& a = r.acceptance;
  if (!a.metric.empty()) {
    std::string value = a.value ? fmt::format("{:.6g}", *a.value) : "not recorded";
    if (a.target) {
      value += fmt::format(" (target {} {:.6g})", a.higher_is_better ? ">=" : "<=", *a.target);
    }
    if (a.passed) value += *a.passed ? " PASS" : " FAIL";
    row("acceptance: " + a.metric, value);
  }
  return rows;
}

// What to do next about the run's verdict: a sentence, the docs section
// that explains it, and, where one applies, the experiment that would test
// the change against this configuration by time to the same result.
struct NextStep {
  std::string what;
  std::string doc;      // "guide-map.md#input-pipeline", under docs/
  std::string command;  // "" when no experiment applies
};

std::vector<NextStep> NextSteps(const Report& r) {
  std::vector<NextStep> next;
  if (r.timing.steps == 0) {
    next.push_back({"wrap each iteration in a trainscope::StepScope, then run again",
                    "guide-map.md#comparable-baseline", ""});
    return next;
  }
  // Below kRecommendNearLow the compute counts as busy (as in Recommend):
  // the next steps are the application's tuning.
  const std::string& cause = r.idle.top_cause;
  const std::optional<ground::IdleCause> known = ground::IdleCauseNamed(cause);
  if (cause.empty() || r.idle.share < ground::kRecommendNearLow) {
    next.push_back(
        {"the compute is busy: test mixed precision (bf16/fp16 autocast) by time to "
         "the same result",
         "guide-map.md#tune-the-application",
         "trainscope tune amp -- YOUR_TRAINER --precision={precision} --seed={repeat}"});
    next.push_back(
        {"test larger batches: the largest that fits, then sizes ranked by time to "
         "the same result",
         "guide-map.md#tune-the-application",
         "trainscope tune batch --lr_rule=linear -- YOUR_TRAINER --batch={batch} --lr={lr}"});
    return next;
  }
  if (known == ground::IdleCause::kDataWait) {
    next.push_back(
        {"tune the input pipeline: loader workers and prefetch depth, swept to the knee "
         "(the fewest workers within the threshold of the best), quiet and beside "
         "other jobs (--coload)",
         "guide-map.md#input-pipeline",
         "trainscope tune loader --coload=cpu=2 -- YOUR_TRAINER --workers={workers} "
         "--prefetch={prefetch}"});
  } else if (known == ground::IdleCause::kLaunch) {
    next.push_back(
        {"launch-bound: test larger batches (fewer, longer kernels) by time to the "
         "same result",
         "guide-map.md#tune-the-application",
         "trainscope tune batch -- YOUR_TRAINER --batch={batch}"});
  } else if (known == ground::IdleCause::kEval) {
    next.push_back({"evaluate less often, or on other resources than the training's",
                    "guide-map.md#release-gpus-from-work-that-does-not-need-them", ""});
  } else if (known == ground::IdleCause::kCheckpoint) {
    next.push_back(
        {"checkpoint asynchronously or at the interval the report's checkpoint "
         "section advises",
         "guide-map.md#interruptions", ""});
  } else {
    next.push_back({"find what runs while the compute idles on " + cause +
                        ": open the longest gaps' steps in the trace",
                    "gap-analysis.md", ""});
  }
  next.push_back({"every cause and what to do about it", "report-schema.md#recommendation", ""});
  return next;
}

// The page's data, one writer per section of run.js; each writes its keys
// into the open object of `j`.

// The record and what to do next: recommendation, next steps, the record's
// rows, the configuration.
void WriteOverview(ground::JsonWriter& j, const Report& r, const std::string& steps_path) {
  j.Key("recommendation").String(r.recommendation);
  j.Key("docs").String("file://" TRAINSCOPE_DOCS_DIR);
  j.Key("next").BeginArray();
  for (const NextStep& step : NextSteps(r)) {
    j.BeginObject().Key("what").String(step.what).Key("doc").String(step.doc);
    j.Key("command").String(step.command).EndObject();
  }
  j.EndArray();
  j.Key("busy_source").String(r.idle.busy_source);
  j.Key("steps_file").String(steps_path);
  j.Key("record").BeginArray();
  for (const auto& [label, value] : Record(r))
    j.BeginArray().String(label).String(value).EndArray();
  j.EndArray();
  j.Key("config").BeginArray();
  for (const auto& [key, value] : r.config) j.BeginArray().String(key).String(value).EndArray();
  j.EndArray();
}

// The phases seen, in their NVTX colours, and the steps' bars: a column
// per bar for the step range, the fastest and slowest step, each phase's
// mean and the idle time by cause.
void WriteSteps(ground::JsonWriter& j, const Bars& bars) {
  std::vector<int> phases;
  for (int p = 0; p < kPhaseCount; ++p) {
    if (bars.phase_seen(p)) phases.push_back(p);
  }
  j.Key("phases").BeginArray();
  for (int p : phases) j.String(PhaseName(static_cast<Phase>(p)));
  j.EndArray();
  // Each phase in its NVTX colour, as in Nsight Systems and the timeline.
  j.Key("phase_colors").BeginArray();
  for (int p : phases) {
    j.String(fmt::format("#{:06x}", PhaseColor(static_cast<Phase>(p)) & 0xFFFFFF));
  }
  j.EndArray();
  j.Key("steps").BeginObject();
  j.Key("count").Int(bars.steps());
  j.Key("per_bar").Int(bars.per_bar());
  auto column = [&](std::string_view key, auto value) {
    j.Key(key).BeginArray();
    for (const Bar& bar : bars.bars()) value(bar);
    j.EndArray();
  };
  column("first", [&](const Bar& b) { j.Int(b.first); });
  column("last", [&](const Bar& b) { j.Int(b.last); });
  column("min_ms", [&](const Bar& b) { j.Number(b.min_ms); });
  column("max_ms", [&](const Bar& b) { j.Number(b.max_ms); });
  j.Key("phase_ms").BeginObject();
  for (int p : phases) {
    column(PhaseName(static_cast<Phase>(p)),
           [&](const Bar& b) { j.Number(b.phase_ms[p] / static_cast<double>(b.count)); });
  }
  j.EndObject();
  j.Key("causes").BeginArray();
  for (const std::string& cause : bars.causes()) j.String(cause);
  j.EndArray();
  j.Key("idle_ms").BeginObject();
  for (size_t c = 0; c < bars.causes().size(); ++c) {
    column(bars.causes()[c],
           [&](const Bar& b) { j.Number(b.idle_ms[c] / static_cast<double>(b.count)); });
  }
  j.EndObject();
  j.EndObject();
}

// The gaps' histogram and the longest gaps; HTA's device breakdowns; the
// phase table.
void WriteGapsAndDevice(ground::JsonWriter& j, const Report& r) {
  j.Key("gaps").BeginObject();
  j.Key("count").Int(r.gaps.count);
  j.Key("largest_ms").Number(r.gaps.largest_ms);
  j.Key("histogram").BeginArray();
  for (const Report::Gaps::Bucket& bucket : r.gaps.histogram) {
    j.BeginObject().Key("label").String(bucket.label).Key("count").Int(bucket.count);
    j.Key("total_ms").Number(bucket.total_ms).EndObject();
  }
  j.EndArray();
  j.Key("largest").BeginArray();
  for (const Report::Gaps::Gap& gap : r.gaps.largest) {
    j.BeginObject().Key("start_s").Number(gap.start_s).Key("duration_ms").Number(gap.duration_ms);
    j.Key("step").Int(gap.step).Key("cause").String(gap.cause).EndObject();
  }
  j.EndArray();
  j.EndObject();
  const Report::DeviceTimeline::Hta& hta = r.device_timeline.hta;
  j.Key("hta").BeginObject();
  j.Key("rows").Int(hta.rows).Key("late_rows").Int(hta.late_rows);
  j.Key("compute_s").Number(hta.compute_s).Key("non_compute_s").Number(hta.non_compute_s);
  j.Key("idle_s").Number(hta.idle_s);
  j.Key("streams").BeginArray();
  for (const Report::DeviceTimeline::Hta::Stream& stream : hta.idle_by_stream) {
    j.BeginObject().Key("stream").Int(stream.stream);
    j.Key("host_wait_s")
        .Number(stream.host_wait_s)
        .Key("kernel_wait_s")
        .Number(stream.kernel_wait_s);
    j.Key("other_s").Number(stream.other_s).EndObject();
  }
  j.EndArray();
  j.EndObject();
  j.Key("phase_table").BeginArray();
  for (const PhaseStat& p : r.phases) {
    j.BeginArray().String(p.phase).Int(p.steps);
    j.String(fmt::format("{:.3f}", p.median_ms)).String(fmt::format("{:.3f}", p.p90_ms));
    j.String(fmt::format("{:.3f}", p.max_ms)).String(Percent(p.share_of_steps)).EndArray();
  }
  j.EndArray();
}

// Each loader, with its queue depth over time (counters.<name>.queue_depth).
void WriteLoaders(ground::JsonWriter& j, const Report& r) {
  j.Key("loaders").BeginArray();
  for (const Report::Loader& l : r.loaders) {
    j.BeginObject().Key("name").String(l.name).Key("kind").String(l.kind);
    j.Key("workers").Int(l.workers).Key("prefetch").Int(l.prefetch);
    j.Key("pin_memory").Bool(l.pin_memory).Key("batches").Int(l.batches);
    j.Key("cpu_ms_per_batch").Number(l.cpu_ms_per_batch).Key("cpu_cores").Number(l.cpu_cores);
    j.Key("queue_depth_mean").Number(l.queue_depth_mean);
    j.Key("queue_depth_max").Int(l.queue_depth_max);
    const Report::Counter* depth = nullptr;
    for (const Report::Counter& c : r.counters) {
      if (c.name == l.name + ".queue_depth") depth = &c;
    }
    j.Key("queue").BeginObject();
    auto series = [&](std::string_view key, auto value) {
      j.Key(key).BeginArray();
      if (depth != nullptr) {
        for (const Report::Counter::Window& w : depth->series) value(w);
      }
      j.EndArray();
    };
    series("start_s", [&](const Report::Counter::Window& w) { j.Number(w.start_s); });
    // A window without a sample is a gap in the line, not a zero.
    series("mean", [&](const Report::Counter::Window& w) {
      j.Number(w.samples > 0 ? std::optional<double>(w.mean) : std::nullopt);
    });
    series("max", [&](const Report::Counter::Window& w) {
      j.Number(w.samples > 0 ? std::optional<double>(static_cast<double>(w.max)) : std::nullopt);
    });
    j.EndObject().EndObject();
  }
  j.EndArray();
}

}  // namespace

// The page's own code (run.js): the data's sections, in order.
extern const unsigned char kRunJs[];
extern const unsigned long kRunJsSize;

absl::StatusOr<std::string> RunPage(const std::string& report_path, const std::string& steps_path,
                                    std::string_view timeline_json,
                                    std::string_view timeline_note) {
  if (absl::Status need = NeedChartJs(); !need.ok()) return need;
  absl::StatusOr<Report> report = exporter::ReadReportFile(report_path);
  if (!report.ok()) return report.status();
  Bars bars;
  if (!steps_path.empty()) {
    absl::Status status = exporter::ForEachStepRow(steps_path, [&bars](const Report::Step& row) {
      bars.Add(row);
      return true;
    });
    // A run killed before its first row may leave no steps file.
    if (!status.ok() && status.code() != absl::StatusCode::kNotFound) return status;
  }
  const Report& r = *report;
  ground::JsonWriter j;
  j.BeginObject();
  WriteOverview(j, r, steps_path);
  WriteSteps(j, bars);
  WriteGapsAndDevice(j, r);
  WriteLoaders(j, r);
  j.Key("timeline_note").String(timeline_note);
  j.EndObject();
  return Page(fmt::format("trainscope \u00b7 {}", r.run.name), j.str(),
              EmbeddedText(kRunJs, kRunJsSize), timeline_json);
}

}  // namespace trainscope::html
