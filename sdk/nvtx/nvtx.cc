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

struct Domain {
  nvtxDomainHandle_t handle = nullptr;
  nvtxStringHandle_t step_message = nullptr;
  std::array<std::atomic<nvtxStringHandle_t>, kMaxRegisteredNames> names{};

  Domain() {
    handle = nvtxDomainCreateA(std::string(kDomainName).c_str());
    for (int i = 0; i < kPhaseCount; ++i) {
      const std::string name(PhaseName(static_cast<Phase>(i)));
      nvtxDomainNameCategoryA(handle, static_cast<uint32_t>(i) + 1, name.c_str());
      names[i].store(nvtxDomainRegisterStringA(handle, name.c_str()),
                     std::memory_order_release);
    }
    nvtxDomainNameCategoryA(handle, kStepCategory, "step");
    step_message = nvtxDomainRegisterStringA(handle, "step");
  }
};

// Created on first use (the first interned name or Session::Start); never
// destroyed, so ranges may end during static destruction.
Domain& GetDomain() {
  static Domain* domain = new Domain();
  return *domain;
}

nvtxEventAttributes_t Attributes(nvtxStringHandle_t message, uint32_t category,
                                 uint32_t color, int64_t step) {
  nvtxEventAttributes_t attr{};
  attr.version = NVTX_VERSION;
  attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attr.category = category;
  attr.colorType = NVTX_COLOR_ARGB;
  attr.color = color;
  attr.payloadType = NVTX_PAYLOAD_TYPE_INT64;
  attr.payload.llValue = step;
  attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  attr.message.registered = message;
  return attr;
}

nvtxEventAttributes_t RangeAttributes(NameId name, Phase phase, int64_t step) {
  Domain& domain = GetDomain();
  const NameId slot =
      name < kMaxRegisteredNames ? name : static_cast<NameId>(Phase::kOther);
  nvtxStringHandle_t message = domain.names[slot].load(std::memory_order_acquire);
  if (message == nullptr) {
    message = domain.names[static_cast<int>(phase)].load(std::memory_order_acquire);
  }
  return Attributes(message, static_cast<uint32_t>(phase) + 1, PhaseColor(phase), step);
}

}  // namespace

bool Available() { return true; }

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

namespace trainscope::detail {

void NvtxPush(NameId name, Phase phase, int64_t step) noexcept {
  const nvtxEventAttributes_t attr = nvtx::RangeAttributes(name, phase, step);
  nvtxDomainRangePushEx(nvtx::GetDomain().handle, &attr);
}

void NvtxPushStep(int64_t step) noexcept {
  nvtx::Domain& domain = nvtx::GetDomain();
  const nvtxEventAttributes_t attr =
      nvtx::Attributes(domain.step_message, nvtx::kStepCategory, 0xFF404040u, step);
  nvtxDomainRangePushEx(domain.handle, &attr);
}

void NvtxPop() noexcept { nvtxDomainRangePop(nvtx::GetDomain().handle); }

uint64_t NvtxStart(NameId name, Phase phase, int64_t step) noexcept {
  const nvtxEventAttributes_t attr = nvtx::RangeAttributes(name, phase, step);
  const nvtxRangeId_t id = nvtxDomainRangeStartEx(nvtx::GetDomain().handle, &attr);
  return id == 0 ? 1 : id;  // 0 means "no range" to AsyncRange
}

void NvtxEnd(uint64_t range_id) noexcept {
  nvtxDomainRangeEnd(nvtx::GetDomain().handle, range_id);
}

}  // namespace trainscope::detail

#else  // !TRAINSCOPE_WITH_NVTX

bool Available() { return false; }
void RegisterName(NameId, std::string_view) {}
void NameThread(uint32_t, std::string_view) {}

}  // namespace trainscope::nvtx

namespace trainscope::detail {
void NvtxPush(NameId, Phase, int64_t) noexcept {}
void NvtxPushStep(int64_t) noexcept {}
void NvtxPop() noexcept {}
uint64_t NvtxStart(NameId, Phase, int64_t) noexcept { return 0; }
void NvtxEnd(uint64_t) noexcept {}
}  // namespace trainscope::detail

#endif  // TRAINSCOPE_WITH_NVTX
