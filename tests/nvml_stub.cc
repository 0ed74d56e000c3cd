// A stand-in for libnvidia-ml.so.1 with two GPUs, for tuning_test: the
// NVML entry points GpuCovariates calls, with the C signatures of nvml.h
// and made-up readings. GPU 0 is idle (a GPU the trial does not use) at
// 210 MHz and 40 C: its clock must not set the minimum. GPU 1 works: it
// reads 1980 MHz on its first SM clock query and 1410 MHz after (a clock
// dropping during a trial), 71 C, and a software thermal slowdown.
#include <atomic>

namespace {
int g_devices[2];
std::atomic<int> g_clock_queries{0};
int Index(void* device) { return device == &g_devices[1] ? 1 : 0; }
}  // namespace

extern "C" {
__attribute__((visibility("default"))) int nvmlInit_v2() { return 0; }
__attribute__((visibility("default"))) int nvmlShutdown() { return 0; }
__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = 2;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned index,
                                                                         void** device) {
  if (index > 1) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = &g_devices[index];
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetClockInfo(void* device, int type,
                                                                  unsigned* mhz) {
  if (type != 1) return 2;  // only NVML_CLOCK_SM is asked for
  if (Index(device) == 0) {
    *mhz = 210;
  } else {
    *mhz = g_clock_queries.fetch_add(1) == 0 ? 1980 : 1410;
  }
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetTemperature(void* device, int sensor,
                                                                    unsigned* celsius) {
  if (sensor != 0) return 2;
  *celsius = Index(device) == 1 ? 71 : 40;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetCurrentClocksEventReasons(
    void* device, unsigned long long* reasons) {
  *reasons = Index(device) == 1 ? 0x20 : 0x1;  // sw_thermal_slowdown; gpu_idle
  return 0;
}
}
