// trainscope/torch/loader.h: the input pipeline, instrumented.
//
// The loop shape to use: each batch arrives inside an already-open step, so
// the step's time includes its own input wait (the first of each epoch too)
// and the per-step rows and the phase table charge it to that step.
//
//   auto loader = torch::data::make_data_loader(dataset, options);
//   int64_t global_step = 0;
//   for (int epoch = 0; epoch < epochs; ++epoch) {
//     auto steps = trainscope::libtorch::Steps(*session, *loader,
//                                              trainscope::StepIndex(global_step));
//     for (auto& [step, batch] : steps) {
//       step.set_samples(trainscope::Samples(batch.data.size(0)));
//       ... forward, backward, optimizer step ...
//     }
//     global_step = steps.next_index();
//   }
//
// Instrument(*loader) only times the fetches, for loops that open their
// steps themselves (open the step first, then advance the iterator):
//
//   for (auto& batch : trainscope::libtorch::Instrument(*loader)) { ... }
//
// leaves each wait between two steps (still a data_wait range, and the cause
// of the idle gap it makes), which is what a StepScope inside the body gets.
//
//   trainscope::libtorch::PrefetchLoader<Batch> prefetch(
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

#include <time.h>

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
#include "trainscope/session.h"

namespace trainscope::libtorch {

namespace detail {
inline NameId LoaderNextName() {
  static const NameId id = InternName("loader.next");
  return id;
}
inline NameId LoaderBatchName() {
  static const NameId id = InternName("loader.batch");
  return id;
}
}  // namespace detail

// Wraps an iterable so that fetching each batch is a kDataWait range named
// "loader.next", and the counter "loader.batch" records the index of each
// batch that arrived (none for the fetch that finds the end). A fetch is
// forced inside the range: LibTorch's iterator fetches its first batch at
// the first comparison with end(), not in begin(), so begin() compares.
// Cost per batch: about two scope costs (bench/trainscope_bench.cc,
// BM_instrumented_loader), on top of the
// source's own. The source must outlive the wrapper. Not thread-safe, like
// the iterators it wraps.
template <typename Iterable>
class InstrumentedLoader {
  using SourceIterator = decltype(std::begin(std::declval<Iterable&>()));
  using SourceEnd = decltype(std::end(std::declval<Iterable&>()));

 public:
  explicit InstrumentedLoader(Iterable& source) : source_(&source) {}

  // Compares equal to an iterator past the last batch.
  class Sentinel {};

  class Iterator {
   public:
    decltype(auto) operator*() { return **it_; }
    auto operator->() { return &**it_; }
    // Fetches the next batch (a kDataWait range).
    Iterator& operator++() {
      {
        PhaseScope wait(Phase::kDataWait, detail::LoaderNextName());
        ++*it_;
        at_end_ = *it_ == *end_;
      }
      if (!at_end_) RecordCounter(detail::LoaderBatchName(), ++index_);
      return *this;
    }
    bool operator!=(const Sentinel&) const { return !at_end_; }
    bool operator==(const Sentinel&) const { return at_end_; }
    // The index of the current batch (0 for the first).
    int64_t index() const { return index_; }

   private:
    friend class InstrumentedLoader;
    explicit Iterator(Iterable& source) {
      {
        PhaseScope wait(Phase::kDataWait, detail::LoaderNextName());
        it_.emplace(std::begin(source));
        end_.emplace(std::end(source));
        at_end_ = *it_ == *end_;  // where LibTorch's iterator really waits
      }
      if (!at_end_) RecordCounter(detail::LoaderBatchName(), 0);
    }
    std::optional<SourceIterator> it_;
    std::optional<SourceEnd> end_;
    int64_t index_ = 0;
    bool at_end_ = false;
  };

  // Fetches the first batch (a kDataWait range).
  Iterator begin() { return Iterator(*source_); }
  Sentinel end() { return Sentinel(); }

 private:
  Iterable* source_;
};

// InstrumentedLoader over `source`, with the type deduced.
template <typename Iterable>
InstrumentedLoader<Iterable> Instrument(Iterable& source) {
  return InstrumentedLoader<Iterable>(source);
}

// A range over `source` whose every batch arrives inside an open step of
// `session`: each iteration opens step first, first + 1, ..., fetches the
// batch inside it (a kDataWait range "loader.next", the counter
// "loader.batch" as Instrument records them) and hands out both; the step
// closes when the iteration ends (the next ++, a break, or an exception
// leaving the loop). The fetch that finds the end discards its step, so
// a loader of n batches makes n steps; its wait (LibTorch knows its end:
// microseconds) is tagged with the discarded index, which the next epoch's
// first step reuses. See the loop at the top of this file.
// `source` must outlive the range (`session` may move: the range keeps a
// handle on its run); one thread drives it.
// Cost per batch: a step scope and about two scope costs.
template <typename Iterable>
class StepLoop {
  using SourceIterator = decltype(std::begin(std::declval<Iterable&>()));
  using SourceEnd = decltype(std::end(std::declval<Iterable&>()));
  using BatchRef = decltype(*std::declval<SourceIterator&>());

 public:
  StepLoop(Session& session, Iterable& source, StepIndex first)
      : session_(trainscope::internal::BorrowSession(session)),
        source_(&source),
        next_(first.value) {}
  // Not copied or moved: its iterator and open step point into it (Steps()
  // returns it without a move, C++17's guaranteed elision).
  StepLoop(const StepLoop&) = delete;
  StepLoop& operator=(const StepLoop&) = delete;

  // What each iteration hands out: `auto& [step, batch]`.
  struct Item {
    StepScope& step;  // the open step: set_samples(), index()
    BatchRef batch;   // the source's batch (a reference for LibTorch's loader)
  };

