// libFuzzer target: the steps.jsonl reader (sdk/export/steps_file.h), the
// whole file: complete rows, a cut last line.
#include <cstddef>
#include <cstdint>

#include "sdk/export/steps_file.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = trainscope::fuzz::AsFile(data, size, "steps.jsonl");
  (void)trainscope::exporter::ReadStepsFile(path);
  return 0;
}
