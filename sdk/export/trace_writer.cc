// trace.json writer. See trace_writer.h.
#include "sdk/export/trace_writer.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <iterator>

#include "fmt/format.h"
#include "sdk/ground/files.h"
#include "sdk/ground/json_writer.h"
#include "trainscope/version.h"

namespace trainscope::exporter {
namespace {

constexpr size_t kBufferLimit = 1 << 20;
constexpr std::string_view kFooter = "\n]}\n";

// Microseconds with nanosecond digits, exact: 1234567 ns -> "1234.567".
void AppendMicros(std::string* out, int64_t ns) {
  const char* sign = ns < 0 ? "-" : "";
  const uint64_t magnitude = ns < 0 ? static_cast<uint64_t>(-ns) : static_cast<uint64_t>(ns);
  fmt::format_to(std::back_inserter(*out), "{}{}.{:03}", sign, magnitude / 1000, magnitude % 1000);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Open(const std::string& dir,
                                                               std::string_view file,
                                                               std::string_view run_name,
                                                               int64_t pid) {
  std::unique_ptr<TraceWriter> writer(new TraceWriter());
  writer->dir_ = dir;
  writer->path_ = fmt::format("{}/{}", dir, file);
  writer->body_path_ = fmt::format("{}/.{}.body.{}", dir, file, pid);
  writer->pid_ = pid;
  writer->body_fd_ =
      open(writer->body_path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (writer->body_fd_ < 0) {
    return ground::ErrnoStatus(errno, fmt::format("creating {}", writer->body_path_));
  }
  std::string& h = writer->header_;
  h = "{\"schemaVersion\":1,\"displayTimeUnit\":\"ms\",\"traceName\":";
  ground::AppendJsonString(&h, run_name);
  h += ",\"trainscope\":{\"version\":\"" TRAINSCOPE_VERSION_STRING
       "\",\"clock\":\"CLOCK_MONOTONIC\",\"time_unit\":\"us\"},\n\"traceEvents\":[\n";
  fmt::format_to(std::back_inserter(h),
                 "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"tid\":0,"
                 "\"args\":{{\"name\":",
                 pid);
  ground::AppendJsonString(&h, fmt::format("trainscope: {}", run_name));
  h += "}}";
  absl::Status status = writer->Publish(false);
  if (!status.ok()) return status;
  return writer;
}

TraceWriter::~TraceWriter() {
  Quiesce(true).IgnoreError();
  if (body_fd_ >= 0) close(body_fd_);
}

const std::string& TraceWriter::NameOf(NameId id) {
  if (id >= names_.size()) names_.resize(id + 1);
  if (names_[id].empty()) {
    names_[id] = std::string(LookupName(id));
    if (names_[id].empty()) names_[id] = fmt::format("name#{}", id);
  }
  return names_[id];
}

int TraceWriter::FormatEvent(std::string* out_text, uint32_t os_tid, const Event& e,
                             const ThreadIdOf& thread_id_of) {
  std::string& out = *out_text;
  const std::string_view phase = PhaseName(e.phase);
  if (e.kind == EventKind::kStep) {
    fmt::format_to(std::back_inserter(out),
                   ",\n{{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#{}\","
                   "\"pid\":{},\"tid\":{},\"ts\":",
                   e.step, pid_, os_tid);
    AppendMicros(&out, e.start_ns);
    out += ",\"dur\":";
    AppendMicros(&out, e.end_ns - e.start_ns);
    fmt::format_to(std::back_inserter(out), ",\"args\":{{\"step\":{},\"samples\":{}}}}}", e.step,
                   e.value);
    return 1;
  }
  std::string name;
  ground::AppendJsonString(&name, NameOf(e.value));
  if (e.kind == EventKind::kCounter) {  // a counter track (Perfetto, chrome://tracing)
    fmt::format_to(std::back_inserter(out),
                   ",\n{{\"ph\":\"C\",\"cat\":\"trainscope\",\"name\":{},\"pid\":{},\"tid\":{},"
                   "\"ts\":",
                   name, pid_, os_tid);
    AppendMicros(&out, e.start_ns);
    fmt::format_to(std::back_inserter(out), ",\"args\":{{\"value\":{}}}}}", e.end_ns);
    return 1;
  }
  if (e.kind == EventKind::kAsync) {
    const uint64_t id = next_async_id_++;
    const uint32_t begin_tid = thread_id_of(e.aux);
    for (int edge = 0; edge < 2; ++edge) {
      fmt::format_to(std::back_inserter(out),
                     ",\n{{\"ph\":\"{}\",\"cat\":\"trainscope_async\",\"name\":{},\"id\":{},"
                     "\"pid\":{},\"tid\":{},\"ts\":",
                     edge == 0 ? 'b' : 'e', name, id, pid_, edge == 0 ? begin_tid : os_tid);
      AppendMicros(&out, edge == 0 ? e.start_ns : e.end_ns);
      fmt::format_to(std::back_inserter(out), ",\"args\":{{\"step\":{},\"phase\":\"{}\"}}}}",
                     e.step, phase);
    }
    return 2;
  }
  fmt::format_to(std::back_inserter(out),
                 ",\n{{\"ph\":\"X\",\"cat\":\"trainscope\",\"name\":{},\"pid\":{},\"tid\":{},"
                 "\"ts\":",
                 name, pid_, os_tid);
  AppendMicros(&out, e.start_ns);
  out += ",\"dur\":";
  AppendMicros(&out, e.end_ns - e.start_ns);
  fmt::format_to(std::back_inserter(out), ",\"args\":{{\"step\":{},\"phase\":\"{}\"}}}}", e.step,
                 phase);
  return 1;
}

bool TraceWriter::FormatDeviceInterval(std::string* out, const ground::Timeline& timeline,
                                       const ground::Interval& i) {
  using ground::IntervalKind;
  const bool device = ground::IsDeviceKind(i.kind);
  const bool call = i.kind == IntervalKind::kRuntimeCall;
  const bool sync = i.kind == IntervalKind::kSyncCall;
  if (!device && !call && !sync) return false;
  if (device_tracks_named_.size() < timeline.tracks().size()) {
    device_tracks_named_.resize(timeline.tracks().size(), false);
  }
  const ground::Track& track = timeline.tracks()[i.track];
  const bool on_device = track.kind == ground::TrackKind::kDeviceStream;
  if (on_device && !device_tracks_named_[i.track]) {
    device_tracks_named_[i.track] = true;
    fmt::format_to(std::back_inserter(stream_metadata_),
                   ",\n{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{0},\"tid\":0,"
                   "\"args\":{{\"name\":\"GPU {0}\"}}}},\n{{\"ph\":\"M\",\"name\":\"thread_name\","
                   "\"pid\":{0},\"tid\":{1},\"args\":{{\"name\":\"stream {1}\"}}}}",
                   track.pid, track.tid);
  }
  if (!on_device && track.tid != 0 && static_cast<int64_t>(track.pid) == pid_ &&
      !track.name.empty() && thread_names_.size() < kMaxCallThreadNames &&
      thread_names_.count(track.tid) == 0) {
    // A thread only CUPTI saw (LibTorch's autograd device threads): the
    // name its track was given (cupti::RecordConverter reads the OS's).
    NameThread(track.tid, track.name);
  }
  const char* cat = i.kind == IntervalKind::kKernel   ? "kernel"
                    : i.kind == IntervalKind::kMemcpy ? "gpu_memcpy"
                    : i.kind == IntervalKind::kMemset ? "gpu_memset"
                    : sync                            ? "cuda_sync"
                                                      : "cuda_runtime";
  std::string name;
  ground::AppendJsonString(&name, timeline.name(i.name));
  fmt::format_to(std::back_inserter(*out),
                 ",\n{{\"ph\":\"X\",\"cat\":\"{}\",\"name\":{},\"pid\":{},\"tid\":{},\"ts\":", cat,
                 name, track.pid, track.tid);
  AppendMicros(out, i.start_ns);
  *out += ",\"dur\":";
  AppendMicros(out, i.end_ns - i.start_ns);
  if (on_device) {
    fmt::format_to(std::back_inserter(*out),
                   ",\"args\":{{\"device\":{},\"stream\":{},\"correlation\":{},\"step\":{},"
                   "\"phase\":\"{}\"}}}}",
                   track.pid, track.tid, i.value, i.step, PhaseName(i.phase));
  } else {
    fmt::format_to(std::back_inserter(*out), ",\"args\":{{\"correlation\":{}}}}}", i.value);
  }
  return true;
}

absl::Status TraceWriter::AppendDeviceIntervals(const ground::Timeline& timeline) {
  std::string text;
  for (const ground::Interval& i : timeline.intervals()) {
    FormatDeviceInterval(&text, timeline, i);
    if (text.size() >= kBufferLimit) {
      if (absl::Status status = AppendToBody(text); !status.ok()) return status;
      text.clear();
    }
  }
  return AppendToBody(text);
}

void TraceWriter::NameThread(uint32_t os_tid, std::string_view name) {
  std::string& event = thread_names_[os_tid];
  thread_names_bytes_ -= event.size();
  event.clear();
  fmt::format_to(std::back_inserter(event),
                 ",\n{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},"
                 "\"args\":{{\"name\":",
                 pid_, os_tid);
  ground::AppendJsonString(&event, name);
  event += "}}";
  thread_names_bytes_ += event.size();
}

void TraceWriter::ForgetThread(uint32_t os_tid) {
  auto it = thread_names_.find(os_tid);
  if (it == thread_names_.end()) return;
  thread_names_bytes_ -= it->second.size();
  thread_names_.erase(it);
}

uint64_t TraceWriter::frame_bytes() const { return header_.size() + kFooter.size(); }

absl::Status TraceWriter::AppendToBody(std::string_view text) {
  if (text.empty()) return absl::OkStatus();
  absl::Status status = ground::WriteAll(body_fd_, text, fmt::format("writing {}", body_path_));
  if (status.ok()) {
    body_bytes_ += text.size();
  } else if (ftruncate(body_fd_, static_cast<off_t>(body_bytes_)) != 0) {
    // A failed (e.g. full-disk) write may leave part of an event behind: cut
    // the body back to the last whole window so the next Publish stays valid.
    status = ground::ErrnoStatus(errno, fmt::format("truncating {}", body_path_));
  }
  return status;
}

TraceWriter::Request TraceWriter::MakeRequest(const std::vector<std::string_view>& held) const {
  Request request;
  request.head.reserve(header_.size() + stream_metadata_.size() + thread_names_bytes_);
  request.head += header_;
  request.head += stream_metadata_;
  for (const auto& [tid, event] : thread_names_) request.head += event;
  request.body_bytes = body_bytes_;
  size_t tail = kFooter.size();
  for (std::string_view text : held) tail += text.size();
  request.tail.reserve(tail);
  for (std::string_view text : held) request.tail += text;
  request.tail += kFooter;
  return request;
}

absl::Status TraceWriter::WriteFile(const Request& request, bool final) {
  const std::string temp = fmt::format("{}/.trace.json.tmp.{}", dir_, pid_);
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ground::ErrnoStatus(errno, fmt::format("creating {}", temp));
  const std::string what = fmt::format("writing {}", temp);
  absl::Status status = ground::WriteAll(fd, request.head, what);
  // With an explicit offset sendfile leaves the body's file position alone,
  // so the drain may append to the body meanwhile; the body only grows past
  // body_bytes (a failed append is cut back to no less than it).
  off_t offset = 0;
  const auto size = static_cast<off_t>(request.body_bytes);
  while (status.ok() && offset < size) {
    const ssize_t n = sendfile(fd, body_fd_, &offset, static_cast<size_t>(size - offset));
    if (n < 0 && errno != EINTR) status = ground::ErrnoStatus(errno, what);
    if (n == 0) status = ground::ErrnoStatus(EIO, what);  // the body is shorter than it was
  }
  if (status.ok()) status = ground::WriteAll(fd, request.tail, what);
  if (status.ok() && final && fsync(fd) != 0) status = ground::ErrnoStatus(errno, what);
  if (close(fd) != 0 && status.ok()) status = ground::ErrnoStatus(errno, what);
  if (status.ok() && rename(temp.c_str(), path_.c_str()) != 0) {
    status = ground::ErrnoStatus(errno, fmt::format("renaming {} to {}", temp, path_));
  }
  if (!status.ok()) {
    unlink(temp.c_str());
    return status;
  }
  published_bytes_.store(request.head.size() + request.body_bytes + request.tail.size(),
                         std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status TraceWriter::Quiesce(bool stop) {
  std::unique_lock<std::mutex> lock(publish_mu_);
  waiting_.reset();
  publish_cv_.notify_all();  // an AwaitPublished waiting on the dropped request
  publish_cv_.wait(lock, [this] { return !writing_; });
  absl::Status status = std::move(background_status_);
  background_status_ = absl::OkStatus();
  if (stop && publisher_.joinable()) {
    stop_ = true;
    lock.unlock();
    publish_cv_.notify_all();
    publisher_.join();
  }
  return status;
}

absl::Status TraceWriter::Publish(bool final, const std::vector<std::string_view>& held) {
  const absl::Status background = Quiesce(final);
  const absl::Status status = WriteFile(MakeRequest(held), final);
  if (!status.ok()) return status;
  if (final) {
    // The complete file replaces whatever a background publish failed to
    // write: that failure no longer matters.
    close(body_fd_);
    body_fd_ = -1;
    unlink(body_path_.c_str());
    return absl::OkStatus();
  }
  return background;
}

absl::Status TraceWriter::PublishSoon(const std::vector<std::string_view>& held) {
  if (body_fd_ < 0) {
    return absl::FailedPreconditionError(
        fmt::format("{}: already published for the last time", path_));
  }
  Request request = MakeRequest(held);
  std::lock_guard<std::mutex> lock(publish_mu_);
  if (!publisher_.joinable()) {
    stop_ = false;  // a Publish before may have stopped an earlier thread
    publisher_ = std::thread([this] { PublishLoop(); });
  }
  waiting_ = std::move(request);
  publish_cv_.notify_all();
  absl::Status status = std::move(background_status_);
  background_status_ = absl::OkStatus();
  return status;
}

absl::Status TraceWriter::AwaitPublished() {
  std::unique_lock<std::mutex> lock(publish_mu_);
  publish_cv_.wait(lock, [this] { return !writing_ && !waiting_.has_value(); });
  absl::Status status = std::move(background_status_);
  background_status_ = absl::OkStatus();
  return status;
}

void TraceWriter::PublishLoop() {
  pthread_setname_np(pthread_self(), "ts-publish");  // as top and gdb show it
  std::unique_lock<std::mutex> lock(publish_mu_);
  while (true) {
    publish_cv_.wait(lock, [this] { return stop_ || waiting_.has_value(); });
    if (stop_) return;
    Request request = std::move(*waiting_);
    waiting_.reset();
    writing_ = true;
    lock.unlock();
    absl::Status status = WriteFile(request, false);
    lock.lock();
    writing_ = false;
    background_status_.Update(status);
    publish_cv_.notify_all();
  }
}

}  // namespace trainscope::exporter
