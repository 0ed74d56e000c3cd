// DevicePrefetcher, RecordStepMemory and the memory budgets. See
// trainscope/torch/device.h.
#include "trainscope/torch/device.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <mutex>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "trainscope/torch/internal/device_index.h"

#if TRAINSCOPE_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace trainscope::libtorch {

#if TRAINSCOPE_TORCH_CUDA
namespace {
// The CUDA device `device` names ("cuda" alone: the current one).
c10::DeviceIndex CudaIndex(const at::Device& device) {
  return detail::ResolveDeviceIndex(device, [] { return c10::cuda::current_device(); });
}
}  // namespace
#endif

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
  std::deque<Pending> pending;  // at most max_pending
  size_t max_pending;
  int64_t pinned_on_submit = 0;
#if TRAINSCOPE_TORCH_CUDA
  std::optional<c10::cuda::CUDAStream> side;
#endif
  Impl(at::Device d, size_t most) : device(d), max_pending(std::max<size_t>(most, 1)) {}
  bool copies() const { return TRAINSCOPE_TORCH_CUDA != 0 && device.is_cuda(); }
};

DevicePrefetcher::DevicePrefetcher(at::Device device, size_t max_pending)
    : impl_(std::make_unique<Impl>(device, max_pending)) {}
DevicePrefetcher::~DevicePrefetcher() = default;

void PinForDevice(std::vector<at::Tensor>& batch, const at::Device& device) {
  if (TRAINSCOPE_TORCH_CUDA == 0 || !device.is_cuda()) return;
#if TRAINSCOPE_TORCH_CUDA
  // A worker thread's current device is 0 until set: without the guard the
  // host allocator would make a context there, on every rank.
  const c10::cuda::CUDAGuard on_device(CudaIndex(device));
#endif
  for (at::Tensor& t : batch) {
    if (t.defined() && t.is_cpu() && !t.is_pinned()) t = t.pin_memory();
  }
}

absl::Status SetCurrentDevice(const at::Device& device) {
  if (!device.is_cuda()) return absl::OkStatus();
#if TRAINSCOPE_TORCH_CUDA
  try {
    c10::cuda::set_device(CudaIndex(device));
    return absl::OkStatus();
  } catch (const std::exception& e) {
    std::string message = e.what();
    if (const size_t eol = message.find('\n'); eol != std::string::npos) message.resize(eol);
    return absl::FailedPreconditionError(
        absl::StrCat("SetCurrentDevice(", device.str(), "): ", message));
  }
#else
  return absl::FailedPreconditionError(
      "SetCurrentDevice: this build of trainscope::torch has no CUDA paths");
#endif
}

bool DevicePrefetcher::copies() const { return impl_->copies(); }
int64_t DevicePrefetcher::pinned_on_submit() const { return impl_->pinned_on_submit; }
size_t DevicePrefetcher::pending() const { return impl_->pending.size(); }
size_t DevicePrefetcher::max_pending() const { return impl_->max_pending; }

absl::Status DevicePrefetcher::Submit(std::optional<std::vector<at::Tensor>> batch) {
  if (!batch) return absl::OkStatus();
  if (impl_->pending.size() >= impl_->max_pending) {
    return absl::ResourceExhaustedError(
        absl::StrCat("DevicePrefetcher::Submit: ", impl_->pending.size(),
                     " batches pending, the most it holds (max_pending); take one with Next() "
                     "first"));
  }
  static const NameId name = InternName("prefetch.h2d");
  PhaseScope launch(Phase::kHostToDevice, name);
  Impl::Pending entry;
  if (!impl_->copies()) {
    entry.tensors = std::move(*batch);
    impl_->pending.push_back(std::move(entry));
    return absl::OkStatus();
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
  return absl::OkStatus();
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
    const c10::DeviceIndex index = CudaIndex(device);
    const auto stats = alloc::getDeviceStats(index);
    constexpr auto kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    const auto& allocated = stats.allocated_bytes[kAll];
    const auto& reserved = stats.reserved_bytes[kAll];
    session.RecordStepMemory(step, allocated.current, allocated.peak, "cuda_caching_allocator",
                             reserved.current, reserved.peak);
    alloc::resetPeakStats(index);
    return;
  }
#endif
  static_cast<void>(device);
  session.RecordStepMemory(step, StatusBytes("VmRSS"), StatusBytes("VmHWM"), "process_rss");
  ResetPeakRss();
}

namespace {

// The CPU budget: LibTorch's CPU allocator behind a count of live bytes.
// Each allocation gets a small context (the inner DataPtr and its size) so
// that its free is counted too. Lives for the process, never destroyed:
// tensors it allocated may outlive any owner.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(c10::Allocator* inner) : inner_(inner) {}

