// Streaming Kineto / Chrome trace reader. See trace_reader.h. How one
// value is read (numbers, times, strings, keys) is value_decoding.h.
#include "sdk/kineto/trace_reader.h"

#include <fcntl.h>
#include <pthread.h>
#include <simdjson.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <thread>

#include "fmt/format.h"
#include "sdk/ground/cpus.h"
#include "sdk/ground/files.h"
#include "sdk/ground/timeline.h"
#include "sdk/kineto/gzip_stream.h"
#include "sdk/kineto/json_scanner.h"
#include "sdk/kineto/value_decoding.h"

namespace trainscope::kineto {
namespace {

// The buffer a streamed input is read into: small enough to stay in a
// core's L2 cache between inflating and parsing (an element bigger than it
// grows it).
constexpr size_t kInitialBuffer = 2 << 20;
constexpr size_t kPadding = simdjson::SIMDJSON_PADDING;
constexpr size_t kIncomplete = kScanIncomplete;
constexpr size_t kMaxTopLevelText = 64 << 10;
// With several CPUs, a gzip file is inflated on a thread of its own, ahead
// of the parse, into a buffer as big as its gzip trailer says, with this
// much room to spare (several members, whose trailer gives only the last
// one's length, then read on from where the buffer ends), in steps of
// kInflateStep.
constexpr size_t kInflateSlack = 64 << 10;
constexpr size_t kInflateStep = 1 << 20;
// About how many bytes of traceEvents elements one simdjson call parses.
constexpr size_t kMaxBatch = 64 << 10;
// ScanComposite reads whole 64-byte blocks past the data.
static_assert(kPadding >= 64);
// Inputs held whole in memory up to this size may be parsed on several
// threads (bigger mapped files stream on one, handing pages back).
constexpr size_t kMaxParallel = 64 << 20;
// The least traceEvents bytes worth a thread of their own.
constexpr size_t kMinShare = 4 << 20;
// Shares are about this big, or smaller than the bytes per thread by
// kSharesPerThread: small enough that whoever is free takes the next one
// and nobody waits long at the end, big enough that a share's fixed costs
// (a guess, a sink, a commit) do not count.
constexpr size_t kSharePiece = 1 << 20;
constexpr size_t kSharesPerThread = 8;

}  // namespace

struct TraceReader::Impl {
  enum class State { kStart, kKey, kColon, kValue, kAfterMember, kElement, kAfterElement, kDone };

  // One share of the traceEvents elements, for ParseShares: those that start
  // in [start, limit).
  struct Share {
    size_t start = 0, limit = 0;
    // After a parse: `whole` when it stopped at its first element at or past
    // `limit`, which starts at `next`. Otherwise it stopped early (the array
    // ended, or trouble), and the serial reader picks up at `resume`: after
    // its last element parsed, or at the element where it stopped.
    bool whole = false;
    size_t next = 0;
    size_t resume = 0;
    bool resume_at_element = true;
    uint64_t events = 0;                // parsed and handed on
    uint64_t guessed = 0, wrong = 0;    // ReadStats' guessed_batches and wrong_guesses
    std::unique_ptr<EventSink> sink;    // a worker's run (ParallelSink::NewShare)
    std::exception_ptr error;           // what the worker's sink threw
    std::atomic<bool> finished{false};  // a worker is done with it
    std::atomic<bool> cancel{false};    // it will be dropped: stop early
  };

  // A thread's parser and batch buffers, for ParseShare.
  struct Batcher {
    simdjson::ondemand::parser parser;
    std::vector<ElementSpan> spans;  // the batch being parsed
    std::vector<char> copy;          // its bytes, padded
  };

  // Inflates a gzip file into `data` on a thread of its own, ahead of the
  // parse (StartInflater); Fill waits for it.
  struct Inflater {
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

  std::string path;
  int fd = -1;                         // the gzip file, while it streams
  std::unique_ptr<GzipStream> gzip;    // streams it into the buffer (Fill)
  std::unique_ptr<Inflater> inflater;  // or inflates it ahead (StartInflater)
  std::string_view* input = nullptr;   // where ParseShares shows the workers the input
  gzFile file = nullptr;               // any other input that is not a mapped file
  std::unique_ptr<char[]> buf;         // the bytes, when read or inflated
  char* data = nullptr;                // buf, or the mapping of a plain file
  void* map = nullptr;                 // MapWhole's mapping, when there is one
  size_t map_size = 0;
  size_t released = 0;  // mapped bytes before this were handed back
  size_t cap = 0;
  size_t begin = 0;       // first unconsumed byte
  size_t end = 0;         // one past the last byte read
  uint64_t consumed = 0;  // absolute offset of buf[0]
  bool eof = false;
  ReadStats stats;
  std::vector<std::pair<std::string, std::string>> top_level;
  std::optional<int64_t> rank;
  Batcher serial;  // this thread's parser and batch buffers
  // How the first element of traceEvents is laid out (NoteFirstElement).
  bool lines = false;
  std::string indent;
  int max_threads = 0;  // 0: the CPUs this thread may run on

  ~Impl() {
    if (inflater != nullptr && inflater->thread.joinable()) {
      inflater->cancel = true;
      inflater->thread.join();
    }
    if (fd >= 0) close(fd);
    if (file != nullptr) gzclose(file);
    if (map != nullptr) munmap(map, map_size);
  }

  absl::Status Error(size_t index, std::string_view what) const {
    return absl::InvalidArgumentError(fmt::format("{}: byte {}: {}", path, consumed + index, what));
  }

