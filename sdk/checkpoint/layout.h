// sdk/checkpoint/layout.h: the names inside a checkpoint store (see
// docs/checkpoint.md, "Layout of a store"), shared by the store and the
// manifest.
#ifndef TRAINSCOPE_SDK_CHECKPOINT_LAYOUT_H_
#define TRAINSCOPE_SDK_CHECKPOINT_LAYOUT_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "fmt/format.h"

namespace trainscope::checkpoint {

inline constexpr char kManifest[] = "MANIFEST.json";
inline constexpr int64_t kMaxStep = 999'999'999'999;  // step-<12 digits>
inline constexpr char kLatest[] = "latest";
inline constexpr char kLock[] = ".lock";
inline constexpr char kStepPrefix[] = "step-";

// 1200 -> "step-000000001200".
inline std::string StepDirName(int64_t step) { return fmt::format("step-{:012d}", step); }

// "step-000000001200" -> 1200; -1 for anything else.
inline int64_t StepOfDirName(std::string_view name) {
  if (name.size() != 17 || name.substr(0, 5) != kStepPrefix) return -1;
  int64_t step = 0;
  for (char c : name.substr(5)) {
    if (c < '0' || c > '9') return -1;
    step = step * 10 + (c - '0');
  }
  return step;
}

// A checkpoint file's name: letters, digits, '.', '_', '-', not starting
// with '.', at most 128 bytes, not the manifest's.
inline bool ValidFileName(std::string_view name) {
  if (name.empty() || name.size() > 128 || name[0] == '.' || name == kManifest) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

}  // namespace trainscope::checkpoint

#endif  // TRAINSCOPE_SDK_CHECKPOINT_LAYOUT_H_
