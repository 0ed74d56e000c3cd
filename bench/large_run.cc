// large_run: records a run of N events (default 10^6) through the public API
// and finishes it, writing trace.json and report.json. Used to measure what
// Finish() and `trainscope summary` cost on a large run (README,
// "Performance", measured with /usr/bin/time -v).
//   large_run OUT_DIR [EVENTS]
#include <cstdio>
#include <cstdlib>

#include "trainscope/trainscope.h"

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {  // a folder, not a flag misread as one
    std::fprintf(stderr, "usage: large_run OUT_DIR [EVENTS]\n");
    return 2;
  }
  const long events = argc > 2 ? std::atol(argv[2]) : 1000000;
  constexpr int kPerStep = 10;  // the step range and 9 phases
  trainscope::Options options;
  options.output_dir = argv[1];
  options.run_name = "large_run";
  options.buffer_bytes_per_thread = trainscope::Bytes(64u << 20);
  options.sinks = trainscope::Sink::kTraceJson | trainscope::Sink::kReportJson;
  auto session = trainscope::Session::Start(options);
  if (!session.ok()) {
    std::fprintf(stderr, "large_run: %s\n", session.status().ToString().c_str());
    return 1;
  }
  for (long i = 0; i < events / kPerStep; ++i) {
    trainscope::StepScope step(*session, i, trainscope::Samples(32));
    for (int p = 0; p < kPerStep - 1; ++p) {
      trainscope::PhaseScope scope(static_cast<trainscope::Phase>(p));
    }
  }
  auto report = session->Finish();
  if (!report.ok()) {
    std::fprintf(stderr, "large_run: %s\n", report.status().ToString().c_str());
    return 1;
  }
  std::printf("large_run: %lld events recorded, %lld dropped\n",
              static_cast<long long>(report->events.recorded),
              static_cast<long long>(report->events.dropped));
  return 0;
}
