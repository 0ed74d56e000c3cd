// trainscope/torch/state.h: the whole training state, as checkpoint files.
//
//   trainscope::libtorch::TrainingState state;
//   state.Add("model", *model);
//   state.Add("optimizer", optimizer);
//   state.Add("scaler", scaler);
//   state.AddRng();
//   state.SetValue("loader.epoch", "3");
//   absl::StatusOr<std::vector<trainscope::CheckpointFile>> files = state.Snapshot();
//   store.Save(step, *files);
//   ...
//   absl::StatusOr<trainscope::LoadedCheckpoint> latest = store.LoadLatest();
//   state.Restore(*latest);                  // bit-identical tensors, same RNG stream
//
// Each part is a Stateful: it turns itself into bytes and back. Adapters
// exist for a torch::nn::Module (parameters and buffers, restored onto the
// devices the module's own are on, whatever device saved them), a
// torch::optim::Optimizer (its per-parameter state, restored onto its
// parameters' device, the CPU when they are on several; and every param
// group's options, lr included), the GradScaler, the default CPU generator (and the
// CUDA ones when present), and string values (loader position, step, user
// keys) in values.tsv.
#ifndef TRAINSCOPE_TORCH_STATE_H_
#define TRAINSCOPE_TORCH_STATE_H_

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/checkpoint.h"
#include "trainscope/torch/amp.h"

namespace trainscope::libtorch {

// Something that can be saved into one checkpoint file and restored.
class Stateful {
 public:
  virtual ~Stateful() = default;
  // The file's bytes. Errors: Internal with LibTorch's message.
  virtual absl::StatusOr<std::string> Save() = 0;
  // Restores from Save()'s bytes. Errors: DataLoss naming what could not be
  // read (a checkpoint from another model, a corrupt archive).
  virtual absl::Status Load(const std::string& bytes) = 0;
};

// Where the input pipeline is: what a restored loader needs to hand out the
// same next batch.
struct LoaderPosition {
  int64_t epoch = 0;
  int64_t batch_index = 0;  // the next batch to hand out in the epoch
  uint64_t sampler_seed = 0;
};

class TrainingState {
 public:
  // Registers a part saved as "<name>.pt" (the object must outlive this).
  // Names as CheckpointFile's: letters, digits, '.', '_', '-'.
  void Add(const std::string& name, ::torch::nn::Module& module);
  void Add(const std::string& name, ::torch::optim::Optimizer& optimizer);
  void Add(const std::string& name, GradScaler& scaler);
  void Add(const std::string& name, std::unique_ptr<Stateful> part);
  // The default CPU generator, and every CUDA device's when CUDA is up
  // ("rng.pt"). Read and written under each generator's mutex.
  void AddRng();
  // String values saved in "values.tsv" (loader position, counters, ...).
  void SetValue(const std::string& key, const std::string& value);
  // The value restored (or set) for key, or `fallback`.
  std::string Value(const std::string& key, const std::string& fallback = "") const;
  // The loader position, as the values "loader.epoch", "loader.batch_index"
  // and "loader.sampler_seed". loader_position() reads them back (0 for one
  // that is absent or not a number).
  void SetLoaderPosition(const LoaderPosition& position);
  LoaderPosition loader_position() const;

  // Every part's bytes: the blocking half of a save (a copy of the state in
  // host memory). Errors: the failing part's, named.
  absl::StatusOr<std::vector<CheckpointFile>> Snapshot();
  // Restores every registered part from a verified checkpoint. Errors:
  // NotFound naming a part the checkpoint lacks; the part's DataLoss.
  absl::Status Restore(const LoadedCheckpoint& checkpoint);

 private:
  std::vector<std::pair<std::string, std::unique_ptr<Stateful>>> parts_;
  std::map<std::string, std::string> values_;
};

}  // namespace trainscope::libtorch

#endif  // TRAINSCOPE_TORCH_STATE_H_
