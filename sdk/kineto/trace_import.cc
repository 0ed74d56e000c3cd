// Kineto trace -> Timeline. See trace_import.h.
#include "sdk/kineto/trace_import.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/numbers.h"
#include "fmt/format.h"

namespace trainscope::kineto {
namespace {

using ground::Interval;
using ground::IntervalKind;
using ground::TrackKind;

constexpr std::string_view kStepPrefix = "ProfilerStep#";

// What an event's category says it is, in every dialect Kineto has written
// that HTA reads: today's lower-case names and PyTorch 1.x's capitalised
// ones ("Kernel", "Memcpy", "Memset", "Runtime", "Driver"), in any case.
enum class Category : uint8_t {
  kOther,
  kKernel,
  kMemcpy,
  kMemset,
  kSync,
  kRuntime,
  kTrainscope,
  kGpuUserAnnotation,
};

// `cat` equals `lower` (lower-case ASCII, the same size) in any case.
inline bool SameIgnoringCase(std::string_view cat, std::string_view lower) {
  for (size_t i = 0; i < lower.size(); ++i) {
    char c = cat[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + ('a' - 'A'));
    if (c != lower[i]) return false;
  }
  return true;
}

// By length, then first letter: most events (cpu_op, ac2g, python_function)
// are told apart in a few instructions, and only a candidate is compared.
Category Classify(std::string_view cat) {
  if (cat.empty()) return Category::kOther;
  auto is = [&](std::string_view lower) { return SameIgnoringCase(cat, lower); };
  const char first = static_cast<char>(cat[0] | 0x20);  // a letter in lower case
  switch (cat.size()) {
    case 6:
      if (first == 'k') return is("kernel") ? Category::kKernel : Category::kOther;
      if (first == 'm') {
        return is("memcpy")   ? Category::kMemcpy
               : is("memset") ? Category::kMemset
                              : Category::kOther;
      }
      if (first == 'd') return is("driver") ? Category::kRuntime : Category::kOther;
      return Category::kOther;
    case 7:
      return first == 'r' && is("runtime") ? Category::kRuntime : Category::kOther;
    case 9:
      return first == 'c' && is("cuda_sync") ? Category::kSync : Category::kOther;
    case 10:
      if (first == 'g') {
        return is("gpu_memcpy")   ? Category::kMemcpy
               : is("gpu_memset") ? Category::kMemset
                                  : Category::kOther;
      }
      return first == 't' && is("trainscope") ? Category::kTrainscope : Category::kOther;
    case 11:
      return first == 'c' && is("cuda_driver") ? Category::kRuntime : Category::kOther;
    case 12:
      return first == 'c' && is("cuda_runtime") ? Category::kRuntime : Category::kOther;
    case 19:
      return first == 'g' && is("gpu_user_annotation") ? Category::kGpuUserAnnotation
                                                       : Category::kOther;
    default:
      return Category::kOther;
  }
}

// A track's identity: its kind, pid and tid, any int64 each (hashed in
// unsigned arithmetic: no overflow).
struct TrackKey {
  TrackKind kind;
  int64_t pid;
  int64_t tid;
  bool operator==(const TrackKey& o) const {
    return kind == o.kind && pid == o.pid && tid == o.tid;
  }
};
struct TrackKeyHash {
  size_t operator()(const TrackKey& k) const {
    uint64_t h = static_cast<uint64_t>(k.pid) * 0x9e3779b97f4a7c15ull;
    h = (h ^ static_cast<uint64_t>(k.tid)) * 0xbf58476d1ce4e5b9ull;
    return std::hash<uint64_t>()(h ^ static_cast<uint64_t>(k.kind));
  }
};

// Turns events into intervals of `out`. The importer ImportTrace makes
// writes into the result; for a run of events parsed on a worker thread it
// makes another (NewShare) that writes into a trace of its own, which Commit
// then appends to the result: names and tracks renumbered, counts and HTA
// facts combined, so the result is the same as a serial import's.
class Importer : public ParallelSink {
 public:
  explicit Importer(ImportedTrace* out) : out_(out) {}

  // Whether Visit needs e's pid, tid and args: for the categories it keeps, steps
  // (args.samples), and the first event (NoteHtaFacts tests its stream and
  // correlation). The rest, most of a trace, skip them.
  bool WantsArgs(const RawEvent& e) override {
    if (!first_seen_) return true;
    const Category cat = Classify(e.cat);
    return (cat != Category::kOther && cat != Category::kGpuUserAnnotation) ||
           e.name.substr(0, kStepPrefix.size()) == kStepPrefix;
  }

