// sdk/kineto/trace_reader.h: streams the events of a Chrome / PyTorch-profiler
// (Kineto) trace without loading the file.
//
//   TraceReader reader;
//   absl::Status status = reader.Read("rank0.json.gz", [&](const RawEvent& e) {
//     if (e.cat == "kernel") kernels.push_back(...);
//   });
//
// A plain file is mapped; a gzip file is inflated with ISA-L
// (GzipStream) into a 2 MiB buffer that stays in cache, or, with several
// CPUs and a trailer saying it holds at most 64 MiB, on a thread of its own
// ahead of the parse into one buffer; pipes go through zlib. The elements of
// the top-level "traceEvents" array are parsed about 64 KB at a time with
// simdjson's On Demand API, which reads only the fields asked for. A batch
// ends at a guessed element start (a '{' after "}," at the first element's
// indentation), which the parse itself checks: a guess inside an element
// leaves it unbalanced and fails, and a structural scanner (strings,
// escapes and nesting; 64 bytes at a time with SSE2) then cuts that batch.
// Memory is the chunk buffer plus the largest single event, whatever the
// file's size. Inputs that are held whole (a plain file up to 64 MiB, which
// is mapped, or a gzip file inflated ahead, once it is all in) are parsed
// on several threads when more than one CPU is
// free; see set_max_threads. Errors name the file and the byte offset in
// the uncompressed JSON.
#ifndef TRAINSCOPE_SDK_KINETO_TRACE_READER_H_
#define TRAINSCOPE_SDK_KINETO_TRACE_READER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace trainscope::kineto {

// The fields of one trace event that the analyses use. Views are valid only
// during the callback. Absent numbers are -1 (ts/dur: `has_ts`/`has_dur` say
// whether they were present).
//
// ts and dur are written in microseconds, often with a fraction ("ts":
// 1712195495505772.800 from a Kineto built with nanoseconds, whose spacing as
// a double would be 0.25 us). They are read from their text as whole
// nanoseconds, never through a double: exact to the nanosecond in any
// number shape ("5e-05" too), further digits rounded to the nearest. A time
// that reads as 2^53 us or more, or a ts + dur that reaches it
// (ground::kMaxTraceNanos), is an error naming the event and the member.
//
// Ids (pid, tid and the args below) are read exactly as int64, never
// through a double; one written with a point or an exponent counts when
// it is a whole number below 2^53 ("4515.0"). Any other number ("3.5",
// "1e300", 2^63) is an error naming the event and the member.
struct RawEvent {
  std::string_view ph;
  std::string_view cat;
  std::string_view name;
  int64_t pid = -1;  // -1 when absent or a string (metadata tracks)
  int64_t tid = -1;
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  bool has_ts = false;
  bool has_dur = false;
  bool ts_is_float = false;  // ts was written as a floating-point literal ("5.0")
  // From "args":
  int64_t stream = -1;
  int64_t correlation = -1;
  int64_t device = -1;
  int64_t step = -1;       // trainscope's own traces: args.step
  int64_t samples = -1;    // trainscope's own traces: args.samples
  std::string_view phase;  // trainscope's own traces: args.phase
  uint64_t offset = 0;     // byte offset of the event in the uncompressed JSON
};

struct ReadStats {
  uint64_t bytes = 0;   // uncompressed JSON bytes read
  uint64_t events = 0;  // elements of traceEvents
  bool compressed = false;
  double inflate_s = 0;  // time spent inflating (0 for plain files)
  // The gzip data was inflated on a thread of its own, ahead of the parse.
  bool inflated_ahead = false;
  int threads = 1;  // threads that parsed traceEvents
  int shares = 0;   // the pieces traceEvents was cut into (0: not cut)
  // Shares whose guessed first element turned out not to be one (it was
  // inside an element): their work was dropped and the calling thread
  // parsed those bytes instead.
  int shares_dropped = 0;
  // Batches of elements cut at a guessed element start, with no pass over
  // their bytes before simdjson's; and those that did not parse whole (the
  // guess was inside an element, or an element is malformed): the scanner
  // then cut the rest of that batch again.
  uint64_t guessed_batches = 0;
  uint64_t wrong_guesses = 0;
};