  c10::DataPtr allocate(size_t n) override {
    const auto bytes = static_cast<int64_t>(n);
    const int64_t live = live_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    const int64_t limit = limit_.load(std::memory_order_relaxed);
    if (limit > 0 && live > limit) {
      live_.fetch_sub(bytes, std::memory_order_relaxed);
      refused_.fetch_add(1, std::memory_order_relaxed);
      TORCH_CHECK_WITH(OutOfMemoryError, false, "trainscope CPU memory budget: ", n,
                       " bytes more would make ", live,
                       " bytes of CPU tensors, over the budget of ", limit,
                       " bytes (trainscope::libtorch::LimitMemory)");
    }
    int64_t peak = peak_.load(std::memory_order_relaxed);
    while (live > peak && !peak_.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
    }
    auto* context = new Context{c10::DataPtr(), bytes, this};
    try {
      context->inner = inner_->allocate(n);
    } catch (...) {
      live_.fetch_sub(bytes, std::memory_order_relaxed);
      delete context;
      throw;
    }
    void* data = context->inner.get();
    const c10::Device device = context->inner.device();
    return c10::DataPtr(data, context, &Free, device);
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  void set_limit(int64_t bytes) { limit_.store(bytes, std::memory_order_relaxed); }
  CpuTensorMemory counts() const {
    CpuTensorMemory m;
    m.live_bytes = live_.load(std::memory_order_relaxed);
    m.peak_bytes = peak_.load(std::memory_order_relaxed);
    m.limit_bytes = limit_.load(std::memory_order_relaxed);
    m.refused = refused_.load(std::memory_order_relaxed);
    return m;
  }

 private:
  struct Context {
    c10::DataPtr inner;
    int64_t bytes;
    CountingCpuAllocator* owner;
  };
  static void Free(void* p) {
    auto* context = static_cast<Context*>(p);
    context->owner->live_.fetch_sub(context->bytes, std::memory_order_relaxed);
    delete context;  // frees the inner allocation through its own deleter
  }

  c10::Allocator* inner_;
  std::atomic<int64_t> live_{0}, peak_{0}, limit_{0}, refused_{0};
};

std::atomic<CountingCpuAllocator*> g_cpu_budget{nullptr};

CountingCpuAllocator* InstallCpuBudget() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto* counting = new CountingCpuAllocator(c10::GetCPUAllocator());
    // The highest priority: nothing set later at a lower one replaces it.
    c10::SetCPUAllocator(counting, /*priority=*/255);
    g_cpu_budget.store(counting, std::memory_order_release);
  });
  return g_cpu_budget.load(std::memory_order_acquire);
}

int64_t CgroupLimitBytes() {
  std::ifstream in("/sys/fs/cgroup/memory.max");  // cgroup v2; "max" when unlimited
  std::string text;
  if (!(in >> text) || text == "max") return 0;
  try {
    return std::stoll(text);
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

absl::Status LimitMemory(const at::Device& device, int64_t bytes) {
  if (bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("LimitMemory: ", bytes, " bytes: the budget cannot be negative"));
  }
  if (device.is_cpu()) {
    const int64_t total = DeviceMemoryBytes(device);
    if (total > 0 && bytes > total) {
      return absl::OutOfRangeError(
          absl::StrCat("LimitMemory: ", bytes, " bytes is more than this machine's ", total));
    }
    InstallCpuBudget()->set_limit(bytes);
    return absl::OkStatus();
  }
  if (!device.is_cuda()) {
    return absl::InvalidArgumentError(
        absl::StrCat("LimitMemory: ", device.str(), ": only cpu and cuda devices are supported"));
  }
#if TRAINSCOPE_TORCH_CUDA
  try {
    const int64_t total = DeviceMemoryBytes(device);
    if (total <= 0)
      return absl::InternalError("LimitMemory: cannot read " + device.str() + "'s memory");
    if (bytes > total) {
      return absl::OutOfRangeError(
          absl::StrCat("LimitMemory: ", bytes, " bytes is more than ", device.str(), "'s ", total));
    }
    const double fraction =
        bytes == 0 ? 1.0 : static_cast<double>(bytes) / static_cast<double>(total);
    const c10::DeviceIndex index = CudaIndex(device);
    // The caching allocator exists only once CUDA is initialised (PyTorch's
    // set_per_process_memory_fraction initialises it first too).
    at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
    c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, index);
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("LimitMemory(", device.str(), "): ", e.what()));
  }
#else
  return absl::FailedPreconditionError(
      "LimitMemory: this build of trainscope::torch has no CUDA paths");
#endif
}

CpuTensorMemory CpuTensorMemoryNow() {
  const CountingCpuAllocator* budget = g_cpu_budget.load(std::memory_order_acquire);
  return budget == nullptr ? CpuTensorMemory{} : budget->counts();
}

int64_t DeviceMemoryBytes(const at::Device& device) {
#if TRAINSCOPE_TORCH_CUDA
  if (device.is_cuda()) {
    try {
      return static_cast<int64_t>(at::cuda::getDeviceProperties(CudaIndex(device))->totalGlobalMem);
    } catch (const std::exception&) {
      return 0;
    }
  }
#endif
  if (!device.is_cpu()) return 0;
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  int64_t total = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
  const int64_t cgroup = CgroupLimitBytes();
  if (cgroup > 0 && (total == 0 || cgroup < total)) total = cgroup;
  return total;
}

}  // namespace trainscope::libtorch
