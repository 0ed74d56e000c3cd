// The trace reader's input window. See trace_input.h.
#include "sdk/kineto/trace_input.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

#include "fmt/format.h"
#include "sdk/ground/files.h"
#include "sdk/kineto/parallel_shares.h"

namespace trainscope::kineto {
namespace {

// The buffer a streamed input is read into: small enough to stay in a
// core's L2 cache between inflating and parsing (an element bigger than it
// grows it).
constexpr size_t kInitialBuffer = 2 << 20;
// An inflater fills a buffer as big as the gzip trailer says, with this
// much room to spare (several members, whose trailer gives only the last
// one's length, then read on from where the buffer ends), in steps of
// kInflateStep.
constexpr size_t kInflateSlack = 64 << 10;
constexpr size_t kInflateStep = 1 << 20;
// A mapped file's parsed pages are handed back in runs of this many bytes.
constexpr size_t kReleaseEvery = 8 << 20;

double SecondsSince(std::chrono::steady_clock::time_point started) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

// A regular file that starts with gzip's magic bytes, and its size.
bool IsGzipFile(int fd, off_t* size) {
  struct stat st;
  unsigned char magic[2];
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || pread(fd, magic, 2, 0) != 2 ||
      magic[0] != 0x1f || magic[1] != 0x8b) {
    return false;
  }
  *size = st.st_size;
  return true;
}

}  // namespace

// Inflates a gzip file into the buffer on a thread of its own, ahead of the
// parse (StartInflater); Fill waits for it.
struct TraceInput::Inflater {
  std::thread thread;
  std::unique_ptr<GzipStream> stream;  // a fault it stops at stays with it
  size_t room = 0;                     // bytes of data it may fill (the padding comes after)
  std::mutex mutex;
  std::condition_variable progress;
  size_t ready = 0;               // bytes of data inflated (under mutex)
  std::atomic<bool> done{false};  // it has stopped (set under mutex)
  bool ended = false;             // ... at the end of the gzip data
  double seconds = 0;             // its time inflating
  std::atomic<bool> cancel{false};
};

TraceInput::TraceInput() = default;

TraceInput::~TraceInput() {
  if (inflater_ != nullptr && inflater_->thread.joinable()) {
    inflater_->cancel = true;
    inflater_->thread.join();
  }
  if (fd_ >= 0) close(fd_);
  if (file_ != nullptr) gzclose(file_);
  if (map_ != nullptr) munmap(map_, map_size_);
}

absl::Status TraceInput::Open(const std::string& path, int max_threads, ReadStats* stats) {
  path_ = path;
  stats_ = stats;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ground::ErrnoStatus(errno, fmt::format("cannot open trace {}", path));
  off_t gzip_size = 0;
  if (MapWhole(fd)) {
    close(fd);
  } else if (IsGzipFile(fd, &gzip_size)) {
    // ISA-L: inflated ahead on a thread of its own, or streamed here.
    fd_ = fd;
    gzip_ = std::make_unique<GzipStream>(fd);
    stats_->compressed = true;
    StartInflater(gzip_size, max_threads);
  } else {
    // Pipes and the like: zlib reads them, gzip or plain.
    file_ = gzdopen(fd, "rb");
    if (file_ == nullptr) {
      close(fd);
      return absl::ResourceExhaustedError(fmt::format("{}: cannot start zlib", path));
    }
    gzbuffer(file_, 1 << 20);
  }
  if (data == nullptr) {  // streamed: through a buffer that Fill refills
    cap = kInitialBuffer;
    buf_ = std::make_unique<char[]>(cap);
    data = buf_.get();
  }
  return absl::OkStatus();
}

absl::Status TraceInput::Error(size_t index, std::string_view what) const {
  return absl::InvalidArgumentError(fmt::format("{}: byte {}: {}", path_, consumed + index, what));
}

