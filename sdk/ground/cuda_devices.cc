// The CUDA device probe. See cuda_devices.h.
#include "sdk/ground/cuda_devices.h"

#include <dlfcn.h>

#include "fmt/format.h"

namespace trainscope::ground {

CudaDevices ProbeCudaDevices() {
  CudaDevices devices;
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    devices.status = "no CUDA driver: libcuda.so.1 not found";
    return devices;
  }
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  using GetFn = int (*)(int*, int);
  using NameFn = int (*)(char*, int, int);
  auto init = reinterpret_cast<InitFn>(dlsym(driver, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(driver, "cuDeviceGetCount"));
  auto get = reinterpret_cast<GetFn>(dlsym(driver, "cuDeviceGet"));
  auto name = reinterpret_cast<NameFn>(dlsym(driver, "cuDeviceGetName"));
  if (init == nullptr || count == nullptr || get == nullptr || name == nullptr) {
    devices.status = "CUDA driver lacks cuInit/cuDeviceGetName";
    return devices;
  }
  // Needs no cuInit: known even where no device is.
  using VersionFn = int (*)(int*);
  if (auto version = reinterpret_cast<VersionFn>(dlsym(driver, "cuDriverGetVersion"));
      version == nullptr || version(&devices.driver_version) != 0) {
    devices.driver_version = 0;
  }
  if (const int rc = init(0); rc != 0) {
    devices.status = fmt::format("cuInit failed with CUDA error {}{}", rc,
                                 rc == 100 ? " (no CUDA-capable device)" : "");
    return devices;
  }
  int n = 0;
  if (count(&n) != 0 || n == 0) {
    devices.status = "no CUDA device visible";
    return devices;
  }
  int device = 0;
  char text[256] = {};
  if (get(&device, 0) == 0 && name(text, sizeof(text), device) == 0) {
    devices.first_name = text;
  }
  devices.count = n;
  devices.status = fmt::format("{} CUDA device(s) via the driver API", n);
  return devices;  // the driver stays loaded: CUDA libraries will want it
}

}  // namespace trainscope::ground
