// sdk/kineto/batch_parser.h: traceEvents elements parsed many at a time, in
// one simdjson call per batch of about 64 KiB, cut at a guessed element
// start (no pass over the bytes before simdjson's) or, when there is no
// guess or it was wrong, where the scanner (json_scanner.h) finds the last
// whole element. Internal to sdk/kineto.
//
//   BatchParser batches(input);
//   batches.NoteFirstElement(first_brace);
//   Batcher mine;
//   Batch b = batches.Parse(at, input.end, {}, mine, sink);
//   if (b.done > 0) at = batches.NextElement(b.stop);
//
// Memory: a Batcher holds one batch's element spans and, with copy_out, a
// padded copy of its bytes (about 64 KiB, more only for a bigger element).
#ifndef TRAINSCOPE_SDK_KINETO_BATCH_PARSER_H_
#define TRAINSCOPE_SDK_KINETO_BATCH_PARSER_H_

#include <simdjson.h>

#include <cstddef>
#include <string>
#include <vector>

#include "sdk/kineto/json_scanner.h"
#include "sdk/kineto/trace_input.h"
#include "sdk/kineto/trace_reader.h"

namespace trainscope::kineto {

// About how many bytes of traceEvents elements one simdjson call parses.
inline constexpr size_t kMaxBatch = 64 << 10;

// A thread's parser and batch buffers.
struct Batcher {
  simdjson::ondemand::parser parser;
  std::vector<ElementSpan> spans;  // the batch being parsed
  std::vector<char> copy;          // its bytes, padded
};

// What BatchParser::Parse did.
struct Batch {
  size_t done = 0;                // events handed on
  size_t stop = kScanIncomplete;  // one past the last of them (kScanIncomplete: none)
  bool guessed = false;           // cut at a guessed element start
  bool whole = false;             // every element of the batch was handed on
};

// How Parse cuts and where simdjson reads.
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

class BatchParser {
 public:
  // Parses elements of `input`, which must outlive it.
  explicit BatchParser(TraceInput& input) : in_(input) {}

  // Notes how the first element of traceEvents, at data[first], is laid
  // out, for GuessElement: whether it begins a line, and its indentation.
  void NoteFirstElement(size_t first);

  // Parses one batch of elements, the first at `at` (a '{'), about
  // kMaxBatch bytes with none starting at or past `limit`, handing each
  // event to `sink`. The batch ends at a guessed element start unless
  // `mode.scan` or there is no guess; then the scanner finds where its last
  // whole element ends. A wrong guess leaves the element it falls in
  // unbalanced, so that element's parse fails and it is not handed on.
  // simdjson needs the elements inside '[' and ']': written over the bytes
  // around them while it parses (restored after), or with `mode.copy_out`
  // around a copy in `batcher`. It stops at the first error, or where
  // simdjson's elements and the scanner's disagree; the serial reader then
  // meets that element alone and names the error exactly. With copy_out it
  // only reads the input: several threads may call it at once, each with
  // its own batcher. Cost: one simdjson pass, plus one scanner pass when
  // not guessed and one copy with copy_out; no allocation once the
  // batcher's buffers have grown.
  Batch Parse(size_t at, size_t limit, BatchMode mode, Batcher& batcher, EventSink& sink);

  // The start of the element after the one that ends at `stop`, past ", ",
  // or kScanIncomplete when other text (or the end) comes first.
  size_t NextElement(size_t stop) const;

  // A guess at an element's start at or after `from`: a '{' after '}' and
  // ',' (with spaces between, all after `floor`), which, when the array's
  // first element begins a line, begins a line with the same indentation.
  // kScanIncomplete when none is found within 1 MiB. A wrong guess (inside
  // an element) only costs time.
  size_t GuessElement(size_t from, size_t floor) const;

 private:
  size_t ElementBefore(size_t q, size_t floor) const;
  bool GuessCut(size_t at, size_t limit, size_t* stop) const;
  size_t ElementEnd(size_t start) const;

  TraceInput& in_;
  bool lines_ = false;  // the first element begins a line ...
  std::string indent_;  // ... after this indentation
};

}  // namespace trainscope::kineto

#endif  // TRAINSCOPE_SDK_KINETO_BATCH_PARSER_H_
