// libFuzzer target: a checkpoint's MANIFEST.json reader (ParseManifest,
// trainscope/checkpoint.h).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "trainscope/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)trainscope::ParseManifest(std::string_view(reinterpret_cast<const char*>(data), size),
                                  "fuzz");
  return 0;
}