  // Keeps [begin, end), moves it to the front, grows the buffer when it is
  // full, and reads more. Sets eof at the end of the file.
  absl::Status Fill() {
    if (inflater != nullptr) return AwaitInflater();
    if (begin > 0) {
      std::memmove(data, data + begin, end - begin);
      consumed += begin;
      end -= begin;
      begin = 0;
    }
    if (end + kPadding + (64 << 10) > cap) {
      const size_t grown = cap * 2;
      auto bigger = std::make_unique<char[]>(grown);
      std::memcpy(bigger.get(), data, end);
      buf = std::move(bigger);
      data = buf.get();
      cap = grown;
    }
    const auto started = std::chrono::steady_clock::now();
    if (gzip != nullptr) {
      absl::StatusOr<size_t> n = gzip->Read(data + end, cap - end - kPadding);
      stats.inflate_s +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (!n.ok()) return InflateError(n.status());
      if (*n == 0) eof = true;
      end += *n;
      std::memset(data + end, 0, kPadding);
      stats.bytes += *n;
      return absl::OkStatus();
    }
    const int n = gzread(file, data + end, static_cast<unsigned>(cap - end - kPadding));
    if (!stats.compressed && gzdirect(file) == 0) stats.compressed = true;
    if (stats.compressed) {
      stats.inflate_s +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    }
    if (n < 0) {
      int code = 0;
      const char* message = gzerror(file, &code);
      return absl::DataLossError(fmt::format("{}: byte {}: cannot inflate: {}", path,
                                             consumed + end, message ? message : "zlib error"));
    }
    if (n == 0) eof = true;
    end += static_cast<size_t>(n);
    std::memset(data + end, 0, kPadding);
    stats.bytes += static_cast<uint64_t>(n);
    return absl::OkStatus();
  }

  // A GzipStream fault as the reader's error: the stream names the bytes.
  absl::Status InflateError(const absl::Status& fault) const {
    return absl::Status(fault.code(),
                        fmt::format("{}: cannot inflate: {}", path, std::string(fault.message())));
  }