// Where the events of a trace go when parts of it may be parsed on other
// threads (TraceReader::Read with a sink). Visit and WantsArgs are the
// calling thread's: they get the events parsed there, in file order. The
// events parsed on a worker thread go to a sink NewShare made for that run
// of events, on that thread; Commit then adds that run after every event
// visited or committed so far, on the calling thread. A run that turns out
// not to be needed (it started at a wrong guess) is destroyed uncommitted.
// So the events visited here and in the committed runs, in that order, are
// exactly the trace's events in file order.
class EventSink {
 public:
  virtual ~EventSink() = default;
  // One event. Its views are valid only during the call.
  virtual void Visit(const RawEvent& event) = 0;
  // Asked once per parse of an event (an event is parsed again after a
  // wrong guess, and a dropped share's "events" are asked too, so keep it
  // free of side effects), when its "pid", "tid" or "args" member comes
  // after "cat" and "name" (as Kineto writes them), with the fields parsed
  // so far; false skips those members: pid and tid stay -1, and stream,
  // correlation, device, step, samples and phase stay unset. It saves most
  // of the parse of the events a caller drops. A true where false would do
  // costs only time.
  virtual bool WantsArgs(const RawEvent& event) {
    (void)event;
    return true;
  }
};

class ParallelSink : public EventSink {
 public:
  // A sink for a run of events parsed on another thread (called on it, and
  // maybe on several threads at once).
  virtual std::unique_ptr<EventSink> NewShare() = 0;
  // Appends the run `share` (made by NewShare) after everything so far.
  virtual void Commit(std::unique_ptr<EventSink> share) = 0;
};

class TraceReader {
 public:
  using Visitor = std::function<void(const RawEvent&)>;
  // As EventSink::WantsArgs: false skips the pid, tid and args that come
  // after cat and name. It may be called from the reader's worker threads,
  // at the same time as the visitor and as itself.
  using ArgsFilter = std::function<bool(const RawEvent&)>;

  TraceReader();
  ~TraceReader();

  // Threads that may parse one trace: 0 (the default) means the CPUs the
  // calling thread may run on; 1 keeps it on the calling thread. Inputs
  // held whole in memory (a plain file up to 64 MiB, mapped, or a gzip
  // file inflated at once) of at least 8 MiB of events use up to one thread
  // per 4 MiB. Their events are cut into shares of about 1 MiB at guessed
  // element starts (no pass over the bytes); the calling thread parses
  // shares from the front and the workers take them from the back, so
  // whoever is free takes the next. Every share start is checked against
  // where the share before it really ended; a wrong guess only costs that
  // share's work. Errors are the same as on one thread.
  void set_max_threads(int threads);

  // Reads `path`, calling `visit` for each element of "traceEvents" in file
  // order, on the calling thread. Errors: NotFound / PermissionDenied naming the file;
  // InvalidArgument "<path>: byte <offset>: <what>" for malformed JSON, a
  // missing traceEvents array, or a truncated file; DataLoss for a corrupt
  // gzip stream.
  absl::Status Read(const std::string& path, const Visitor& visit,
                    const ArgsFilter& wants_args = nullptr);
  // The same into a sink (see ParallelSink): the runs parsed on worker
  // threads are visited there, so the calling thread does not hand on
  // their events one by one. With `visit`, those runs are kept as
  // RawEvents (their strings copied) and visited here at their turn. An
  // exception from a sink (or from `visit`, `wants_args`) reaches the
  // caller, from whichever thread, once the workers are joined.
  absl::Status Read(const std::string& path, ParallelSink& sink);

  // Top-level members other than traceEvents whose JSON text is short (under
  // 64 KiB), e.g. {"distributedInfo", "{\"rank\": 0, ...}"}. Valid after Read.
  const std::vector<std::pair<std::string, std::string>>& top_level() const;
  // distributedInfo.rank, when the trace has it.
  std::optional<int64_t> rank() const;
  const ReadStats& stats() const;

 private:
  struct Impl;
  // Read; *input (when given) gets the input's bytes if they are held whole.
  absl::Status ReadWith(const std::string& path, ParallelSink& sink, std::string_view* input);
  std::unique_ptr<Impl> impl_;
  int max_threads_ = 0;
};

}  // namespace trainscope::kineto

#endif  // TRAINSCOPE_SDK_KINETO_TRACE_READER_H_
