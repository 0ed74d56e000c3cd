// libFuzzer target: the trace reader and importer on a plain JSON trace
// (sdk/kineto), one parsing thread. Any input must give a trace or an
// error, never a crash, a hang or a sanitizer report.
#include <cstddef>
#include <cstdint>

#include "sdk/kineto/trace_import.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = trainscope::fuzz::AsFile(data, size, "trace.json");
  (void)trainscope::kineto::ImportTrace(path, /*threads=*/1);
  return 0;
}
