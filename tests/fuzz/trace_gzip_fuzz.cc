// libFuzzer target: the trace reader on gzip input (sdk/kineto: ISA-L's
// inflate, the member and trailer checks), the bytes as given: mutations
// land in the compressed stream. Seeds are real .json.gz traces.
#include <cstddef>
#include <cstdint>

#include "sdk/kineto/trace_import.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = trainscope::fuzz::AsFile(data, size, "trace.json.gz");
  (void)trainscope::kineto::ImportTrace(path, /*threads=*/1);
  return 0;
}
