// trainscope/torch/amp.h: automatic mixed precision for LibTorch.
//
//   trainscope::libtorch::GradScaler scaler;           // fp16: scale the loss
//   for (...) {
//     torch::Tensor loss;
//     {
//       trainscope::libtorch::AutocastGuard autocast(torch::kCUDA, torch::kHalf);
//       loss = criterion(model->forward(x), y);
//     }
//     optimizer.zero_grad();
//     scaler.Scale(loss).backward();
//     absl::StatusOr<bool> stepped = scaler.Step(optimizer);  // skipped on inf/NaN
//     scaler.Update();
//   }
//
// LibTorch has autocast but no GradScaler (pytorch/pytorch#44710). This one
// follows torch.amp.GradScaler: the same defaults, the same fused kernels
// (at::_amp_foreach_non_finite_check_and_unscale_, at::_amp_update_scale_,
// on CPU too since LibTorch 2.3), so its scale sequence is PyTorch's; plus
// a minimum scale and a count of skipped steps. bf16 needs no scaler (it has
// fp32's exponent range): docs/amp.md.
#ifndef TRAINSCOPE_TORCH_AMP_H_
#define TRAINSCOPE_TORCH_AMP_H_

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trainscope::libtorch {

// RAII autocast region, like Python's `with torch.autocast(device, dtype)`:
// enables autocast for `device_type` with `dtype` (CPU: bf16; CUDA: fp16 or
// bf16) on this thread, and restores the previous state on exit; leaving
// the outermost region clears the cast cache. Regions nest; `enabled =
// false` turns autocast off inside. Cost: a few thread-local writes.
class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType device_type, at::ScalarType dtype, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_type_;
  bool previous_enabled_;
  at::ScalarType previous_dtype_;
  bool previous_cache_enabled_;
};

// GradScaler's settings; the defaults are torch.amp.GradScaler's.
struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  // good steps in a row before the scale grows
  double min_scale = 0.0;          // the scale never backs off below this (0: no floor)
  bool enabled = true;             // false: Scale/Unscale do nothing, Step always steps
  // Unscale fp16 gradients too. Off, as in PyTorch (which raises
  // "Attempting to unscale FP16 gradients."): an fp16 gradient of an fp16
  // parameter has lost what scaling was for, so Unscale refuses it.
  bool allow_fp16_gradients = false;
};

// Dynamic loss scaling for fp16 training. Scale() multiplies the loss so
// that small gradients survive fp16; Unscale() divides the gradients back
// and checks them for inf/NaN; Step() skips the optimizer step when any was
// found; Update() backs the scale off after an overflow and grows it after
// growth_interval clean steps. Not thread-safe: one training loop.
class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // loss x scale, the loss's shape. The scale is a 0-dim float32 tensor (as
  // PyTorch's) on the loss's device, made on the first call. Cost: one
  // multiply kernel.
  at::Tensor Scale(const at::Tensor& loss);

  // Divides the gradients of `optimizer`'s parameters by the scale in place
  // and notes whether any is inf or NaN. Optional before Step() (to clip
  // gradients first). Errors: FailedPrecondition when already called for
  // this optimizer since the last Update(), or before any Scale();
  // InvalidArgument for an fp16 gradient unless allow_fp16_gradients
  // (nothing is unscaled then); Unimplemented for sparse gradients. Cost: one fused kernel per
  // device and dtype.
  absl::Status Unscale(::torch::optim::Optimizer& optimizer);

  // Unscales if needed, then calls optimizer.step() unless a gradient was
  // inf or NaN. Returns whether it stepped. Errors: as Unscale, and
  // FailedPrecondition when Step() was already called since Update().
  // Cost: Unscale's, plus a device-to-host read of the inf flag (a sync).
  absl::StatusOr<bool> Step(::torch::optim::Optimizer& optimizer);

  // Adjusts the scale from the flags of every optimizer unscaled since the
  // last Update() (none: the scale is kept), clamps it to min_scale, and
  // resets them. Cost: one small kernel.
  void Update();

  // The current scale. Cost: a device-to-host read.
  double scale() const;
  // Clean steps since the last back-off or growth.
  int64_t growth_tracker() const;
  // Optimizer steps Step() skipped because of inf/NaN.
  int64_t skipped_steps() const { return skipped_steps_; }
  const GradScalerOptions& options() const { return options_; }

  // Everything needed to resume: like torch.amp.GradScaler.state_dict().
  struct State {
    double scale = 65536.0;
    int64_t growth_tracker = 0;
    int64_t skipped_steps = 0;
    GradScalerOptions options;
  };
  State state() const;
  // Restores a State (all options but allow_fp16_gradients, which stays
  // this scaler's). Errors: InvalidArgument for a scale that is not
  // positive and finite, factors that do not back off (< 1) and grow (> 1),
  // or a growth_interval below 1.
  absl::Status Load(const State& state);

 private:
  enum class Stage { kReady, kUnscaled, kStepped };
  struct PerOptimizer {
    Stage stage = Stage::kReady;
    std::map<std::string, at::Tensor> found_inf;  // by device ("cuda:0"), float32, 0-dim
  };
  void LazyInit(const at::Device& device);

  GradScalerOptions options_;
  at::Tensor scale_;           // float32, 0-dim, on the loss's device
  at::Tensor growth_tracker_;  // int32, 0-dim, same device
  double pending_scale_;       // init_scale (or a loaded scale) until the first Scale()
  int64_t pending_tracker_ = 0;
  int64_t skipped_steps_ = 0;
  std::map<const ::torch::optim::Optimizer*, PerOptimizer> per_optimizer_;
};

}  // namespace trainscope::libtorch

#endif  // TRAINSCOPE_TORCH_AMP_H_
