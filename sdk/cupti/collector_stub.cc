// The collector built without the CUDA toolkit's CUPTI headers: same API,
// Start always fails. See collector.h.
#include <limits>
#include <utility>

#include "sdk/cupti/collector.h"

namespace trainscope::cupti {

struct Collector::Impl {};

bool CompiledWithCupti() { return false; }

absl::StatusOr<std::unique_ptr<Collector>> Collector::Start(const CollectorOptions&) {
  return absl::UnavailableError("CUPTI unavailable: built without the CUDA toolkit");
}

Collector::Collector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Collector::~Collector() = default;
void Collector::SetActive(bool) {}
absl::Status Collector::Stop() { return absl::OkStatus(); }
void Collector::AppendTo(ground::Timeline*) {}
TimestampNs Collector::CompleteBefore() { return std::numeric_limits<TimestampNs>::max(); }
CollectorStats Collector::stats() const { return {}; }

}  // namespace trainscope::cupti
