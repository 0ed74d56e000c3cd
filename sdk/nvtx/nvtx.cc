// The `trainscope` NVTX domain. See nvtx.h.
#include "sdk/nvtx/nvtx.h"

#include <array>
#include <atomic>
#include <string>

#include "trainscope/phase.h"
#include "trainscope/scope.h"

#if TRAINSCOPE_WITH_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace trainscope::nvtx {

#if TRAINSCOPE_WITH_NVTX
namespace {

nvtxEventAttributes_t Attributes(nvtxStringHandle_t message, uint32_t category, uint32_t color) {
  nvtxEventAttributes_t attr{};
  attr.version = NVTX_VERSION;
  attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attr.category = category;
  attr.colorType = NVTX_COLOR_ARGB;
  attr.color = color;
  attr.payloadType = NVTX_PAYLOAD_TYPE_INT64;
  attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  attr.message.registered = message;
  return attr;
}

struct Domain {
  nvtxDomainHandle_t handle = nullptr;
  // Ready-made attributes per phase (and one for steps, at kPhaseCount):
  // a range copies one and sets its payload, and its message for custom names.
  std::array<nvtxEventAttributes_t, kPhaseCount + 1> templates{};
  std::array<std::atomic<nvtxStringHandle_t>, kMaxRegisteredNames> names{};

  Domain() {
    handle = nvtxDomainCreateA(std::string(kDomainName).c_str());
    for (int i = 0; i < kPhaseCount; ++i) {
      const Phase phase = static_cast<Phase>(i);
      const std::string name(PhaseName(phase));
      nvtxDomainNameCategoryA(handle, static_cast<uint32_t>(i) + 1, name.c_str());
      nvtxStringHandle_t message = nvtxDomainRegisterStringA(handle, name.c_str());
      names[i].store(message, std::memory_order_release);
      templates[i] = Attributes(message, static_cast<uint32_t>(i) + 1, PhaseColor(phase));
    }
    nvtxDomainNameCategoryA(handle, kStepCategory, "step");
    templates[kPhaseCount] =
        Attributes(nvtxDomainRegisterStringA(handle, "step"), kStepCategory, 0xFF404040u);
  }
};

// Built by Initialize() at Session::Start (or by an earlier interned name or
// thread name), before any scope can push. Never destroyed, so ranges may
// end during static destruction.
Domain& GetDomain() {
  static Domain* domain = new Domain();
  return *domain;
}
// The hot path reads this pointer instead of paying GetDomain()'s guard.
// Relaxed loads suffice: Session::Start stores it before its release store
// of g_generation, which every scope loads with acquire first.
std::atomic<Domain*> g_domain{nullptr};
// Falls back to GetDomain() when called before any Session::Start (a
// benchmark calling the detail functions directly).
inline Domain& HotDomain() {
  Domain* domain = g_domain.load(std::memory_order_relaxed);
  return TRAINSCOPE_LIKELY(domain != nullptr) ? *domain : GetDomain();
}

nvtxEventAttributes_t RangeAttributes(NameId name, Phase phase, int64_t step) {
  const Domain& domain = HotDomain();
  nvtxEventAttributes_t attr = domain.templates[static_cast<unsigned>(phase) % kPhaseCount];
  attr.payload.llValue = step;
  if (name >= static_cast<NameId>(kPhaseCount) && name < kMaxRegisteredNames) {
    if (nvtxStringHandle_t message = domain.names[name].load(std::memory_order_acquire)) {
      attr.message.registered = message;
    }
  }
  return attr;
}

}  // namespace

bool Available() { return true; }

void Initialize() { g_domain.store(&GetDomain(), std::memory_order_relaxed); }

void RegisterName(NameId id, std::string_view name) {
  if (id >= kMaxRegisteredNames) return;
  Domain& domain = GetDomain();
  const std::string text(name);
  domain.names[id].store(nvtxDomainRegisterStringA(domain.handle, text.c_str()),
                         std::memory_order_release);
}

void NameThread(uint32_t os_tid, std::string_view name) {
  GetDomain();  // make sure NVTX is initialised
  const std::string text(name);
  nvtxNameOsThreadA(os_tid, text.c_str());
}

}  // namespace trainscope::nvtx

// These run only while g_nvtx_enabled, which Session::Start sets after
// Initialize(), so g_domain is set.
namespace trainscope::internal {

void NvtxPush(NameId name, Phase phase, int64_t step) noexcept {
  const nvtxEventAttributes_t attr = nvtx::RangeAttributes(name, phase, step);
  nvtxDomainRangePushEx(nvtx::HotDomain().handle, &attr);
}

void NvtxPushStep(int64_t step) noexcept {
  nvtxEventAttributes_t attr = nvtx::HotDomain().templates[kPhaseCount];
  attr.payload.llValue = step;
  nvtxDomainRangePushEx(nvtx::HotDomain().handle, &attr);
}

void NvtxPop() noexcept { nvtxDomainRangePop(nvtx::HotDomain().handle); }

uint64_t NvtxStart(NameId name, Phase phase, int64_t step) noexcept {
  const nvtxEventAttributes_t attr = nvtx::RangeAttributes(name, phase, step);
  return nvtxDomainRangeStartEx(nvtx::HotDomain().handle, &attr);
}

void NvtxEnd(uint64_t range_id) noexcept { nvtxDomainRangeEnd(nvtx::HotDomain().handle, range_id); }

}  // namespace trainscope::internal

#else  // !TRAINSCOPE_WITH_NVTX

bool Available() { return false; }
void Initialize() {}
void RegisterName(NameId, std::string_view) {}
void NameThread(uint32_t, std::string_view) {}

}  // namespace trainscope::nvtx

namespace trainscope::internal {
void NvtxPush(NameId, Phase, int64_t) noexcept {}
void NvtxPushStep(int64_t) noexcept {}
void NvtxPop() noexcept {}
uint64_t NvtxStart(NameId, Phase, int64_t) noexcept { return 0; }
void NvtxEnd(uint64_t) noexcept {}
}  // namespace trainscope::internal

#endif  // TRAINSCOPE_WITH_NVTX
