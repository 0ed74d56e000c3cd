// Instruments a loop through the installed headers and library only.
#include <cstdio>

#include "trainscope/trainscope.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  trainscope::Options options;
  options.output_dir = argv[1];
  options.run_name = "consumer";
  options.sinks = trainscope::Sink::kTraceJson | trainscope::Sink::kReportJson;
  auto session = trainscope::Session::Start(options);
  if (!session.ok()) {
    std::fprintf(stderr, "%s\n", session.status().ToString().c_str());
    return 1;
  }
  for (int64_t i = 0; i < 10; ++i) {
    trainscope::StepScope step(*session, i, trainscope::Samples(4));
    TRAINSCOPE_PHASE(kForward);
  }
  auto report = session->Finish();
  if (!report.ok()) return 1;
  std::printf("consumer: %lld steps, trainscope %s\n", static_cast<long long>(report->timing.steps),
              TRAINSCOPE_VERSION_STRING);
  return report->timing.steps == 10 ? 0 : 1;
}
