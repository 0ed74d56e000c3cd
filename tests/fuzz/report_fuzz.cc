// libFuzzer target: report.json's reader (sdk/export/report_json.h, over
// ground/json_fields.h).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sdk/export/report_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)trainscope::exporter::ParseReportJson(
      std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  return 0;
}
