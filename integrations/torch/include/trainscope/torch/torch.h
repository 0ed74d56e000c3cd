// trainscope/torch/torch.h: LibTorch adapters for trainscope.
//
//   auto session = trainscope::Session::Start(options);
//   trainscope::libtorch::DescribeTorch(*session);   // torch version, current device
//
// This header includes no LibTorch header itself; its .cc files do. Link
// trainscope::torch, which carries LibTorch's flags (including the wheel's
// _GLIBCXX_USE_CXX11_ABI).
#ifndef TRAINSCOPE_TORCH_TORCH_H_
#define TRAINSCOPE_TORCH_TORCH_H_

#include <string>

#include "trainscope/session.h"

namespace trainscope::libtorch {

// What LibTorch says about this process's compute.
struct TorchFacts {
  std::string version;  // TORCH_VERSION, e.g. "2.15.0"
  bool cuda_available = false;
  int cuda_devices = 0;
  // The calling thread's current CUDA device ("cuda:1": a rank's, once it
  // set it, libtorch::SetCurrentDevice), or "cpu" without CUDA.
  std::string device;
  int intra_op_threads = 0;
};

// Asks LibTorch. Cost: a CUDA probe on first call (cheap without a driver).
TorchFacts QueryTorch();

// Adds QueryTorch()'s facts to the session's report config
// ("torch.version", "torch.device", "torch.cuda_devices",
// "torch.intra_op_threads").
void DescribeTorch(Session& session);

}  // namespace trainscope::libtorch

#endif  // TRAINSCOPE_TORCH_TORCH_H_