  void Visit(const RawEvent& e) override {
    NoteHtaFacts(e);
    if (e.ph != "X" || !e.has_ts) {
      ++out_->skipped;
      return;
    }
    Interval interval;
    interval.start_ns = e.ts_ns;
    interval.end_ns = e.ts_ns + (e.has_dur ? e.dur_ns : 0);
    interval.value = e.correlation;
    const Category cat = Classify(e.cat);
    if (cat == Category::kKernel || cat == Category::kMemcpy || cat == Category::kMemset) {
      interval.kind = cat == Category::kKernel   ? IntervalKind::kKernel
                      : cat == Category::kMemcpy ? IntervalKind::kMemcpy
                                                 : IntervalKind::kMemset;
      ++(cat == Category::kKernel   ? out_->kernels
         : cat == Category::kMemcpy ? out_->memcpys
                                    : out_->memsets);
      const int64_t device = e.device >= 0 ? e.device : e.pid;
      const int64_t stream = e.stream >= 0 ? e.stream : e.tid;
      interval.track = Track(TrackKind::kDeviceStream, device, stream);
    } else if (cat == Category::kSync) {
      // CUPTI synchronisation records: Kineto puts them on the stream (or
      // context) waited on.
      interval.kind = IntervalKind::kSyncCall;
      interval.phase = Phase::kSync;
      ++out_->sync_calls;
      const int64_t device = e.device >= 0 ? e.device : e.pid;
      interval.track = Track(TrackKind::kDeviceStream, device, e.stream);
    } else if (cat == Category::kRuntime) {
      interval.kind = IntervalKind::kRuntimeCall;
      ++out_->runtime_calls;
      interval.track = Track(TrackKind::kHostThread, e.pid, e.tid);
    } else if (cat != Category::kGpuUserAnnotation &&
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
      interval.track = Track(TrackKind::kHostThread, e.pid, e.tid);
    } else if (cat == Category::kTrainscope) {
      Phase phase = Phase::kOther;
      ParsePhase(e.phase, &phase);
      interval.kind = IntervalKind::kHostRange;
      interval.phase = phase;
      interval.step = e.step;
      interval.value = 0;
      ++out_->host_ranges;
      interval.track = Track(TrackKind::kHostThread, e.pid, e.tid);
    } else {
      ++out_->skipped;
      return;
    }
    interval.name = out_->timeline.Intern(e.name);
    out_->timeline.Add(interval);
  }

  std::unique_ptr<EventSink> NewShare() override;
  void Commit(std::unique_ptr<EventSink> share) override;

 private:
  // What HTA's rules need beyond the intervals (see HtaTraceFacts).
  void NoteHtaFacts(const RawEvent& e) {
    analysis::HtaTraceFacts& facts = out_->hta;
    if (!e.has_ts || e.ts_is_float) facts.round_to_us = true;
    // HTA keeps rows that have a category and a duration, except "Trace".
    const bool loaded = e.has_dur && e.has_ts && !e.cat.empty() && e.cat != "Trace";
    if (!first_seen_) {
      // Event #0's start, when HTA keeps it and it is not a GPU row. (In a
      // run of events, its first event: Commit uses it only when the run is
      // the start of the trace.)
      first_seen_ = true;
      const bool gpu_row = (e.stream >= 0 && e.correlation >= 0) || e.name == "Event Sync" ||
                           e.name == "Context Sync";
      if (loaded && !gpu_row) facts.first_event_ns = e.ts_ns;
    }
    if (loaded && e.name.substr(0, kStepPrefix.size()) == kStepPrefix) {
      if (step_names_.insert(std::string(e.name)).second) ++facts.profiler_steps;
      facts.last_step_start_ns = std::max(facts.last_step_start_ns, e.ts_ns);
    }
  }

  // The track (kind, pid, tid), added with its usual name on first use.
  uint32_t Track(TrackKind kind, int64_t pid, int64_t tid) {
    const TrackKey key{kind, pid, tid};
    auto it = tracks_.find(key);
    if (it != tracks_.end()) return it->second;
    const uint32_t track = out_->timeline.AddTrack({kind, pid, tid,
                                                    kind == TrackKind::kDeviceStream
                                                        ? fmt::format("GPU {} stream {}", pid, tid)
                                                        : fmt::format("thread {}", tid)});
    tracks_.emplace(key, track);
    return track;
  }

  ImportedTrace* out_;
  bool first_seen_ = false;
  std::unordered_set<std::string> step_names_;
  std::unordered_map<TrackKey, uint32_t, TrackKeyHash> tracks_;
};

// A run of events imported on a worker thread, into a trace of its own.
struct ShareImporter : EventSink {
  ShareImporter() : importer(&trace) {}
  void Visit(const RawEvent& e) override { importer.Visit(e); }
  bool WantsArgs(const RawEvent& e) override { return importer.WantsArgs(e); }

