// Polyaxon defaults. See trainscope/polyaxon/polyaxon.h.
#include "trainscope/polyaxon/polyaxon.h"

#include <cstdlib>

namespace trainscope::polyaxon {

std::optional<Run> Detect() {
  const char* outputs = std::getenv("POLYAXON_RUN_OUTPUTS_PATH");
  if (outputs == nullptr || *outputs == '\0') return std::nullopt;
  Run run;
  run.outputs_path = outputs;
  while (run.outputs_path.size() > 1 && run.outputs_path.back() == '/') run.outputs_path.pop_back();
  if (const char* uuid = std::getenv("POLYAXON_RUN_UUID")) run.uuid = uuid;
  return run;
}

bool ApplyDefaults(Options* session, CheckpointStoreOptions* store) {
  const std::optional<Run> run = Detect();
  if (!run) return false;
  if (session != nullptr) {
    if (session->output_dir == Options().output_dir) {
      session->output_dir = run->outputs_path + "/trainscope";
    }
    session->config.emplace_back("polyaxon.outputs_path", run->outputs_path);
    if (!run->uuid.empty()) session->config.emplace_back("polyaxon.run_uuid", run->uuid);
  }
  if (store != nullptr && store->dir.empty()) store->dir = run->outputs_path + "/checkpoints";
  return true;
}

}  // namespace trainscope::polyaxon
