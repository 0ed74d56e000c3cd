// sdk/ground/timeline.h: the one data model every source fills and every
// analysis reads.
//
// Sources (the recorder's rings today; CUPTI buffers and Kineto traces next)
// turn what they read into Intervals on Tracks, in one clock (nanoseconds).
// No analysis knows where an interval came from.
//
//   Timeline timeline;
//   uint32_t main = timeline.AddTrack({TrackKind::kHostThread, pid, tid, "main"});
//   timeline.Add({start, end, step, 0, timeline.Intern("forward"), main,
//                 IntervalKind::kHostRange, Phase::kForward});
#ifndef TRAINSCOPE_SDK_GROUND_TIMELINE_H_
#define TRAINSCOPE_SDK_GROUND_TIMELINE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "trainscope/clock.h"
#include "trainscope/phase.h"

namespace trainscope::ground {

enum class TrackKind : uint8_t {
  kHostThread,    // one OS thread's ranges
  kHostAsync,     // ranges that crossed threads
  kDeviceStream,  // one device stream's activity
};

struct Track {
  TrackKind kind = TrackKind::kHostThread;
  int64_t pid = 0;  // process id; the device index for device tracks
  int64_t tid = 0;  // OS thread id, or the stream id for device tracks
  std::string name;
};

enum class IntervalKind : uint8_t {
  kHostRange,   // a phase or named range on a host thread
  kStep,        // a training step; `value` is its sample count
  kAsyncRange,  // a host range that may have crossed threads
  kKernel,      // device work, from CUPTI or a Kineto trace
  kMemcpy,
  kMemset,
  kRuntimeCall,  // a CUDA runtime/driver API call on a host thread; `value`
                 // is its correlation id (it launched the device interval
                 // with the same id)
  kSyncCall,     // a host thread blocked in a CUDA synchronisation
};

// True for the kinds that are device activity.
constexpr bool IsDeviceKind(IntervalKind kind) {
  return kind == IntervalKind::kKernel || kind == IntervalKind::kMemcpy ||
         kind == IntervalKind::kMemset;
}

// True for the device side of a run: device activity and the host calls
// that launch it or wait for it (what CUPTI or a Kineto trace adds to the
// host's own ranges).
constexpr bool IsDeviceSide(IntervalKind kind) {
  return IsDeviceKind(kind) || kind == IntervalKind::kRuntimeCall ||
         kind == IntervalKind::kSyncCall;
}

// True for a host range, on one thread or across threads (not steps).
constexpr bool IsHostRange(IntervalKind kind) {
  return kind == IntervalKind::kHostRange || kind == IntervalKind::kAsyncRange;
}

// Trace files write time in microseconds, often with a fraction ("ts":
// 1712195495505772.800 from a Kineto built with nanoseconds); the timeline
// keeps whole nanoseconds.
//
// Trace times must be below 2^53 us in magnitude, past which a double no
// longer holds whole microseconds (as a Unix time, about the year 2255).
inline constexpr TimestampNs kMaxTraceNanos = (TimestampNs{1} << 53) * 1000;

// The double nearest to ns / 1000: exactly what a correctly rounding JSON
// parser (Python's json, glibc's strtod) makes of the decimal text of that
// many microseconds. Correctly rounded for |ns| < kMaxTraceNanos, every time
// a trace can hold. Cost: a few ns.
double NanosToMicros(TimestampNs ns);

// A half-open time interval [start_ns, end_ns) on one track.
struct Interval {
  TimestampNs start_ns = 0;
  TimestampNs end_ns = 0;
  int64_t step = -1;  // the step it belongs to, -1 if none
  int64_t value = 0;  // kStep: samples; device kinds: correlation id
  uint32_t name = 0;  // Timeline::Intern id
  uint32_t track = 0;
  IntervalKind kind = IntervalKind::kHostRange;
  Phase phase = Phase::kOther;

  TimestampNs duration_ns() const { return end_ns - start_ns; }
};

// Interned strings: the same text always gets the same small id.
class NameTable {
 public:
  // The id of `name`, added on first use. Cost: one hash lookup; a copy of
  // the text only the first time.
  uint32_t Intern(std::string_view name);
  const std::string& name(uint32_t id) const { return names_[id]; }
  size_t size() const { return names_.size(); }

 private:
  std::vector<std::string> names_;
  // Looked up by a view of the text (absl's string hash is transparent): no copy.
  absl::flat_hash_map<std::string, uint32_t> ids_;
};

class Timeline {
 public:
  // Adds a track and returns its index.
  uint32_t AddTrack(Track track);
  // Returns the id of `name`, adding it on first use.
  uint32_t Intern(std::string_view name) { return names_.Intern(name); }
  // Appends an interval. Intervals with end < start are clamped to empty.
  void Add(Interval interval) {
    if (interval.end_ns < interval.start_ns) interval.end_ns = interval.start_ns;
    intervals_.push_back(interval);
  }
  // Appends a default Interval for the caller to fill in place, valid until
  // the next append: a hot loop's fields go straight to the vector, not
  // through a copy on the stack (whose narrow stores a wide load would wait
  // for). The caller keeps end_ns >= start_ns. Cost: a push_back.
  Interval& Append() { return intervals_.emplace_back(); }
  // Sorts intervals by start (then by longer first, so parents precede
  // children), stably. Analyses expect a sorted timeline. `two_threads`:
  // a timeline of 20,000 intervals or more is sorted in two halves on two
  // threads and merged (same result).
  void Sort(bool two_threads = false);

  const std::vector<Track>& tracks() const { return tracks_; }
  const std::vector<Interval>& intervals() const { return intervals_; }
  // For analyses that annotate intervals in place (launch attribution).
  std::vector<Interval>& mutable_intervals() { return intervals_; }
  const std::string& name(uint32_t id) const { return names_.name(id); }
  // How many names are interned (ids 0 to names() - 1).
  size_t names() const { return names_.size(); }
  // The index of the track with this kind, pid and tid, added (named
  // `name`) if there is none. Linear in the number of tracks.
  uint32_t FindOrAddTrack(TrackKind kind, int64_t pid, int64_t tid, std::string_view name);
  size_t size() const { return intervals_.size(); }

 private:
  std::vector<Track> tracks_;
  std::vector<Interval> intervals_;
  NameTable names_;
};

}  // namespace trainscope::ground

#endif  // TRAINSCOPE_SDK_GROUND_TIMELINE_H_
