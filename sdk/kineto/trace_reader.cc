// Streaming Kineto / Chrome trace reader. See trace_reader.h. The reader
// keeps the state machine over the trace's top level; where the bytes come
// from is trace_input.h, how elements are parsed in batches
// batch_parser.h (one event: event_decoding.h, one value:
// value_decoding.h), and how a trace held whole is parsed on several
// threads parallel_shares.h.
#include "sdk/kineto/trace_reader.h"

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "sdk/kineto/batch_parser.h"
#include "sdk/kineto/event_decoding.h"
#include "sdk/kineto/json_scanner.h"
#include "sdk/kineto/parallel_shares.h"
#include "sdk/kineto/trace_input.h"
#include "sdk/kineto/value_decoding.h"

namespace trainscope::kineto {
namespace {
constexpr size_t kMaxTopLevelText = 64 << 10;
}  // namespace

struct TraceReader::Impl {
  enum class State { kStart, kKey, kColon, kValue, kAfterMember, kElement, kAfterElement, kDone };

  TraceInput in;
  BatchParser batches{in};
  Batcher serial;                     // this thread's parser and batch buffers
  std::string_view* input = nullptr;  // where ParseShares shows the workers the input
  ReadStats stats;
  std::vector<std::pair<std::string, std::string>> top_level;
  std::optional<int64_t> rank;
  int max_threads = 0;  // 0: the CPUs this thread may run on

  // Index one past the closing quote of the string whose body starts at i.
  size_t SkipString(size_t i) const {
    while (i < in.end) {
      const void* quote = std::memchr(in.data + i, '"', in.end - i);
      if (quote == nullptr) return kScanIncomplete;
      const size_t q = static_cast<const char*>(quote) - in.data;
      size_t backslashes = 0;
      while (q > backslashes && in.data[q - 1 - backslashes] == '\\') ++backslashes;
      if (backslashes % 2 == 0) return q + 1;
      i = q + 1;
    }
    return kScanIncomplete;
  }

  // Index one past the JSON value starting at i, kScanIncomplete if it runs past
  // the bytes read so far. Scalars end at a delimiter. `escapes`, when given,
  // says whether an object or array has a backslash in it.
  size_t ScanValue(size_t i, bool* escapes = nullptr) const {
    const char first = in.data[i];
    if (first == '"') return SkipString(i + 1);
    if (first != '{' && first != '[') {
      while (i < in.end && !IsSpace(in.data[i]) && in.data[i] != ',' && in.data[i] != '}' &&
             in.data[i] != ']')
        ++i;
      return i < in.end ? i : kScanIncomplete;
    }
    ScanState scanned;
    const size_t stop = ScanComposite(in.data, i, in.end, &scanned);
    if (escapes != nullptr) *escapes = scanned.backslash;
    return stop;
  }

  // The event in [start, stop), which has a backslash in it if `escapes`,
  // parsed on its own: errors name this event and its first byte.
  absl::Status ParseEvent(size_t start, size_t stop, bool escapes, EventSink& sink) {
    simdjson::ondemand::document doc;
    simdjson::ondemand::object object;
    RawEvent event;
    event.offset = in.consumed + start;
    simdjson::error_code error =
        serial.parser.iterate(in.data + start, stop - start, in.cap - start).get(doc);
    if (!error) error = doc.get_object().get(object);
    EventFault fault;
    if (!error) error = ParseObject(object, escapes, sink, &event, &fault);
    if (error) {
      const std::string key = *fault.key == '\0' ? "" : fmt::format("\"{}\": ", fault.key);
      return in.Error(
          start, fmt::format("event {}: {}{}", stats.events, key,
                             fault.what != nullptr ? fault.what : simdjson::error_message(error)));
    }
    ++stats.events;
    sink.Visit(event);
    return absl::OkStatus();
  }

  // Reads the trace's top level, the states below, handing the elements of
  // traceEvents to `sink`. Errors: the reader's (see Read).
  absl::Status Run(ParallelSink& sink);

