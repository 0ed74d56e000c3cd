// soak: a long run in constant memory. Records 10^6, 10^7 and (with
// --events=100000000) 10^8 events through the public API, 10 a step (the
// step and 9 phases), paced at --rate events per second so that the drain
// keeps up, and prints after each the peak RSS (VmHWM), the growth per 10^6
// events since the first 10^6, the events dropped and the output directory's
// size. Goal: at most 32 MB of growth from 10^6 to 10^8 events.
// The baseline is the same process's RSS after its first 10^6 events.
// Not a test: it reports PASS/MISS and exits 0.
//
//   soak OUT_DIR [--events=10000000] [--rate=1000000]
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "trainscope/trainscope.h"

namespace {

// A field of /proc/self/status in kB ("VmHWM", "VmRSS").
long StatusKb(const char* field) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  long kb = -1;
  const size_t n = std::strlen(field);
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, field, n) == 0 && line[n] == ':') kb = std::atol(line + n + 1);
  }
  std::fclose(f);
  return kb;
}

// CPU seconds of the thread named `name` ("trainscope-drain"), -1 if none.
double ThreadCpuSeconds(const char* name) {
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    FILE* comm = std::fopen((task.path() / "comm").c_str(), "r");
    if (comm == nullptr) continue;
    char text[64] = {};
    const bool match = std::fgets(text, sizeof text, comm) != nullptr &&
                       std::strncmp(text, name, std::strlen(name)) == 0;
    std::fclose(comm);
    if (!match) continue;
    FILE* stat = std::fopen((task.path() / "stat").c_str(), "r");
    if (stat == nullptr) return -1;
    char line[1024] = {};
    const bool read = std::fgets(line, sizeof line, stat) != nullptr;
    std::fclose(stat);
    if (!read) return -1;
    const char* after = std::strrchr(line, ')');  // fields 14, 15: utime, stime
    unsigned long long utime = 0, stime = 0;
    if (after == nullptr ||
        std::sscanf(after + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                    &stime) != 2) {
      return -1;
    }
    return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return -1;
}

uint64_t DirectoryBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file(ec)) total += entry.file_size(ec);
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {  // a folder, not a flag misread as one
    std::fprintf(stderr, "usage: soak OUT_DIR [--events=N] [--rate=EVENTS_PER_S]\n");
    return 2;
  }
  long long max_events = 10000000;
  double rate = 1e6;
  for (int i = 2; i < argc; ++i) {
    if (std::strncmp(argv[i], "--events=", 9) == 0) max_events = std::atoll(argv[i] + 9);
    if (std::strncmp(argv[i], "--rate=", 7) == 0) rate = std::atof(argv[i] + 7);
  }
  constexpr int kPerStep = 10;
  trainscope::Options options;
  options.output_dir = argv[1];
  options.run_name = "soak";
  // report.json + steps.jsonl + trace.json (its default windows)
  options.sinks = trainscope::Sink::kReportJson | trainscope::Sink::kTraceJson;
  options.summary_stream = nullptr;
  options.nvtx = false;
  options.device_timeline = false;
  auto session = trainscope::Session::Start(options);
  if (!session.ok()) {
    std::fprintf(stderr, "soak: %s\n", session.status().ToString().c_str());
    return 1;
  }
  std::printf("soak: %d events a step, paced at %.0f events/s, 1 MiB ring, trace windows\n",
              kPerStep, rate);
  std::printf("%12s %10s %10s %14s %10s %12s %14s\n", "events", "seconds", "peak_MB", "MB_per_1e6",
              "dropped", "out_MB", "drain_Mev/cpu_s");
  using Clock = std::chrono::steady_clock;
  const auto begin = Clock::now();
  Clock::duration paused{0};
  long long recorded = 0;
  long long next_report = 1000000;
  double base_mb = 0;
  double peak_mb = 0;
  for (int64_t step = 0; recorded < max_events; ++step) {
    {
      trainscope::StepScope scope(*session, trainscope::StepIndex(step), trainscope::Samples(32));
      for (int p = 0; p < kPerStep - 1; ++p) {
        trainscope::PhaseScope phase(static_cast<trainscope::Phase>(p));
      }
    }
    recorded += kPerStep;
    if ((step & 63) == 0) {  // pace: stay at or below `rate`
      const auto due = begin + paused +
                       std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(recorded / rate));
      while (Clock::now() < due) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (recorded >= next_report) {
      // Let the drain catch up before reading memory; the pause is not
      // made up for afterwards (a burst would overflow the ring).
      const auto pause_start = Clock::now();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      peak_mb = StatusKb("VmHWM") / 1024.0;
      if (next_report == 1000000) base_mb = peak_mb;
      const double per_million =
          recorded > 1000000 ? (peak_mb - base_mb) / (recorded / 1e6 - 1) : 0;
      trainscope::ThreadBuffer* ring = trainscope::ActiveBuffer();
      const double drain_cpu = ThreadCpuSeconds("tscope-drain");
      std::printf("%12lld %10.1f %10.1f %14.3f %10llu %12.1f %14.2f\n", recorded,
                  std::chrono::duration<double>(Clock::now() - begin).count(), peak_mb, per_million,
                  ring != nullptr ? static_cast<unsigned long long>(ring->dropped()) : 0ull,
                  DirectoryBytes(options.output_dir) / 1e6,
                  drain_cpu > 0 ? recorded / 1e6 / drain_cpu : 0.0);
      std::fflush(stdout);
      next_report *= 10;
      paused += Clock::now() - pause_start;
    }
  }
  auto report = session->Finish();
  if (!report.ok()) {
    std::fprintf(stderr, "soak: %s\n", report.status().ToString().c_str());
    return 1;
  }
  const double growth = peak_mb - base_mb;
  std::printf(
      "soak: %lld events, %lld late; peak RSS grew %.1f MB after the first 10^6 events "
      "(goal <= 32 MB): %s; %lld dropped (goal 0): %s\n",
      static_cast<long long>(report->events.recorded), static_cast<long long>(report->events.late),
      growth, growth <= 32 ? "PASS" : "MISS", static_cast<long long>(report->events.dropped),
      report->events.dropped == 0 ? "PASS" : "MISS");
  std::printf("soak: trace.json %.2f MB (%lld windows written, %lld left out, %zu slowest steps)\n",
              static_cast<double>(report->trace.bytes) / 1e6,
              static_cast<long long>(report->trace.windows_written),
              static_cast<long long>(report->trace.windows_dropped), report->trace.slowest.size());
  std::printf("soak: steps.jsonl %lld rows, %lld dropped (the disk fell behind)\n",
              static_cast<long long>(report->steps_file.rows),
              static_cast<long long>(report->steps_file.rows_dropped));
  return 0;
}
