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
#ifndef TRAINSCOPE_SDK_EXPORT_TRACE_WRITER_H_
#define TRAINSCOPE_SDK_EXPORT_TRACE_WRITER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
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
  // removes the body file. Cost: a copy of the body (sendfile).
  absl::Status Publish(bool final, const std::vector<std::string_view>& held = {});

  uint64_t body_bytes() const { return body_bytes_; }
  uint64_t metadata_bytes() const { return stream_metadata_.size() + thread_names_bytes_; }
  // The header's and footer's bytes.
  uint64_t frame_bytes() const;
  // The size of trace.json at the last Publish.
  uint64_t published_bytes() const { return published_bytes_; }
  const std::string& path() const { return path_; }

 private:
  TraceWriter() = default;
  const std::string& NameOf(NameId id);

  std::string dir_;
  std::string path_;
  std::string body_path_;
  std::string header_;
  int body_fd_ = -1;
  int64_t pid_ = 0;
  std::vector<std::string> names_;
  uint64_t body_bytes_ = 0;  // bytes of whole events in the body file
  uint64_t published_bytes_ = 0;
  uint64_t next_async_id_ = 1;
  std::vector<bool> device_tracks_named_;  // by track index
  std::string stream_metadata_;            // process/thread names of the streams
  // os tid -> its metadata event: the session's threads, and threads only
  // CUPTI saw (at most kMaxCallThreadNames of those).
  std::map<uint32_t, std::string> thread_names_;
  static constexpr size_t kMaxCallThreadNames = 1024;
  uint64_t thread_names_bytes_ = 0;
};

}  // namespace trainscope::exporter

#endif  // TRAINSCOPE_SDK_EXPORT_TRACE_WRITER_H_