  // Where Run is, between its stages.
  State state = State::kStart;
  std::string key;            // the member whose colon and value come next
  bool saw_events = false;    // traceEvents' array has begun
  bool tried_shares = false;  // ParseShares was asked (once, at an element)
  bool noted_first = false;   // the first element was noted to `batches`
  bool scan = false;          // cut the next batch with the scanner (a guess just failed)

  // No bytes left at in.begin: reads more, or, at the end of the file, the
  // error of a trace that ends here.
  absl::Status AtEndOfBytes();
  // One step outside traceEvents' elements (kStart, kKey, kColon, kValue,
  // kAfterMember) at c = in.data[in.begin]. *stop is kScanIncomplete when
  // the name or value there runs past the bytes read (nothing consumed).
  absl::Status TopLevel(char c, size_t* stop);
  // kElement at c: the elements from in.begin, on several threads
  // (ParseShares), in batches, or the one element alone; *stop as above.
  absl::Status Element(char c, ParallelSink& sink, size_t* stop);
  // Batches of elements from in.begin, a guessed cut first (unless one
  // just failed), then the scanner's. True when some were handed on (then
  // in.begin is after them).
  bool ParseBatches(ParallelSink& sink);
  // kAfterElement at c: a comma or the end of the array.
  absl::Status AfterElement(char c);
  // A name or value runs past the bytes read: reads more, or at the end of
  // the file says what is cut off.
  absl::Status ValueCutOff();
};

absl::Status TraceReader::Impl::Run(ParallelSink& sink) {
  while (state != State::kDone) {
    while (in.begin < in.end && IsSpace(in.data[in.begin])) ++in.begin;
    if (in.begin == in.end) {
      if (absl::Status status = AtEndOfBytes(); !status.ok()) return status;
      continue;
    }
    const char c = in.data[in.begin];
    size_t stop = 0;
    absl::Status status = state == State::kElement        ? Element(c, sink, &stop)
                          : state == State::kAfterElement ? AfterElement(c)
                                                          : TopLevel(c, &stop);
    if (!status.ok()) return status;
    if (stop == kScanIncomplete) {
      if (absl::Status more = ValueCutOff(); !more.ok()) return more;
    }
  }
  if (!saw_events) return in.Error(in.begin, "the trace has no traceEvents array");
  return absl::OkStatus();
}

absl::Status TraceReader::Impl::AtEndOfBytes() {
  if (!in.eof) return in.Fill();
  if (in.consumed + in.end == 0) {
    return in.Error(0, stats.compressed ? "the gzip stream holds no data (it inflates to 0 bytes)"
                                        : "the file is empty");
  }
  return in.Error(in.begin, saw_events ? "unexpected end of file inside the trace (truncated?)"
                                       : "unexpected end of file: no traceEvents array");
}

absl::Status TraceReader::Impl::TopLevel(char c, size_t* stop) {
  switch (state) {
    case State::kStart:
      if (c != '{') return in.Error(in.begin, "a trace must start with '{' (a JSON object)");
      ++in.begin;
      state = State::kKey;
      break;
    case State::kKey:
      if (c == '}') {
        ++in.begin;
        state = State::kDone;
        break;
      }
      if (c != '"') return in.Error(in.begin, fmt::format("expected a member name, found '{}'", c));
      *stop = SkipString(in.begin + 1);
      if (*stop == kScanIncomplete) break;
      key.assign(in.data + in.begin + 1, *stop - in.begin - 2);
      in.begin = *stop;
      state = State::kColon;
      break;
    case State::kColon:
      if (c != ':') return in.Error(in.begin, fmt::format("expected ':' after \"{}\"", key));
      ++in.begin;
      state = State::kValue;
      break;
    case State::kValue:
      if (key == "traceEvents") {
        if (c != '[') return in.Error(in.begin, "traceEvents is not an array");
        ++in.begin;
        saw_events = true;
        state = State::kElement;
        break;
      }
      *stop = ScanValue(in.begin);
      if (*stop == kScanIncomplete) break;
      if (*stop - in.begin < kMaxTopLevelText) {
        top_level.emplace_back(key, std::string(in.data + in.begin, *stop - in.begin));
      }
      in.begin = *stop;
      state = State::kAfterMember;
      break;
    case State::kAfterMember:
      if (c == ',') {
        state = State::kKey;
      } else if (c == '}') {
        state = State::kDone;
      } else {
        return in.Error(in.begin,
                        fmt::format("expected ',' or '}}' after the value of \"{}\"", key));
      }
      ++in.begin;
      break;
    case State::kElement:
    case State::kAfterElement:
    case State::kDone:
      break;
  }
  return absl::OkStatus();
}

absl::Status TraceReader::Impl::Element(char c, ParallelSink& sink, size_t* stop) {
  if (c == ']') {  // an empty array, or a trailing comma
    ++in.begin;
    state = State::kAfterMember;
    return absl::OkStatus();
  }
  if (c != '{') {
    return in.Error(in.begin, fmt::format("traceEvents element {} is not an object", stats.events));
  }
  // A batch of elements in one simdjson call (it needs the byte before
  // the first). Where it stops short (an error, or text between the
  // elements that is not ", "), the states take over from the last element
  // it visited: an error then names its element and byte exactly (a batch
  // that fails at its first element falls through to the element on its
  // own).
  if (!noted_first) {
    noted_first = true;
    batches.NoteFirstElement(in.begin);
  }
  // Once the input is all in memory: an inflater that has finished hands
  // over its bytes now, not when this thread runs out of them, so that
  // every CPU parses what is left.
  if (in.inflated()) {
    if (absl::Status status = in.Fill(); !status.ok()) return status;
  }
  if (!tried_shares && !in.inflating()) {
    tried_shares = true;
    bool at_element = false;
    if (ParseShares({in, batches, serial, max_threads, input}, sink, &stats, &at_element)) {
      state = at_element ? State::kElement : State::kAfterElement;
      return absl::OkStatus();
    }
  }
  if (in.begin > 0 && ParseBatches(sink)) {
    state = State::kAfterElement;
    return absl::OkStatus();
  }
  bool escapes = false;
  *stop = ScanValue(in.begin, &escapes);
  if (*stop == kScanIncomplete) return absl::OkStatus();
  if (absl::Status status = ParseEvent(in.begin, *stop, escapes, sink); !status.ok()) {
    return status;
  }
  in.begin = *stop;
  state = State::kAfterElement;
  return absl::OkStatus();
}

bool TraceReader::Impl::ParseBatches(ParallelSink& sink) {
  for (bool scan_now = scan;; scan_now = true) {
    const Batch batch = batches.Parse(
        in.begin, in.end, {scan_now, /*copy_out=*/false, /*relocate=*/false}, serial, sink);
    stats.events += batch.done;
    stats.guessed_batches += batch.guessed;
    stats.wrong_guesses += batch.guessed && !batch.whole;
    scan = batch.guessed && !batch.whole;
    if (batch.done > 0) {
      in.begin = batch.stop;
      in.Release(in.begin);
      return true;
    }
    if (!batch.guessed) return false;  // nothing: the element on its own
  }
}

absl::Status TraceReader::Impl::AfterElement(char c) {
  if (c == ',') {
    state = State::kElement;
  } else if (c == ']') {
    state = State::kAfterMember;
  } else {
    return in.Error(in.begin, fmt::format("expected ',' or ']' after traceEvents element {}",
                                          stats.events - 1));
  }
  ++in.begin;
  return absl::OkStatus();
}

absl::Status TraceReader::Impl::ValueCutOff() {
  if (!in.eof) return in.Fill();
  return in.Error(in.begin, state == State::kElement
                                ? fmt::format("traceEvents element {} is cut off (truncated file?)",
                                              stats.events)
                                : std::string("a value is cut off (truncated file?)"));
}

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
  s.max_threads = max_threads_;
  s.input = input;
  if (absl::Status opened = s.in.Open(path, max_threads_, &s.stats); !opened.ok()) return opened;
  absl::Status status = s.Run(sink);
  const absl::Status rest = s.in.Finish(/*read_rest=*/status.ok());
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