  // With several CPUs and a gzip file whose trailer says it inflates to
  // at most kMaxParallel bytes: a thread inflates it into one buffer of
  // that size, kInflateStep bytes at a time, while this one parses behind
  // it (Fill waits for it); once it is all in, ParseShares cuts what is
  // left into shares for every CPU. False, with nothing changed, when that
  // does not apply or no thread starts: the file then streams through
  // `gzip` on this thread, in a buffer that stays in cache.
  bool StartInflater(off_t file_size) {
    unsigned char trailer[4];
    if (file_size < 18 || pread(fd, trailer, 4, file_size - 4) != 4) return false;
    // ISIZE: the length of the last member, mod 2^32.
    const size_t isize =
        trailer[0] | trailer[1] << 8 | trailer[2] << 16 | static_cast<size_t>(trailer[3]) << 24;
    if (isize == 0 || isize > kMaxParallel || ThreadsFor(isize) < 2) return false;
    const size_t room = isize + kInflateSlack;
    std::unique_ptr<char[]> buffer(new (std::nothrow) char[room + kPadding]);
    if (buffer == nullptr) return false;
    auto job = std::make_unique<Inflater>();
    job->stream = std::move(gzip);
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
          absl::StatusOr<size_t> n =
              j->stream->Read(out + at, std::min(kInflateStep, j->room - at));
          if (!n.ok() || *n == 0) {
            ended = n.ok();
            break;
          }
          at += *n;
          std::lock_guard<std::mutex> lock(j->mutex);
          j->ready = at;
          j->progress.notify_one();
        }
        std::memset(out + at, 0, kPadding);
        std::lock_guard<std::mutex> lock(j->mutex);
        j->ready = at;
        j->ended = ended;
        j->seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        j->done.store(true, std::memory_order_release);
        j->progress.notify_one();
      });
    } catch (...) {  // no thread: stream on this one
      gzip = std::move(job->stream);
      return false;
    }
    buf = std::move(buffer);
    data = out;
    cap = room + kPadding;
    inflater = std::move(job);
    stats.inflated_ahead = true;
    return true;
  }

  // Waits for the inflater to stop and joins it. Its bytes become readable
  // and counted; when it stopped short of the end of the gzip data (at a
  // fault, which stays with the stream, with its buffer full, or cancelled)
  // the rest comes through `gzip` on this thread.
  void JoinInflater() {
    Inflater& j = *inflater;
    {
      std::unique_lock<std::mutex> lock(j.mutex);
      j.progress.wait(lock, [&] { return j.done.load(); });
    }
    j.thread.join();
    end = j.ready;
    stats.bytes = j.ready;
    stats.inflate_s += j.seconds;
    eof = j.ended;
    if (!eof) gzip = std::move(j.stream);
    inflater.reset();
  }

  // Fill with the inflater: waits until it has inflated more than the bytes
  // here, and makes them readable, all but the last kPadding (simdjson reads
  // that far past what it parses) until it is done; then JoinInflater.
  absl::Status AwaitInflater() {
    Inflater& j = *inflater;
    {
      std::unique_lock<std::mutex> lock(j.mutex);
      j.progress.wait(lock, [&] { return j.done.load() || j.ready > end + kPadding; });
      if (!j.done) {
        end = j.ready - kPadding;
        return absl::OkStatus();
      }
    }
    const size_t before = end;
    JoinInflater();
    return end > before || eof ? absl::OkStatus() : Fill();
  }

  // After the parse. With `read_rest`, inflates what is left of a gzip file
  // (after the closing '}', usually a newline and the trailer) so that its
  // CRC-32 and length checks run: a failed check is Fill's error. Without,
  // stops the inflater. Either way no thread outlives Read, and stats count
  // the bytes inflated.
  absl::Status FinishInput(bool read_rest) {
    if (inflater != nullptr) {
      if (!read_rest) inflater->cancel = true;
      JoinInflater();
    }
    if (gzip == nullptr || !read_rest || eof) return absl::OkStatus();
    const auto started = std::chrono::steady_clock::now();
    constexpr size_t kScratch = 1 << 20;
    std::unique_ptr<char[]> scratch(new (std::nothrow) char[kScratch]);
    if (scratch == nullptr) return absl::ResourceExhaustedError(path + ": out of memory");
    absl::Status status;
    for (;;) {
      absl::StatusOr<size_t> n = gzip->Read(scratch.get(), kScratch);
      if (!n.ok()) status = InflateError(n.status());
      if (!n.ok() || *n == 0) break;
      stats.bytes += *n;
    }
    stats.inflate_s +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    eof = status.ok();
    return status;
  }

  // Maps a plain (not gzip) regular file at fd whole, copy-on-write, with
  // zeroed padding after it, and marks it all read: no copy into a buffer.
  // False, with nothing changed, when it is not such a file or mmap fails;
  // the streaming path then reads it. Release() hands the pages already
  // parsed back, so the resident set stays bounded.
  bool MapWhole(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 2) {
      return false;
    }
    unsigned char magic[2];
    if (pread(fd, magic, 2, 0) != 2 || (magic[0] == 0x1f && magic[1] == 0x8b)) return false;
    const size_t size = static_cast<size_t>(st.st_size);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t file_pages = (size + page - 1) / page * page;
    const size_t reserve = file_pages + (kPadding + page - 1) / page * page;
    // Anonymous zero pages first, so the padding past the file's last page
    // is readable; the file is mapped over their start.
    void* area = mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) return false;
    if (mmap(area, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, 0) == MAP_FAILED) {
      munmap(area, reserve);
      return false;
    }
    madvise(area, size, MADV_SEQUENTIAL);
    map = area;
    map_size = reserve;
    data = static_cast<char*>(area);
    cap = size + kPadding;
    end = size;
    eof = true;
    stats.bytes = size;
    return true;
  }

  // With a mapped file: hands back the pages wholly before `before` once
  // kReleaseEvery bytes have piled up. Nothing before it is read again.
  void Release(size_t before) {
    constexpr size_t kReleaseEvery = 8 << 20;
    if (map == nullptr || before < released + kReleaseEvery) return;
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t upto = (before - page) / page * page;  // keep the page before `before`
    if (upto <= released) return;
    madvise(data + released, upto - released, MADV_DONTNEED);
    released = upto;
  }

  // Index one past the closing quote of the string whose body starts at i.
  size_t SkipString(size_t i) const {
    while (i < end) {
      const void* quote = std::memchr(data + i, '"', end - i);
      if (quote == nullptr) return kIncomplete;
      const size_t q = static_cast<const char*>(quote) - data;
      size_t backslashes = 0;
      while (q > backslashes && data[q - 1 - backslashes] == '\\') ++backslashes;
      if (backslashes % 2 == 0) return q + 1;
      i = q + 1;
    }
    return kIncomplete;
  }

  // Index one past the JSON value starting at i, kIncomplete if it runs past
  // the bytes read so far. Scalars end at a delimiter. `escapes`, when given,
  // says whether an object or array has a backslash in it.
  size_t ScanValue(size_t i, bool* escapes = nullptr) const {
    const char first = data[i];
    if (first == '"') return SkipString(i + 1);
    if (first != '{' && first != '[') {
      while (i < end && !IsSpace(data[i]) && data[i] != ',' && data[i] != '}' && data[i] != ']')
        ++i;
      return i < end ? i : kIncomplete;
    }
    ScanState state;
    const size_t stop = ScanComposite(data, i, end, &state);
    if (escapes != nullptr) *escapes = state.backslash;
    return stop;
  }

  // `error`, after naming `key` in *bad_key when there is one.
  static simdjson::error_code Fault(simdjson::error_code error, const char* key,
                                    std::string* bad_key) {
    if (bad_key != nullptr) *bad_key = key;
    return error;
  }

  // The error of a time member's read, or SUCCESS.
  static simdjson::error_code TimeFault(NumberRead read) {
    if (read == NumberRead::kMalformed) return simdjson::NUMBER_ERROR;
    if (read == NumberRead::kOutOfRange) return simdjson::NUMBER_OUT_OF_RANGE;
    return simdjson::SUCCESS;
  }

  // The args members the analyses use. On an error, *bad_key (when given)
  // names the member at fault.
  simdjson::error_code ParseArgs(simdjson::ondemand::value& value, bool escapes, RawEvent* event,
                                 std::string* bad_key) {
    simdjson::ondemand::object args;
    if (value.get_object().get(args) != simdjson::SUCCESS) return simdjson::SUCCESS;
    for (auto arg_member : args) {
      if (auto error = arg_member.error()) return error;
      simdjson::ondemand::field& arg = arg_member.value_unsafe();
      std::string_view key;
      if (auto error = KeyOf(arg, escapes, &key)) return error;
      // The integer members, each with its name for errors; other keys are
      // skipped.
      static constexpr struct {
        std::string_view key;
        int64_t RawEvent::*field;
        const char* name;
      } kInts[] = {{"stream", &RawEvent::stream, "args.stream"},
                   {"correlation", &RawEvent::correlation, "args.correlation"},
                   {"device", &RawEvent::device, "args.device"},
                   {"step", &RawEvent::step, "args.step"},
                   {"samples", &RawEvent::samples, "args.samples"}};
      if (key == "phase") {
        GetString(arg.value(), escapes, &event->phase);
        continue;
      }
      for (const auto& member : kInts) {
        if (key != member.key) continue;
        if (auto error = AsInt(arg.value(), &(event->*member.field))) {
          return Fault(error, member.name, bad_key);
        }
        break;
      }
    }
    return simdjson::SUCCESS;
  }

  // The fields of one event object, into `event`.
  simdjson::error_code ParseObject(simdjson::ondemand::object& object, bool escapes,
                                   EventSink& sink, RawEvent* event,
                                   std::string* bad_key = nullptr) {
    bool saw_cat = false, saw_name = false;
    // Asked once, when pid, tid or args comes after cat and name: whether
    // the sink wants them.
    enum { kNotAsked, kWanted, kNotWanted } details = kNotAsked;
    auto skip = [&] {
      if (!saw_cat || !saw_name) return false;
      if (details == kNotAsked) details = sink.WantsArgs(*event) ? kWanted : kNotWanted;
      return details == kNotWanted;
    };
    for (auto member : object) {
      // Used where it is: a copy out of the result (a 16-byte load of two
      // smaller stores) stalled store-to-load forwarding on every field.
      if (auto error = member.error()) return error;
      simdjson::ondemand::field& field = member.value_unsafe();
      std::string_view key;
      if (auto error = KeyOf(field, escapes, &key)) return error;
      // A reference, not a copy: see the field above.
      simdjson::ondemand::value& value = field.value();
      if (key == "ph") {
        GetString(value, escapes, &event->ph);
      } else if (key == "cat") {
        GetString(value, escapes, &event->cat);
        saw_cat = true;
      } else if (key == "name") {
        GetString(value, escapes, &event->name);
        saw_name = true;
      } else if (key == "pid") {
        if (skip()) continue;
        if (auto error = AsInt(value, &event->pid)) return Fault(error, "pid", bad_key);
      } else if (key == "tid") {
        if (skip()) continue;
        if (auto error = AsInt(value, &event->tid)) return Fault(error, "tid", bad_key);
      } else if (key == "ts") {
        const NumberRead read = GetMicros(value, &event->ts_ns, &event->ts_is_float);
        if (auto error = TimeFault(read)) return Fault(error, "ts", bad_key);
        event->has_ts = read == NumberRead::kNumber;
      } else if (key == "dur") {
        bool dur_is_float = false;
        const NumberRead read = GetMicros(value, &event->dur_ns, &dur_is_float);
        if (auto error = TimeFault(read)) return Fault(error, "dur", bad_key);
        event->has_dur = read == NumberRead::kNumber;
      } else if (key == "args") {
        if (skip()) continue;
        if (auto error = ParseArgs(value, escapes, event, bad_key)) return error;
      }
    }
    // The end, too, must be a time a trace can hold (and an int64).
    int64_t end = 0;
    if (event->has_ts && event->has_dur &&
        (__builtin_add_overflow(event->ts_ns, event->dur_ns, &end) ||
         end >= ground::kMaxTraceNanos || end <= -ground::kMaxTraceNanos)) {
      return Fault(simdjson::NUMBER_OUT_OF_RANGE, "ts + dur", bad_key);
    }
    return simdjson::SUCCESS;
  }

  // What ParseBatch did.
  struct Batch {
    size_t done = 0;            // events handed on
    size_t stop = kIncomplete;  // one past the last of them (kIncomplete: none)
    bool guessed = false;       // cut at a guessed element start
    bool whole = false;         // every element of the batch was handed on
  };

  // How ParseBatch cuts and where simdjson reads.
  struct BatchMode {
    // Cut with the scanner, not at a guessed element start (a guess just
    // failed, or there is none).
    bool scan = false;
    // Other threads read the input: simdjson parses a copy in the batcher,
    // not the input with '[' and ']' written around the elements.
    bool copy_out = false;
    // With copy_out, off the thread that owns the input: the events' views
    // into the copy are made views of the input again.
    bool relocate = false;
  };

  // Parses one batch of elements, the first at `at` (a '{'), about
  // kMaxBatch bytes with none starting at or past `limit`, in one simdjson
  // call, handing each event to `sink`. The batch ends at a guessed element
  // start (no pass over its bytes before simdjson's) unless `mode.scan` or
  // there is no guess; then the scanner finds where its last whole element
  // ends. A wrong guess leaves the element it falls in unbalanced, so that
  // element's parse fails and it is not handed on. simdjson needs the
  // elements inside '[' and ']': written over the bytes around them while
  // it parses, or with `mode.copy_out` around a copy in `batcher`. It stops
  // at the first error, or where simdjson's elements and the scanner's
  // disagree.
  Batch ParseBatch(size_t at, size_t limit, BatchMode mode, Batcher& batcher, EventSink& sink) {
    const bool scan = mode.scan, copy_out = mode.copy_out, relocate = mode.relocate;
    Batch batch;
    const std::vector<ElementSpan>* list = nullptr;  // the scanner's elements
    size_t stop = 0;
    if (!scan && GuessCut(at, limit, &stop)) {
      batch.guessed = true;
    } else {
      std::vector<ElementSpan>& spans = batcher.spans;
      spans.clear();
      ScanElements(data, at, end, std::min(kMaxBatch, limit - at), &spans);
      if (!spans.empty() && spans.back().stop >= end) spans.pop_back();
      if (spans.empty() || spans.front().start != at) return batch;
      stop = spans.back().stop;
      list = &spans;
    }
    const size_t from = at - 1, bytes = stop + 1 - from;
    char* text = data + from;
    size_t capacity = cap - from;
    const char saved_first = data[from], saved_last = data[stop];
    if (copy_out) {
      std::vector<char>& copy = batcher.copy;
      if (copy.size() < bytes + kPadding) copy.resize(bytes + kPadding);
      std::memcpy(copy.data(), data + from, bytes);
      std::memset(copy.data() + bytes, 0, kPadding);
      text = copy.data();
      capacity = copy.size();
    }
    text[0] = '[';
    text[bytes - 1] = ']';
    size_t last = 0;  // where the last element handed on starts
    bool stopped = false;
    simdjson::ondemand::document doc;
    simdjson::ondemand::array array;
    if (batcher.parser.iterate(text, bytes, capacity).get(doc) || doc.get_array().get(array)) {
      stopped = true;
    } else {
      for (auto element : array) {
        if (element.error()) {
          stopped = true;
          break;
        }
        simdjson::ondemand::value& value = element.value_unsafe();  // in place, as in ParseObject
        const size_t start = from + static_cast<size_t>(value.raw_json_token().data() - text);
        if (list != nullptr && (batch.done == list->size() || start != (*list)[batch.done].start)) {
          stopped = true;
          break;
        }
        RawEvent event;
        event.offset = consumed + start;
        // Without the scanner, backslashes are found string by string.
        const bool escapes = list != nullptr && (*list)[batch.done].escapes;
        auto object = value.get_object();
        if (object.error() || ParseObject(object.value_unsafe(), escapes, sink, &event)) {
          stopped = true;
          break;
        }
        if (relocate) Relocate(&event, text, bytes, data + from);
        sink.Visit(event);
        ++batch.done;
        last = start;
      }
    }
    if (!copy_out) {
      data[from] = saved_first;
      data[stop] = saved_last;
    }
    // A guessed batch must also have used every token: the ']' that closed
    // the array was the batch's last.
    batch.whole =
        !stopped && (list != nullptr ? batch.done == list->size()
                                     : doc.current_location().error() == simdjson::OUT_OF_BOUNDS);
    if (batch.whole) {
      batch.stop = stop;
    } else if (batch.done > 0) {
      batch.stop = list != nullptr ? (*list)[batch.done - 1].stop : ElementEnd(last);
    }
    return batch;
  }

  // The start of the element after the one that ends at `stop`, past ", ",
  // or kIncomplete when other text (or the end) comes first.
  size_t NextElement(size_t stop) const {
    size_t next = stop;
    while (next < end && IsSpace(data[next])) ++next;
    if (next == end || data[next] != ',') return kIncomplete;
    ++next;
    while (next < end && IsSpace(data[next])) ++next;
    return next < end && data[next] == '{' ? next : kIncomplete;
  }

  // Parses the elements of `share` in batches (ParseBatch, on copies), to
  // `sink`, until its next element starts at or past its limit (whole), the
  // array ends, or trouble (which the serial reader then meets again and
  // reports exactly). The shared bytes are only read: a share that starts
  // at a wrong guess (inside an element) reads nonsense, is dropped, and
  // harms no other. Off the calling thread (`relocate`), the events' views
  // point into the input, which outlives the share.
  void ParseShare(Share& share, Batcher& batcher, EventSink& sink, bool relocate) {
    share.whole = false;
    share.resume = share.start;
    share.resume_at_element = true;
    share.events = 0;
    share.guessed = share.wrong = 0;
    bool scan = false;  // cut the next batch with the scanner (a guess just failed)
    for (size_t at = share.start;;) {
      if (share.cancel.load(std::memory_order_relaxed)) return;
      if (at >= share.limit) {
        share.whole = true;
        share.next = at;
        return;
      }
      const Batch batch =
          ParseBatch(at, share.limit, {scan, /*copy_out=*/true, relocate}, batcher, sink);
      share.events += batch.done;
      share.guessed += batch.guessed;
      share.wrong += batch.guessed && !batch.whole;
      if (batch.stop != kIncomplete) {
        share.resume = batch.stop;
        share.resume_at_element = false;
      }
      // After a wrong guess the scanner cuts on from the last element
      // parsed; a scanned batch that stops short is trouble.
      scan = batch.guessed && !batch.whole;
      if (!batch.whole && !batch.guessed) return;
      if (batch.done == 0) continue;
      at = NextElement(batch.stop);
      if (at == kIncomplete) return;
    }
  }

  // The views of `event` into `copy` (`bytes` long) as views of the same
  // bytes at `source`.
  static void Relocate(RawEvent* event, const char* copy, size_t bytes, const char* source) {
    for (std::string_view* field : {&event->ph, &event->cat, &event->name, &event->phase}) {
      if (field->data() >= copy && field->data() < copy + bytes) {
        *field = std::string_view(source + (field->data() - copy), field->size());
      }
    }
  }

  // Notes how the first element of traceEvents, at data[first], is laid
  // out, for GuessElement: whether it begins a line, and its indentation.
  void NoteFirstElement(size_t first) {
    size_t line = first;
    while (line > 0 && (data[line - 1] == ' ' || data[line - 1] == '\t')) --line;
    lines = line > 0 && data[line - 1] == '\n';
    indent.assign(data + line, first - line);
  }

  // A guess at an element's start at or after `from`: a '{' after '}' and
  // ',' (with spaces between, all after `floor`), which, when the array's
  // first element begins a line, begins a line with the same indentation.
  // kIncomplete when none is found within 1 MiB. A wrong guess (inside an
  // element) only costs time.
  size_t GuessElement(size_t from, size_t floor) const {
    const size_t stop = std::min(end, from + (1 << 20));
    for (size_t at = from; at < stop;) {
      const void* brace = std::memchr(data + at, '{', stop - at);
      if (brace == nullptr) return kIncomplete;
      const size_t q = static_cast<const char*>(brace) - data;
      at = q + 1;
      if (lines && (q < indent.size() + 1 || data[q - indent.size() - 1] != '\n' ||
                    std::string_view(data + q - indent.size(), indent.size()) != indent)) {
        continue;
      }
      if (ElementBefore(q, floor) != kIncomplete) return q;
    }
    return kIncomplete;
  }

  // For a '{' at q: one past the '}' before it when only spaces and one ','
  // lie between (all after `floor`), else kIncomplete.
  size_t ElementBefore(size_t q, size_t floor) const {
    size_t i = q;
    while (i > floor && IsSpace(data[i - 1])) --i;
    if (i <= floor || data[i - 1] != ',') return kIncomplete;
    --i;
    while (i > floor && IsSpace(data[i - 1])) --i;
    return i > floor && data[i - 1] == '}' ? i : kIncomplete;
  }

  // Where a batch of elements that starts at `at` may end, without a pass
  // over its bytes: *stop, one past the '}' before a guessed element start
  // at or after at + kMaxBatch (or before `limit`, when that comes first
  // and is not the end). False when there is no guess. ParseBatch then
  // tells whether the guess was right.
  bool GuessCut(size_t at, size_t limit, size_t* stop) const {
    size_t guess = limit;
    if (at + kMaxBatch < limit) {
      guess = GuessElement(at + kMaxBatch, at);
      if (guess == kIncomplete) return false;
      guess = std::min(guess, limit);
    }
    if (guess >= end) return false;
    *stop = ElementBefore(guess, at);
    return *stop != kIncomplete;
  }

  // One past the element that starts at data[start] (which parsed, so it
  // ends; should the scanner disagree, `end`, where the serial reader then
  // reports the trace cut off).
  size_t ElementEnd(size_t start) const {
    ScanState state;
    const size_t stop = ScanComposite(data, start, end, &state);
    return stop == kIncomplete ? end : stop;
  }

  // How many threads may parse `bytes` of elements.
  int ThreadsFor(size_t bytes) const {
    const int cpus = max_threads > 0 ? max_threads : ground::AvailableCpus();
    return static_cast<int>(std::min<size_t>({static_cast<size_t>(cpus), bytes / kMinShare, 64}));
  }

  bool ParseShares(ParallelSink& sink, State* state);

  // The event in [start, stop), which has a backslash in it if `escapes`,
  // parsed on its own: errors name this event and its first byte.
  absl::Status ParseEvent(size_t start, size_t stop, bool escapes, EventSink& sink) {
    simdjson::ondemand::document doc;
    simdjson::ondemand::object object;
    RawEvent event;
    event.offset = consumed + start;
    simdjson::error_code error =
        serial.parser.iterate(data + start, stop - start, cap - start).get(doc);
    if (!error) error = doc.get_object().get(object);
    std::string bad_key;
    if (!error) error = ParseObject(object, escapes, sink, &event, &bad_key);
    if (error) {
      return Error(start, fmt::format("event {}: {}{}", stats.events,
                                      bad_key.empty() ? "" : "\"" + bad_key + "\": ",
                                      simdjson::error_message(error)));
    }
    ++stats.events;
    sink.Visit(event);
    return absl::OkStatus();
  }

  absl::Status Run(ParallelSink& sink);
};

