// trainscope/torch/device.h: feeding the device, and what it holds.
//
//   trainscope::libtorch::PrefetchLoader<std::vector<torch::Tensor>> loader(
//       [&](int64_t i) -> std::optional<std::vector<torch::Tensor>> {
//         std::vector<torch::Tensor> batch = Load(i);
//         trainscope::libtorch::PinForDevice(batch, device);  // on the worker
//         return batch;
//       });
//   trainscope::libtorch::DevicePrefetcher prefetch(device);
//   prefetch.Submit(loader.Next()).IgnoreError();  // copy batch k+1 ...
//   for (...) {
//     std::optional<std::vector<torch::Tensor>> batch = prefetch.Next();  // ... while k runs
//     prefetch.Submit(loader.Next()).IgnoreError();  // one pending: never full
//     ... train on *batch ...
//     trainscope::libtorch::RecordStepMemory(session, step, device);
//   }
#ifndef TRAINSCOPE_TORCH_DEVICE_H_
#define TRAINSCOPE_TORCH_DEVICE_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "trainscope/scope.h"
#include "trainscope/session.h"

namespace trainscope::libtorch {

// True when this build of trainscope::torch has the CUDA paths (LibTorch was
// built with CUDA and the toolkit was found); they still need a device at run
// time.
bool BuiltWithCuda();

// Makes `device` the calling thread's current CUDA device
// (c10::cuda::set_device), so that what LibTorch does without naming a
// device (torch::cuda::synchronize, the pinned host allocator, a context
// for the driver) happens there and not on GPU 0. Call it first thing on
// each rank's training thread, with that rank's device. A CPU device does
// nothing. Errors: FailedPrecondition with LibTorch's message (no such
// device, no driver), or for CUDA in a build without the CUDA paths.
absl::Status SetCurrentDevice(const at::Device& device);

// Pins the host tensors of `batch` for copies to `device`: each pageable
// CPU tensor is replaced by a page-locked copy (LibTorch's caching host
// allocator, which reuses the blocks once their copies are done), so that
// DevicePrefetcher::Submit only launches the asynchronous copies. Call it
// where the batch is made: in a PrefetchLoader producer, on the loader's
// worker threads. Nothing happens for a non-CUDA device, a build without
// the CUDA paths, or tensors already pinned or on a device. It pins with
// `device` as the thread's current device (a CUDAGuard), so a worker
// thread touches no other GPU. Cost: a host copy per pageable tensor, on
// the calling thread. Throws what LibTorch throws (no driver).
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
// Memory: at most `max_pending` batches are held, so on CUDA at most
// max_pending x (the largest batch's bytes) of device memory for the
// copies, and as much pinned host memory for their staging copies (kept
// until the batch is taken); a batch Next() returned is the caller's. One
// thread.
class DevicePrefetcher {
 public:
  // `max_pending` (at least 1): batches submitted and not yet taken. The
  // usual loop (submit batch k+1, train on k) holds one.
  explicit DevicePrefetcher(at::Device device, size_t max_pending = 2);
  ~DevicePrefetcher();
  DevicePrefetcher(const DevicePrefetcher&) = delete;
  DevicePrefetcher& operator=(const DevicePrefetcher&) = delete;

