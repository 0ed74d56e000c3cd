// sdk/nvtx/nvtx.h: the `trainscope` NVTX domain (internal).
//
// One process-wide domain with a category and color per Phase, a registered
// string per range name, and the step index as each range's payload. The
// scope hooks reach it through the internal::Nvtx* functions in scope.h. With
// NVTX compiled out (no CUDA toolkit at configure time) every function here is
// a no-op and Available() is false.
#ifndef TRAINSCOPE_SDK_NVTX_NVTX_H_
#define TRAINSCOPE_SDK_NVTX_NVTX_H_

#include <cstdint>
#include <string_view>

#include "trainscope/types.h"

namespace trainscope::nvtx {

// The NVTX domain name Nsight Systems shows.
inline constexpr std::string_view kDomainName = "trainscope";
// The NVTX category id of step ranges (phase categories are phase + 1).
inline constexpr uint32_t kStepCategory = 16;
// Names with ids at or above this are pushed with the "other" string.
inline constexpr NameId kMaxRegisteredNames = 4096;

// True when the SDK was compiled with NVTX.
bool Available();

// Creates the domain, its categories and the phase strings, once. Called by
// Session::Start so that no scope pays for it. Thread-safe.
void Initialize();

// Registers `name` under `id` as an NVTX string of the domain. Called once
// per id by the name registry. Thread-safe.
void RegisterName(NameId id, std::string_view name);

// Names OS thread `os_tid` for NVTX tools (nvtxNameOsThreadA).
void NameThread(uint32_t os_tid, std::string_view name);

}  // namespace trainscope::nvtx

#endif  // TRAINSCOPE_SDK_NVTX_NVTX_H_