// When the whole of the input is in memory and more than one CPU is free:
// guesses element starts that cut the elements from `begin` into shares of
// about kSharePiece bytes. This thread parses shares from the front, handing
// their events to `sink`; worker threads take shares from the back, each
// into a sink of its own, which this thread commits in file order when it
// gets there. A share's events count only if it starts exactly where the
// share before it ended; otherwise its guess was inside an element, its
// work is dropped, and this thread parses those bytes itself. So what the
// sink gets is what the serial reader would have visited. False, with
// nothing visited, when it does not split. Otherwise it leaves `begin` and
// *state for the serial reader to finish from: after the last element
// handed on, or at the element where a share stopped (the serial reader
// then parses it alone and reports any error exactly).
bool TraceReader::Impl::ParseShares(ParallelSink& sink, State* state) {
  if (!eof || file != nullptr || gzip != nullptr || end > kMaxParallel || begin == 0) {
    return false;
  }
  const int threads = ThreadsFor(end - begin);
  if (threads < 2) return false;
  if (input != nullptr) *input = std::string_view(data, end);
  const size_t piece =
      std::max(kSharePiece, (end - begin) / (static_cast<size_t>(threads) * kSharesPerThread));
  std::vector<std::unique_ptr<Share>> shares;
  shares.push_back(std::make_unique<Share>());
  shares[0]->start = begin;
  for (size_t at = begin + piece; at < end; at += piece) {
    const size_t guess = GuessElement(at, begin);
    if (guess == kIncomplete || guess <= shares.back()->start) continue;
    shares.back()->limit = guess;
    shares.push_back(std::make_unique<Share>());
    shares.back()->start = guess;
  }
  shares.back()->limit = end;
  if (shares.size() < 2) return false;
  const uint64_t count = shares.size();
  stats.shares = static_cast<int>(count);
  // Who has which share: the low half is the first share this thread has
  // not taken, the high half the first one a worker has taken (count when
  // none). This thread owns share 0 from the start.
  std::atomic<uint64_t> claims{count << 32 | 1};
  auto take_front = [&](uint64_t k) {  // this thread takes share k, its next one
    uint64_t c = claims.load();
    while (k < (c >> 32)) {
      if (claims.compare_exchange_weak(c, (c >> 32) << 32 | (k + 1))) return true;
    }
    return false;
  };
  auto take_back = [&]() -> uint64_t {  // a worker takes the last free share, or count
    uint64_t c = claims.load();
    for (;;) {
      const uint64_t low = c & 0xffffffff, high = c >> 32;
      if (high <= low) return count;
      if (claims.compare_exchange_weak(c, (high - 1) << 32 | low)) return high - 1;
    }
  };
  std::vector<std::thread> workers;
  struct JoinAll {  // whatever happens on this thread, no worker outlives the shares
    std::vector<std::unique_ptr<Share>>& shares;
    std::vector<std::thread>& workers;
    ~JoinAll() {
      for (auto& share : shares) share->cancel = true;
      for (std::thread& worker : workers) worker.join();
    }
  } join_all{shares, workers};
  auto work = [&] {
    pthread_setname_np(pthread_self(), "ts-parse");
    Batcher batcher;
    for (uint64_t k; (k = take_back()) < count;) {
      Share& share = *shares[k];
      try {
        share.sink = sink.NewShare();
        ParseShare(share, batcher, *share.sink, /*relocate=*/true);
      } catch (...) {  // rethrown on the calling thread, at this share's turn
        share.error = std::current_exception();
      }
      share.finished.store(true, std::memory_order_release);
    }
  };
  for (int t = 1; t < threads; ++t) {
    try {
      workers.emplace_back(work);
    } catch (...) {  // no thread: this one takes more shares
      break;
    }
  }
  stats.threads = 1 + static_cast<int>(workers.size());
  size_t at = begin;  // where the next element starts
  for (uint64_t k = 0; k < count; ++k) {
    Share& share = *shares[k];
    const bool mine = k == 0 || take_front(k);
    Share* done = &share;
    Share instead;  // the bytes of a wrongly guessed share, from `at`
    if (share.start != at) {
      ++stats.shares_dropped;
      share.cancel = true;
      if (at >= share.limit) continue;  // one element spans the whole share
      instead.start = at;
      instead.limit = share.limit;
      done = &instead;
    }
    if (mine || done == &instead) {
      ParseShare(*done, serial, sink, /*relocate=*/false);
    } else {
      while (!share.finished.load(std::memory_order_acquire)) std::this_thread::yield();
      // As on one thread, what the sink threw reaches the caller (after the
      // workers are joined), where the events before it were handed on.
      if (share.error) std::rethrow_exception(share.error);
      if (share.sink != nullptr) sink.Commit(std::move(share.sink));
    }
    stats.events += done->events;
    stats.guessed_batches += done->guessed;
    stats.wrong_guesses += done->wrong;
    if (!done->whole) {
      begin = done->resume;
      *state = done->resume_at_element ? State::kElement : State::kAfterElement;
      return true;
    }
    at = done->next;
  }
  begin = at;  // not reached: the last share ends at the array's end
  *state = State::kElement;
  return true;
}

