// sdk/tuning/tune_parts.h: what the files of `trainscope tune` share
// (tune.cc defines them; tune_batch.cc and tune_loader.cc use them).
// Internal to those files.
#ifndef TRAINSCOPE_SDK_TUNING_TUNE_PARTS_H_
#define TRAINSCOPE_SDK_TUNING_TUNE_PARTS_H_

#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "sdk/tuning/experiment.h"
#include "sdk/tuning/tune.h"

namespace trainscope::tuning::tune_parts {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// InvalidArgument "tune <subcommand>: <what>".
absl::Status Bad(const TuneOptions& o, const std::string& what);

// The spec's defaults that every subcommand shares.
ExperimentSpec BaseSpec(const TuneOptions& o);

// The repeats: the user's, or the fewest that can accept among `variants`
// (at least `floor`).
int Repeats(const TuneOptions& o, size_t variants, int floor);

// The median of `field` over the trials of `variant`: a failed trial
// counts as `failed_value` when `failed_too`, else not at all. NaN when
// none counts. Cost: O(trials).
double MedianOf(const std::vector<Trial>& trials, int variant,
                const std::function<std::optional<double>(const Trial&)>& field, bool failed_too,
                double failed_value);

}  // namespace trainscope::tuning::tune_parts

#endif  // TRAINSCOPE_SDK_TUNING_TUNE_PARTS_H_
