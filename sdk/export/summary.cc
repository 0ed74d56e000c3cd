// The human summary. See summary.h.
#include "sdk/export/summary.h"

#include <iterator>

#include "fmt/format.h"

namespace trainscope::exporter {

namespace {

// "gaps: 812 idle gaps; the longest 52.100 ms (step 17, data_wait); most
// idle time in gaps of 10ms-100ms (640.000 ms)": how the idle time splits.
std::string GapsLine(const Report::Gaps& g) {
  std::string out = fmt::format("gaps: {} idle gap{}; the longest {:.3f} ms", g.count,
                                g.count == 1 ? "" : "s", g.largest_ms);
  if (!g.largest.empty()) {
    const Report::Gaps::Gap& longest = g.largest.front();
    const std::string where =
        longest.step >= 0 ? fmt::format("step {}", longest.step) : "between steps";
    out += longest.cause.empty() ? fmt::format(" ({})", where)
                                 : fmt::format(" ({}, {})", where, longest.cause);
  }
  const Report::Gaps::Bucket* most = nullptr;
  for (const Report::Gaps::Bucket& b : g.histogram) {
    if (b.total_ms > 0 && (most == nullptr || b.total_ms > most->total_ms)) most = &b;
  }
  if (most != nullptr) {
    out += fmt::format("; most idle time in gaps of {} ({:.3f} ms)", most->label, most->total_ms);
  }
  return out;
}

// The summary's text, a line at a time.
struct Lines {
  std::string out;
  template <typename... T>
  void operator()(fmt::format_string<T...> format, T&&... args) {
    fmt::format_to(std::back_inserter(out), format, std::forward<T>(args)...);
    out.push_back('\n');
  }
};

// The phases' table.
void PhaseLines(const Report& r, Lines& line) {
  if (!r.phases.empty()) {
    line("  {:<12} {:>10} {:>10} {:>10} {:>8}", "phase", "median ms", "p90 ms", "max ms",
         "of step");
    for (const PhaseStat& p : r.phases) {
      if (p.steps == 0) {
        line("  {:<12} {:>32.3f} ms in all, outside steps", p.phase, 1000 * p.total_s);
        continue;
      }
      line("  {:<12} {:>10.3f} {:>10.3f} {:>10.3f} {:>7.1f}%", p.phase, p.median_ms, p.p90_ms,
           p.max_ms, 100 * p.share_of_steps);
    }
  }
}

// Idle time, its gaps, the device timeline.
void IdleLines(const Report& r, Lines& line) {
  if (r.idle.top_cause.empty()) {
    line("idle: {:.1f}% of the step window ({})", 100 * r.idle.share, r.idle.busy_source);
  } else {
    const double top_s = r.idle.by_cause.empty() ? 0 : r.idle.by_cause.front().second;
    line("idle: {:.1f}% of the step window ({}); top cause {} ({:.2f} s)", 100 * r.idle.share,
         r.idle.busy_source, r.idle.top_cause, top_s);
  }
  if (r.gaps.count > 0) line("{}", GapsLine(r.gaps));
  line("device timeline: {}{}", r.device_timeline.status,
       r.device_timeline.status == "collected"
           ? fmt::format(" ({} kernels, {} records dropped)", r.device_timeline.kernels,
                         r.device_timeline.dropped)
           : "");
}

// What the run lost: events, steps file rows.
void LossLines(const Report& r, Lines& line) {
  if (r.events.dropped > 0) {
    line(
        "warning: {} events dropped (full per-thread buffers): raise "
        "Options::buffer_bytes_per_thread",
        r.events.dropped);
  }
  if (r.steps_file.rows_dropped > 0) {
    line("warning: {} of {} rows left out of steps.jsonl (the disk fell behind, or a write failed)",
         r.steps_file.rows_dropped, r.steps_file.rows + r.steps_file.rows_dropped);
  }
}

void CheckpointLines(const Report& r, Lines& line) {
  if (const Report::Checkpoint& c = r.checkpoint; c.saves > 0 || c.failed > 0) {
    line("checkpoints: {} saved ({} failed), {:.1f} ms blocking each, {:.0f} MB/s persist{}",
         c.saves, c.failed, c.saves > 0 ? 1e3 * c.blocking_s / c.saves : 0.0,
         c.persist_bytes_per_s / 1e6,
         c.resumed_from_step >= 0
             ? fmt::format("; resumed from step {}, {} steps recomputed, restart delay {:.2f} s",
                           c.resumed_from_step, c.recomputed_steps, c.restart_delay_s)
             : "");
    if (c.optimal_interval_s > 0) {
      line(
          "checkpoint interval: every {:.1f} s; Young/Daly optimum {:.1f} s for an MTBF of {:g} h "
          "(expected overhead {:.2f}% now)",
          c.interval_s, c.optimal_interval_s, c.mtbf_hours, 100 * c.expected_overhead_share);
    }
  }
}

// Serving latency and the acceptance check.
void ResultLines(const Report& r, Lines& line) {
  if (r.serving) {
    line(
        "serving: {} requests at {:.1f}/s; latency p50 {:.2f} ms, p90 {:.2f} ms, p99 {:.2f} ms, "
        "max {:.2f} ms",
        r.serving->requests, r.serving->requests_per_s, r.serving->p50_ms, r.serving->p90_ms,
        r.serving->p99_ms, r.serving->max_ms);
  }
  if (!r.acceptance.metric.empty()) {
    const char* verdict = !r.acceptance.passed   ? "not judged"
                          : *r.acceptance.passed ? "PASS"
                                                 : "FAIL";
    line("acceptance: {} = {} (target {} {}) {}", r.acceptance.metric,
         r.acceptance.value ? fmt::format("{:g}", *r.acceptance.value) : "unset",
         r.acceptance.higher_is_better ? ">=" : "<=",
         r.acceptance.target ? fmt::format("{:g}", *r.acceptance.target) : "unset", verdict);
  }
}

}  // namespace

std::string FormatSummary(const Report& r) {
  Lines line;
  line("trainscope · {} · {} steps in {:.2f} s (startup {:.2f} s, warmup {} steps) on {}",
       r.run.name, r.timing.steps, r.timing.total_s, r.timing.startup_s, r.timing.warmup_steps,
       r.environment.accelerator);
  line(
      "steady state: {:.1f} steps/s, {:.0f} samples/s, median step {:.2f} ms; {:.4f} "
      "resource-hours",
      r.throughput.steady_steps_per_s, r.throughput.steady_samples_per_s,
      r.throughput.median_step_ms, r.resource_hours);
  PhaseLines(r, line);
  IdleLines(r, line);
  LossLines(r, line);
  CheckpointLines(r, line);
  ResultLines(r, line);
  line("→ {}", r.recommendation);
  return std::move(line.out);
}

}  // namespace trainscope::exporter
