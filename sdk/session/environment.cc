// Process and machine facts for the report. See environment.h.
#include "sdk/session/environment.h"

#include <dlfcn.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "fmt/format.h"
#include "sdk/ground/cpus.h"
#include "sdk/ground/cuda_devices.h"
#include "sdk/nvtx/nvtx.h"
#include "trainscope/version.h"

namespace trainscope::environment {
namespace {

std::string ReadFile(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string EnvOr(const char* name, std::string fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0' ? std::string(value) : fallback;
}

// Runs `git rev-parse HEAD` in the working directory; "" when not a checkout.
std::string GitCommit() {
  FILE* pipe = popen("git rev-parse HEAD 2>/dev/null", "r");
  if (pipe == nullptr) return "";
  char line[128] = {};
  const bool got = std::fgets(line, sizeof(line), pipe) != nullptr;
  const int rc = pclose(pipe);
  if (!got || rc != 0) return "";
  return std::string(absl::StripAsciiWhitespace(line));
}

std::string CpuModel() {
  for (absl::string_view line : absl::StrSplit(ReadFile("/proc/cpuinfo"), '\n')) {
    if (absl::ConsumePrefix(&line, "model name")) {
      const size_t colon = line.find(':');
      if (colon != absl::string_view::npos) {
        return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
      }
    }
  }
  return "unknown CPU";
}

std::string ContainerImage() {
  std::string image = EnvOr("TRAINSCOPE_CONTAINER_IMAGE", "");
  if (!image.empty()) return image;
  if (std::getenv("KUBERNETES_SERVICE_HOST") != nullptr) {
    return "kubernetes pod (image not stated: set TRAINSCOPE_CONTAINER_IMAGE)";
  }
  if (access("/.dockerenv", F_OK) == 0) {
    return "docker container (image not stated: set TRAINSCOPE_CONTAINER_IMAGE)";
  }
  return "none detected";
}

std::string OsDescription() {
  utsname names{};
  if (uname(&names) != 0) return "linux";
  std::string pretty;
  for (absl::string_view line : absl::StrSplit(ReadFile("/etc/os-release"), '\n')) {
    if (absl::ConsumePrefix(&line, "PRETTY_NAME=")) {
      pretty = std::string(absl::StripSuffix(absl::StripPrefix(line, "\""), "\""));
    }
  }
  return fmt::format("{} (kernel {}, {})", pretty.empty() ? names.sysname : pretty, names.release,
                     names.machine);
}

}  // namespace

absl::StatusOr<ProcessStart> ReadProcessStart() {
  const std::string stat = ReadFile("/proc/self/stat");
  // Field 2 (comm) may hold spaces: parse after its closing parenthesis.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) {
    return absl::InternalError("/proc/self/stat: unexpected format (no ')')");
  }
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(close + 2), ' ');
  // After comm come fields 3, 4, ...; starttime is field 22, index 19 here.
  uint64_t start_ticks = 0;
  if (fields.size() < 20 || !absl::SimpleAtoi(fields[19], &start_ticks)) {
    return absl::InternalError("/proc/self/stat: cannot parse field 22 (starttime)");
  }
  const long ticks_per_s = sysconf(_SC_CLK_TCK);
  timespec boot{};
  timespec real{};
  clock_gettime(CLOCK_BOOTTIME, &boot);
  clock_gettime(CLOCK_REALTIME, &real);
  const TimestampNs mono_now = NowNs();
  const double boot_s = boot.tv_sec + boot.tv_nsec * 1e-9;
  const double age_s = boot_s - static_cast<double>(start_ticks) / ticks_per_s;
  ProcessStart start;
  start.monotonic_ns = mono_now - static_cast<TimestampNs>(age_s * 1e9);
  start.unix_s = real.tv_sec + real.tv_nsec * 1e-9 - age_s;
  return start;
}

void DescribeEnvironment(const Options& options, Report* report) {
  Report::Run& run = report->run;
  run.name = options.run_name;
  run.code_version = !options.code_version.empty() ? options.code_version
                                                   : EnvOr("TRAINSCOPE_CODE_VERSION", GitCommit());
  if (run.code_version.empty()) run.code_version = "unknown";
  run.data_version = !options.data_version.empty() ? options.data_version
                                                   : EnvOr("TRAINSCOPE_DATA_VERSION", "unknown");
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  run.host = host;
  run.pid = getpid();

  Report::Environment& env = report->environment;
  env.cpu_model = CpuModel();
  // The CPUs this process may run on (affinity, cgroup cpusets), not the host's.
  env.cpu_count = ground::AvailableCpus();
  const ground::CudaDevices cuda = ground::ProbeCudaDevices();
  env.accelerator_count = cuda.count;
  env.accelerator = cuda.count > 0 ? cuda.first_name : env.cpu_model;
  env.accelerator_status = cuda.count > 0 ? cuda.status : fmt::format("CPU only ({})", cuda.status);
  env.container_image =
      !options.container_image.empty() ? options.container_image : ContainerImage();
  env.os = OsDescription();
  env.trainscope_version = TRAINSCOPE_VERSION_STRING;
  env.nvtx_compiled = nvtx::Available();
}

absl::StatusOr<double> ParseSubmitTime(std::string_view text) {
  double seconds = 0;
  if (absl::SimpleAtod(std::string(text), &seconds) && seconds > 0) return seconds;
  absl::Time time;
  std::string error;
  if (absl::ParseTime(absl::RFC3339_full, std::string(text), &time, &error)) {
    return absl::ToDoubleSeconds(time - absl::UnixEpoch());
  }
  return absl::InvalidArgumentError(fmt::format(
      "submission time '{}': expected Unix seconds or ISO 8601 such as 2026-12-02T14:05:00Z ({})",
      text, error));
}

std::string FormatIso8601(double unix_s) {
  const absl::Time time =
      absl::UnixEpoch() + absl::Milliseconds(static_cast<int64_t>(unix_s * 1000));
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", time, absl::UTCTimeZone());
}

}  // namespace trainscope::environment
