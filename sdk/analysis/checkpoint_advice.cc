// The Young/Daly checkpoint interval. See checkpoint_advice.h.
#include "sdk/analysis/checkpoint_advice.h"

#include <cmath>

namespace trainscope::analysis {

void AdviseCheckpointInterval(double mtbf_hours, Report::Checkpoint* c) {
  c->mtbf_hours = mtbf_hours;
  if (mtbf_hours <= 0 || c->saves <= 0) return;
  const double mtbf_s = mtbf_hours * 3600;
  const double cost_s = c->blocking_s / static_cast<double>(c->saves);
  c->optimal_interval_s = std::sqrt(2 * cost_s * mtbf_s);
  if (c->interval_s > 0) {
    c->expected_overhead_share = cost_s / c->interval_s + c->interval_s / (2 * mtbf_s);
    c->expected_lost_s_per_failure =
        c->interval_s / 2 + (c->restart_delay_s > 0 ? c->restart_delay_s : 0);
  }
}

}  // namespace trainscope::analysis