absl::Status TraceReader::Impl::Run(ParallelSink& sink) {
  State state = State::kStart;
  bool tried_shares = false, noted_first = false;
  bool scan = false;  // cut the next batch with the scanner (a guess just failed)
  std::string key;
  bool saw_events = false;
  bool escapes = false;
  while (state != State::kDone) {
    while (begin < end && IsSpace(data[begin])) ++begin;
    if (begin == end) {
      if (eof) {
        return Error(begin, saw_events ? "unexpected end of file inside the trace (truncated?)"
                                       : "unexpected end of file: no traceEvents array");
      }
      if (absl::Status status = Fill(); !status.ok()) return status;
      continue;
    }
    const char c = data[begin];
    size_t stop = 0;
    switch (state) {
      case State::kStart:
        if (c != '{') return Error(begin, "a trace must start with '{' (a JSON object)");
        ++begin;
        state = State::kKey;
        break;
      case State::kKey:
        if (c == '}') {
          ++begin;
          state = State::kDone;
          break;
        }
        if (c != '"') return Error(begin, fmt::format("expected a member name, found '{}'", c));
        stop = SkipString(begin + 1);
        if (stop == kIncomplete) break;
        key.assign(data + begin + 1, stop - begin - 2);
        begin = stop;
        state = State::kColon;
        break;
      case State::kColon:
        if (c != ':') return Error(begin, fmt::format("expected ':' after \"{}\"", key));
        ++begin;
        state = State::kValue;
        break;
      case State::kValue:
        if (key == "traceEvents") {
          if (c != '[') return Error(begin, "traceEvents is not an array");
          ++begin;
          saw_events = true;
          state = State::kElement;
          break;
        }
        stop = ScanValue(begin);
        if (stop == kIncomplete) break;
        if (stop - begin < kMaxTopLevelText) {
          top_level.emplace_back(key, std::string(data + begin, stop - begin));
        }
        begin = stop;
        state = State::kAfterMember;
        break;
      case State::kAfterMember:
        if (c == ',') {
          state = State::kKey;
        } else if (c == '}') {
          state = State::kDone;
        } else {
          return Error(begin, fmt::format("expected ',' or '}}' after the value of \"{}\"", key));
        }
        ++begin;
        break;
      case State::kElement:
        if (c == ']') {  // an empty array, or a trailing comma
          ++begin;
          state = State::kAfterMember;
          break;
        }
        if (c != '{') {
          return Error(begin, fmt::format("traceEvents element {} is not an object", stats.events));
        }
        // A batch of elements in one simdjson call (it needs the byte before
        // the first). Where it stops short (an error, or text between the
        // elements that is not ", "), the states below take over from the
        // last element it visited: an error then names its element and byte
        // exactly (a batch that fails at its first element falls through to
        // the element on its own).
        if (!noted_first) {
          noted_first = true;
          NoteFirstElement(begin);
        }
        // Once the input is all in memory: an inflater that has finished
        // hands over its bytes now, not when this thread runs out of them,
        // so that every CPU parses what is left.
        if (inflater != nullptr && inflater->done.load(std::memory_order_acquire)) {
          if (absl::Status status = Fill(); !status.ok()) return status;
        }
        if (!tried_shares && inflater == nullptr) {
          tried_shares = true;
          if (ParseShares(sink, &state)) break;
        }
        if (begin > 0) {
          // A guessed cut first (unless one just failed), then the scanner's.
          bool handed_on = false;
          for (bool scan_now = scan;; scan_now = true) {
            const Batch batch = ParseBatch(
                begin, end, {scan_now, /*copy_out=*/false, /*relocate=*/false}, serial, sink);
            stats.events += batch.done;
            stats.guessed_batches += batch.guessed;
            stats.wrong_guesses += batch.guessed && !batch.whole;
            scan = batch.guessed && !batch.whole;
            if (batch.done > 0) {
              begin = batch.stop;
              Release(begin);
              handed_on = true;
              break;
            }
            if (!batch.guessed) break;  // nothing: the element on its own, below
          }
          if (handed_on) {
            state = State::kAfterElement;
            break;
          }
        }
        stop = ScanValue(begin, &escapes);
        if (stop == kIncomplete) break;
        if (absl::Status status = ParseEvent(begin, stop, escapes, sink); !status.ok()) {
          return status;
        }
        begin = stop;
        state = State::kAfterElement;
        break;
      case State::kAfterElement:
        if (c == ',') {
          state = State::kElement;
        } else if (c == ']') {
          state = State::kAfterMember;
        } else {
          return Error(begin, fmt::format("expected ',' or ']' after traceEvents element {}",
                                          stats.events - 1));
        }
        ++begin;
        break;
      case State::kDone:
        break;
    }
    if (stop == kIncomplete) {
      if (eof) {
        return Error(begin, state == State::kElement
                                ? fmt::format("traceEvents element {} is cut off (truncated file?)",
                                              stats.events)
                                : std::string("a value is cut off (truncated file?)"));
      }
      if (absl::Status status = Fill(); !status.ok()) return status;
    }
  }
  if (!saw_events) return Error(begin, "the trace has no traceEvents array");
  return absl::OkStatus();
}

