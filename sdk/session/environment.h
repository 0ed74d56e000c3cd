// sdk/session/environment.h: facts about the process and machine for the
// baseline record (internal).
#ifndef TRAINSCOPE_SDK_SESSION_ENVIRONMENT_H_
#define TRAINSCOPE_SDK_SESSION_ENVIRONMENT_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "trainscope/clock.h"
#include "trainscope/report.h"
#include "trainscope/session.h"

namespace trainscope::environment {

// When this process started, on the recorder's clock and on the wall clock,
// from /proc/self/stat (field 22, starttime).
struct ProcessStart {
  TimestampNs monotonic_ns = 0;
  double unix_s = 0;
};
// Errors: Internal naming /proc/self/stat if it cannot be read or parsed.
absl::StatusOr<ProcessStart> ReadProcessStart();

// Fills run identity and environment facts: code and data version, container
// image, accelerator, CPU, OS and host. Options win over environment
// variables, which win over detection. Cost: reads a few /proc files and may
// run `git rev-parse HEAD` once.
void DescribeEnvironment(const Options& options, Report* report);

// Parses a submission time: Unix seconds ("1764680000.5") or ISO 8601 UTC
// ("2026-12-02T14:05:00Z"). Errors: InvalidArgument quoting the text.
absl::StatusOr<double> ParseSubmitTime(std::string_view text);

// Formats Unix seconds as ISO 8601 UTC with milliseconds.
std::string FormatIso8601(double unix_s);

}  // namespace trainscope::environment

#endif  // TRAINSCOPE_SDK_SESSION_ENVIRONMENT_H_
