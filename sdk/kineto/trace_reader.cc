// Streaming Kineto / Chrome trace reader. See trace_reader.h.
#include "sdk/kineto/trace_reader.h"

#include <fcntl.h>
#include <libdeflate.h>
#include <simdjson.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "fmt/format.h"
#include "sdk/core/files.h"
#include "sdk/kineto/json_scanner.h"

namespace trainscope::kineto {
namespace {

constexpr size_t kInitialBuffer = 4 << 20;
constexpr size_t kPadding = simdjson::SIMDJSON_PADDING;
constexpr size_t kIncomplete = kScanIncomplete;
constexpr size_t kMaxTopLevelText = 64 << 10;
// A gzip file whose member inflates to less is inflated at once with
// libdeflate (several times faster than zlib); larger ones stream.
constexpr size_t kMaxWholeGzip = 64 << 20;
// About how many bytes of traceEvents elements one simdjson call parses.
constexpr size_t kMaxBatch = 64 << 10;
// ScanComposite reads whole 64-byte blocks past the data.
static_assert(kPadding >= 64);

// The whole of the file at fd (of `size` bytes), or false.
bool ReadAll(int fd, size_t size, char* out) {
  for (size_t done = 0; done < size;) {
    const ssize_t n = pread(fd, out + done, size - done, static_cast<off_t>(done));
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// A member name as text. Without a backslash in the event, the raw name is
// the name, and reading it in place skips unescaped_key()'s copy.
simdjson::error_code KeyOf(simdjson::ondemand::field& field, bool escapes,
                           std::string_view* key) {
  if (escapes) return field.unescaped_key().get(*key);
  const char* raw = field.key().raw();
  size_t length = 0;
  while (raw[length] != '"') ++length;  // simdjson has checked the quote is there
  *key = std::string_view(raw, length);
  return simdjson::SUCCESS;
}

// A number; integers (most of Kineto's) are parsed once. A failed get_int64()
// does not consume the value, so floats, integers past 64 bits and the rest
// then take the old path.
struct Number {
  double value = 0;
  bool is_float = false;  // a floating-point literal ("5.0", "5e3")
};
bool GetNumber(simdjson::ondemand::value value, Number* out) {
  // Not get_number(): in simdjson 3.0.1 it reads some long floats wrong
  // (1682725898082212.000 as 0) and accepts numbers that run into a stray
  // byte ("5\"9"), which get_int64() and get_double() refuse.
  int64_t integer = 0;
  if (value.get_int64().get(integer) == simdjson::SUCCESS) {
    out->is_float = false;
    out->value = static_cast<double>(integer);
    return true;
  }
  simdjson::ondemand::json_type type;
  if (value.type().get(type) != simdjson::SUCCESS ||
      type != simdjson::ondemand::json_type::number) {
    return false;
  }
  simdjson::ondemand::number_type number_type;
  out->is_float = value.get_number_type().get(number_type) == simdjson::SUCCESS &&
                  number_type == simdjson::ondemand::number_type::floating_point_number;
  return value.get_double().get(out->value) == simdjson::SUCCESS;
}

// A number, or -1 for anything else (strings such as Kineto's named tracks).
// Through the double, as before.
int64_t AsInt(simdjson::ondemand::value value) {
  Number number;
  return GetNumber(value, &number) ? static_cast<int64_t>(number.value) : -1;
}

// A string's text, or "" for anything else.
void GetString(simdjson::ondemand::value value, std::string_view* out) {
  if (value.get_string().get(*out) != simdjson::SUCCESS) *out = {};
}

}  // namespace

struct TraceReader::Impl {
  std::string path;
  gzFile file = nullptr;
  std::unique_ptr<char[]> buf;  // the bytes, when read or inflated
  char* data = nullptr;         // buf, or the mapping of a plain file
  void* map = nullptr;          // MapWhole's mapping, when there is one
  size_t map_size = 0;
  size_t released = 0;          // mapped bytes before this were handed back
  size_t cap = 0;
  size_t begin = 0;  // first unconsumed byte
  size_t end = 0;    // one past the last byte read
  uint64_t consumed = 0;  // absolute offset of buf[0]
  bool eof = false;
  simdjson::ondemand::parser parser;
  ReadStats stats;
  std::vector<std::pair<std::string, std::string>> top_level;
  std::optional<int64_t> rank;
  std::vector<ElementSpan> spans;  // CutBatch's elements

  ~Impl() {
    if (file != nullptr) gzclose(file);
    if (map != nullptr) munmap(map, map_size);
  }

  absl::Status Error(size_t index, std::string_view what) const {
    return absl::InvalidArgumentError(
        fmt::format("{}: byte {}: {}", path, consumed + index, what));
  }

  // Keeps [begin, end), moves it to the front, grows the buffer when it is
  // full, and reads more. Sets eof at the end of the file.
  absl::Status Fill() {
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

  // Inflates a small single-member gzip file at fd into buf with libdeflate
  // and marks it all read. False, with nothing changed, for anything else
  // (plain, multi-member, big or corrupt files): the streaming zlib path then
  // reads it and reports any error.
  bool InflateWhole(int fd) {
    const auto started = std::chrono::steady_clock::now();
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 18 ||
        static_cast<uint64_t>(st.st_size) > kMaxWholeGzip) {
      return false;
    }
    const size_t size = static_cast<size_t>(st.st_size);
    unsigned char magic[2];
    if (pread(fd, magic, 2, 0) != 2 || magic[0] != 0x1f || magic[1] != 0x8b) return false;
    auto in = std::make_unique<unsigned char[]>(size);
    if (!ReadAll(fd, size, reinterpret_cast<char*>(in.get()))) return false;
    // ISIZE: the length mod 2^32. A longer output does not fit the buffer.
    const size_t isize = in[size - 4] | in[size - 3] << 8 | in[size - 2] << 16 |
                         static_cast<size_t>(in[size - 1]) << 24;
    if (isize == 0 || isize > kMaxWholeGzip) return false;
    auto out = std::make_unique<char[]>(isize + kPadding);
    libdeflate_decompressor* inflater = libdeflate_alloc_decompressor();
    if (inflater == nullptr) return false;
    size_t in_used = 0, out_used = 0;
    const libdeflate_result result = libdeflate_gzip_decompress_ex(
        inflater, in.get(), size, out.get(), isize, &in_used, &out_used);
    libdeflate_free_decompressor(inflater);
    if (result != LIBDEFLATE_SUCCESS || in_used != size || out_used != isize) return false;
    std::memset(out.get() + isize, 0, kPadding);
    buf = std::move(out);
    data = buf.get();
    cap = isize + kPadding;
    end = isize;
    eof = true;
    stats.compressed = true;
    stats.bytes = isize;
    stats.inflate_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return true;
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
      while (i < end && !IsSpace(data[i]) && data[i] != ',' && data[i] != '}' && data[i] != ']') ++i;
      return i < end ? i : kIncomplete;
    }
    ScanState state;
    const size_t stop = ScanComposite(data, i, end, &state);
    if (escapes != nullptr) *escapes = state.backslash;
    return stop;
  }

  // The args members the analyses use.
  simdjson::error_code ParseArgs(simdjson::ondemand::value value, bool escapes, RawEvent* event) {
    simdjson::ondemand::object args;
    if (value.get_object().get(args) != simdjson::SUCCESS) return simdjson::SUCCESS;
    for (auto arg_member : args) {
      simdjson::ondemand::field arg;
      if (auto error = std::move(arg_member).get(arg)) return error;
      std::string_view key;
      if (auto error = KeyOf(arg, escapes, &key)) return error;
      if (key == "stream") {
        event->stream = AsInt(arg.value());
      } else if (key == "correlation") {
        event->correlation = AsInt(arg.value());
      } else if (key == "device") {
        event->device = AsInt(arg.value());
      } else if (key == "step") {
        event->step = AsInt(arg.value());
      } else if (key == "samples") {
        event->samples = AsInt(arg.value());
      } else if (key == "phase") {
        GetString(arg.value(), &event->phase);
      }
    }
    return simdjson::SUCCESS;
  }

  // The fields of one event object, into `event`.
  simdjson::error_code ParseObject(simdjson::ondemand::object object, bool escapes,
                                   const ArgsFilter& wants_args, RawEvent* event) {
    bool saw_cat = false, saw_name = false;
    for (auto member : object) {
      simdjson::ondemand::field field;
      if (auto error = std::move(member).get(field)) return error;
      std::string_view key;
      if (auto error = KeyOf(field, escapes, &key)) return error;
      simdjson::ondemand::value value = field.value();
      Number number;
      if (key == "ph") {
        GetString(value, &event->ph);
      } else if (key == "cat") {
        GetString(value, &event->cat);
        saw_cat = true;
      } else if (key == "name") {
        GetString(value, &event->name);
        saw_name = true;
      } else if (key == "pid") {
        event->pid = AsInt(value);
      } else if (key == "tid") {
        event->tid = AsInt(value);
      } else if (key == "ts") {
        event->has_ts = GetNumber(value, &number);
        event->ts_is_float = number.is_float;
        if (event->has_ts) event->ts_us = number.value;
      } else if (key == "dur") {
        event->has_dur = GetNumber(value, &number);
        if (event->has_dur) event->dur_us = number.value;
      } else if (key == "args") {
        if (wants_args && saw_cat && saw_name && !wants_args(*event)) continue;
        if (auto error = ParseArgs(value, escapes, event)) return error;
      }
    }
    return simdjson::SUCCESS;
  }

  // The event in [start, stop), which has a backslash in it if `escapes`,
  // parsed on its own: errors name this event and its first byte.
  absl::Status ParseEvent(size_t start, size_t stop, bool escapes, const Visitor& visit,
                          const ArgsFilter& wants_args) {
    simdjson::ondemand::document doc;
    simdjson::ondemand::object object;
    RawEvent event;
    event.offset = consumed + start;
    simdjson::error_code error =
        parser.iterate(data + start, stop - start, cap - start).get(doc);
    if (!error) error = doc.get_object().get(object);
    if (!error) error = ParseObject(object, escapes, wants_args, &event);
    if (error) {
      return Error(start, fmt::format("event {}: {}", stats.events, simdjson::error_message(error)));
    }
    ++stats.events;
    visit(event);
    return absl::OkStatus();
  }

  // Finds the run of complete elements that starts at `begin` (a '{'), of
  // about kMaxBatch bytes, in one pass. The last must end before `end` (its
  // next byte becomes ']' while it is parsed).
  void CutBatch() {
    spans.clear();
    ScanElements(data, begin, end, kMaxBatch, &spans);
    if (!spans.empty() && spans.back().stop >= end) spans.pop_back();
  }

  // Parses the spans as one array in one simdjson call, in place: the byte
  // before the first and the one after the last are '[' and ']' meanwhile.
  // Returns how many events were visited; it stops at the first error, or
  // where simdjson's elements and the spans disagree.
  size_t IterateBatch(const Visitor& visit, const ArgsFilter& wants_args) {
    const size_t first = spans.front().start - 1, last = spans.back().stop;
    const char saved_first = data[first], saved_last = data[last];
    data[first] = '[';
    data[last] = ']';
    size_t done = 0;
    simdjson::ondemand::document doc;
    simdjson::ondemand::array array;
    if (!parser.iterate(data + first, last + 1 - first, cap - first).get(doc) &&
        !doc.get_array().get(array)) {
      for (auto element : array) {
        simdjson::ondemand::value value;
        simdjson::ondemand::object object;
        if (done == spans.size() || std::move(element).get(value)) break;
        if (value.raw_json_token().data() != data + spans[done].start) break;
        RawEvent event;
        event.offset = consumed + spans[done].start;
        if (value.get_object().get(object) ||
            ParseObject(object, spans[done].escapes, wants_args, &event)) {
          break;
        }
        ++stats.events;
        visit(event);
        ++done;
      }
    }
    data[first] = saved_first;
    data[last] = saved_last;
    return done;
  }

  absl::Status Run(const Visitor& visit, const ArgsFilter& wants_args);
};

absl::Status TraceReader::Impl::Run(const Visitor& visit, const ArgsFilter& wants_args) {
  enum class State { kStart, kKey, kColon, kValue, kAfterMember, kElement, kAfterElement, kDone };
  State state = State::kStart;
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
        if (begin > 0) {
          CutBatch();
          if (spans.size() > 1) {
            const size_t done = IterateBatch(visit, wants_args);
            if (done > 0) {
              begin = spans[done - 1].stop;
              Release(begin);
              state = State::kAfterElement;
              break;
            }
          }
        }
        stop = ScanValue(begin, &escapes);
        if (stop == kIncomplete) break;
        if (absl::Status status = ParseEvent(begin, stop, escapes, visit, wants_args);
            !status.ok()) {
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

TraceReader::TraceReader() : impl_(std::make_unique<Impl>()) {}
TraceReader::~TraceReader() = default;

absl::Status TraceReader::Read(const std::string& path, const Visitor& visit,
                                const ArgsFilter& wants_args) {
  impl_ = std::make_unique<Impl>();
  Impl& s = *impl_;
  s.path = path;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return core::ErrnoStatus(errno, fmt::format("cannot open trace {}", path));
  if (s.MapWhole(fd) || s.InflateWhole(fd)) {
    close(fd);
  } else {
    s.file = gzdopen(fd, "rb");
    if (s.file == nullptr) {
      close(fd);
      return absl::ResourceExhaustedError(fmt::format("{}: cannot start zlib", path));
    }
    gzbuffer(s.file, 1 << 20);
    s.cap = kInitialBuffer;
    s.buf = std::make_unique<char[]>(s.cap);
    s.data = s.buf.get();
  }
  absl::Status status = s.Run(visit, wants_args);
  if (!status.ok()) return status;
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
