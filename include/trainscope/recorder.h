// trainscope/recorder.h: the in-process timeline's hot path.
//
// Each thread that records gets a fixed-capacity ring of compact Events the
// first time it records in a session (registration: one allocation and two
// short locks, then never again). Recording an event is a few stores into the
// thread's own ring and one release store of its head index: no lock, no
// allocation, no syscall. A background thread of the Session drains the rings.
// When a ring is full the event is dropped and counted; the producer never
// waits. Most code uses the scopes in scope.h rather than this header.
//
//   if (trainscope::ThreadBuffer* ring = trainscope::ActiveBuffer()) {
//     ring->Push(event);
//   }
#ifndef TRAINSCOPE_RECORDER_H_
#define TRAINSCOPE_RECORDER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "trainscope/clock.h"
#include "trainscope/phase.h"
#include "trainscope/types.h"

#if defined(__GNUC__)
#define TRAINSCOPE_LIKELY(x) __builtin_expect(!!(x), 1)
#define TRAINSCOPE_UNLIKELY(x) __builtin_expect(!!(x), 0)
// Plain-data thread-local storage: __thread needs no initialisation check on
// access (extern thread_local does), and initial-exec needs no call.
#define TRAINSCOPE_THREAD_LOCAL __thread __attribute__((tls_model("initial-exec")))
#else
#define TRAINSCOPE_LIKELY(x) (x)
#define TRAINSCOPE_UNLIKELY(x) (x)
#define TRAINSCOPE_THREAD_LOCAL thread_local
#endif

namespace trainscope {

// What an Event describes.
enum class EventKind : uint8_t {
  kRange = 0,    // a phase or named range that began and ended on this thread
  kStep = 1,     // a training step; `value` holds the sample count
  kAsync = 2,    // a range that may have ended on another thread than it began
  kCounter = 3,  // a sample of a named value: start_ns = time, end_ns = the value
};

// One recorded range, written once when the range ends. 32 bytes. In a
// ring, start_ns and end_ns are ReadTicks() values (clock.h); the drainer
// converts them to NowNs()'s clock before anything else sees the Event.
struct Event {
  TimestampNs start_ns;
  TimestampNs end_ns;
  int64_t step;    // the step active when the range began, -1 outside steps
  uint32_t value;  // NameId for ranges, sample count for kStep
  EventKind kind;
  Phase phase;
  // kAsync: the registry index of the thread it began on. kRange, kStep:
  // the scopes open on the thread when it ended, itself included (0: not
  // known). 1 marks a cut: no later Event of the thread began before this
  // one's end, so the drain may fold up to it before it has read the rest
  // of the ring.
  uint16_t aux;
};
static_assert(sizeof(Event) == 32, "Event must stay compact");

namespace recorder {
class ThreadRegistry;
}  // namespace recorder

// A single-producer, single-consumer ring of Events owned by one thread.
// Push is called only by the owning thread; Drain only by the Session's
// drainer. Capacity is a power of two.
class ThreadBuffer {
 public:
  // Allocates room for `capacity` events (rounded down to a power of two,
  // at least 64). Called at registration, never on the hot path.
  ThreadBuffer(size_t capacity, uint32_t os_tid, uint16_t index);
  ~ThreadBuffer();
  ThreadBuffer(const ThreadBuffer&) = delete;
  ThreadBuffer& operator=(const ThreadBuffer&) = delete;

  // Appends `event`, or counts it as dropped when the ring is full.
  // Cost: a handful of stores; never blocks, allocates or locks. A range
  // pushed by hand (not by a scope.h scope) should be bracketed by
  // OpenScope/SetOpenStart and CloseScope, with ScopeDepth() in its `aux`:
  // the drain folds up to the oldest scope a thread says it has open, and a
  // range it was not told of may arrive after the drain passed its start
  // (counted late).
  void Push(const Event& event) noexcept {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (TRAINSCOPE_UNLIKELY(head - tail_cache_ >= capacity_)) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (head - tail_cache_ >= capacity_) {
        dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        return;
      }
    }
    events_[head & mask_] = event;
    head_.store(head + 1, std::memory_order_release);
  }

