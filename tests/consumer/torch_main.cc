// A LibTorch training loop instrumented through the installed package only:
// trainscope::torch's headers, its Steps loop over a torch::data DataLoader.
#include <torch/torch.h>

#include <cstdio>

#include "trainscope/torch/loader.h"
#include "trainscope/trainscope.h"

using namespace trainscope;  // with torch:: still unambiguous

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  Options options;
  options.output_dir = argv[1];
  options.run_name = "consumer_torch";
  options.sinks = Sink::kReportJson;
  options.device_timeline = false;
  options.warmup_steps = 0;
  auto session = Session::Start(options);
  if (!session.ok()) {
    std::fprintf(stderr, "%s\n", session.status().ToString().c_str());
    return 1;
  }
  torch::manual_seed(0);
  auto dataset = torch::data::datasets::TensorDataset(torch::randn({64, 4}))
                     .map(torch::data::transforms::Stack<torch::data::TensorExample>());
  auto loader = torch::data::make_data_loader(std::move(dataset), /*batch_size=*/8);
  torch::nn::Linear model(4, 1);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.01));
  auto steps = libtorch::Steps(*session, *loader);
  for (auto& [step, batch] : steps) {
    step.set_samples(Samples(batch.data.size(0)));
    sgd.zero_grad();
    torch::Tensor loss;
    {
      TRAINSCOPE_PHASE(kForward);
      loss = model(batch.data).pow(2).mean();
    }
    {
      TRAINSCOPE_PHASE(kBackward);
      loss.backward();
    }
    TRAINSCOPE_PHASE(kOptimizer);
    sgd.step();
  }
  auto report = session->Finish();
  if (!report.ok()) return 1;
  std::printf("consumer_torch: %lld steps of LibTorch through trainscope::torch\n",
              static_cast<long long>(report->timing.steps));
  return report->timing.steps == 8 ? 0 : 1;
}
