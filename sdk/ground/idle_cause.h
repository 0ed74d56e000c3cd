// sdk/ground/idle_cause.h: why the accelerator idles.
//
// The causes the gap analysis blames idle time on, in priority order (where
// several are active at once, the first takes the time), each with the name
// the report, the steps file and the pages write, and what to do about it.
// One table, read by the analysis (the blame, the recommendation) and by the
// html pages (their next steps); docs/report-schema.md describes each.
#ifndef TRAINSCOPE_SDK_GROUND_IDLE_CAUSE_H_
#define TRAINSCOPE_SDK_GROUND_IDLE_CAUSE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace trainscope::ground {

// The first six are the non-compute phases, in Phase's order of them.
enum class IdleCause : uint8_t {
  kDataWait,    // data_wait phase: the input pipeline
  kH2d,         // h2d phase: host-to-device copies
  kSync,        // sync phase, or a thread blocked in a CUDA synchronisation
  kCheckpoint,  // checkpoint phase
  kEval,        // eval phase
  kOther,       // other (custom) ranges
  kCopyCall,    // the host in cudaMemcpy*/cudaMemset* calls
  kLaunch,      // the host in kernel launches
  kCudaApi,     // the host in other CUDA calls
  kHost,        // inside a step, no phase or call covers it
  kOutsideStep  // between steps
};
inline constexpr int kIdleCauseCount = 11;

struct IdleCauseInfo {
  IdleCause cause;
  std::string_view name;    // as written in report.json, steps.jsonl, pages
  std::string_view advice;  // what to do about it (the recommendation's clause)
};

inline constexpr std::array<IdleCauseInfo, kIdleCauseCount> kIdleCauses = {{
    {IdleCause::kDataWait, "data_wait",
     "tune the loader (workers, prefetch depth, pinned memory; "
     "docs/guide-map.md#input-pipeline)"},
    {IdleCause::kH2d, "h2d", "copy from pinned memory on a side stream, ahead of use"},
    {IdleCause::kSync, "sync", "remove blocking synchronisations (.item(), .cpu(), device syncs)"},
    {IdleCause::kCheckpoint, "checkpoint", "checkpoint asynchronously or less often"},
    {IdleCause::kEval, "eval", "evaluate less often or on other resources"},
    {IdleCause::kOther, "other", "look at the custom ranges that run while compute idles"},
    {IdleCause::kCopyCall, "copy_call",
     "the host blocks in cudaMemcpyAsync/cudaMemsetAsync (pageable memory, or a hidden "
     "device-to-host sync): pin the host buffer or move the read off the step"},
    {IdleCause::kLaunch, "launch",
     "launch-bound: fuse small kernels, capture the step in a CUDA graph, or raise the batch "
     "size"},
    {IdleCause::kCudaApi, "cuda_api",
     "CUDA calls in the loop (allocation, event polling): warm the caching allocator and keep "
     "cudaMalloc/cudaFree out of the step"},
    {IdleCause::kHost, "host",
     "host work no phase covers (launch overhead or unmarked code): mark it with "
     "TRAINSCOPE_RANGE"},
    {IdleCause::kOutsideStep, "outside_step", "work between steps: move it into the loop or off"},
}};

// The cause's place in kIdleCauses (and in arrays indexed by cause).
constexpr int IdleCauseIndex(IdleCause cause) { return static_cast<int>(cause); }
constexpr std::string_view IdleCauseName(IdleCause cause) {
  return kIdleCauses[IdleCauseIndex(cause)].name;
}
constexpr std::string_view IdleCauseAdvice(IdleCause cause) {
  return kIdleCauses[IdleCauseIndex(cause)].advice;
}
// The cause a report names; nullopt for a name that is none of them.
constexpr std::optional<IdleCause> IdleCauseNamed(std::string_view name) {
  for (const IdleCauseInfo& info : kIdleCauses) {
    if (info.name == name) return info.cause;
  }
  return std::nullopt;
}

// The idle share from which the recommendation names a cause, and the band
// [low, high) around it in which it says the run is near the threshold (so
// that runs either side of it, at 9.9% and 10.0%, read alike). Below low,
// compute is busy enough: the next steps are the application's tuning.
inline constexpr double kRecommendIdleThreshold = 0.10;
inline constexpr double kRecommendNearLow = 0.08;
inline constexpr double kRecommendNearHigh = 0.12;

}  // namespace trainscope::ground

#endif  // TRAINSCOPE_SDK_GROUND_IDLE_CAUSE_H_
