// sdk/export/trace_writer.h: trace.json, written while the run goes on.
//
// trace.json is Chrome trace-event JSON in the PyTorch-profiler (Kineto)
// conventions: {"traceEvents":[...]} of complete events (ph "X") with
// microsecond ts/dur, pid/tid, cat and args; steps are "ProfilerStep#N"
// user annotations; cross-thread ranges are async events (ph "b"/"e").
// It loads in Perfetto UI and chrome://tracing.
//
// What it holds is chosen by TraceWindows (trace_windows.h): the writer
// formats events into text, appends whole windows to a hidden body file, and
// publishes header + metadata (process and thread names) + body + the
// windows still held in memory (the slowest steps) + footer.
//
// Crash safety: Publish() builds the file in a temporary and renames it over
// trace.json, so trace.json is always complete, valid JSON: after a crash it
// holds every window up to the last Publish (the session publishes every
// Options::trace_checkpoint_interval_ms when a window was added).
//
// The copy of the body (up to Options::trace_budget_bytes, 256 MiB) is not
// made on the caller's thread while the run goes on: PublishSoon() hands it
// to the writer's own thread ("ts-publish"), so that the drain, which calls
// it, keeps emptying the rings.
#ifndef TRAINSCOPE_SDK_EXPORT_TRACE_WRITER_H_
#define TRAINSCOPE_SDK_EXPORT_TRACE_WRITER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sdk/ground/timeline.h"
#include "trainscope/recorder.h"

namespace trainscope::exporter {

class TraceWriter {
 public:
  // Maps a ring's registry index to the OS thread id that owns it.
  using ThreadIdOf = std::function<uint32_t(uint16_t index)>;

  // Creates the body file in `dir` and publishes an empty, valid trace file
  // named `file` ("trace.json", or "trace-rank<R>.json"). Errors name the file.
  static absl::StatusOr<std::unique_ptr<TraceWriter>> Open(const std::string& dir,
                                                           std::string_view file,
                                                           std::string_view run_name, int64_t pid);
  ~TraceWriter();

  // Formats one drained event of thread `os_tid` (two for an async range)
  // onto `out`, each as ",\n{...}". Returns the number of trace events.
  int FormatEvent(std::string* out, uint32_t os_tid, const Event& event,
                  const ThreadIdOf& thread_id_of);
  // Formats interval `i` of `timeline` onto `out` when it is device work, a
  // CUDA API call or a synchronisation (from CUPTI), in the Kineto
  // conventions: device work on pid = device, tid = stream with args
  // device/stream/correlation (and the launching step and phase); calls as
  // cat "cuda_runtime" on their thread. Names each stream once, in the
  // metadata. Returns false (writing nothing) for other intervals.
  bool FormatDeviceInterval(std::string* out, const ground::Timeline& timeline,
                            const ground::Interval& i);
  // Formats every device interval of `timeline` and appends them to the body.
  absl::Status AppendDeviceIntervals(const ground::Timeline& timeline);
  // Names thread `os_tid` in the metadata (the latest name wins). Memory: one
  // entry a named thread.
  void NameThread(uint32_t os_tid, std::string_view name);
  // Forgets thread `os_tid`'s name.
  void ForgetThread(uint32_t os_tid);
  // Appends whole events (",\n{...}" each) to the body file. On a failed
  // write the body is cut back to what it held before. Errors name the file.
  absl::Status AppendToBody(std::string_view text);
  // Atomically replaces trace.json with header, metadata, body, `held`
  // (whole events, in order) and footer. With `final`, also fsyncs it and
  // removes the body file. Waits for a PublishSoon under way first, and
  // supersedes one waiting. Cost: a copy of the body (sendfile). Errors:
  // this publish's, else (not `final`: the final file replaces what a
  // background publish failed to write) a background publish's not yet
  // returned; each names the file. After a failed final publish the body
  // file stays, for a retry.
  absl::Status Publish(bool final, const std::vector<std::string_view>& held = {});
  // Publish(false, held) on the writer's thread (started by the first call):
  // copies the metadata and `held` now, and the body up to its present size
  // there, then returns. A request made while one is being written waits,
  // and a later one replaces it. Cost here: the copies, no file I/O.
  // Memory: three times (metadata + held) at most: one being written, one
  // waiting, and the one being made here before it replaces the waiting
  // one. Errors: the last background publish's that failed since the
  // previous call, if any (the request is still made); FailedPrecondition
  // after the final Publish.
  absl::Status PublishSoon(const std::vector<std::string_view>& held);
  // Waits until every PublishSoon made so far is on disk (or failed).
  // Returns the background status not yet returned, as PublishSoon does.
  absl::Status AwaitPublished();

  uint64_t body_bytes() const { return body_bytes_; }
  uint64_t metadata_bytes() const { return stream_metadata_.size() + thread_names_bytes_; }
  // The header's and footer's bytes.
  uint64_t frame_bytes() const;
  // The size of trace.json at the last Publish that completed.
  uint64_t published_bytes() const { return published_bytes_.load(std::memory_order_relaxed); }
  const std::string& path() const { return path_; }

 private:
  // What one publish writes: `head`, the body's first `body_bytes`, `tail`.
  struct Request {
    std::string head;  // header and metadata
    uint64_t body_bytes = 0;
    std::string tail;  // held events and footer
  };

  TraceWriter() = default;
  const std::string& NameOf(NameId id);
  Request MakeRequest(const std::vector<std::string_view>& held) const;
  // Writes `request` to the temporary and renames it over path_. Reads only
  // what does not change while the writer is open (dir_, path_, pid_, the
  // body's first body_bytes), so it runs on either thread.
  absl::Status WriteFile(const Request& request, bool final);
  void PublishLoop();
  // Waits until no background publish is under way and drops a waiting one;
  // with `stop`, also ends the thread. Returns the background status.
  absl::Status Quiesce(bool stop);

  std::string dir_;
  std::string path_;
  std::string body_path_;
  std::string header_;
  int body_fd_ = -1;
  int64_t pid_ = 0;
  std::vector<std::string> names_;
  uint64_t body_bytes_ = 0;  // bytes of whole events in the body file
  std::atomic<uint64_t> published_bytes_{0};
  uint64_t next_async_id_ = 1;
  std::vector<bool> device_tracks_named_;  // by track index
  std::string stream_metadata_;            // process/thread names of the streams
  // os tid -> its metadata event: the session's threads, and threads only
  // CUPTI saw (at most kMaxCallThreadNames of those).
  std::map<uint32_t, std::string> thread_names_;
  static constexpr size_t kMaxCallThreadNames = 1024;
  uint64_t thread_names_bytes_ = 0;

  // The publishing thread. Guarded by publish_mu_: everything below.
  std::mutex publish_mu_;
  std::condition_variable publish_cv_;
  std::optional<Request> waiting_;
  bool writing_ = false;
  bool stop_ = false;
  absl::Status background_status_;
  std::thread publisher_;
};

}  // namespace trainscope::exporter

#endif  // TRAINSCOPE_SDK_EXPORT_TRACE_WRITER_H_
