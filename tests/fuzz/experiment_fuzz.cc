// libFuzzer target: experiment.json's reader (sdk/tuning: ReadExperiment,
// over ground/json_fields.h).
#include <cstddef>
#include <cstdint>

#include "sdk/tuning/experiment.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = trainscope::fuzz::AsFile(data, size, "experiment.json");
  (void)trainscope::tuning::ReadExperiment(path);
  return 0;
}
