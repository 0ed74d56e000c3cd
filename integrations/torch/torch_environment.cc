// LibTorch facts for the report. See trainscope/torch/torch.h.
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <string>

#include "trainscope/torch/torch.h"

#if TRAINSCOPE_TORCH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace trainscope::libtorch {

TorchFacts QueryTorch() {
  TorchFacts facts;
  facts.version = TORCH_VERSION;
  facts.cuda_available = ::torch::cuda::is_available();
  facts.cuda_devices = facts.cuda_available ? static_cast<int>(::torch::cuda::device_count()) : 0;
  facts.device = "cpu";
#if TRAINSCOPE_TORCH_CUDA
  // The calling thread's device: each rank's own once it has set it.
  if (facts.cuda_available) facts.device = "cuda:" + std::to_string(c10::cuda::current_device());
#endif
  facts.intra_op_threads = at::get_num_threads();
  return facts;
}

void DescribeTorch(Session& session) {
  const TorchFacts facts = QueryTorch();
  session.SetConfig("torch.version", facts.version);
  session.SetConfig("torch.device", facts.device);
  session.SetConfig("torch.cuda_devices", std::to_string(facts.cuda_devices));
  session.SetConfig("torch.intra_op_threads", std::to_string(facts.intra_op_threads));
}

}  // namespace trainscope::libtorch
