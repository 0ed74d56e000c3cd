// trainscope/torch/loader.h: the input pipeline, instrumented.
//
//   auto loader = torch::data::make_data_loader(dataset, options);
//   for (auto& batch : trainscope::torch::Instrument(*loader)) { ... }
//
// A range-for fetches the next batch between two loop bodies, so a StepScope
// inside the body leaves the wait outside every step (it still shows as a
// data_wait range and as the cause of the idle gap it makes). To charge it
// to the step, advance inside the step:
//
//   auto batches = trainscope::torch::Instrument(*loader);
//   for (auto it = batches.begin(); it != batches.end(); ++i) {
//     trainscope::StepScope step(session, trainscope::StepIndex(i));
//     ... train on *it ...
//     ++it;  // waits for batch i + 1 inside step i
//   }
//
//   trainscope::torch::PrefetchLoader<Batch> prefetch(
//       [&](int64_t i) -> std::optional<Batch> { return i < n ? Load(i) : std::nullopt; },
//       {.workers = 4, .queue_depth = 8});
//   while (std::optional<Batch> batch = prefetch.Next()) { ... }
//
// Each wait for a batch is a kDataWait range (NVTX and the timeline), so the
// report's data_wait share and idle-gap causes show an input-bound run. The
// batch index and the prefetch queue's depth are counters (trace.json
// counter tracks, min/mean/max in report.counters). These templates need no
// LibTorch: they wrap any iterable (torch::data::DataLoader, a std::vector)
// and any batch type.
#ifndef TRAINSCOPE_TORCH_LOADER_H_
#define TRAINSCOPE_TORCH_LOADER_H_

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "trainscope/recorder.h"
#include "trainscope/scope.h"

namespace trainscope::torch {

// Wraps an iterable so that fetching each batch (begin() and every ++) is a
// kDataWait range named "loader.next", and the counter "loader.batch" records
// the index of the batch that arrived. Cost per batch: about two scope
// costs (bench: loader_bench), on top of the source's own. The source must
// outlive the wrapper. Not thread-safe, like the iterators it wraps.
template <typename Iterable>
class InstrumentedLoader {
  using SourceIterator = decltype(std::begin(std::declval<Iterable&>()));
  using SourceEnd = decltype(std::end(std::declval<Iterable&>()));

 public:
  explicit InstrumentedLoader(Iterable& source) : source_(&source) {}

  class Sentinel {
   public:
    explicit Sentinel(SourceEnd end) : end_(std::move(end)) {}

   private:
    friend class InstrumentedLoader;
    SourceEnd end_;
  };

  class Iterator {
   public:
    decltype(auto) operator*() { return *it_; }
    auto operator->() { return &*it_; }
    Iterator& operator++() {
      {
        PhaseScope wait(Phase::kDataWait, NextName());
        ++it_;
      }
      RecordCounter(BatchName(), ++index_);
      return *this;
    }
    bool operator!=(const Sentinel& end) { return !(it_ == end.end_); }
    bool operator==(const Sentinel& end) { return it_ == end.end_; }
    // The index of the current batch (0 for the first).
    int64_t index() const { return index_; }

   private:
    friend class InstrumentedLoader;
    explicit Iterator(SourceIterator it) : it_(std::move(it)) {}
    SourceIterator it_;
    int64_t index_ = 0;
  };

  // Fetches the first batch (a kDataWait range).
  Iterator begin() {
    std::optional<Iterator> first;
    {
      PhaseScope wait(Phase::kDataWait, NextName());
      first.emplace(Iterator(std::begin(*source_)));
    }
    RecordCounter(BatchName(), 0);
    return std::move(*first);
  }
  Sentinel end() { return Sentinel(std::end(*source_)); }

 private:
  static NameId NextName() {
    static const NameId id = InternName("loader.next");
    return id;
  }
  static NameId BatchName() {
    static const NameId id = InternName("loader.batch");
    return id;
  }
  Iterable* source_;
};

// InstrumentedLoader over `source`, with the type deduced.
template <typename Iterable>
InstrumentedLoader<Iterable> Instrument(Iterable& source) {
  return InstrumentedLoader<Iterable>(source);
}

// How a PrefetchLoader runs.
struct PrefetchOptions {
  int workers = 2;       // threads calling the producer, named "<name>/<k>"
  int queue_depth = 4;   // batches made ahead of the consumer, at most
  std::string name = "loader";
  // The first index to make and hand out: a restored run passes the
  // checkpoint's TrainingState::loader_position().batch_index here (and
  // seeds produce from its sampler_seed and epoch), so the next batch is
  // the one the interrupted run would have had. Negative counts as 0.
  int64_t first_index = 0;
};

// A loader of our own: `workers` threads call produce(i) for i = 0, 1, ...
// (each index once, several at a time) and keep up to `queue_depth` batches
// ready; Next() hands them out in index order. produce returns nullopt past
// the end. Each Next() is a kDataWait range ("<name>.next") and records the
// counter "<name>.queue_depth": the batches ready when it was called (0
// means the consumer waited: input-bound). Next() and the destructor are
// for one consumer thread. An exception thrown by produce is rethrown from
// the Next() that would have returned that batch.
template <typename Batch>
class PrefetchLoader {
 public:
  using Producer = std::function<std::optional<Batch>(int64_t index)>;