  class Sentinel {};

  class Iterator {
   public:
    Item& operator*() { return *item_; }
    Item* operator->() { return &*item_; }
    // Closes the current step, opens the next and fetches its batch.
    Iterator& operator++() {
      item_.reset();
      step_.reset();
      ++batch_;
      Open();
      return *this;
    }
    bool operator!=(const Sentinel&) const { return item_.has_value(); }
    bool operator==(const Sentinel&) const { return !item_.has_value(); }

    Iterator(const Iterator&) = delete;
    Iterator& operator=(const Iterator&) = delete;

   private:
    friend class StepLoop;
    explicit Iterator(StepLoop* loop) : loop_(loop) { Open(); }

    void Open() {
      step_.emplace(loop_->session_, StepIndex(loop_->next_));
      bool at_end;
      {
        PhaseScope wait(Phase::kDataWait, detail::LoaderNextName());
        if (!it_.has_value()) {
          it_.emplace(std::begin(*loop_->source_));
          end_.emplace(std::end(*loop_->source_));
        } else {
          ++*it_;
        }
        at_end = *it_ == *end_;  // where LibTorch's iterator really waits
      }
      if (at_end) {
        step_->Discard();
        step_.reset();
        return;
      }
      RecordCounter(detail::LoaderBatchName(), batch_);
      item_.emplace(Item{*step_, **it_});
      ++loop_->next_;
    }

    StepLoop* loop_;
    std::optional<SourceIterator> it_;
    std::optional<SourceEnd> end_;
    std::optional<StepScope> step_;
    std::optional<Item> item_;
    int64_t batch_ = 0;  // the batch's index within this range
  };

  // Opens the first step and fetches the first batch in it.
  Iterator begin() { return Iterator(this); }
  Sentinel end() { return Sentinel(); }
  // The index the step after the last one handed out would have: the
  // `first` of the next epoch's range.
  int64_t next_index() const { return next_; }

 private:
  Session session_;  // borrowed (internal::BorrowSession)
  Iterable* source_;
  int64_t next_;
};

// StepLoop over `source`, with the type deduced; steps count from `first`.
template <typename Iterable>
StepLoop<Iterable> Steps(Session& session, Iterable& source, StepIndex first = StepIndex(0)) {
  return StepLoop<Iterable>(session, source, first);
}

// How a PrefetchLoader runs.
struct PrefetchOptions {
  int workers = 2;      // threads calling the producer, named "<name>/<k>"
  int queue_depth = 4;  // batches made ahead of the consumer, at most
  std::string name = "loader";
  // The first index to make and hand out: a restored run passes the
  // checkpoint's TrainingState::loader_position().batch_index here (and
  // seeds produce from its sampler_seed and epoch), so the next batch is
  // the one the interrupted run would have had. Negative counts as 0.
  int64_t first_index = 0;
  // When set, the loader describes itself to this session's report
  // (Session::RecordLoader: report.loaders.<name>, kind "PrefetchLoader",
  // prefetch = queue_depth / workers rounded up). Not kept past the
  // constructor.
  Session* session = nullptr;
  // For the report only: the producer pins its batches (PinForDevice).
  bool pin_memory = false;
  int64_t batch_size = 0;  // for the report only; 0: not said
};

namespace detail {
// This thread's CPU time in microseconds (CLOCK_THREAD_CPUTIME_ID; 0 if
// the clock cannot be read). Cost: a system call.
inline int64_t ThreadCpuUs() {
  timespec t{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0) return 0;
  return static_cast<int64_t>(t.tv_sec) * 1'000'000 + t.tv_nsec / 1000;
}
}  // namespace detail

// A loader of our own: `workers` threads call produce(i) for i = 0, 1, ...
// (each index once, several at a time) and keep up to `queue_depth` batches
// ready; Next() hands them out in index order. produce returns nullopt past
// the end. Each Next() is a kDataWait range ("<name>.next") and records the
// counter "<name>.queue_depth": the batches ready when it was called (0
// means the consumer waited: input-bound). Each batch made records
// "<name>.cpu_us", the CPU time produce took on its worker (a clock read
// before and after: two system calls per batch, on the worker). With
// PrefetchOptions::session the report's loaders.<name> joins the two with
// the settings. Memory: at most queue_depth + workers batches, and the
// threads. Next() and the destructor are
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
    cpu_name_ = InternName(options_.name + ".cpu_us");
    if (options_.session != nullptr) {
      LoaderSettings settings;
      settings.name = options_.name;
      settings.kind = "PrefetchLoader";
      settings.workers = options_.workers;
      settings.prefetch = (options_.queue_depth + options_.workers - 1) / options_.workers;
      settings.pin_memory = options_.pin_memory;
      settings.batch_size = options_.batch_size;
      (void)options_.session->RecordLoader(settings);  // only a bad name fails: kept as it is
      options_.session = nullptr;
    }
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
      can_work_.wait(
          lock, [&] { return stop_ || (taken_ < end_ && taken_ < next_ + options_.queue_depth); });
      if (stop_ || taken_ >= end_) return;
      const int64_t index = taken_++;
      lock.unlock();
      Slot slot;
      const int64_t cpu_before = detail::ThreadCpuUs();
      try {
        slot.batch = produce_(index);
      } catch (...) {
        slot.error = std::current_exception();
      }
      if (slot.batch) RecordCounter(cpu_name_, detail::ThreadCpuUs() - cpu_before);
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
  NameId cpu_name_ = 0;
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

}  // namespace trainscope::libtorch

#endif  // TRAINSCOPE_TORCH_LOADER_H_