  // Consumer side: hands every event pushed so far to `sink(Event*, size_t)`
  // (at most two calls, for the two halves of the ring; the sink may rewrite
  // them in place) and frees their slots. Returns the number of events drained.
  template <typename Sink>
  size_t Drain(Sink&& sink) {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    const uint64_t head = head_.load(std::memory_order_acquire);
    if (head == tail) return 0;
    const size_t count = static_cast<size_t>(head - tail);
    const size_t first = static_cast<size_t>(tail & mask_);
    const size_t run = count < capacity_ - first ? count : capacity_ - first;
    sink(events_.get() + first, run);
    if (run < count) sink(events_.get(), count - run);
    tail_.store(head, std::memory_order_release);
    return count;
  }

  // Events dropped because the ring was full. Any thread may read it.
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  // Scope nesting, kept by the owning thread for the drain (scope.h calls
  // these; not for user code). A scope calls OpenScope() before it reads its
  // start, SetOpenStart() with that start when OpenScope() returned true
  // (the outermost scope), ScopeDepth() for its Event's `aux`, and
  // CloseScope() after its Push. Cost: an increment or decrement and, for
  // the outermost scope only, one store each way (plain moves on x86).
  bool OpenScope() noexcept {
    if (depth_++ != 0) return false;
    // Before the start is read: a drain that looks in between holds back.
    open_since_.store(kOpening, std::memory_order_release);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the clock read stays after
    return true;
  }
  void SetOpenStart(int64_t ticks) noexcept { open_since_.store(ticks, std::memory_order_release); }
  // The scopes open, the caller's included, saturated to 16 bits.
  uint16_t ScopeDepth() const noexcept {
    return static_cast<uint16_t>(depth_ > 0xFFFF ? 0xFFFF : depth_);
  }
  void CloseScope() noexcept {
    // Release, after the Push: a drain that sees nothing open sees the Event.
    if (--depth_ == 0) open_since_.store(kNothingOpen, std::memory_order_release);
  }
  // Consumer side, read before a drain: the start (ticks) of the outermost
  // scope open on the thread, kNothingOpen, or kOpening while a scope is
  // reading its start. Every Event of the thread not in that drain began
  // at or after it, or after the read.
  static constexpr int64_t kNothingOpen = -1;
  static constexpr int64_t kOpening = 0;
  int64_t open_since() const noexcept { return open_since_.load(std::memory_order_acquire); }

  // Marks the ring as given back by its thread (at thread exit): once drained,
  // the session frees it. Not on the hot path.
  void Retire() noexcept { retired_.store(true, std::memory_order_release); }
  // True after Retire(); read before a drain, every event pushed before the
  // thread retired it is then in that drain.
  bool retired() const noexcept { return retired_.load(std::memory_order_acquire); }
  // Events pushed and not drained yet; a snapshot, for benchmarks and tests
  // that wait for the drain (never needed on the hot path).
  size_t pending() const {
    return static_cast<size_t>(head_.load(std::memory_order_acquire) -
                               tail_.load(std::memory_order_acquire));
  }
  // The ring's capacity in events and in bytes.
  size_t capacity() const { return capacity_; }
  size_t bytes() const { return capacity_ * sizeof(Event); }
  // The owning thread's Linux thread id and its index in the registry.
  uint32_t os_tid() const { return os_tid_; }
  uint16_t index() const { return index_; }

 private:
  friend class recorder::ThreadRegistry;  // sets index_ once it has a slot

  std::unique_ptr<Event[]> events_;
  size_t capacity_;
  uint64_t mask_;
  uint32_t os_tid_;
  uint16_t index_;
  alignas(64) std::atomic<uint64_t> head_{0};
  uint64_t tail_cache_ = 0;  // producer's last view of tail_
  int32_t depth_ = 0;        // scopes open on the owning thread (its own)
  std::atomic<int64_t> open_since_{kNothingOpen};
  std::atomic<uint64_t> dropped_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
  std::atomic<bool> retired_{false};
};