  ImportedTrace trace;
  Importer importer;
};

std::unique_ptr<EventSink> Importer::NewShare() { return std::make_unique<ShareImporter>(); }

void Importer::Commit(std::unique_ptr<EventSink> share) {
  ShareImporter& part = static_cast<ShareImporter&>(*share);
  const ImportedTrace& in = part.trace;
  const Importer& from = part.importer;
  // Names and tracks in the order the run first used them: the order a
  // serial import would have added them in.
  const ground::Timeline& timeline = in.timeline;
  std::vector<uint32_t> names(timeline.names());
  for (uint32_t id = 0; id < names.size(); ++id)
    names[id] = out_->timeline.Intern(timeline.name(id));
  std::vector<uint32_t> tracks(timeline.tracks().size());
  for (uint32_t id = 0; id < tracks.size(); ++id) {
    const ground::Track& t = timeline.tracks()[id];
    tracks[id] = Track(t.kind, t.pid, t.tid);
  }
  for (Interval interval : timeline.intervals()) {
    interval.name = names[interval.name];
    interval.track = tracks[interval.track];
    out_->timeline.Add(interval);
  }
  out_->kernels += in.kernels;
  out_->memcpys += in.memcpys;
  out_->memsets += in.memsets;
  out_->runtime_calls += in.runtime_calls;
  out_->sync_calls += in.sync_calls;
  out_->steps += in.steps;
  out_->host_ranges += in.host_ranges;
  out_->skipped += in.skipped;
  analysis::HtaTraceFacts& facts = out_->hta;
  facts.round_to_us = facts.round_to_us || in.hta.round_to_us;
  if (!first_seen_ && from.first_seen_) {
    first_seen_ = true;
    facts.first_event_ns = in.hta.first_event_ns;
  }
  for (const std::string& name : from.step_names_) {
    if (step_names_.insert(name).second) ++facts.profiler_steps;
  }
  facts.last_step_start_ns = std::max(facts.last_step_start_ns, in.hta.last_step_start_ns);
}

}  // namespace

absl::StatusOr<ImportedTrace> ImportTrace(const std::string& path, int threads) {
  const auto started = std::chrono::steady_clock::now();
  ImportedTrace trace;
  trace.path = path;
  Importer importer(&trace);
  TraceReader reader;
  reader.set_max_threads(threads);
  absl::Status status = reader.Read(path, importer);
  if (!status.ok()) return status;
  trace.rank = reader.rank();
  trace.read = reader.stats();
  trace.timeline.Sort(/*two_threads=*/trace.read.threads > 1);
  trace.parse_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return trace;
}

namespace {

// Counts every event by category (TraceSurvey).
class Surveyor {
 public:
  explicit Surveyor(TraceSurvey* out) : out_(out) {}
  void Visit(const RawEvent& e) {
    const bool device = e.stream >= 0 && e.correlation >= 0;
    out_->profiler_ranges += e.cat == "cuda_profiler_range" ? 1 : 0;
    const std::string cat(e.cat);
    auto it = index_.find(cat);
    if (it == index_.end()) {
      if (out_->categories.size() >= TraceSurvey::kMaxCategories) {
        ++out_->other_events;
        return;
      }
      out_->categories.push_back({cat, 0, 0});
      it = index_.emplace(cat, out_->categories.size() - 1).first;
    }
    TraceSurvey::Category& c = out_->categories[it->second];
    ++c.events;
    c.device += device ? 1 : 0;
  }

 private:
  TraceSurvey* out_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace

absl::StatusOr<TraceSurvey> SurveyTrace(const std::string& path) {
  TraceSurvey survey;
  Surveyor surveyor(&survey);
  TraceReader reader;
  reader.set_max_threads(1);
  absl::Status s = reader.Read(path, [&](const RawEvent& e) { surveyor.Visit(e); });
  if (!s.ok()) return s;
  return survey;
}

std::string NothingToAnalyse(const std::string& path, const TraceSurvey& survey,
                             uint64_t events_read) {
  std::vector<const TraceSurvey::Category*> by_count;
  for (const TraceSurvey::Category& c : survey.categories) by_count.push_back(&c);
  std::stable_sort(by_count.begin(), by_count.end(),
                   [](const auto* a, const auto* b) { return a->events > b->events; });
  auto list = [&](bool device_only) {
    std::string out;
    int shown = 0;
    for (const TraceSurvey::Category* c : by_count) {
      const int64_t n = device_only ? c->device : c->events;
      if (n == 0) continue;
      if (shown++ == 8) {
        out += ", ...";
        break;
      }
      out += fmt::format("{}{} {}", out.empty() ? "" : ", ",
                         c->name.empty() ? "(no category)" : c->name, n);
    }
    return out;
  };
  if (survey.profiler_ranges > 0) {
    return fmt::format(
        "{}: a CUPTI range-profiler trace ({} cuda_profiler_range events): it holds counter "
        "ranges, not the activity records (kernels, copies, launches) an idle analysis needs; "
        "record with torch.profiler and ProfilerActivity.CUDA for those",
        path, survey.profiler_ranges);
  }
  int64_t device = 0;
  for (const TraceSurvey::Category& c : survey.categories) device += c.device;
  if (device > 0) {
    return fmt::format(
        "{}: {} events carry a stream and a correlation (device work) but in categories this "
        "reader does not know ({}); none is a kernel, memcpy or memset category it reads "
        "(kernel, gpu_memcpy, gpu_memset, or PyTorch 1.x's Kernel, Memcpy, Memset)",
        path, device, list(true));
  }
  return fmt::format(
      "{}: a CPU-only trace: no kernels, memory copies or sets, nothing on a device stream and "
      "no trainscope phases, so nothing to analyse ({} events read: {}); a PyTorch-profiler "
      "trace has its device work only with ProfilerActivity.CUDA",
      path, events_read, list(false));
}

}  // namespace trainscope::kineto
