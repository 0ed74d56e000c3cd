// GPU covariates of a trial, read through NVML: the SM clock, the
// temperature and the clock-event ("throttle") reasons, which explain noise
// between trials that the objective alone cannot (a GPU that ran hot or at
// its power cap during one trial). NVML is loaded at run time with dlopen,
// as CUPTI is: no link dependency, and a machine without an NVIDIA driver
// gets a one-line status instead.
//
//   GpuCovariates gpu;                     // loads NVML once
//   GpuTrialSample sample;
//   gpu.Sample(&sample);                   // at the start and every 0.5 s
//   ... sample.sm_clock_mhz_min, temperature_c_max, reasons ...
//
// Library: $TRAINSCOPE_NVML_PATH when set, else libnvidia-ml.so.1 (the
// driver's). Every GPU that NVML lists is sampled: the covariates are the
// machine's, over the trial. Memory: a few words per object.
#ifndef TRAINSCOPE_SDK_TUNING_GPU_COVARIATES_H_
#define TRAINSCOPE_SDK_TUNING_GPU_COVARIATES_H_

#include <cstdint>
#include <optional>
#include <string>

namespace trainscope::tuning {

// What one trial's samples add up to; empty optionals until a sample was
// read.
struct GpuTrialSample {
  std::optional<double> sm_clock_mhz_min;   // the lowest SM clock of a GPU not idle
  std::optional<double> temperature_c_max;  // the highest temperature seen, any GPU
  uint64_t reasons = 0;                     // clock-event reasons seen (NVML bits), OR-ed
  int samples = 0;
};

// The names of NVML's clock-event reason bits, comma-separated, leaving out
// gpu_idle (a GPU between kernels is idle; it says nothing about noise):
// "sw_power_cap, sw_thermal_slowdown"; "" for none. Unknown bits read as
// "0x...".
std::string ClockEventReasonNames(uint64_t reasons);

class GpuCovariates {
 public:
  // Loads and initialises NVML. Never fails: status() says what happened.
  GpuCovariates();
  ~GpuCovariates();
  GpuCovariates(const GpuCovariates&) = delete;
  GpuCovariates& operator=(const GpuCovariates&) = delete;

  bool available() const { return impl_ != nullptr; }
  // "NVML: 2 GPUs (PATH)" or "unavailable (REASON)", e.g. "unavailable
  // (cannot load libnvidia-ml.so.1: libnvidia-ml.so.1: cannot open shared
  // object file: No such file or directory)".
  const std::string& status() const { return status_; }

  // Reads every GPU's SM clock, temperature and clock-event reasons into
  // `sample` (min, max, OR). The clock of a GPU whose reasons say idle is
  // left out (an idle GPU's clock drops by design). A reading NVML refuses
  // is skipped. Cost: three NVML calls per GPU (microseconds each); nothing
  // when unavailable.
  void Sample(GpuTrialSample* sample) const;

 private:
  struct Impl;
  Impl* impl_ = nullptr;
  std::string status_;
};

}  // namespace trainscope::tuning

#endif  // TRAINSCOPE_SDK_TUNING_GPU_COVARIATES_H_
