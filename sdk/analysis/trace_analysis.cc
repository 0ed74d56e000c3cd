// One trace's analysis. See trace_analysis.h.
#include "sdk/analysis/trace_analysis.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <thread>
#include <vector>

#include "sdk/ground/cpus.h"

namespace trainscope::analysis {

TraceAnalysis AnalyzeTimeline(const Timeline& timeline, const HtaTraceFacts& facts, int threads) {
  TraceAnalysis result;
  std::thread hta;
  std::exception_ptr hta_error;  // rethrown here, as on one thread
  if (timeline.size() >= 10000 && (threads == 0 ? ground::AvailableCpus() : threads) > 1) {
    try {
      hta = std::thread([&] {
        try {
          result.hta = ComputeHtaBreakdown(timeline, facts);
        } catch (...) {
          hta_error = std::current_exception();
        }
      });
    } catch (...) {  // no thread: this one does it below
    }
  }
  // If anything below throws, the thread is still joined before `result` goes.
  struct Join {
    std::thread& thread;
    ~Join() {
      if (thread.joinable()) thread.join();
    }
  } join{hta};
  if (!hta.joinable()) result.hta = ComputeHtaBreakdown(timeline, facts);
  result.steps = AnalyzeSteps(timeline, -1);
  if (!result.steps.steps.empty()) {
    result.window_start_ns = result.steps.steps.front().start_ns;
    for (const StepSpan& step : result.steps.steps) {
      result.window_end_ns = std::max(result.window_end_ns, step.end_ns);
    }
  } else {
    TimestampNs first = std::numeric_limits<TimestampNs>::max();
    TimestampNs last = std::numeric_limits<TimestampNs>::min();
    for (const Interval& i : timeline.intervals()) {
      if (!IsDeviceKind(i.kind)) continue;
      first = std::min(first, i.start_ns);
      last = std::max(last, i.end_ns);
    }
    if (first <= last) {
      result.window_start_ns = first;
      result.window_end_ns = last;
    }
  }
  // Runs of consecutive step indices: what lies between them was not kept.
  std::vector<IntervalSet::Span> runs;
  const std::vector<StepSpan>& steps = result.steps.steps;  // by start
  for (size_t k = 0; k < steps.size(); ++k) {
    if (k == 0 || steps[k].index != steps[k - 1].index + 1) {
      runs.emplace_back(steps[k].start_ns, steps[k].end_ns);
    } else {
      runs.back().second = std::max(runs.back().second, steps[k].end_ns);
    }
  }
  if (runs.size() > 1) {
    result.step_windows = static_cast<int>(runs.size());
    result.idle = GapAnalyzer::AnalyzeWithin(timeline, IntervalSet::FromUnsorted(runs));
  } else {
    result.idle = GapAnalyzer::Analyze(timeline, result.window_start_ns, result.window_end_ns);
  }
  if (hta.joinable()) hta.join();  // before `result` is returned (maybe moved)
  if (hta_error) std::rethrow_exception(hta_error);
  return result;
}

}  // namespace trainscope::analysis
