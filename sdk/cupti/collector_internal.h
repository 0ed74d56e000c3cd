// sdk/cupti/collector_internal.h: the collector's parts that tests reach
// without a GPU: the order of the activity kinds, the APIs left unrecorded,
// the roles of API callbacks, and a start with a given CuptiLibrary (a
// stand-in library of plain functions in tests). Not a public API.
#ifndef TRAINSCOPE_SDK_CUPTI_COLLECTOR_INTERNAL_H_
#define TRAINSCOPE_SDK_CUPTI_COLLECTOR_INTERNAL_H_

#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sdk/cupti/collector.h"
#include "sdk/cupti/library.h"

namespace trainscope::cupti::internal {

struct ActivityKind {
  CUpti_ActivityKind kind;
  const char* name;  // "CONCURRENT_KERNEL"
};

// The kinds the collector enables, in the order it enables them: device
// kinds (kernels, copies, peer copies, sets) before the API kinds whose calls
// launch them, so that no launch is recorded without its device work; it
// disables them in the reverse order (`enable` false), API kinds first.
std::vector<ActivityKind> KindsInOrder(bool enable);

// Calls whose records are turned off after RUNTIME and DRIVER are enabled,
// as Kineto does: asked constantly, they carry no device work
// (cudaGetDevice, cuCtxGetCurrent, cuDevicePrimaryCtxGetState). Pairs of
// (domain, cbid).
std::vector<std::pair<CUpti_CallbackDomain, CUpti_CallbackId>> QuietApis();

// What the collector's API callback does for a call, by its name
// (cuptiGetCallbackName, version suffix dropped).
enum class CallbackRole : uint8_t {
  kNone,
  kLaunch,        // launches device work: announced at entry (records.h)
  kCaptureBegin,  // cudaStreamBeginCapture*, cuStreamBeginCapture*
  kCaptureEnd,    // cudaStreamEndCapture, cuStreamEndCapture
};
CallbackRole RoleOf(std::string_view name);

// Collector::Start after the driver probe and the library search: claims
// the process's collector, then configures CUPTI through `lib`, which must
// outlive the collector. Errors as Collector::Start.
absl::StatusOr<std::unique_ptr<Collector>> StartWithLibrary(const CollectorOptions& options,
                                                            const CuptiLibrary* lib);

}  // namespace trainscope::cupti::internal

#endif  // TRAINSCOPE_SDK_CUPTI_COLLECTOR_INTERNAL_H_
