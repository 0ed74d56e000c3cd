// AutocastGuard and GradScaler. See trainscope/torch/amp.h.
#include "trainscope/torch/amp.h"

#include <ATen/autocast_mode.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace trainscope::libtorch {

AutocastGuard::AutocastGuard(c10::DeviceType device_type, at::ScalarType dtype, bool enabled)
    : device_type_(device_type),
      previous_enabled_(at::autocast::is_autocast_enabled(device_type)),
      previous_dtype_(at::autocast::get_autocast_dtype(device_type)),
      previous_cache_enabled_(at::autocast::is_autocast_cache_enabled()) {
  at::autocast::set_autocast_enabled(device_type, enabled);
  at::autocast::set_autocast_dtype(device_type, dtype);
  at::autocast::increment_nesting();
  at::autocast::set_autocast_cache_enabled(true);
}

AutocastGuard::~AutocastGuard() {
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_type_, previous_enabled_);
  at::autocast::set_autocast_dtype(device_type_, previous_dtype_);
  at::autocast::set_autocast_cache_enabled(previous_cache_enabled_);
}

GradScaler::GradScaler(GradScalerOptions options)
    : options_(options), pending_scale_(options.init_scale) {}

void GradScaler::LazyInit(const at::Device& device) {
  if (scale_.defined()) return;
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  // 0-dim, as torch.full((), init_scale): loss x scale keeps the loss's shape.
  scale_ = at::full({}, pending_scale_, f32);
  growth_tracker_ = at::full({}, pending_tracker_, f32.dtype(at::kInt));
}

at::Tensor GradScaler::Scale(const at::Tensor& loss) {
  if (!options_.enabled) return loss;
  LazyInit(loss.device());
  return loss * scale_.to(loss.device(), /*non_blocking=*/true);
}

absl::Status GradScaler::Unscale(::torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) return absl::OkStatus();
  PerOptimizer& state = per_optimizer_[&optimizer];
  if (state.stage == Stage::kUnscaled) {
    return absl::FailedPreconditionError(
        "GradScaler::Unscale: already called for this optimizer since the last Update()");
  }
  if (state.stage == Stage::kStepped) {
    return absl::FailedPreconditionError("GradScaler::Unscale: called after Step()");
  }
  if (!scale_.defined()) {
    return absl::FailedPreconditionError(
        "GradScaler::Unscale: no Scale() yet, so the gradients were not scaled");
  }
  // inv_scale is computed in double and rounded to float, as PyTorch does.
  const at::Tensor inv_scale = scale_.to(at::kDouble).reciprocal().to(at::kFloat);
  std::map<std::pair<std::string, at::ScalarType>, std::vector<at::Tensor>> groups;
  for (auto& group : optimizer.param_groups()) {
    for (auto& param : group.params()) {
      const at::Tensor& grad = param.grad();
      if (!grad.defined()) continue;
      if (grad.is_sparse()) {
        return absl::UnimplementedError("GradScaler::Unscale: sparse gradients are not supported");
      }
      if (grad.scalar_type() == at::kHalf && !options_.allow_fp16_gradients) {
        return absl::InvalidArgumentError(
            "GradScaler::Unscale: attempting to unscale FP16 gradients (a parameter of shape " +
            c10::str(grad.sizes()) +
            " is fp16): keep master parameters in fp32 under autocast, or set "
            "GradScalerOptions::allow_fp16_gradients");
      }
      groups[{grad.device().str(), grad.scalar_type()}].push_back(grad);
    }
  }
  for (auto& [key, grads] : groups) {
    const c10::Device device = grads.front().device();
    auto it = state.found_inf.find(key.first);
    if (it == state.found_inf.end()) {
      it = state.found_inf
               .emplace(key.first,
                        at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(device)))
               .first;
    }
    at::_amp_foreach_non_finite_check_and_unscale_(grads, it->second,
                                                   inv_scale.to(device, /*non_blocking=*/true));
  }
  if (state.found_inf.empty()) {  // no gradients: nothing overflowed
    state.found_inf.emplace(
        scale_.device().str(),
        at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(scale_.device())));
  }
  state.stage = Stage::kUnscaled;
  return absl::OkStatus();
}

absl::StatusOr<bool> GradScaler::Step(::torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  PerOptimizer* state = &per_optimizer_[&optimizer];
  if (state->stage == Stage::kStepped) {
    return absl::FailedPreconditionError(
        "GradScaler::Step: already called for this optimizer since the last Update()");
  }
  if (state->stage == Stage::kReady) {
    if (absl::Status status = Unscale(optimizer); !status.ok()) return status;
    state = &per_optimizer_[&optimizer];
  }
  double found = 0;
  for (const auto& [device, flag] : state->found_inf) found += flag.item<double>();
  state->stage = Stage::kStepped;
  if (found != 0) {
    ++skipped_steps_;
    return false;
  }
  optimizer.step();
  return true;
}

void GradScaler::Update() {
  if (!options_.enabled || !scale_.defined()) {
    per_optimizer_.clear();
    return;
  }
  std::vector<at::Tensor> flags;
  for (auto& [optimizer, state] : per_optimizer_) {
    for (auto& [device, flag] : state.found_inf) flags.push_back(flag.to(scale_.device()));
  }
  per_optimizer_.clear();
  if (flags.empty()) return;  // no optimizer was unscaled: keep the scale
  at::Tensor found_inf = flags[0];
  for (size_t k = 1; k < flags.size(); ++k) found_inf = found_inf + flags[k];
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf, options_.growth_factor,
                         options_.backoff_factor, options_.growth_interval);
  if (options_.min_scale > 0) scale_.clamp_min_(options_.min_scale);
}

double GradScaler::scale() const {
  return scale_.defined() ? scale_.item<double>() : pending_scale_;
}

int64_t GradScaler::growth_tracker() const {
  return growth_tracker_.defined() ? growth_tracker_.item<int64_t>() : pending_tracker_;
}

GradScaler::State GradScaler::state() const {
  State s;
  s.scale = scale();
  s.growth_tracker = growth_tracker();
  s.skipped_steps = skipped_steps_;
  s.options = options_;
  return s;
}

absl::Status GradScaler::Load(const State& s) {
  if (!(s.scale > 0) || !std::isfinite(s.scale)) {
    return absl::InvalidArgumentError("GradScaler::Load: scale " + std::to_string(s.scale) +
                                      " is not positive and finite");
  }
  if (!(s.options.growth_factor > 1) || !(s.options.backoff_factor < 1) ||
      !(s.options.backoff_factor > 0) || s.options.growth_interval < 1 || s.growth_tracker < 0) {
    return absl::InvalidArgumentError(
        "GradScaler::Load: need growth_factor > 1, 0 < backoff_factor < 1, growth_interval >= 1 "
        "and growth_tracker >= 0");
  }
  const bool allow_fp16_gradients = options_.allow_fp16_gradients;  // the program's, not state
  options_ = s.options;
  options_.allow_fp16_gradients = allow_fp16_gradients;
  skipped_steps_ = s.skipped_steps;
  if (scale_.defined()) {
    scale_.fill_(s.scale);
    growth_tracker_.fill_(s.growth_tracker);
  } else {
    pending_scale_ = s.scale;
    pending_tracker_ = s.growth_tracker;
  }
  per_optimizer_.clear();
  return absl::OkStatus();
}

}  // namespace trainscope::libtorch