absl::Status TraceInput::Fill() {
  if (inflater_ != nullptr) return AwaitInflater();
  if (begin > 0) {
    std::memmove(data, data + begin, end - begin);
    consumed += begin;
    end -= begin;
    begin = 0;
  }
  if (end + kInputPadding + (64 << 10) > cap) {
    const size_t grown = cap * 2;
    auto bigger = std::make_unique<char[]>(grown);
    std::memcpy(bigger.get(), data, end);
    buf_ = std::move(bigger);
    data = buf_.get();
    cap = grown;
  }
  const auto started = std::chrono::steady_clock::now();
  if (gzip_ != nullptr) {
    absl::StatusOr<size_t> n = gzip_->Read(data + end, cap - end - kInputPadding);
    stats_->inflate_s += SecondsSince(started);
    if (!n.ok()) return InflateError(n.status());
    if (*n == 0) eof = true;
    end += *n;
    std::memset(data + end, 0, kInputPadding);
    stats_->bytes += *n;
    return absl::OkStatus();
  }
  const int n = gzread(file_, data + end, static_cast<unsigned>(cap - end - kInputPadding));
  if (!stats_->compressed && gzdirect(file_) == 0) stats_->compressed = true;
  if (stats_->compressed) stats_->inflate_s += SecondsSince(started);
  if (n < 0) {
    int code = 0;
    const char* message = gzerror(file_, &code);
    return absl::DataLossError(fmt::format("{}: byte {}: cannot inflate: {}", path_, consumed + end,
                                           message ? message : "zlib error"));
  }
  if (n == 0) eof = true;
  end += static_cast<size_t>(n);
  std::memset(data + end, 0, kInputPadding);
  stats_->bytes += static_cast<uint64_t>(n);
  return absl::OkStatus();
}

// A GzipStream fault as the reader's error: the stream names the bytes.
absl::Status TraceInput::InflateError(const absl::Status& fault) const {
  return absl::Status(fault.code(),
                      fmt::format("{}: cannot inflate: {}", path_, std::string(fault.message())));
}

bool TraceInput::inflated() const {
  return inflater_ != nullptr && inflater_->done.load(std::memory_order_acquire);
}

// With several CPUs and a gzip file whose trailer says it inflates to at
// most kMaxParallel bytes: a thread inflates it into one buffer of that
// size, kInflateStep bytes at a time, while the caller parses behind it
// (Fill waits for it); once it is all in, ParseShares cuts what is left
// into shares for every CPU. False, with nothing changed, when that does
// not apply or no thread starts: the file then streams through `gzip_` on
// the calling thread, in a buffer that stays in cache.
bool TraceInput::StartInflater(off_t file_size, int max_threads) {
  unsigned char trailer[4];
  if (file_size < 18 || pread(fd_, trailer, 4, file_size - 4) != 4) return false;
  // ISIZE: the length of the last member, mod 2^32.
  const size_t isize =
      trailer[0] | trailer[1] << 8 | trailer[2] << 16 | static_cast<size_t>(trailer[3]) << 24;
  if (isize == 0 || isize > kMaxParallel || ParseThreadsFor(isize, max_threads) < 2) return false;
  const size_t room = isize + kInflateSlack;
  std::unique_ptr<char[]> buffer(new (std::nothrow) char[room + kInputPadding]);
  if (buffer == nullptr) return false;
  auto job = std::make_unique<Inflater>();
  job->stream = std::move(gzip_);
  job->room = room;
  Inflater* const j = job.get();
  char* const out = buffer.get();
  try {
    job->thread = std::thread([j, out] {
      pthread_setname_np(pthread_self(), "ts-inflate");  // as top and gdb show it
      const auto started = std::chrono::steady_clock::now();
      size_t at = 0;
      bool ended = false;
      while (at < j->room && !j->cancel.load(std::memory_order_relaxed)) {
        absl::StatusOr<size_t> n = j->stream->Read(out + at, std::min(kInflateStep, j->room - at));
        if (!n.ok() || *n == 0) {
          ended = n.ok();
          break;
        }
        at += *n;
        std::lock_guard<std::mutex> lock(j->mutex);
        j->ready = at;
        j->progress.notify_one();
      }
      std::memset(out + at, 0, kInputPadding);
      std::lock_guard<std::mutex> lock(j->mutex);
      j->ready = at;
      j->ended = ended;
      j->seconds = SecondsSince(started);
      j->done.store(true, std::memory_order_release);
      j->progress.notify_one();
    });
  } catch (...) {  // no thread: stream on this one
    gzip_ = std::move(job->stream);
    return false;
  }
  buf_ = std::move(buffer);
  data = out;
  cap = room + kInputPadding;
  inflater_ = std::move(job);
  stats_->inflated_ahead = true;
  return true;
}

