// trainscope/torch/internal/collectives.h: what libtorch::ProcessGroup
// decides from an error and from the environment, apart from c10d, so that
// it can be tested without peers.
//
// Not for users (docs/architecture.md, "Layers"): namespace
// trainscope::libtorch::detail; it may change without notice.
#ifndef TRAINSCOPE_TORCH_INTERNAL_COLLECTIVES_H_
#define TRAINSCOPE_TORCH_INTERNAL_COLLECTIVES_H_

#include <exception>
#include <functional>

namespace trainscope::libtorch::detail {

// Whether a collective's error means a peer or the transport failed (a
// rank died, timed out, or the store is gone), rather than a call c10d
// refused. c10d's distributed errors (c10::DistError and its kinds:
// DistBackendError, DistStoreError, DistNetworkError) and errors from
// outside c10 (Gloo's transport, the system) are failures; any other
// c10::Error (TORCH_CHECK on a tensor list, a dtype, a device) is a usage
// error, which no peer can explain.
bool IsPeerFailure(const std::exception& error);

// Whether ProcessGroupNCCL blocks the host in wait(), read from the
// environment as c10d reads it: TORCH_NCCL_BLOCKING_WAIT, else (when it is
// unset) the older NCCL_BLOCKING_WAIT; y, yes, 1, t, true are true and n,
// no, 0, f, false are false, in any case; unset or another value is false.
// `getenv` returns a variable's value or null.
bool NcclBlockingWait(const std::function<const char*(const char*)>& getenv);

}  // namespace trainscope::libtorch::detail

#endif  // TRAINSCOPE_TORCH_INTERNAL_COLLECTIVES_H_
