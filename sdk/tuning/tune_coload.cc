// `trainscope tune loader --coload`: the contending processes beside a
// sweep. See tune.h.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "fmt/format.h"
#include "sdk/ground/files.h"
#include "sdk/tuning/tune.h"

namespace trainscope::tuning {

absl::StatusOr<CoLoad> ParseCoLoad(std::string_view text) {
  CoLoad load;
  if (text.empty()) return load;
  for (absl::string_view part : absl::StrSplit(absl::string_view(text.data(), text.size()), ',')) {
    const size_t eq = part.find('=');
    int n = 0;
    if (eq == absl::string_view::npos || !absl::SimpleAtoi(part.substr(eq + 1), &n) || n < 0 ||
        n > 256) {
      return absl::InvalidArgumentError(fmt::format(
          "--coload: \"{}\": expected cpu=N or io=M (N, M from 0 to 256)", std::string(part)));
    }
    const absl::string_view key = part.substr(0, eq);
    if (key == "cpu") {
      load.cpu = n;
    } else if (key == "io") {
      load.io = n;
    } else {
      return absl::InvalidArgumentError(
          fmt::format("--coload: \"{}\": expected cpu=N or io=M", std::string(part)));
    }
  }
  return load;
}

namespace {

[[noreturn]] void BusyLoop() {
  volatile uint64_t x = 0;
  for (;;) x = x * 6364136223846793005u + 1;
}

// Writes 4 MiB, syncs, reads it back; again, until killed. Only
// async-signal-safe calls after fork.
[[noreturn]] void IoLoop(const char* path, char* buffer, size_t size) {
  for (;;) {
    const int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) _exit(1);
    for (size_t done = 0; done < size;) {
      const ssize_t n = write(fd, buffer + done, size - done);
      if (n <= 0) _exit(1);
      done += static_cast<size_t>(n);
    }
    fsync(fd);
    lseek(fd, 0, SEEK_SET);
    while (read(fd, buffer, size) > 0) {
    }
    close(fd);
  }
}

}  // namespace

CoLoadProcesses::CoLoadProcesses(const CoLoad& load, const std::string& scratch_dir) {
  if (!load.any()) return;
  if (absl::Status s = ground::EnsureWritableDirectory(scratch_dir); !s.ok()) {
    status_ = s;
    return;
  }
  scratch_ = scratch_dir;
  constexpr size_t kIoBytes = 4 << 20;
  std::vector<std::string> paths;
  for (int i = 0; i < load.io; ++i) paths.push_back(fmt::format("{}/coload-io-{}", scratch_dir, i));
  std::vector<char> buffer(load.io > 0 ? kIoBytes : 0, 'x');  // before fork: no malloc after
  const pid_t parent = getpid();
  for (int i = 0; i < load.cpu + load.io; ++i) {
    const pid_t pid = fork();
    if (pid < 0) {
      status_ = ground::ErrnoStatus(errno, "--coload: fork");
      return;
    }
    if (pid == 0) {
      // Never outlive the sweep: killed with trainscope, whatever kills it.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(0);
      setpgid(0, 0);
      if (i < load.cpu) BusyLoop();
      IoLoop(paths[static_cast<size_t>(i - load.cpu)].c_str(), buffer.data(), buffer.size());
    }
    pids_.push_back(pid);
  }
}

CoLoadProcesses::~CoLoadProcesses() {
  for (pid_t pid : pids_) kill(pid, SIGKILL);
  for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
  for (size_t i = 0; !scratch_.empty(); ++i) {
    if (unlink(fmt::format("{}/coload-io-{}", scratch_, i).c_str()) != 0) break;
  }
}

}  // namespace trainscope::tuning
