// trainscope/torch/device.h: feeding the device, and what it holds.
//
//   trainscope::libtorch::PrefetchLoader<std::vector<torch::Tensor>> loader(
//       [&](int64_t i) -> std::optional<std::vector<torch::Tensor>> {
//         std::vector<torch::Tensor> batch = Load(i);
//         trainscope::libtorch::PinForDevice(batch, device);  // on the worker
//         return batch;
//       });
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

// Pins the host tensors of `batch` for copies to `device`: each pageable
// CPU tensor is replaced by a page-locked copy (LibTorch's caching host
// allocator, which reuses the blocks once their copies are done), so that
// DevicePrefetcher::Submit only launches the asynchronous copies. Call it
// where the batch is made: in a PrefetchLoader producer, on the loader's
// worker threads. Nothing happens for a non-CUDA device, a build without
// the CUDA paths, or tensors already pinned or on a device. Cost: a host
// copy per pageable tensor, on the calling thread. Throws what LibTorch
// throws (no driver).
void PinForDevice(std::vector<at::Tensor>& batch, const at::Device& device);

// Copies host batches to the device ahead of use. On CUDA: each tensor is
// pinned (unless it already is: PinForDevice in the loader's workers keeps
// that host copy off the training thread; each one made here is counted,
// pinned_on_submit()), copied with non_blocking on a side stream
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
  // loader's end can be passed straight in). Cost: the asynchronous copies'
  // launch, plus a host copy for each pageable tensor (pinned here, counted
  // in pinned_on_submit() and the counter "prefetch.pinned_on_submit").
  void Submit(std::optional<std::vector<at::Tensor>> batch);
  // Tensors Submit had to pin on the calling thread so far (0 when the
  // loader pins them, or on the pass-through path).
  int64_t pinned_on_submit() const;
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
