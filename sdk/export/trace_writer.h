// sdk/export/trace_writer.h: trace.json, written while the run goes on.
//
// trace.json is Chrome trace-event JSON in the PyTorch-profiler (Kineto)
// conventions: {"traceEvents":[...]} of complete events (ph "X") with
// microsecond ts/dur, pid/tid, cat and args; steps are "ProfilerStep#N"
// user annotations; cross-thread ranges are async events (ph "b"/"e").
// It loads in Perfetto UI and chrome://tracing.
//
// Crash safety: events are appended to a hidden body file as they are
// drained. Publish() builds header + body + footer in a temporary file and
// renames it over trace.json, so trace.json is always complete, valid JSON:
// after a crash it holds every event up to the last Publish (the session
// publishes every Options::trace_checkpoint_interval_ms).
#ifndef TRAINSCOPE_SDK_EXPORT_TRACE_WRITER_H_
#define TRAINSCOPE_SDK_EXPORT_TRACE_WRITER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sdk/analysis/timeline.h"
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
                                                           std::string_view run_name,
                                                           int64_t pid);
  ~TraceWriter();

  // Formats `count` events drained from thread `os_tid`. Buffered; written
  // to the body file when the buffer is large or at Publish().
  absl::Status Append(uint32_t os_tid, const Event* events, size_t count,
                      const ThreadIdOf& thread_id_of);
  // Adds the device activity, CUDA API calls and synchronisations of
  // `timeline` (from CUPTI; call again with later intervals on the same
  // tracks, each stream is named once) in the Kineto conventions: device work on pid =
  // device, tid = stream with args device/stream/correlation (and the
  // launching step and phase); calls as cat "cuda_runtime" on their thread.
  absl::Status AppendDeviceIntervals(const analysis::Timeline& timeline);
  // Adds a thread_name metadata event.
  absl::Status NameThread(uint32_t os_tid, std::string_view name);
  // Atomically replaces trace.json with everything appended so far. With
  // `final`, also fsyncs it and removes the body file.
  absl::Status Publish(bool final);

  uint64_t events_written() const { return events_written_; }
  const std::string& path() const { return path_; }

 private:
  TraceWriter() = default;
  absl::Status FlushBuffer();
  const std::string& NameOf(NameId id);
  void AppendEvent(uint32_t os_tid, const Event& event, const ThreadIdOf& thread_id_of);

  std::string dir_;
  std::string path_;
  std::string body_path_;
  std::string header_;
  int body_fd_ = -1;
  int64_t pid_ = 0;
  std::string buffer_;
  std::vector<std::string> names_;
  uint64_t body_bytes_ = 0;  // bytes of whole events in the body file
  uint64_t events_written_ = 0;
  uint64_t next_async_id_ = 1;
  std::vector<bool> device_tracks_named_;  // by track index
};

}  // namespace trainscope::exporter

#endif  // TRAINSCOPE_SDK_EXPORT_TRACE_WRITER_H_
