// Kineto trace -> Timeline. See trace_import.h.
#include "sdk/kineto/trace_import.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <string_view>
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/numbers.h"
#include "fmt/format.h"

namespace trainscope::kineto {
namespace {

using analysis::Interval;
using analysis::IntervalKind;
using analysis::TrackKind;

constexpr std::string_view kStepPrefix = "ProfilerStep#";

struct PairHash {
  size_t operator()(const std::pair<int64_t, int64_t>& p) const {
    return std::hash<int64_t>()(p.first * 1000003 ^ p.second);
  }
};

class Importer {
 public:
  explicit Importer(ImportedTrace* out) : out_(out) {}

  // Whether Visit needs e's args: for the categories it keeps, steps
  // (args.samples), and every event up to HTA's first row (NoteHtaFacts tests
  // its stream and correlation). The rest, most of a trace, skip them.
  // Called from the reader's threads too: first_event_seen_ is atomic, and
  // a stale false only reads args that were not needed.
  bool WantsArgs(const RawEvent& e) const {
    if (!first_event_seen_.load(std::memory_order_relaxed)) return true;
    const std::string_view cat = e.cat;
    return cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset" || cat == "cuda_sync" ||
           cat == "cuda_runtime" || cat == "cuda_driver" || cat == "trainscope" ||
           e.name.substr(0, kStepPrefix.size()) == kStepPrefix;
  }

  void Visit(const RawEvent& e) {
    NoteHtaFacts(e);
    if (e.ph != "X" || !e.has_ts) {
      ++out_->skipped;
      return;
    }
    Interval interval;
    interval.start_ns = MicrosToNanos(e.ts_us);
    interval.end_ns = interval.start_ns + (e.has_dur ? MicrosToNanos(e.dur_us) : 0);
    interval.value = e.correlation;
    const std::string_view cat = e.cat;
    if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") {
      interval.kind = cat == "kernel"       ? IntervalKind::kKernel
                      : cat == "gpu_memcpy" ? IntervalKind::kMemcpy
                                            : IntervalKind::kMemset;
      ++(cat == "kernel" ? out_->kernels : cat == "gpu_memcpy" ? out_->memcpys : out_->memsets);
      const int64_t device = e.device >= 0 ? e.device : e.pid;
      const int64_t stream = e.stream >= 0 ? e.stream : e.tid;
      interval.track = Track(TrackKind::kDeviceStream, device, stream, "GPU {} stream {}");
    } else if (cat == "cuda_sync") {
      // CUPTI synchronisation records: Kineto puts them on the stream (or
      // context) waited on.
      interval.kind = IntervalKind::kSyncCall;
      interval.phase = Phase::kSync;
      ++out_->sync_calls;
      const int64_t device = e.device >= 0 ? e.device : e.pid;
      interval.track = Track(TrackKind::kDeviceStream, device, e.stream, "GPU {} stream {}");
    } else if (cat == "cuda_runtime" || cat == "cuda_driver") {
      interval.kind = IntervalKind::kRuntimeCall;
      ++out_->runtime_calls;
      interval.track = Track(TrackKind::kHostThread, e.pid, e.tid, "thread {1}");
    } else if (cat != "gpu_user_annotation" &&
               e.name.substr(0, kStepPrefix.size()) == kStepPrefix) {
      int64_t index = 0;
      if (!absl::SimpleAtoi(std::string(e.name.substr(kStepPrefix.size())), &index)) {
        ++out_->skipped;
        return;
      }
      interval.kind = IntervalKind::kStep;
      interval.step = index;
      interval.value = e.samples > 0 ? e.samples : 0;
      ++out_->steps;
      interval.track = Track(TrackKind::kHostThread, e.pid, e.tid, "thread {1}");
    } else if (cat == "trainscope") {
      Phase phase = Phase::kOther;
      ParsePhase(e.phase, &phase);
      interval.kind = IntervalKind::kHostRange;
      interval.phase = phase;
      interval.step = e.step;
      interval.value = 0;
      ++out_->host_ranges;
      interval.track = Track(TrackKind::kHostThread, e.pid, e.tid, "thread {1}");
    } else {
      ++out_->skipped;
      return;
    }
    interval.name = out_->timeline.Intern(e.name);
    out_->timeline.Add(interval);
  }

 private:
  // What HTA's rules need beyond the intervals (see HtaTraceFacts).
  void NoteHtaFacts(const RawEvent& e) {
    analysis::HtaTraceFacts& facts = out_->hta;
    if (!e.has_ts || e.ts_is_float) facts.round_to_us = true;
    // HTA keeps rows that have a category and a duration, except "Trace".
    const bool loaded = e.has_dur && e.has_ts && !e.cat.empty() && e.cat != "Trace";
    if (!loaded) {
      first_event_seen_.store(true, std::memory_order_relaxed);
      return;
    }
    if (e.name.substr(0, kStepPrefix.size()) == kStepPrefix) {
      if (step_names_.insert(std::string(e.name)).second) ++facts.profiler_steps;
      facts.last_step_start_ns = std::max(facts.last_step_start_ns, MicrosToNanos(e.ts_us));
    }
    if (!first_event_seen_.load(std::memory_order_relaxed)) {
      first_event_seen_.store(true, std::memory_order_relaxed);
      const bool gpu_row = (e.stream >= 0 && e.correlation >= 0) || e.name == "Event Sync" ||
                           e.name == "Context Sync";
      if (!gpu_row) facts.first_event_ns = MicrosToNanos(e.ts_us);
    }
  }

  uint32_t Track(TrackKind kind, int64_t pid, int64_t tid, const char* pattern) {
    const auto key = std::make_pair(pid * 4 + static_cast<int64_t>(kind), tid);
    auto it = tracks_.find(key);
    if (it != tracks_.end()) return it->second;
    const uint32_t track = out_->timeline.AddTrack(
        {kind, pid, tid, fmt::format(fmt::runtime(pattern), pid, tid)});
    tracks_.emplace(key, track);
    return track;
  }

  ImportedTrace* out_;
  std::atomic<bool> first_event_seen_{false};
  std::unordered_set<std::string> step_names_;
  std::unordered_map<std::pair<int64_t, int64_t>, uint32_t, PairHash> tracks_;
};

}  // namespace

// Kineto's ts are microseconds since the epoch (about 1.7e15): exact in a
// double, but not once multiplied by 1000 (past 2^53). Convert the whole and
// fractional parts separately.
int64_t MicrosToNanos(double us) {
  const double whole = std::floor(us);
  return static_cast<int64_t>(whole) * 1000 + std::llround((us - whole) * 1000.0);
}

absl::StatusOr<ImportedTrace> ImportTrace(const std::string& path, int threads) {
  const auto started = std::chrono::steady_clock::now();
  ImportedTrace trace;
  trace.path = path;
  Importer importer(&trace);
  TraceReader reader;
  reader.set_max_threads(threads);
  absl::Status status = reader.Read(
      path, [&](const RawEvent& e) { importer.Visit(e); },
      [&](const RawEvent& e) { return importer.WantsArgs(e); });
  if (!status.ok()) return status;
  trace.rank = reader.rank();
  trace.read = reader.stats();
  trace.timeline.Sort();
  trace.parse_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return trace;
}

}  // namespace trainscope::kineto
