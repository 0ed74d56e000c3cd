// sdk/analysis/checkpoint_advice.h: how often to checkpoint, by Young and
// Daly's first-order rule, from what the run's saves cost. Pure.
//
//   Report::Checkpoint c = ...;          // saves, blocking_s, interval_s, ...
//   AdviseCheckpointInterval(4.0, &c);   // an MTBF of 4 hours
//   // c.optimal_interval_s == sqrt(2 x (blocking_s / saves) x 4 h)
#ifndef TRAINSCOPE_SDK_ANALYSIS_CHECKPOINT_ADVICE_H_
#define TRAINSCOPE_SDK_ANALYSIS_CHECKPOINT_ADVICE_H_

#include "trainscope/report.h"

namespace trainscope::analysis {

// Sets c->mtbf_hours and, when mtbf_hours > 0 and c->saves > 0, the advice:
// optimal_interval_s = sqrt(2 C M) for the mean blocking cost C of a save
// (blocking_s / saves) and the mean time between failures M; and, when the
// run's own interval_s is known (two saves or more), the expected share of
// time lost at that interval, C / interval + interval / (2 M), and the
// work lost per failure, interval / 2 plus the restart delay. Reads saves,
// blocking_s, interval_s and restart_delay_s. Cost: a few flops.
void AdviseCheckpointInterval(double mtbf_hours, Report::Checkpoint* c);

}  // namespace trainscope::analysis

#endif  // TRAINSCOPE_SDK_ANALYSIS_CHECKPOINT_ADVICE_H_