  // Starts the workers. Options are clamped to at least one worker and a
  // depth of one. Cost: the threads' start.
  PrefetchLoader(Producer produce, PrefetchOptions options = {})
      : produce_(std::move(produce)), options_(std::move(options)) {
    if (options_.workers < 1) options_.workers = 1;
    if (options_.queue_depth < 1) options_.queue_depth = 1;
    next_ = taken_ = std::max<int64_t>(0, options_.first_index);
    next_name_ = InternName(options_.name + ".next");
    depth_name_ = InternName(options_.name + ".queue_depth");
    for (int k = 0; k < options_.workers; ++k) {
      workers_.emplace_back([this, k] { Work(k); });
    }
  }

  PrefetchLoader(const PrefetchLoader&) = delete;
  PrefetchLoader& operator=(const PrefetchLoader&) = delete;

  // Stops the workers once their current batch is made.
  ~PrefetchLoader() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    can_work_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  // The next batch in index order, waiting for it if needed; nullopt at the
  // end. Cost when a batch is ready: a lock, a map lookup and a move.
  std::optional<Batch> Next() {
    std::unique_lock<std::mutex> lock(mu_);
    RecordCounter(depth_name_, static_cast<int64_t>(ReadyLocked()));
    std::optional<Batch> batch;
    {
      PhaseScope wait(Phase::kDataWait, next_name_);
      ready_cv_.wait(lock, [&] { return ready_.count(next_) > 0 || next_ >= end_; });
      if (next_ >= end_ && ready_.count(next_) == 0) return std::nullopt;
      auto it = ready_.find(next_);
      Slot slot = std::move(it->second);
      ready_.erase(it);
      ++next_;
      lock.unlock();
      can_work_.notify_all();
      if (slot.error) std::rethrow_exception(slot.error);
      batch = std::move(slot.batch);
    }
    return batch;
  }

  // The index of the batch the next Next() hands out: what to save as
  // LoaderPosition::batch_index at a step boundary. Cost: a lock.
  int64_t position() const {
    std::lock_guard<std::mutex> lock(mu_);
    return next_;
  }

  // Batches ready now, beyond what Next() has handed out.
  size_t ready() const {
    std::lock_guard<std::mutex> lock(mu_);
    return ReadyLocked();
  }

 private:
  struct Slot {
    std::optional<Batch> batch;
    std::exception_ptr error;
  };

  size_t ReadyLocked() const {
    size_t n = 0;
    for (int64_t i = next_; ready_.count(i) > 0; ++i) ++n;
    return n;
  }

  void Work(int k) {
    NameThisThread(options_.name + "/" + std::to_string(k));
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      can_work_.wait(lock, [&] {
        return stop_ || (taken_ < end_ && taken_ < next_ + options_.queue_depth);
      });
      if (stop_ || taken_ >= end_) return;
      const int64_t index = taken_++;
      lock.unlock();
      Slot slot;
      try {
        slot.batch = produce_(index);
      } catch (...) {
        slot.error = std::current_exception();
      }
      lock.lock();
      if (!slot.batch && !slot.error) {
        if (index < end_) end_ = index;  // past the end: nothing from here on
      } else {
        ready_.emplace(index, std::move(slot));
      }
      ready_cv_.notify_all();
      can_work_.notify_all();
    }
  }

  Producer produce_;
  PrefetchOptions options_;
  NameId next_name_ = 0;
  NameId depth_name_ = 0;
  mutable std::mutex mu_;
  std::condition_variable ready_cv_;
  std::condition_variable can_work_;
  std::map<int64_t, Slot> ready_;
  int64_t next_ = 0;   // the index Next() hands out next
  int64_t taken_ = 0;  // the next index a worker takes
  int64_t end_ = INT64_MAX;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace trainscope::torch

#endif  // TRAINSCOPE_TORCH_LOADER_H_
