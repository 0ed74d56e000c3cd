// Streaming Kineto / Chrome trace reader. See trace_reader.h.
#include "sdk/kineto/trace_reader.h"

#include <fcntl.h>
#include <simdjson.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "fmt/format.h"
#include "sdk/core/files.h"

namespace trainscope::kineto {
namespace {

constexpr size_t kInitialBuffer = 4 << 20;
constexpr size_t kPadding = simdjson::SIMDJSON_PADDING;
constexpr size_t kIncomplete = static_cast<size_t>(-1);
constexpr size_t kMaxTopLevelText = 64 << 10;

// Bytes that change the scanner's state outside strings.
struct StructuralTable {
  bool is[256] = {};
  constexpr StructuralTable() {
    is[static_cast<unsigned char>('"')] = true;
    is[static_cast<unsigned char>('{')] = true;
    is[static_cast<unsigned char>('}')] = true;
    is[static_cast<unsigned char>('[')] = true;
    is[static_cast<unsigned char>(']')] = true;
  }
};
constexpr StructuralTable kStructural;

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// A number, or -1 for anything else (strings such as Kineto's named tracks).
int64_t AsInt(simdjson::ondemand::value value) {
  simdjson::ondemand::json_type type;
  if (value.type().get(type) != simdjson::SUCCESS ||
      type != simdjson::ondemand::json_type::number) {
    return -1;
  }
  double number = 0;
  if (value.get_double().get(number) != simdjson::SUCCESS) return -1;
  return static_cast<int64_t>(number);
}

// A string's text, or "" for anything else.
void GetString(simdjson::ondemand::value value, std::string_view* out) {
  if (value.get_string().get(*out) != simdjson::SUCCESS) *out = {};
}

bool AsDouble(simdjson::ondemand::value value, double* out) {
  simdjson::ondemand::json_type type;
  if (value.type().get(type) != simdjson::SUCCESS ||
      type != simdjson::ondemand::json_type::number) {
    return false;
  }
  return value.get_double().get(*out) == simdjson::SUCCESS;
}

}  // namespace

struct TraceReader::Impl {
  std::string path;
  gzFile file = nullptr;
  std::unique_ptr<char[]> buf;
  size_t cap = 0;
  size_t begin = 0;  // first unconsumed byte
  size_t end = 0;    // one past the last byte read
  uint64_t consumed = 0;  // absolute offset of buf[0]
  bool eof = false;
  simdjson::ondemand::parser parser;
  ReadStats stats;
  std::vector<std::pair<std::string, std::string>> top_level;
  std::optional<int64_t> rank;

  ~Impl() {
    if (file != nullptr) gzclose(file);
  }

  absl::Status Error(size_t index, std::string_view what) const {
    return absl::InvalidArgumentError(
        fmt::format("{}: byte {}: {}", path, consumed + index, what));
  }

  // Keeps [begin, end), moves it to the front, grows the buffer when it is
  // full, and reads more. Sets eof at the end of the file.
  absl::Status Fill() {
    if (begin > 0) {
      std::memmove(buf.get(), buf.get() + begin, end - begin);
      consumed += begin;
      end -= begin;
      begin = 0;
    }
    if (end + kPadding + (64 << 10) > cap) {
      const size_t grown = cap * 2;
      auto bigger = std::make_unique<char[]>(grown);
      std::memcpy(bigger.get(), buf.get(), end);
      buf = std::move(bigger);
      cap = grown;
    }
    const auto started = std::chrono::steady_clock::now();
    const int n = gzread(file, buf.get() + end, static_cast<unsigned>(cap - end - kPadding));
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
    std::memset(buf.get() + end, 0, kPadding);
    stats.bytes += static_cast<uint64_t>(n);
    return absl::OkStatus();
  }

