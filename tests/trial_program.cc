// trial_program: a small instrumented program for the experiment engine's
// and `trainscope tune`'s tests, on trainscope's core alone (no LibTorch:
// it starts in milliseconds and runs under the sanitizers). It keeps the
// trial contract of docs/experiments.md: a quality target, the training
// curve through Session::RecordLoss, out of memory through
// Session::RecordOutOfMemory.
//
//   trial_program [--out=DIR] [--steps=20] [--step_ms=1] [--seed=0]
//                 [--no_target] [--no_loss] [--batch=B --memory_limit=M]
//                 [--hang] [--loss_offset=X]
//                 [--workers=W --decode_ms=D] [--any_flag=value ...]
//
// Each step sleeps --step_ms, records its loss (exp(-step / 10) plus a
// seeded wobble of 1% plus --loss_offset), and the run reaches the quality
// target "score" >= 1 at its last step. With --decode_ms, a loader is
// simulated: each step first waits for its batch (a data_wait phase) of
// D ms with no workers, D / W - step_ms with W of them working ahead (none
// once they keep up), so the knee is W = D / step_ms. --batch above --memory_limit records
// an out-of-memory failure at step 0 and exits 3. --hang sleeps for good
// before its first step. Unknown --flags are recorded as configuration
// (so that a command can carry any placeholder). Exit codes: 0, 2 for a
// bad flag, 3 out of memory.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "trainscope/trainscope.h"

namespace {

bool Number(std::string_view text, double* out) {
  const std::string copy(text);
  char* end = nullptr;
  *out = std::strtod(copy.c_str(), &end);
  return !copy.empty() && end != nullptr && *end == '\0';
}

}  // namespace

int main(int argc, char** argv) {
  trainscope::Options options;
  options.output_dir = "out/trial_program";
  options.run_name = "trial_program";
  options.sinks = trainscope::Sink::kReportJson;
  options.device_timeline = false;  // no CUPTI line in its log
  double steps = 20, step_ms = 1, seed = 0, batch = 0, memory_limit = -1, loss_offset = 0;
  double workers = 0, decode_ms = 0;
  bool target = true, hang = false, loss = true;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string_view key = arg.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? "" : arg.substr(eq + 1);
    double* number = key == "--steps"          ? &steps
                     : key == "--step_ms"      ? &step_ms
                     : key == "--seed"         ? &seed
                     : key == "--batch"        ? &batch
                     : key == "--memory_limit" ? &memory_limit
                     : key == "--loss_offset"  ? &loss_offset
                     : key == "--workers"      ? &workers
                     : key == "--decode_ms"    ? &decode_ms
                                               : nullptr;
    if (number != nullptr) {
      if (!Number(value, number)) {
        std::fprintf(stderr, "trial_program: %s: not a number\n", argv[i]);
        return 2;
      }
    } else if (key == "--out") {
      options.output_dir = std::string(value);
    } else if (key == "--no_target") {
      target = false;
    } else if (key == "--no_loss") {
      loss = false;
    } else if (key == "--hang") {
      hang = true;
    } else if (key.substr(0, 2) == "--" && key.size() > 2) {
      options.config.emplace_back(std::string(key.substr(2)), std::string(value));
    } else {
      std::fprintf(stderr, "trial_program: %s: expected --flag=value\n", argv[i]);
      return 2;
    }
  }
  options.config.emplace_back("batch_size", std::to_string(static_cast<int64_t>(batch)));
  absl::StatusOr<trainscope::Session> session = trainscope::Session::Start(options);
  if (!session.ok()) {
    std::fprintf(stderr, "trial_program: %s\n", session.status().ToString().c_str());
    return 1;
  }
  if (hang) std::this_thread::sleep_for(std::chrono::hours(1));
  if (target) session->SetQualityTarget("score", 1.0, /*higher_is_better=*/true);
  uint64_t state = static_cast<uint64_t>(seed) * 6364136223846793005u + 1442695040888963407u;
  const auto n = static_cast<int64_t>(steps);
  for (int64_t i = 0; i < n; ++i) {
    trainscope::StepScope step(*session, trainscope::StepIndex(i), trainscope::Samples(1));
    if (memory_limit >= 0 && batch > memory_limit) {
      session->RecordOutOfMemory("batch " + std::to_string(static_cast<int64_t>(batch)) +
                                 " needs more than the memory limit " +
                                 std::to_string(static_cast<int64_t>(memory_limit)));
      return 3;  // the Session finishes as it goes out of scope
    }
    if (decode_ms > 0) {
      const double wait_ms = workers < 1 ? decode_ms : std::max(0.0, decode_ms / workers - step_ms);
      TRAINSCOPE_PHASE(kDataWait);
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(wait_ms));
    }
    {
      TRAINSCOPE_PHASE(kForward);
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(step_ms));
    }
    state = state * 6364136223846793005u + 1442695040888963407u;
    const double wobble = 0.01 * (static_cast<double>(state >> 11) / 9007199254740992.0 - 0.5);
    const double value = std::exp(-static_cast<double>(i) / 10) + wobble + loss_offset;
    if (absl::Status s = loss ? session->RecordLoss(i, value) : absl::OkStatus(); !s.ok()) {
      std::fprintf(stderr, "trial_program: %s\n", s.ToString().c_str());
      return 1;
    }
    // Recorded with --no_target too: a program that forgot SetQualityTarget.
    if (i + 1 == n) (void)session->RecordQuality("score", 1.0);
  }
  absl::StatusOr<trainscope::Report> report = session->Finish();
  if (!report.ok()) {
    std::fprintf(stderr, "trial_program: %s\n", report.status().ToString().c_str());
    return 1;
  }
  return 0;
}
