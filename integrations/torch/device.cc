// DevicePrefetcher and RecordStepMemory. See trainscope/torch/device.h.
#include "trainscope/torch/device.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <utility>

#if TRAINSCOPE_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace trainscope::libtorch {

bool BuiltWithCuda() { return TRAINSCOPE_TORCH_CUDA != 0; }

struct DevicePrefetcher::Impl {
  at::Device device;
  struct Pending {
    std::vector<at::Tensor> tensors;  // on the device (or the host batch, passing through)
    std::vector<at::Tensor> staging;  // pinned host copies, kept until the batch is taken
#if TRAINSCOPE_TORCH_CUDA
    std::unique_ptr<at::cuda::CUDAEvent> copied;
#endif
  };
  std::deque<Pending> pending;
  int64_t pinned_on_submit = 0;
#if TRAINSCOPE_TORCH_CUDA
  std::optional<c10::cuda::CUDAStream> side;
#endif
  explicit Impl(at::Device d) : device(d) {}
  bool copies() const { return TRAINSCOPE_TORCH_CUDA != 0 && device.is_cuda(); }
};

DevicePrefetcher::DevicePrefetcher(at::Device device) : impl_(std::make_unique<Impl>(device)) {}
DevicePrefetcher::~DevicePrefetcher() = default;

void PinForDevice(std::vector<at::Tensor>& batch, const at::Device& device) {
  if (TRAINSCOPE_TORCH_CUDA == 0 || !device.is_cuda()) return;
  for (at::Tensor& t : batch) {
    if (t.defined() && t.is_cpu() && !t.is_pinned()) t = t.pin_memory();
  }
}

bool DevicePrefetcher::copies() const { return impl_->copies(); }
int64_t DevicePrefetcher::pinned_on_submit() const { return impl_->pinned_on_submit; }
size_t DevicePrefetcher::pending() const { return impl_->pending.size(); }

void DevicePrefetcher::Submit(std::optional<std::vector<at::Tensor>> batch) {
  if (!batch) return;
  static const NameId name = InternName("prefetch.h2d");
  PhaseScope launch(Phase::kHostToDevice, name);
  Impl::Pending entry;
  if (!impl_->copies()) {
    entry.tensors = std::move(*batch);
    impl_->pending.push_back(std::move(entry));
    return;
  }
#if TRAINSCOPE_TORCH_CUDA
  if (!impl_->side) impl_->side = c10::cuda::getStreamFromPool(false, impl_->device.index());
  c10::cuda::CUDAStreamGuard guard(*impl_->side);
  int64_t pinned_here = 0;
  for (at::Tensor& t : *batch) {
    at::Tensor host = t;
    if (!t.is_cuda() && !t.is_pinned()) {
      host = t.pin_memory();  // the host copy PinForDevice in the workers avoids
      ++pinned_here;
    }
    entry.tensors.push_back(host.to(impl_->device, /*non_blocking=*/true));
    entry.staging.push_back(std::move(host));
  }
  entry.copied = std::make_unique<at::cuda::CUDAEvent>();
  entry.copied->record(*impl_->side);
  impl_->pinned_on_submit += pinned_here;
  static const NameId pinned_name = InternName("prefetch.pinned_on_submit");
  RecordCounter(pinned_name, pinned_here);
#endif
  impl_->pending.push_back(std::move(entry));
}

std::optional<std::vector<at::Tensor>> DevicePrefetcher::Next() {
  if (impl_->pending.empty()) return std::nullopt;
  static const NameId name = InternName("prefetch.wait");
  PhaseScope wait(Phase::kHostToDevice, name);
  Impl::Pending entry = std::move(impl_->pending.front());
  impl_->pending.pop_front();
#if TRAINSCOPE_TORCH_CUDA
  if (entry.copied) {
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(impl_->device.index());
    entry.copied->block(current);
    for (at::Tensor& t : entry.tensors) t.record_stream(current);
  }
#endif
  return std::move(entry.tensors);
}

namespace {

// A "Vm...:  <n> kB" line of /proc/self/status, in bytes; -1 if absent.
int64_t StatusBytes(const char* key) {
  FILE* f = std::fopen("/proc/self/status", "re");
  if (f == nullptr) return -1;
  char line[256];
  int64_t bytes = -1;
  const size_t key_length = std::strlen(key);
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, key, key_length) == 0 && line[key_length] == ':') {
      long long kb = 0;
      if (std::sscanf(line + key_length + 1, "%lld", &kb) == 1) bytes = kb * 1024;
      break;
    }
  }
  std::fclose(f);
  return bytes;
}

// Resets VmHWM to the current RSS ("5" to clear_refs, Linux 4.0+).
void ResetPeakRss() {
  const int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  const ssize_t written = write(fd, "5", 1);
  static_cast<void>(written);
  close(fd);
}

}  // namespace

void RecordStepMemory(Session& session, int64_t step, const at::Device& device) {
#if TRAINSCOPE_TORCH_CUDA
  if (device.is_cuda()) {
    namespace alloc = c10::cuda::CUDACachingAllocator;
    const auto stats = alloc::getDeviceStats(device.index());
    const auto& bytes =
        stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
    session.RecordStepMemory(step, bytes.current, bytes.peak, "cuda_caching_allocator");
    alloc::resetPeakStats(device.index());
    return;
  }
#endif
  static_cast<void>(device);
  session.RecordStepMemory(step, StatusBytes("VmRSS"), StatusBytes("VmHWM"), "process_rss");
  ResetPeakRss();
}

}  // namespace trainscope::libtorch