  // Index one past the closing quote of the string whose body starts at i.
  size_t SkipString(size_t i) const {
    const char* data = buf.get();
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
  // the bytes read so far. Scalars end at a delimiter.
  size_t ScanValue(size_t i) const {
    const char* data = buf.get();
    const char first = data[i];
    if (first == '"') return SkipString(i + 1);
    if (first != '{' && first != '[') {
      while (i < end && !IsSpace(data[i]) && data[i] != ',' && data[i] != '}' && data[i] != ']') ++i;
      return i < end ? i : kIncomplete;
    }
    int depth = 0;
    while (i < end) {
      while (i < end && !kStructural.is[static_cast<unsigned char>(data[i])]) ++i;
      if (i >= end) break;
      const char c = data[i];
      if (c == '"') {
        i = SkipString(i + 1);
        if (i == kIncomplete) return kIncomplete;
        continue;
      }
      depth += (c == '{' || c == '[') ? 1 : -1;
      ++i;
      if (depth == 0) return i;
    }
    return kIncomplete;
  }

  absl::Status ParseEvent(size_t start, size_t stop, const Visitor& visit) {
    simdjson::ondemand::document doc;
    RawEvent event;
    event.offset = consumed + start;
    auto fail = [&](simdjson::error_code error) {
      return Error(start, fmt::format("event {}: {}", stats.events, simdjson::error_message(error)));
    };
    if (auto error = parser.iterate(buf.get() + start, stop - start, cap - start).get(doc)) {
      return fail(error);
    }
    simdjson::ondemand::object object;
    if (auto error = doc.get_object().get(object)) return fail(error);
    for (auto member : object) {
      simdjson::ondemand::field field;
      if (auto error = std::move(member).get(field)) return fail(error);
      std::string_view key;
      if (auto error = field.unescaped_key().get(key)) return fail(error);
      simdjson::ondemand::value value = field.value();
      if (key == "ph") {
        GetString(value, &event.ph);
      } else if (key == "cat") {
        GetString(value, &event.cat);
      } else if (key == "name") {
        GetString(value, &event.name);
      } else if (key == "pid") {
        event.pid = AsInt(value);
      } else if (key == "tid") {
        event.tid = AsInt(value);
      } else if (key == "ts") {
        simdjson::ondemand::number_type type;
        event.ts_is_float = value.get_number_type().get(type) == simdjson::SUCCESS &&
                            type == simdjson::ondemand::number_type::floating_point_number;
        event.has_ts = AsDouble(value, &event.ts_us);
      } else if (key == "dur") {
        event.has_dur = AsDouble(value, &event.dur_us);
      } else if (key == "args") {
        simdjson::ondemand::object args;
        if (value.get_object().get(args) != simdjson::SUCCESS) continue;
        for (auto arg_member : args) {
          simdjson::ondemand::field arg;
          if (auto error = std::move(arg_member).get(arg)) return fail(error);
          std::string_view arg_key;
          if (auto error = arg.unescaped_key().get(arg_key)) return fail(error);
          if (arg_key == "stream") {
            event.stream = AsInt(arg.value());
          } else if (arg_key == "correlation") {
            event.correlation = AsInt(arg.value());
          } else if (arg_key == "device") {
            event.device = AsInt(arg.value());
          } else if (arg_key == "step") {
            event.step = AsInt(arg.value());
          } else if (arg_key == "samples") {
            event.samples = AsInt(arg.value());
          } else if (arg_key == "phase") {
            GetString(arg.value(), &event.phase);
          }
        }
      }
    }
    ++stats.events;
    visit(event);
    return absl::OkStatus();
  }

  absl::Status Run(const Visitor& visit);
};

absl::Status TraceReader::Impl::Run(const Visitor& visit) {
  enum class State { kStart, kKey, kColon, kValue, kAfterMember, kElement, kAfterElement, kDone };
  State state = State::kStart;
  std::string key;
  bool saw_events = false;
  bool first_element = true;
  while (state != State::kDone) {
    while (begin < end && IsSpace(buf[begin])) ++begin;
    if (begin == end) {
      if (eof) {
        return Error(begin, saw_events ? "unexpected end of file inside the trace (truncated?)"
                                       : "unexpected end of file: no traceEvents array");
      }
      if (absl::Status status = Fill(); !status.ok()) return status;
      continue;
    }
    const char c = buf[begin];
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
        key.assign(buf.get() + begin + 1, stop - begin - 2);
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
          first_element = true;
          state = State::kElement;
          break;
        }
        stop = ScanValue(begin);
        if (stop == kIncomplete) break;
        if (stop - begin < kMaxTopLevelText) {
          top_level.emplace_back(key, std::string(buf.get() + begin, stop - begin));
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
        stop = ScanValue(begin);
        if (stop == kIncomplete) break;
        if (absl::Status status = ParseEvent(begin, stop, visit); !status.ok()) return status;
        begin = stop;
        first_element = false;
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
  (void)first_element;
  if (!saw_events) return Error(begin, "the trace has no traceEvents array");
  return absl::OkStatus();
}

TraceReader::TraceReader() : impl_(std::make_unique<Impl>()) {}
TraceReader::~TraceReader() = default;

absl::Status TraceReader::Read(const std::string& path, const Visitor& visit) {
  impl_ = std::make_unique<Impl>();
  Impl& s = *impl_;
  s.path = path;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return core::ErrnoStatus(errno, fmt::format("cannot open trace {}", path));
  s.file = gzdopen(fd, "rb");
  if (s.file == nullptr) {
    close(fd);
    return absl::ResourceExhaustedError(fmt::format("{}: cannot start zlib", path));
  }
  gzbuffer(s.file, 1 << 20);
  s.cap = kInitialBuffer;
  s.buf = std::make_unique<char[]>(s.cap);
  absl::Status status = s.Run(visit);
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
