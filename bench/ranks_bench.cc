// ranks_bench: `trainscope ranks` in memory independent of the run's
// length. For each size (--small and --steps rows a rank), writes 3 ranks'
// report-rank<R>.json and steps-rank<R>.jsonl (rows formatted by the
// steps writer's own code, rank 2 a straggler), runs `trainscope ranks` on
// them as a child, and prints its peak RSS (ru_maxrss of the child, from
// wait4) and time. The goal: the peak at --steps is at most the peak at
// --small plus the bound sdk/export/ranks_report.cc states for R ranks
// (about 280 KiB x R + 140 KiB); a ratio line says PASS or MISS. The rows
// are real files (about 230 bytes a row, so 10^7 rows are 2.3 GB a rank),
// deleted after each size. On the 2-core development VM 10^7 steps took 39 s
// to write and 92 s to report (every row is parsed twice), peak RSS 6.4 MB
// against 6.3 MB at 10^5; --steps=1000000 takes about 12 s in all. Not a
// test: it reports and exits 0 (1 when it cannot run at all).
//
//   ranks_bench DIR [--steps=10000000] [--small=100000]
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "sdk/export/report_json.h"
#include "sdk/export/steps_file.h"

namespace {

using trainscope::Report;
constexpr int kRanks = 3;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Writes the rank's report and `steps` rows; returns the steps file's bytes
// (0 on an error, said on stderr).
uint64_t WriteRank(const std::string& dir, int rank, int64_t steps) {
  Report report;
  report.run.name = "ranks_bench";
  report.run.rank = rank;
  report.run.world_size = kRanks;
  const std::string report_path = fmt::format("{}/report-rank{}.json", dir, rank);
  {
    std::FILE* f = std::fopen(report_path.c_str(), "w");
    if (f == nullptr) {
      std::perror(report_path.c_str());
      return 0;
    }
    const std::string json = trainscope::exporter::ReportToJson(report);
    std::fwrite(json.data(), 1, json.size(), f);
    std::fclose(f);
  }
  const std::string path = trainscope::exporter::StepsFileForReport(report_path);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::perror(path.c_str());
    return 0;
  }
  std::string block;
  block.reserve(2 << 20);
  uint64_t bytes = 0, x = 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(rank);
  Report::Step row;
  row.samples = 64;
  double start_s = 10;
  for (int64_t i = 0; i < steps; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const double jitter_ms = static_cast<double>((x >> 40) % 2000) / 1000;  // 0 to 2 ms
    row.index = i;
    row.start_s = start_s;
    row.duration_ms = 100 + jitter_ms;
    // Rank 2 computes 30 ms longer; the others wait for it in sync.
    row.sync_ms = (rank == 2 ? 5 : 35) + jitter_ms / 2;
    row.data_wait_ms = 1.5;
    row.phase_ms[static_cast<int>(trainscope::Phase::kForward)] = 30 + jitter_ms;
    row.phase_ms[static_cast<int>(trainscope::Phase::kBackward)] = 55;
    start_s += row.duration_ms / 1e3;
    trainscope::exporter::AppendStepRowJsonLine(&block, row);
    if (block.size() >= (1 << 20) || i + 1 == steps) {
      if (::write(fd, block.data(), block.size()) != static_cast<ssize_t>(block.size())) {
        std::perror(path.c_str());
        ::close(fd);
        return 0;
      }
      bytes += block.size();
      block.clear();
    }
  }
  ::close(fd);
  return bytes;
}

struct ChildRun {
  bool ok = false;
  double seconds = 0;
  long max_rss_kb = 0;
  std::string last_line;  // of its output, for the report
};

// `cli ranks dir` as a child, its output in dir/out.txt.
ChildRun RunRanks(const std::string& cli, const std::string& dir) {
  ChildRun run;
  const std::string out = dir + "/out.txt";
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, 1);
    execl(cli.c_str(), cli.c_str(), "ranks", dir.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  if (pid < 0) return run;
  int status = 0;
  struct rusage usage {};
  if (wait4(pid, &status, 0, &usage) != pid) return run;
  run.seconds = SecondsSince(start);
  run.max_rss_kb = usage.ru_maxrss;
  run.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (std::FILE* f = std::fopen(out.c_str(), "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      if (std::strncmp(line, "slowest rank:", 13) == 0 ||
          std::strncmp(line, "no straggler", 12) == 0) {
        run.last_line = line;
      }
    }
    std::fclose(f);
  }
  if (!run.last_line.empty() && run.last_line.back() == '\n') run.last_line.pop_back();
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: ranks_bench DIR [--steps=10000000] [--small=100000]\n");
    return 2;
  }
  int64_t big = 10000000, small = 100000;
  for (int i = 2; i < argc; ++i) {
    if (std::strncmp(argv[i], "--steps=", 8) == 0) big = std::atoll(argv[i] + 8);
    if (std::strncmp(argv[i], "--small=", 8) == 0) small = std::atoll(argv[i] + 8);
  }
  const std::string dir = argv[1];
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::printf("ranks_bench: `trainscope ranks` over %d ranks, peak RSS of the child\n", kRanks);
  std::printf("%14s %14s %10s %10s %12s  %s\n", "steps/rank", "MB/rank", "write_s", "ranks_s",
              "peak_RSS_MB", "verdict line");
  long rss_kb[2] = {0, 0};
  const int64_t sizes[2] = {small, big};
  for (int s = 0; s < 2; ++s) {
    const auto start = std::chrono::steady_clock::now();
    uint64_t bytes = 0;
    for (int rank = 0; rank < kRanks; ++rank) {
      bytes = WriteRank(dir, rank, sizes[s]);
      if (bytes == 0) return 1;
    }
    const double write_s = SecondsSince(start);
    const ChildRun run = RunRanks(TRAINSCOPE_CLI_PATH, dir);
    for (int rank = 0; rank < kRanks; ++rank) {
      std::filesystem::remove(fmt::format("{}/steps-rank{}.jsonl", dir, rank), ec);
    }
    if (!run.ok) {
      std::printf("ranks_bench: `trainscope ranks %s` failed (see %s/out.txt)\n", dir.c_str(),
                  dir.c_str());
      return 1;
    }
    rss_kb[s] = run.max_rss_kb;
    std::printf("%14lld %14.1f %10.1f %10.1f %12.1f  %s\n", static_cast<long long>(sizes[s]),
                static_cast<double>(bytes) / 1e6, write_s, run.seconds, run.max_rss_kb / 1024.0,
                run.last_line.c_str());
    std::fflush(stdout);
  }
  // ranks_report.cc's bound on what may depend on the data, for 3 ranks.
  const double bound_kb = 280.0 * kRanks + 140;
  const double ratio = static_cast<double>(rss_kb[1]) / static_cast<double>(rss_kb[0]);
  const double ratio_bound = (rss_kb[0] + bound_kb) / rss_kb[0];
  std::printf(
      "ranks_bench: peak RSS at %lld steps / at %lld steps = %.3f (bound %.3f: growth <= %.0f KiB "
      "for %d ranks): %s\n",
      static_cast<long long>(big), static_cast<long long>(small), ratio, ratio_bound, bound_kb,
      kRanks, ratio <= ratio_bound ? "PASS" : "MISS");
  return 0;
}