// Not public API (it may change without notice): the state the inline
// hot path reads, visible here only so that the compiler can inline it.
namespace internal {

// The generation of the active session, 0 when none is active. Every
// Session::Start takes a new generation, so a thread notices a new session
// by comparing one integer.
extern std::atomic<uint32_t> g_generation;
// The step index set by the innermost active StepScope, -1 outside steps.
extern std::atomic<int64_t> g_current_step;
// When the innermost active StepScope began (the recorder's clock), -1
// outside steps. Set before the step's ranges begin and reset only after its
// Event is pushed, so the Session's drain, reading it first, never folds time
// of a step it has not drained.
extern std::atomic<int64_t> g_step_open_since;
// AsyncRanges: those begun (the high 32 bits, wrapping) and those begun and
// not ended yet (the low 32 bits), in any session. One add at Begin
// (kAsyncBegun + 1), one subtract at End. While any is open, or one began
// since the last drain, the drain waits fold_delay_ms for them (their start
// is on no thread's open scope).
inline constexpr uint64_t kAsyncBegun = uint64_t{1} << 32;
extern std::atomic<uint64_t> g_async;
// True while the active session emits NVTX ranges.
extern std::atomic<bool> g_nvtx_enabled;
// True while the active session wants to hear of step boundaries (a device
// profiling window is set).
extern std::atomic<bool> g_step_hook;
// Called by StepScope at a step's start when g_step_hook is set.
void OnStepBegin(int64_t step) noexcept;

// The calling thread's view of its registration.
struct ThreadState {
  ThreadBuffer* buffer;
  uint32_t generation;
};
extern TRAINSCOPE_THREAD_LOCAL ThreadState t_thread;

// Slow path: registers the calling thread with the active session (one
// allocation of its ring and one lock). Returns nullptr if no session is
// active any more.
ThreadBuffer* RegisterCurrentThread(uint32_t generation);

}  // namespace internal

// The calling thread's ring in the active session, registering the thread on
// its first call; nullptr when no session is active (one load and a
// predictable branch).
inline ThreadBuffer* ActiveBuffer() noexcept {
  // Acquire (a plain load on x86): what Session::Start set up before it
  // published the generation is visible to the scope.
  const uint32_t generation = internal::g_generation.load(std::memory_order_acquire);
  if (TRAINSCOPE_LIKELY(generation == 0)) return nullptr;
  const internal::ThreadState& state = internal::t_thread;
  if (TRAINSCOPE_LIKELY(state.generation == generation)) return state.buffer;
  return internal::RegisterCurrentThread(generation);
}

// True while a session is recording. Cost: one relaxed load.
inline bool Recording() noexcept {
  return internal::g_generation.load(std::memory_order_relaxed) != 0;
}

// The step index of the innermost active StepScope, or -1.
inline int64_t CurrentStep() noexcept {
  return internal::g_current_step.load(std::memory_order_relaxed);
}

// Interns `name` for custom ranges and returns its stable id (the same name
// always yields the same id, in every session of the process). Also registers
// the name as an NVTX string. Cost: a lock and a hash lookup; call it once per
// call site (TRAINSCOPE_RANGE does). Thread-safe.
NameId InternName(std::string_view name);

// The text of an interned name or a phase/step name id; "" if unknown.
// Thread-safe; the view stays valid for the life of the process.
std::string_view LookupName(NameId id);

// Records `value` for the counter `name` (from InternName) at this moment:
// a counter track in trace.json ("ph":"C") and min/mean/max in the report's
// `counters`. For queue depths, batch indices, bytes in flight. Cost: one
// clock read and a push, like a scope; nothing without an active session.
inline void RecordCounter(NameId name, int64_t value) noexcept {
#ifdef TRAINSCOPE_DISABLE
  static_cast<void>(name);
  static_cast<void>(value);
#else
  ThreadBuffer* buffer = ActiveBuffer();
  if (buffer == nullptr) return;
  buffer->Push(
      Event{ReadTicks(), value, CurrentStep(), name, EventKind::kCounter, Phase::kOther, 0});
#endif
}

// Names the calling thread ("loader/0") in trace.json and in NVTX
// (nvtxNameOsThreadA), as Nsight Systems shows it. Registers the thread with
// the active session if there is one; the name also applies to later
// sessions. Cost: a lock; call it once when the thread starts.
void NameThisThread(std::string_view name);

}  // namespace trainscope

#endif  // TRAINSCOPE_RECORDER_H_
