// tests/test_util.h: temporary directories and child processes for tests.
#ifndef TRAINSCOPE_TESTS_TEST_UTIL_H_
#define TRAINSCOPE_TESTS_TEST_UTIL_H_

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "trainscope/report.h"
#include "trainscope/session.h"

namespace trainscope::testing {

// A fresh directory under $TMPDIR (or /tmp), removed when destroyed.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/trainscope-test-XXXXXX";
    path_ = mkdtemp(pattern.data()) != nullptr ? pattern : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void WriteAll(const std::string& path, const std::string& content) {
  std::ofstream(path) << content;
}

struct ProcessResult {
  int exit_code = -1;  // or 128 + signal
  std::string out;
  std::string err;
};

// Runs argv[0] with arguments, capturing stdout and stderr (through files,
// so a chatty child never blocks on a pipe).
inline ProcessResult RunProcess(const std::vector<std::string>& argv,
                                const std::vector<std::string>& extra_env = {}) {
  TempDir capture;
  const std::string out_path = capture.File("out");
  const std::string err_path = capture.File("err");
  const pid_t pid = fork();
  if (pid == 0) {
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    for (const std::string& kv : extra_env) putenv(const_cast<char*>(kv.c_str()));
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ProcessResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = ReadAll(out_path);
  result.err = ReadAll(err_path);
  return result;
}

// The counter or phase named `name` in a report; null if absent.
inline const Report::Counter* FindCounter(const Report& report, const std::string& name) {
  for (const Report::Counter& c : report.counters) {
    if (c.name == name) return &c;
  }
  return nullptr;
}
inline const PhaseStat* FindPhase(const Report& report, const std::string& name) {
  for (const PhaseStat& p : report.phases) {
    if (p.phase == name) return &p;
  }
  return nullptr;
}

// Session options for a test: outputs under `dir`, trace.json and
// report.json only (no summary on stdout), and the device timeline only
// when asked (a test on a GPU machine then sees what it sees here).
inline Options QuietOptions(const std::string& dir, const std::string& run_name = "test",
                            bool device_timeline = false) {
  Options options;
  options.output_dir = dir;
  options.run_name = run_name;
  options.sinks = Sink::kTraceJson | Sink::kReportJson;
  options.device_timeline = device_timeline;
  return options;
}

}  // namespace trainscope::testing

#endif  // TRAINSCOPE_TESTS_TEST_UTIL_H_