// Waits for the inflater to stop and joins it. Its bytes become readable
// and counted; when it stopped short of the end of the gzip data (at a
// fault, which stays with the stream, with its buffer full, or cancelled)
// the rest comes through `gzip_` on this thread.
void TraceInput::JoinInflater() {
  Inflater& j = *inflater_;
  {
    std::unique_lock<std::mutex> lock(j.mutex);
    j.progress.wait(lock, [&] { return j.done.load(); });
  }
  j.thread.join();
  end = j.ready;
  stats_->bytes = j.ready;
  stats_->inflate_s += j.seconds;
  eof = j.ended;
  if (!eof) gzip_ = std::move(j.stream);
  inflater_.reset();
}

// Fill with the inflater: waits until it has inflated more than the bytes
// here, and makes them readable, all but the last kInputPadding (simdjson
// reads that far past what it parses) until it is done; then JoinInflater.
absl::Status TraceInput::AwaitInflater() {
  Inflater& j = *inflater_;
  {
    std::unique_lock<std::mutex> lock(j.mutex);
    j.progress.wait(lock, [&] { return j.done.load() || j.ready > end + kInputPadding; });
    if (!j.done) {
      end = j.ready - kInputPadding;
      return absl::OkStatus();
    }
  }
  const size_t before = end;
  JoinInflater();
  return end > before || eof ? absl::OkStatus() : Fill();
}

absl::Status TraceInput::Finish(bool read_rest) {
  if (inflater_ != nullptr) {
    if (!read_rest) inflater_->cancel = true;
    JoinInflater();
  }
  if (gzip_ == nullptr || !read_rest || eof) return absl::OkStatus();
  const auto started = std::chrono::steady_clock::now();
  constexpr size_t kScratch = 1 << 20;
  std::unique_ptr<char[]> scratch(new (std::nothrow) char[kScratch]);
  if (scratch == nullptr) return absl::ResourceExhaustedError(path_ + ": out of memory");
  absl::Status status;
  for (;;) {
    absl::StatusOr<size_t> n = gzip_->Read(scratch.get(), kScratch);
    if (!n.ok()) status = InflateError(n.status());
    if (!n.ok() || *n == 0) break;
    stats_->bytes += *n;
  }
  stats_->inflate_s += SecondsSince(started);
  eof = status.ok();
  return status;
}

// Maps a plain (not gzip) regular file at fd whole, copy-on-write, with
// zeroed padding after it, and marks it all read: no copy into a buffer.
// False, with nothing changed, when it is not such a file or mmap fails;
// the streaming path then reads it. Release() hands the pages already
// parsed back, so the resident set stays bounded.
bool TraceInput::MapWhole(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 2) return false;
  unsigned char magic[2];
  if (pread(fd, magic, 2, 0) != 2 || (magic[0] == 0x1f && magic[1] == 0x8b)) return false;
  const size_t size = static_cast<size_t>(st.st_size);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t file_pages = (size + page - 1) / page * page;
  const size_t reserve = file_pages + (kInputPadding + page - 1) / page * page;
  // Anonymous zero pages first, so the padding past the file's last page
  // is readable; the file is mapped over their start.
  void* area = mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (area == MAP_FAILED) return false;
  if (mmap(area, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, 0) == MAP_FAILED) {
    munmap(area, reserve);
    return false;
  }
  madvise(area, size, MADV_SEQUENTIAL);
  map_ = area;
  map_size_ = reserve;
  data = static_cast<char*>(area);
  cap = size + kInputPadding;
  end = size;
  eof = true;
  stats_->bytes = size;
  return true;
}

void TraceInput::Release(size_t before) {
  if (map_ == nullptr || before < released_ + kReleaseEvery) return;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t upto = (before - page) / page * page;  // keep the page before `before`
  if (upto <= released_) return;
  madvise(data + released_, upto - released_, MADV_DONTNEED);
  released_ = upto;
}

}  // namespace trainscope::kineto