namespace {
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

TraceReader::TraceReader() : impl_(std::make_unique<Impl>()) {}
TraceReader::~TraceReader() = default;

void TraceReader::set_max_threads(int threads) { max_threads_ = threads; }

namespace {

// Read(path, visit, wants_args) as a ParallelSink: the events parsed on the
// calling thread go straight to `visit`; a worker's run is kept and visited
// when it is committed.
class FunctionSink : public ParallelSink {
 public:
  FunctionSink(const TraceReader::Visitor& visit, const TraceReader::ArgsFilter& wants_args)
      : visit_(visit), wants_args_(wants_args) {}

  // Where Read puts the input when it is held whole (then it outlives the
  // runs, and views into it are kept as they are).
  std::string_view* input() { return &input_; }

  void Visit(const RawEvent& event) override { visit_(event); }
  bool WantsArgs(const RawEvent& event) override { return !wants_args_ || wants_args_(event); }
  std::unique_ptr<EventSink> NewShare() override { return std::make_unique<Run>(*this); }
  void Commit(std::unique_ptr<EventSink> share) override {
    for (const RawEvent& event : static_cast<Run&>(*share).events) visit_(event);
  }

 private:
  // A worker's events, with copies of the strings that are not views of the
  // input (unescaped ones, in the worker's parser).
  struct Run : EventSink {
    static constexpr size_t kTextBlock = 1 << 20;
    explicit Run(FunctionSink& owner) : owner(owner) {}
    void Visit(const RawEvent& event) override {
      RawEvent kept = event;  // kept only once every view is safe
      for (std::string_view* field : {&kept.ph, &kept.cat, &kept.name, &kept.phase}) {
        const std::string_view input = owner.input_;
        if (field->empty() ||
            (field->data() >= input.data() && field->data() < input.data() + input.size())) {
          continue;
        }
        if (field->size() > text_left) {
          const size_t size = std::max(kTextBlock, field->size());
          text.push_back(std::unique_ptr<char[]>(new char[size]));
          text_at = text.back().get();
          text_left = size;
        }
        std::memcpy(text_at, field->data(), field->size());
        *field = std::string_view(text_at, field->size());
        text_at += field->size();
        text_left -= field->size();
      }
      events.push_back(kept);
    }
    bool WantsArgs(const RawEvent& event) override { return owner.WantsArgs(event); }

