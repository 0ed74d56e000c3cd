// trainscope/torch/internal/device_index.h: which CUDA device a
// torch::Device names.
//
// `torch::Device(torch::kCUDA)` has no index (-1): LibTorch reads it as the
// calling thread's current device. The caching allocator's queries take an
// index in [0, device_count) and throw for -1, so each CUDA path resolves
// the index first, here.
//
// Not for users (docs/architecture.md, "Layers"): namespace
// trainscope::libtorch::detail; it may change without notice.
#ifndef TRAINSCOPE_TORCH_INTERNAL_DEVICE_INDEX_H_
#define TRAINSCOPE_TORCH_INTERNAL_DEVICE_INDEX_H_

#include <c10/core/Device.h>

namespace trainscope::libtorch::detail {

// The index of `device` when it has one, else `current()` (the caller's
// c10::cuda::current_device, only called when needed).
template <typename CurrentIndex>
c10::DeviceIndex ResolveDeviceIndex(const c10::Device& device, CurrentIndex current) {
  return device.has_index() ? device.index() : static_cast<c10::DeviceIndex>(current());
}

}  // namespace trainscope::libtorch::detail

#endif  // TRAINSCOPE_TORCH_INTERNAL_DEVICE_INDEX_H_
