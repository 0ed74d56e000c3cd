// sdk/analysis/phase_stats.h: time per phase per step.
#ifndef TRAINSCOPE_SDK_ANALYSIS_PHASE_STATS_H_
#define TRAINSCOPE_SDK_ANALYSIS_PHASE_STATS_H_

#include <vector>

#include "sdk/analysis/model.h"
#include "sdk/analysis/step_analysis.h"
#include "trainscope/report.h"

namespace trainscope::analysis {

// For each phase that occurs: per step, the time covered by the union of the
// phase's host ranges (any thread) inside the step; then the median, p90 and
// max over the steps in which the phase occurs, and its total over the run.
// Phases are returned in Phase order.
std::vector<PhaseStat> AnalyzePhases(const Timeline& timeline, const StepStats& steps);

}  // namespace trainscope::analysis

#endif  // TRAINSCOPE_SDK_ANALYSIS_PHASE_STATS_H_
