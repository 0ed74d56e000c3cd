// GPU covariates through NVML. See gpu_covariates.h.
#include "sdk/tuning/gpu_covariates.h"

#include <dlfcn.h>

#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include "fmt/format.h"

namespace trainscope::tuning {
namespace {

// NVML's C interface, the few entry points used here (nvml.h, NVML API
// Reference): every call returns nvmlReturn_t, 0 being NVML_SUCCESS; a
// device is an opaque handle.
using NvmlDevice = void*;
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlClockSm = 1;         // nvmlClockType_t NVML_CLOCK_SM
constexpr int kNvmlTemperatureGpu = 0;  // nvmlTemperatureSensors_t NVML_TEMPERATURE_GPU
using InitFn = int (*)();
using ShutdownFn = int (*)();
using CountFn = int (*)(unsigned*);
using HandleFn = int (*)(unsigned, NvmlDevice*);
using ClockFn = int (*)(NvmlDevice, int, unsigned*);
using TemperatureFn = int (*)(NvmlDevice, int, unsigned*);
using ReasonsFn = int (*)(NvmlDevice, unsigned long long*);

// nvmlClocksEventReasons (formerly nvmlClocksThrottleReasons) bits.
constexpr std::pair<uint64_t, const char*> kReasons[] = {
    {0x1, "gpu_idle"},
    {0x2, "applications_clocks_setting"},
    {0x4, "sw_power_cap"},
    {0x8, "hw_slowdown"},
    {0x10, "sync_boost"},
    {0x20, "sw_thermal_slowdown"},
    {0x40, "hw_thermal_slowdown"},
    {0x80, "hw_power_brake_slowdown"},
    {0x100, "display_clock_setting"},
};

}  // namespace

std::string ClockEventReasonNames(uint64_t reasons) {
  std::string names;
  reasons &= ~uint64_t{0x1};  // gpu_idle: not noise
  for (const auto& [bit, name] : kReasons) {
    if ((reasons & bit) == 0) continue;
    names += names.empty() ? "" : ", ";
    names += name;
    reasons &= ~bit;
  }
  if (reasons != 0) names += fmt::format("{}0x{:x}", names.empty() ? "" : ", ", reasons);
  return names;
}

struct GpuCovariates::Impl {
  void* library = nullptr;
  ShutdownFn shutdown = nullptr;
  ClockFn clock = nullptr;
  TemperatureFn temperature = nullptr;
  ReasonsFn reasons = nullptr;  // nullptr: this driver has neither name
  std::vector<NvmlDevice> devices;
};

GpuCovariates::GpuCovariates() {
  const char* override_path = std::getenv("TRAINSCOPE_NVML_PATH");
  const std::string path =
      override_path != nullptr && *override_path != '\0' ? override_path : "libnvidia-ml.so.1";
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    status_ =
        fmt::format("unavailable (cannot load {}: {})", path, why != nullptr ? why : "not found");
    return;
  }
  auto symbol = [&](const char* name) { return dlsym(library, name); };
  auto init = reinterpret_cast<InitFn>(symbol("nvmlInit_v2"));
  auto shutdown = reinterpret_cast<ShutdownFn>(symbol("nvmlShutdown"));
  auto count = reinterpret_cast<CountFn>(symbol("nvmlDeviceGetCount_v2"));
  auto handle = reinterpret_cast<HandleFn>(symbol("nvmlDeviceGetHandleByIndex_v2"));
  auto clock = reinterpret_cast<ClockFn>(symbol("nvmlDeviceGetClockInfo"));
  auto temperature = reinterpret_cast<TemperatureFn>(symbol("nvmlDeviceGetTemperature"));
  auto reasons = reinterpret_cast<ReasonsFn>(symbol("nvmlDeviceGetCurrentClocksEventReasons"));
  if (reasons == nullptr) {  // drivers before 535
    reasons = reinterpret_cast<ReasonsFn>(symbol("nvmlDeviceGetCurrentClocksThrottleReasons"));
  }
  if (init == nullptr || shutdown == nullptr || count == nullptr || handle == nullptr ||
      clock == nullptr || temperature == nullptr) {
    status_ = fmt::format("unavailable ({} lacks the NVML entry points used)", path);
    dlclose(library);
    return;
  }
  if (const int rc = init(); rc != kNvmlSuccess) {
    status_ = fmt::format("unavailable (nvmlInit_v2 returned {})", rc);
    dlclose(library);
    return;
  }
  unsigned n = 0;
  if (const int rc = count(&n); rc != kNvmlSuccess || n == 0) {
    status_ = rc != kNvmlSuccess
                  ? fmt::format("unavailable (nvmlDeviceGetCount_v2 returned {})", rc)
                  : std::string("unavailable (NVML lists no GPU)");
    shutdown();
    dlclose(library);
    return;
  }
  auto impl = std::make_unique<Impl>();
  impl->library = library;
  impl->shutdown = shutdown;
  impl->clock = clock;
  impl->temperature = temperature;
  impl->reasons = reasons;
  for (unsigned i = 0; i < n; ++i) {
    NvmlDevice device = nullptr;
    if (handle(i, &device) == kNvmlSuccess) impl->devices.push_back(device);
  }
  status_ = fmt::format("NVML: {} GPU{} ({}){}", impl->devices.size(),
                        impl->devices.size() == 1 ? "" : "s", path,
                        reasons == nullptr ? "; no clock-event reasons in this driver" : "");
  impl_ = impl.release();
}

GpuCovariates::~GpuCovariates() {
  if (impl_ == nullptr) return;
  impl_->shutdown();
  dlclose(impl_->library);
  delete impl_;
}

void GpuCovariates::Sample(GpuTrialSample* sample) const {
  if (impl_ == nullptr) return;
  for (NvmlDevice device : impl_->devices) {
    unsigned long long bits = 0;
    const bool reasons_read =
        impl_->reasons != nullptr && impl_->reasons(device, &bits) == kNvmlSuccess;
    if (reasons_read) sample->reasons |= bits;
    // An idle GPU (one the trial does not use, or before its first kernel)
    // drops to its idle clock, which says nothing of the trial's: only a
    // GPU at work sets the minimum.
    const bool idle = reasons_read && (bits & 0x1) != 0;
    unsigned mhz = 0, celsius = 0;
    if (!idle && impl_->clock(device, kNvmlClockSm, &mhz) == kNvmlSuccess) {
      const double v = mhz;
      if (!sample->sm_clock_mhz_min || v < *sample->sm_clock_mhz_min) sample->sm_clock_mhz_min = v;
    }
    if (impl_->temperature(device, kNvmlTemperatureGpu, &celsius) == kNvmlSuccess) {
      const double v = celsius;
      if (!sample->temperature_c_max || v > *sample->temperature_c_max) {
        sample->temperature_c_max = v;
      }
    }
  }
  ++sample->samples;
}

}  // namespace trainscope::tuning
