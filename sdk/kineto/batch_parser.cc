// Batches of traceEvents elements in one simdjson call. See batch_parser.h.
#include "sdk/kineto/batch_parser.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "sdk/kineto/event_decoding.h"
#include "sdk/kineto/value_decoding.h"

namespace trainscope::kineto {
namespace {

// The views of `event` into `copy` (`bytes` long) as views of the same
// bytes at `source`.
void Relocate(RawEvent* event, const char* copy, size_t bytes, const char* source) {
  for (std::string_view* field : {&event->ph, &event->cat, &event->name, &event->phase}) {
    if (field->data() >= copy && field->data() < copy + bytes) {
      *field = std::string_view(source + (field->data() - copy), field->size());
    }
  }
}

}  // namespace

Batch BatchParser::Parse(size_t at, size_t limit, BatchMode mode, Batcher& batcher,
                         EventSink& sink) {
  const bool scan = mode.scan, copy_out = mode.copy_out, relocate = mode.relocate;
  Batch batch;
  const std::vector<ElementSpan>* list = nullptr;  // the scanner's elements
  size_t stop = 0;
  if (!scan && GuessCut(at, limit, &stop)) {
    batch.guessed = true;
  } else {
    std::vector<ElementSpan>& spans = batcher.spans;
    spans.clear();
    ScanElements(in_.data, at, in_.end, std::min(kMaxBatch, limit - at), &spans);
    if (!spans.empty() && spans.back().stop >= in_.end) spans.pop_back();
    if (spans.empty() || spans.front().start != at) return batch;
    stop = spans.back().stop;
    list = &spans;
  }
  const size_t from = at - 1, bytes = stop + 1 - from;
  char* text = in_.data + from;
  size_t capacity = in_.cap - from;
  const char saved_first = in_.data[from], saved_last = in_.data[stop];
  if (copy_out) {
    std::vector<char>& copy = batcher.copy;
    if (copy.size() < bytes + kInputPadding) copy.resize(bytes + kInputPadding);
    std::memcpy(copy.data(), in_.data + from, bytes);
    std::memset(copy.data() + bytes, 0, kInputPadding);
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
      event.offset = in_.consumed + start;
      // Without the scanner, backslashes are found string by string.
      const bool escapes = list != nullptr && (*list)[batch.done].escapes;
      auto object = value.get_object();
      if (object.error() || ParseObject(object.value_unsafe(), escapes, sink, &event)) {
        stopped = true;
        break;
      }
      if (relocate) Relocate(&event, text, bytes, in_.data + from);
      sink.Visit(event);
      ++batch.done;
      last = start;
    }
  }
  if (!copy_out) {
    in_.data[from] = saved_first;
    in_.data[stop] = saved_last;
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

size_t BatchParser::NextElement(size_t stop) const {
  size_t next = stop;
  while (next < in_.end && IsSpace(in_.data[next])) ++next;
  if (next == in_.end || in_.data[next] != ',') return kScanIncomplete;
  ++next;
  while (next < in_.end && IsSpace(in_.data[next])) ++next;
  return next < in_.end && in_.data[next] == '{' ? next : kScanIncomplete;
}

void BatchParser::NoteFirstElement(size_t first) {
  size_t line = first;
  while (line > 0 && (in_.data[line - 1] == ' ' || in_.data[line - 1] == '\t')) --line;
  lines_ = line > 0 && in_.data[line - 1] == '\n';
  indent_.assign(in_.data + line, first - line);
}

size_t BatchParser::GuessElement(size_t from, size_t floor) const {
  const size_t stop = std::min(in_.end, from + (1 << 20));
  for (size_t at = from; at < stop;) {
    const void* brace = std::memchr(in_.data + at, '{', stop - at);
    if (brace == nullptr) return kScanIncomplete;
    const size_t q = static_cast<const char*>(brace) - in_.data;
    at = q + 1;
    if (lines_ && (q < indent_.size() + 1 || in_.data[q - indent_.size() - 1] != '\n' ||
                   std::string_view(in_.data + q - indent_.size(), indent_.size()) != indent_)) {
      continue;
    }
    if (ElementBefore(q, floor) != kScanIncomplete) return q;
  }
  return kScanIncomplete;
}

// For a '{' at q: one past the '}' before it when only spaces and one ','
// lie between (all after `floor`), else kScanIncomplete.
size_t BatchParser::ElementBefore(size_t q, size_t floor) const {
  size_t i = q;
  while (i > floor && IsSpace(in_.data[i - 1])) --i;
  if (i <= floor || in_.data[i - 1] != ',') return kScanIncomplete;
  --i;
  while (i > floor && IsSpace(in_.data[i - 1])) --i;
  return i > floor && in_.data[i - 1] == '}' ? i : kScanIncomplete;
}

// Where a batch of elements that starts at `at` may end, without a pass
// over its bytes: *stop, one past the '}' before a guessed element start
// at or after at + kMaxBatch (or before `limit`, when that comes first
// and is not the end). False when there is no guess. Parse then
// tells whether the guess was right.
bool BatchParser::GuessCut(size_t at, size_t limit, size_t* stop) const {
  size_t guess = limit;
  if (at + kMaxBatch < limit) {
    guess = GuessElement(at + kMaxBatch, at);
    if (guess == kScanIncomplete) return false;
    guess = std::min(guess, limit);
  }
  if (guess >= in_.end) return false;
  *stop = ElementBefore(guess, at);
  return *stop != kScanIncomplete;
}

// One past the element that starts at data[start] (which parsed, so it
// ends; should the scanner disagree, `end`, where the serial reader then
// reports the trace cut off).
size_t BatchParser::ElementEnd(size_t start) const {
  ScanState state;
  const size_t stop = ScanComposite(in_.data, start, in_.end, &state);
  return stop == kScanIncomplete ? in_.end : stop;
}

}  // namespace trainscope::kineto
