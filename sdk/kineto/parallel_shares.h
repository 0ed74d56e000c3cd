// sdk/kineto/parallel_shares.h: the traceEvents of an input held whole in
// memory, cut at guessed element starts into shares that several threads
// parse at once, with what the sink gets exactly what one thread would
// have visited. Internal to sdk/kineto.
//
//   bool at_element = false;
//   if (ParseShares({input, batches, serial, max_threads, nullptr}, sink,
//                   &stats, &at_element)) {
//     // the serial reader goes on from input.begin
//   }
//
// Memory: one Batcher per worker thread (about 64 KiB each) and one Share
// per piece (a few hundred bytes, at most kMaxParallel / kSharePiece of
// them), plus what the sink keeps of the runs it has not committed.
#ifndef TRAINSCOPE_SDK_KINETO_PARALLEL_SHARES_H_
#define TRAINSCOPE_SDK_KINETO_PARALLEL_SHARES_H_

#include <cstddef>
#include <string_view>

#include "sdk/kineto/batch_parser.h"
#include "sdk/kineto/trace_input.h"
#include "sdk/kineto/trace_reader.h"

namespace trainscope::kineto {

// Inputs held whole in memory up to this size may be parsed on several
// threads (bigger mapped files stream on one, handing pages back; a gzip
// file is inflated ahead only up to this size).
inline constexpr size_t kMaxParallel = 64 << 20;
// The least traceEvents bytes worth a thread of their own.
inline constexpr size_t kMinShare = 4 << 20;

// How many threads may parse `bytes` of elements: one per kMinShare, up to
// `max_threads` (0: the CPUs the calling thread may run on) and 64.
int ParseThreadsFor(size_t bytes, int max_threads);

// What ParseShares reads.
struct ShareInput {
  TraceInput& input;        // held whole (held_whole()), elements from input.begin
  BatchParser& batches;     // over `input`, its first element noted
  Batcher& serial;          // the calling thread's
  int max_threads;          // as ParseThreadsFor
  std::string_view* whole;  // when given, gets the input's bytes before any worker starts
};

// When the input is held whole and more than one thread may parse it:
// guesses element starts that cut the elements from input.begin into
// shares of about 1 MiB. The calling thread parses shares from the front,
// handing their events to `sink`; worker threads take shares from the
// back, each into a sink of its own (NewShare), which the calling thread
// commits in file order when it gets there. A share's events count only
// if it starts exactly where the share before it ended; otherwise its
// guess was inside an element, its work is dropped, and the calling thread
// parses those bytes itself. False, with nothing visited, when it does not
// split. Otherwise it sets input.begin to where the serial reader finishes
// from, and *at_element to whether an element starts there (else the one
// before it was the last handed on): at the element where a share stopped,
// the serial reader parses it alone and reports any error exactly. Adds to
// `stats` (events, threads, shares, shares_dropped, guessed_batches,
// wrong_guesses). Errors: none of its own; what a sink throws, on any
// thread, is rethrown here once every worker is joined.
bool ParseShares(const ShareInput& in, ParallelSink& sink, ReadStats* stats, bool* at_element);

}  // namespace trainscope::kineto

#endif  // TRAINSCOPE_SDK_KINETO_PARALLEL_SHARES_H_
