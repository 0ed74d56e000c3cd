// analyze_bench, Options, environment, results and child processes. See analyze_bench.h.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/analyze/analyze_bench.h"

namespace trainscope::analyze_bench {

Options& Opt() {
  static Options options;
  return options;
}

Env& E() {
  static Env env;
  return env;
}

double NowS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double ThreadCpuS() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

uint64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

double MemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double value = 0;
  std::string unit;
  while (in >> key >> value >> unit) {
    if (key == "MemAvailable:") return value * 1024;
  }
  return 0;
}

std::map<std::string, Result>& Results() {
  static std::map<std::string, Result> results;
  return results;
}

double Median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

const Result* Find(const std::string& name) {
  auto it = Results().find(name);
  return it == Results().end() || it->second.samples.empty() ? nullptr : &it->second;
}
double WallS(const std::string& name) {
  const Result* r = Find(name);
  if (r == nullptr) return NAN;
  std::vector<double> v;
  for (const Sample& s : r->samples) v.push_back(s.wall_s);
  return Median(v);
}
double BestWallS(const std::string& name) {
  const Result* r = Find(name);
  if (r == nullptr) return NAN;
  double best = INFINITY;
  for (const Sample& s : r->samples) best = std::min(best, s.wall_s);
  return best;
}
double CpuS(const std::string& name) {
  const Result* r = Find(name);
  if (r == nullptr) return NAN;
  std::vector<double> v;
  for (const Sample& s : r->samples) v.push_back(s.cpu_s);
  return Median(v);
}
double Extra(const std::string& name, const std::string& key) {
  const Result* r = Find(name);
  if (r == nullptr) return NAN;
  auto it = r->extra.find(key);
  return it == r->extra.end() ? NAN : Median(it->second);
}

// Records one timed iteration and tells Google Benchmark its time.
void Record(benchmark::State& state, const std::string& name, Sample sample,
            std::map<std::string, double> extra) {
  Result& r = Results()[name];
  r.samples.push_back(sample);
  for (const auto& [k, v] : extra) r.extra[k].push_back(v);
  state.SetIterationTime(std::max(sample.wall_s, 1e-9));
}

const char* PassMiss(bool pass) { return pass ? "PASS" : "MISS"; }

// Runs argv with stdout and stderr sent to files, in its own process group,
// killing that group after timeout_s.
//
// The child is started through a fresh exec of this program
// (--analyze_bench_exec_child, see ExecChildMain) that forks the command
// and reports its wall time and rusage: Linux's exec records the old
// address space's peak RSS in the new image's ru_maxrss, so a command
// started straight from this (large) process would report at least this
// process's RSS. The middle process is a few MB, below any command's own
// peak. posix_spawn (vfork-like in glibc) does not copy this process's page
// tables, so a big parent does not slow the start either.
Child RunChild(const std::vector<std::string>& argv, const std::string& out_path,
               const std::string& err_path, double timeout_s) {
  Child child;
  const std::string report = out_path + ".rusage";
  std::remove(report.c_str());
  std::vector<std::string> full = {E().self, "--analyze_bench_exec_child", report};
  full.insert(full.end(), argv.begin(), argv.end());
  std::vector<char*> args;
  for (const std::string& a : full) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);

  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  pid_t pid = -1;
  bool killed = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return done; })) {
      if (pid > 0) {
        kill(-pid, SIGKILL);  // the group of the child we started
        killed = true;
      }
    }
  });
  int rc;
  {
    std::lock_guard<std::mutex> lock(mu);
    rc = posix_spawn(&pid, args[0], &actions, &attr, args.data(), environ);
  }
  if (rc == 0) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    std::ifstream in(report);
    std::string key;
    double value;
    while (in >> key >> value) {
      if (key == "started") child.started = value != 0;
      if (key == "status") child.status = static_cast<int>(value);
      if (key == "wall_s") child.wall_s = value;
      if (key == "cpu_s") child.cpu_s = value;
      if (key == "maxrss_kb") child.max_rss_bytes = value * 1024;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    child.timed_out = killed;
  }
  cv.notify_all();
  watchdog.join();
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return child;
}

// The middle process of RunChild: analyze_bench --analyze_bench_exec_child
// REPORT COMMAND...: runs COMMAND, writes its wait status, wall time, CPU
// time and peak RSS to REPORT, and exits 0.
int ExecChildMain(int argc, char** argv) {
  if (argc < 4) return 2;
  const char* report = argv[2];
  const double t0 = NowS();
  const pid_t pid = fork();
  if (pid == 0) {
    execvp(argv[3], argv + 3);
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  if (pid > 0) {
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
    }
  }
  const double wall = NowS() - t0;
  FILE* f = std::fopen(report, "w");
  if (f == nullptr) return 2;
  std::fprintf(f, "started %d\nstatus %d\nwall_s %.9f\ncpu_s %.6f\nmaxrss_kb %ld\n",
               pid > 0 ? 1 : 0, status, wall,
               ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
                   ru.ru_stime.tv_usec * 1e-6,
               ru.ru_maxrss);
  std::fclose(f);
  return 0;
}

// The last non-empty line of a file (a Python traceback's error line).
std::string Tail(const std::string& path) {
  std::string text = ReadText(path);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
    text.pop_back();
  }
  const size_t nl = text.rfind('\n');
  std::string line = nl == std::string::npos ? text : text.substr(nl + 1);
  if (line.size() > 200) line.resize(200);
  return line.empty() ? "no output" : line;
}

}  // namespace trainscope::analyze_bench
