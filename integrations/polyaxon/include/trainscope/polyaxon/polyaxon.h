// trainscope/polyaxon/polyaxon.h: defaults for runs scheduled by Polyaxon.
//
//   trainscope::Options options;
//   trainscope::CheckpointStoreOptions store;
//   trainscope::polyaxon::ApplyDefaults(&options, &store);  // no-op outside Polyaxon
//
// Inside a Polyaxon run (POLYAXON_RUN_OUTPUTS_PATH is set), the report and
// trace go to <outputs>/trainscope and checkpoints to <outputs>/checkpoints,
// where Polyaxon keeps them as the run's artifacts and where a retry of the
// run finds them to resume. docs/checkpoint.md#polyaxon has a component with
// termination settings for the resume flow. Needs no LibTorch.
#ifndef TRAINSCOPE_POLYAXON_POLYAXON_H_
#define TRAINSCOPE_POLYAXON_POLYAXON_H_

#include <optional>
#include <string>

#include "trainscope/checkpoint.h"
#include "trainscope/session.h"

namespace trainscope::polyaxon {

// The Polyaxon run this process belongs to.
struct Run {
  std::string outputs_path;  // POLYAXON_RUN_OUTPUTS_PATH
  std::string uuid;          // POLYAXON_RUN_UUID, "" if unset
};

// The run, when POLYAXON_RUN_OUTPUTS_PATH is set and not empty. Cost: two
// getenv calls.
std::optional<Run> Detect();

// Inside a Polyaxon run, points `session` (output_dir, when it is still the
// default "trainscope-out") and `store` (dir, when empty) at the run's
// outputs, and puts the run's uuid into the session's config. Either may be
// null. Returns whether a Polyaxon run was found.
bool ApplyDefaults(Options* session, CheckpointStoreOptions* store);

}  // namespace trainscope::polyaxon

#endif  // TRAINSCOPE_POLYAXON_POLYAXON_H_