  // Starts copying `batch` (host tensors; an empty optional is ignored, so a
  // loader's end can be passed straight in). Errors: ResourceExhausted when
  // max_pending batches are pending (the batch is not taken: take one with
  // Next() first). Cost: the asynchronous copies' launch, plus a host copy
  // for each pageable tensor (pinned here, counted in pinned_on_submit()
  // and the counter "prefetch.pinned_on_submit").
  absl::Status Submit(std::optional<std::vector<at::Tensor>> batch);
  // Tensors Submit had to pin on the calling thread so far (0 when the
  // loader pins them, or on the pass-through path).
  int64_t pinned_on_submit() const;
  // The oldest submitted batch, usable on the current stream; nullopt when
  // none is pending.
  std::optional<std::vector<at::Tensor>> Next();
  // Batches submitted and not yet taken; at most max_pending().
  size_t pending() const;
  size_t max_pending() const;
  // Whether copies go to a CUDA device (false: pass-through).
  bool copies() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Records the memory of step `step` in `session`: on a CUDA device (the
// current one for `torch::kCUDA` without an index) the caching allocator's
// allocated bytes now and their peak since the last call, and its reserved
// bytes (the segments it holds from the device, which LimitMemory caps)
// now and their peak. To give a per-step peak it then resets the device's
// peak statistics (CUDACachingAllocator::resetPeakStats, what
// torch.cuda.reset_peak_memory_stats does): a program that reads
// max_memory_allocated itself sees the peak since the last call, not since
// the start; on CPU the process's resident set now and
// its peak (VmHWM, reset through /proc/self/clear_refs where the kernel
// allows). Shown per step and as a peak in the report. Cost: a few reads
// of /proc or an allocator query; call it once a step, after the step.
void RecordStepMemory(Session& session, int64_t step, const at::Device& device);

// What the CPU memory budget (LimitMemory on a CPU device) has counted:
// bytes of CPU tensor storage allocated through LibTorch's CPU allocator
// since the budget was installed and not yet freed, their peak, the budget
// (0: none) and the allocations refused for it.
struct CpuTensorMemory {
  int64_t live_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t limit_bytes = 0;
  int64_t refused = 0;
};

// Caps the memory LibTorch may allocate on `device`, so that a batch that
// does not fit fails with LibTorch's typed c10::OutOfMemoryError (catch it
// by type, never by its text) instead of the machine swapping or the
// kernel's OOM killer ending the process:
// - CUDA: the caching allocator's per-process fraction
//   (setMemoryFraction) of the device's total memory, `bytes` of it;
// - CPU: a counting allocator installed once for the process in front of
//   LibTorch's own (c10::SetCPUAllocator, top priority) refuses an
//   allocation that would take the live CPU tensor bytes past `bytes`.
//   Only CPU tensor storage is counted (not the process's other heap, nor
//   tensors allocated before the first call), which is what a batch size
//   changes; it stands in for a device's memory so that a search for the
//   largest batch runs on CPU the way it runs on a GPU.
// `bytes` 0 lifts the cap (the counting allocator stays, at the cost of a
// small context allocation and two atomic updates per CPU allocation).
// Because each CPU allocation then carries that context, LibTorch cannot
// lazily clone (copy-on-write, `_lazy_clone`) CPU tensors allocated under
// the budget; ordinary training does not do so. Call it before starting
// threads that allocate (c10::SetCPUAllocator is not synchronised).
// Errors: InvalidArgument for negative bytes or a device other than CPU
// and CUDA; FailedPrecondition for CUDA in a build without the CUDA paths;
// OutOfRange when `bytes` exceeds the device's memory; what LibTorch
// throws becomes Internal.
absl::Status LimitMemory(const at::Device& device, int64_t bytes);

// The CPU budget's counts (all zero before the first LimitMemory on CPU).
// Cost: four atomic loads.
CpuTensorMemory CpuTensorMemoryNow();

// The memory a tensor on `device` may use at most: a CUDA device's total
// memory, or the machine's physical memory (or the cgroup's limit when it
// is lower) for CPU; 0 when it cannot be read. Cost: a driver query or a
// file read.
int64_t DeviceMemoryBytes(const at::Device& device);

// Runs `body()`. When it throws LibTorch's typed c10::OutOfMemoryError (a
// CUDA allocation, or LimitMemory's CPU budget, refused), records it with
// session.RecordOutOfMemory (the error's message without its backtrace)
// and returns ResourceExhausted with that message; otherwise OK. Other
// exceptions pass through unchanged. What `body` held is freed as it
// unwinds, so the run can still finish and write its report, which
// `trainscope tune batch` reads (docs/experiments.md, "The trial
// contract"):
//
//   absl::Status fits = trainscope::libtorch::CatchOutOfMemory(session, [&] { Train(); });
//   if (!fits.ok()) return 3;  // any non-zero code; the report says why
//
// Cost: a try block.
template <typename F>
absl::Status CatchOutOfMemory(Session& session, F&& body) {
  try {
    std::forward<F>(body)();
  } catch (const c10::OutOfMemoryError& e) {
    const char* message = e.what_without_backtrace();
    session.RecordOutOfMemory(message);
    return absl::ResourceExhaustedError(message);
  }
  return absl::OkStatus();
}

}  // namespace trainscope::libtorch

#endif  // TRAINSCOPE_TORCH_DEVICE_H_
