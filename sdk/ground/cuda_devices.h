// The CUDA devices this process can see, from the driver API loaded at run
// time (dlopen of libcuda.so.1): nothing is linked, so it answers on
// machines without CUDA too. Shared by the environment record and the
// CUPTI collector's check before it starts.
#ifndef TRAINSCOPE_SDK_GROUND_CUDA_DEVICES_H_
#define TRAINSCOPE_SDK_GROUND_CUDA_DEVICES_H_

#include <string>

namespace trainscope::ground {

// The CUDA devices, read through the driver API (libcuda.so.1 is loaded with
// dlopen, so nothing links against CUDA). Never fails: without a driver,
// `count` is 0 and `status` says why ("no CUDA driver: libcuda.so.1 not
// found").
struct CudaDevices {
  int count = 0;
  std::string first_name;
  std::string status;
  int driver_version = 0;  // cuDriverGetVersion: 12080 for CUDA 12.8; 0 if unknown
};
CudaDevices ProbeCudaDevices();

}  // namespace trainscope::ground

#endif  // TRAINSCOPE_SDK_GROUND_CUDA_DEVICES_H_
