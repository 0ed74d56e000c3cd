// Traces parsed on several threads. See parallel_shares.h.
#include "sdk/kineto/parallel_shares.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "sdk/ground/cpus.h"

namespace trainscope::kineto {
namespace {

// Shares are about this big, or smaller than the bytes per thread by
// kSharesPerThread: small enough that whoever is free takes the next one
// and nobody waits long at the end, big enough that a share's fixed costs
// (a guess, a sink, a commit) do not count.
constexpr size_t kSharePiece = 1 << 20;
constexpr size_t kSharesPerThread = 8;

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

// Parses the elements of `share` in batches (BatchParser::Parse, on copies), to
// `sink`, until its next element starts at or past its limit (whole), the
// array ends, or trouble (which the serial reader then meets again and
// reports exactly). The shared bytes are only read: a share that starts
// at a wrong guess (inside an element) reads nonsense, is dropped, and
// harms no other. Off the calling thread (`relocate`), the events' views
// point into the input, which outlives the share.
void ParseShare(BatchParser& batches, Share& share, Batcher& batcher, EventSink& sink,
                bool relocate) {
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
        batches.Parse(at, share.limit, {scan, /*copy_out=*/true, relocate}, batcher, sink);
    share.events += batch.done;
    share.guessed += batch.guessed;
    share.wrong += batch.guessed && !batch.whole;
    if (batch.stop != kScanIncomplete) {
      share.resume = batch.stop;
      share.resume_at_element = false;
    }
    // After a wrong guess the scanner cuts on from the last element
    // parsed; a scanned batch that stops short is trouble.
    scan = batch.guessed && !batch.whole;
    if (!batch.whole && !batch.guessed) return;
    if (batch.done == 0) continue;
    at = batches.NextElement(batch.stop);
    if (at == kScanIncomplete) return;
  }
}

using Shares = std::vector<std::unique_ptr<Share>>;

// The elements in [begin, end) cut at guessed element starts into shares
// of `piece` bytes or so (a guess that does not move on is passed over).
Shares CutShares(BatchParser& batches, size_t begin, size_t end, size_t piece) {
  Shares shares;
  shares.push_back(std::make_unique<Share>());
  shares[0]->start = begin;
  for (size_t at = begin + piece; at < end; at += piece) {
    const size_t guess = batches.GuessElement(at, begin);
    if (guess == kScanIncomplete || guess <= shares.back()->start) continue;
    shares.back()->limit = guess;
    shares.push_back(std::make_unique<Share>());
    shares.back()->start = guess;
  }
  shares.back()->limit = end;
  return shares;
}

// Who has which of `count` shares: the calling thread takes them from the
// front, the workers from the back, never the same one. In one word: the
// low half is the first share the calling thread has not taken, the high
// half the first one a worker has taken (count when none). The calling
// thread owns share 0 from the start.
class Claims {
 public:
  explicit Claims(uint64_t count) : count_(count), claims_(count << 32 | 1) {}
  // The calling thread takes share k, its next one: false if a worker has it.
  bool TakeFront(uint64_t k) {
    uint64_t c = claims_.load();
    while (k < (c >> 32)) {
      if (claims_.compare_exchange_weak(c, (c >> 32) << 32 | (k + 1))) return true;
    }
    return false;
  }
  // A worker takes the last free share; count when none is left.
  uint64_t TakeBack() {
    uint64_t c = claims_.load();
    for (;;) {
      const uint64_t low = c & 0xffffffff, high = c >> 32;
      if (high <= low) return count_;
      if (claims_.compare_exchange_weak(c, (high - 1) << 32 | low)) return high - 1;
    }
  }

