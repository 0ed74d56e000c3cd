// trainscope/torch/device.h: feeding the device, and what it holds.
//
//   trainscope::libtorch::DevicePrefetcher prefetch(device);
//   prefetch.Submit(loader.Next());             // copy batch k+1 ...
//   for (...) {
//     std::optional<std::vector<torch::Tensor>> batch = prefetch.Next();  // ... while k runs
//     prefetch.Submit(loader.Next());
//     ... train on *batch ...
//     trainscope::libtorch::RecordStepMemory(session, step, device);
//   }
#ifndef TRAINSCOPE_TORCH_DEVICE_H_
#define TRAINSCOPE_TORCH_DEVICE_H_

#include <ATen/ATen.h>

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainscope/scope.h"
#include "trainscope/session.h"

namespace trainscope::libtorch {

// True when this build of trainscope::torch has the CUDA paths (LibTorch was
// built with CUDA and the toolkit was found); they still need a device at run
// time.
bool BuiltWithCuda();

// Copies host batches to the device ahead of use. On CUDA: each tensor is
// pinned (unless it already is), copied with non_blocking on a side stream
// from LibTorch's pool, and an event is recorded; Next() makes the current
// stream wait on that event and calls record_stream so the caching
// allocator does not reuse the memory early. On a CPU device (or a build
// without CUDA) batches pass through unchanged. The host time of both calls
// is kHostToDevice ("prefetch.h2d": pinning and launching the copies;
// "prefetch.wait": the stream wait): what the host spends on input
// transfer, so idle gaps it causes are blamed on h2d. The copies themselves
// overlap compute and appear in the device timeline (CUPTI memcpy records).
// One thread.
class DevicePrefetcher {
 public:
  explicit DevicePrefetcher(at::Device device);
  ~DevicePrefetcher();
  DevicePrefetcher(const DevicePrefetcher&) = delete;
  DevicePrefetcher& operator=(const DevicePrefetcher&) = delete;

  // Starts copying `batch` (host tensors; an empty optional is ignored, so a
  // loader's end can be passed straight in). Cost: the pin (a host copy
  // when the tensor is pageable) and the asynchronous copy's launch.
  void Submit(std::optional<std::vector<at::Tensor>> batch);
  // The oldest submitted batch, usable on the current stream; nullopt when
  // none is pending.
  std::optional<std::vector<at::Tensor>> Next();
  // Batches submitted and not yet taken.
  size_t pending() const;
  // Whether copies go to a CUDA device (false: pass-through).
  bool copies() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Records the memory of step `step` in `session`: on a CUDA device the
// caching allocator's allocated bytes now and their peak since the last
// call (which resets the peak); on CPU the process's resident set now and
// its peak (VmHWM, reset through /proc/self/clear_refs where the kernel
// allows). Shown per step and as a peak in the report. Cost: a few reads
// of /proc or an allocator query; call it once a step, after the step.
void RecordStepMemory(Session& session, int64_t step, const at::Device& device);

}  // namespace trainscope::libtorch

#endif  // TRAINSCOPE_TORCH_DEVICE_H_