    FunctionSink& owner;
    std::vector<RawEvent> events;
    std::vector<std::unique_ptr<char[]>> text;
    char* text_at = nullptr;
    size_t text_left = 0;
  };

  const TraceReader::Visitor& visit_;
  const TraceReader::ArgsFilter& wants_args_;
  std::string_view input_;
};

}  // namespace

absl::Status TraceReader::Read(const std::string& path, const Visitor& visit,
                               const ArgsFilter& wants_args) {
  FunctionSink sink(visit, wants_args);
  return ReadWith(path, sink, sink.input());
}

absl::Status TraceReader::Read(const std::string& path, ParallelSink& sink) {
  return ReadWith(path, sink, nullptr);
}

absl::Status TraceReader::ReadWith(const std::string& path, ParallelSink& sink,
                                   std::string_view* input) {
  impl_ = std::make_unique<Impl>();
  Impl& s = *impl_;
  s.path = path;
  s.max_threads = max_threads_;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ground::ErrnoStatus(errno, fmt::format("cannot open trace {}", path));
  s.input = input;
  off_t gzip_size = 0;
  if (s.MapWhole(fd)) {
    close(fd);
  } else if (IsGzipFile(fd, &gzip_size)) {
    // ISA-L: inflated ahead on a thread of its own, or streamed here.
    s.fd = fd;
    s.gzip = std::make_unique<GzipStream>(fd);
    s.stats.compressed = true;
    s.StartInflater(gzip_size);
  } else {
    // Pipes and the like: zlib reads them, gzip or plain.
    s.file = gzdopen(fd, "rb");
    if (s.file == nullptr) {
      close(fd);
      return absl::ResourceExhaustedError(fmt::format("{}: cannot start zlib", path));
    }
    gzbuffer(s.file, 1 << 20);
  }
  if (s.data == nullptr) {  // streamed: through a buffer that Fill refills
    s.cap = kInitialBuffer;
    s.buf = std::make_unique<char[]>(s.cap);
    s.data = s.buf.get();
  }
  absl::Status status = s.Run(sink);
  const absl::Status rest = s.FinishInput(/*read_rest=*/status.ok());
  if (!status.ok()) return status;
  if (!rest.ok()) return rest;
  for (const auto& [key, text] : s.top_level) {
    if (key != "distributedInfo") continue;
    simdjson::dom::parser dom;
    simdjson::dom::element info;
    int64_t rank = 0;
    if (dom.parse(text).get(info) == simdjson::SUCCESS &&
        info["rank"].get_int64().get(rank) == simdjson::SUCCESS) {
      s.rank = rank;
    }
  }
  return absl::OkStatus();
}

const std::vector<std::pair<std::string, std::string>>& TraceReader::top_level() const {
  return impl_->top_level;
}
std::optional<int64_t> TraceReader::rank() const { return impl_->rank; }
const ReadStats& TraceReader::stats() const { return impl_->stats; }

}  // namespace trainscope::kineto