 private:
  const uint64_t count_;
  std::atomic<uint64_t> claims_;
};

// A worker thread: takes shares from the back and parses each into a sink
// of its own, keeping what a sink throws for the calling thread, until
// none is left.
void Work(Claims& claims, Shares& shares, BatchParser& batches, ParallelSink& sink) {
  pthread_setname_np(pthread_self(), "ts-parse");
  Batcher batcher;
  for (uint64_t k; (k = claims.TakeBack()) < shares.size();) {
    Share& share = *shares[k];
    try {
      share.sink = sink.NewShare();
      ParseShare(batches, share, batcher, *share.sink, /*relocate=*/true);
    } catch (...) {  // rethrown on the calling thread, at this share's turn
      share.error = std::current_exception();
    }
    share.finished.store(true, std::memory_order_release);
  }
}

// Whatever happens on the calling thread, no worker outlives the shares.
struct JoinAll {
  Shares& shares;
  std::vector<std::thread>& workers;
  ~JoinAll() {
    for (auto& share : shares) share->cancel = true;
    for (std::thread& worker : workers) worker.join();
  }
};

// The calling thread's part: the shares in file order, each parsed here
// (its own, or one that began at a wrong guess, from where the one before
// really ended) or committed from its worker, until one stops short of its
// end. Sets input.begin and *at_element as ParseShares says; adds to
// `stats`. Rethrows what a worker's sink threw.
void TakeSharesInOrder(const ShareInput& in, Shares& shares, Claims& claims, ParallelSink& sink,
                       ReadStats* stats, bool* at_element) {
  size_t at = in.input.begin;  // where the next element starts
  for (uint64_t k = 0; k < shares.size(); ++k) {
    Share& share = *shares[k];
    const bool mine = k == 0 || claims.TakeFront(k);
    Share* done = &share;
    Share instead;  // the bytes of a wrongly guessed share, from `at`
    if (share.start != at) {
      ++stats->shares_dropped;
      share.cancel = true;
      if (at >= share.limit) continue;  // one element spans the whole share
      instead.start = at;
      instead.limit = share.limit;
      done = &instead;
    }
    if (mine || done == &instead) {
      ParseShare(in.batches, *done, in.serial, sink, /*relocate=*/false);
    } else {
      while (!share.finished.load(std::memory_order_acquire)) std::this_thread::yield();
      // As on one thread, what the sink threw reaches the caller (after the
      // workers are joined), where the events before it were handed on.
      if (share.error) std::rethrow_exception(share.error);
      if (share.sink != nullptr) sink.Commit(std::move(share.sink));
    }
    stats->events += done->events;
    stats->guessed_batches += done->guessed;
    stats->wrong_guesses += done->wrong;
    if (!done->whole) {
      in.input.begin = done->resume;
      *at_element = done->resume_at_element;
      return;
    }
    at = done->next;
  }
  in.input.begin = at;  // not reached: the last share ends at the array's end
  *at_element = true;
}

}  // namespace

int ParseThreadsFor(size_t bytes, int max_threads) {
  const int cpus = max_threads > 0 ? max_threads : ground::AvailableCpus();
  return static_cast<int>(std::min<size_t>({static_cast<size_t>(cpus), bytes / kMinShare, 64}));
}

bool ParseShares(const ShareInput& in, ParallelSink& sink, ReadStats* stats, bool* at_element) {
  TraceInput& input = in.input;
  const size_t begin = input.begin, end = input.end;
  if (!input.held_whole() || end > kMaxParallel || begin == 0) return false;
  const int threads = ParseThreadsFor(end - begin, in.max_threads);
  if (threads < 2) return false;
  if (in.whole != nullptr) *in.whole = std::string_view(input.data, end);
  const size_t piece =
      std::max(kSharePiece, (end - begin) / (static_cast<size_t>(threads) * kSharesPerThread));
  Shares shares = CutShares(in.batches, begin, end, piece);
  if (shares.size() < 2) return false;
  stats->shares = static_cast<int>(shares.size());
  Claims claims(shares.size());
  std::vector<std::thread> workers;
  JoinAll join_all{shares, workers};
  for (int t = 1; t < threads; ++t) {
    try {
      workers.emplace_back([&] { Work(claims, shares, in.batches, sink); });
    } catch (...) {  // no thread: this one takes more shares
      break;
    }
  }
  stats->threads = 1 + static_cast<int>(workers.size());
  TakeSharesInOrder(in, shares, claims, sink, stats, at_element);
  return true;
}

}  // namespace trainscope::kineto
