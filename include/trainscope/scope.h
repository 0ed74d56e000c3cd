// trainscope/scope.h: RAII hooks that mark phases, named ranges and steps.
//
//   for (int64_t i = 0; i < steps; ++i) {
//     trainscope::StepScope step(session, i, trainscope::Samples(batch_size));
//     { TRAINSCOPE_PHASE(kDataWait); batch = loader.next(); }
//     { TRAINSCOPE_PHASE(kForward);  loss = model(batch); }
//     { TRAINSCOPE_RANGE("clip_grad"); clip(model); }
//   }
//
// Each scope records one Event when it ends and, when the session has NVTX on,
// pushes and pops an NVTX range in the `trainscope` domain. With no active
// session a scope costs one load and a predictable branch; compiled
// with TRAINSCOPE_DISABLE defined, nothing at all.
#ifndef TRAINSCOPE_SCOPE_H_
#define TRAINSCOPE_SCOPE_H_

#include <cstdint>
#include <utility>

#include "trainscope/clock.h"
#include "trainscope/phase.h"
#include "trainscope/recorder.h"
#include "trainscope/types.h"

namespace trainscope {

class Session;

namespace internal {
// Out-of-line NVTX calls (sdk/nvtx). No-ops when NVTX is compiled out.
void NvtxPush(NameId name, Phase phase, int64_t step) noexcept;
void NvtxPushStep(int64_t step) noexcept;
void NvtxPop() noexcept;
uint64_t NvtxStart(NameId name, Phase phase, int64_t step) noexcept;
void NvtxEnd(uint64_t range_id) noexcept;

inline bool NvtxOn() noexcept { return g_nvtx_enabled.load(std::memory_order_relaxed); }

inline ThreadBuffer* ScopeBuffer() noexcept {
#ifdef TRAINSCOPE_DISABLE
  return nullptr;
#else
  return ActiveBuffer();
#endif
}
}  // namespace internal

// Marks the enclosing block as `phase` (or as a custom named range).
// Records a kRange Event at the end of the block. Not copyable or movable:
// it must end on the thread that began it (see AsyncRange otherwise).
class PhaseScope {
 public:
  // A range named after the phase itself ("forward").
  explicit PhaseScope(Phase phase) noexcept : PhaseScope(phase, static_cast<NameId>(phase)) {}

  // A range named `name` (from InternName) that counts as `phase`.
  PhaseScope(Phase phase, NameId name) noexcept : buffer_(internal::ScopeBuffer()) {
    if (buffer_ == nullptr) return;
    phase_ = phase;
    name_ = name;
    step_ = CurrentStep();
    nvtx_ = internal::NvtxOn();
    if (nvtx_) internal::NvtxPush(name, phase, step_);
    const bool outermost = buffer_->OpenScope();
    start_ns_ = ReadTicks();
    if (outermost) buffer_->SetOpenStart(start_ns_);
  }

  ~PhaseScope() {
    if (buffer_ == nullptr) return;
    const TimestampNs end_ns = ReadTicks();
    if (nvtx_) internal::NvtxPop();
    buffer_->Push(
        Event{start_ns_, end_ns, step_, name_, EventKind::kRange, phase_, buffer_->ScopeDepth()});
    buffer_->CloseScope();
  }

  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  ThreadBuffer* buffer_;
  TimestampNs start_ns_ = 0;
  int64_t step_ = -1;
  NameId name_ = 0;
  Phase phase_ = Phase::kOther;
  bool nvtx_ = false;
};

// Marks one training step. While it lives, CurrentStep() returns its index,
// and every range begun on any thread is tagged with it. Steps should not
// overlap; nesting restores the outer index on exit.
class StepScope {
 public:
  // Begins step `index` of `session`; `samples` is the number of training
  // examples the step processes (for throughput), settable later.
  // The step belongs to the session that is recording (there is one at a
  // time); `session` names it at the call site and is not kept.
  StepScope([[maybe_unused]] Session& session, StepIndex index,
            Samples samples = Samples(0)) noexcept
      : buffer_(internal::ScopeBuffer()) {
    index_ = index.value;
    samples_ = samples.value;
    if (buffer_ == nullptr) return;
    previous_step_ = internal::g_current_step.exchange(index_, std::memory_order_relaxed);
    if (TRAINSCOPE_UNLIKELY(internal::g_step_hook.load(std::memory_order_relaxed))) {
      internal::OnStepBegin(index_);
    }
    nvtx_ = internal::NvtxOn();
    if (nvtx_) internal::NvtxPushStep(index_);
    const bool outermost = buffer_->OpenScope();
    start_ns_ = ReadTicks();
    if (outermost) buffer_->SetOpenStart(start_ns_);
    // A load and a store, not an exchange: one thread owns its steps, and a
    // locked read-modify-write would double the scope's cost.
    previous_open_since_ = internal::g_step_open_since.load(std::memory_order_relaxed);
    internal::g_step_open_since.store(start_ns_, std::memory_order_relaxed);
  }

  ~StepScope() {
    if (buffer_ == nullptr) return;
    const TimestampNs end_ns = ReadTicks();
    if (nvtx_) internal::NvtxPop();
    internal::g_current_step.store(previous_step_, std::memory_order_relaxed);
    const auto samples =
        static_cast<uint32_t>(samples_ < 0 ? 0 : (samples_ > 0xFFFFFFFF ? 0xFFFFFFFF : samples_));
    buffer_->Push(Event{start_ns_, end_ns, index_, samples, EventKind::kStep, Phase::kOther,
                        buffer_->ScopeDepth()});
    buffer_->CloseScope();
    // After the push (release): a drain that sees the step closed sees it.
    internal::g_step_open_since.store(previous_open_since_, std::memory_order_release);
  }

  // Ends the step now without recording it, for a step opened before it
  // was known to have work (libtorch::Steps probing past the last batch):
  // the outer step index comes back and the destructor does nothing more.
  // Ranges begun inside keep the discarded index, which names no step.
  // Cost: a few stores (and an NVTX pop).
  void Discard() noexcept {
    if (buffer_ == nullptr) return;
    if (nvtx_) internal::NvtxPop();
    internal::g_current_step.store(previous_step_, std::memory_order_relaxed);
    buffer_->CloseScope();
    internal::g_step_open_since.store(previous_open_since_, std::memory_order_release);
    buffer_ = nullptr;
  }

  // Sets the number of samples this step processed.
  void set_samples(Samples samples) noexcept { samples_ = samples.value; }
  // The step's index.
  int64_t index() const noexcept { return index_; }

  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;

 private:
  ThreadBuffer* buffer_;
  TimestampNs start_ns_ = 0;
  int64_t index_ = -1;
  int64_t samples_ = 0;
  int64_t previous_step_ = -1;
  int64_t previous_open_since_ = -1;
  bool nvtx_ = false;
};

// A range that may end on another thread than it began on: an asynchronous
// host-to-device copy, a background checkpoint write. Begin() on one thread,
// move the token where the work finishes, End() there (or let it be
// destroyed there). Shown in Nsight Systems as an NVTX start/end range.
class AsyncRange {
 public:
  // An inactive range; End() does nothing.
  AsyncRange() noexcept = default;

  // Begins a range of `phase` named `name` (the phase's own name by default).
  // Cost: like a PhaseScope's begin plus one atomic increment (End: one
  // atomic decrement). Inactive when no session is recording.
  static AsyncRange Begin(Phase phase, NameId name) noexcept {
    AsyncRange range;
    ThreadBuffer* buffer = internal::ScopeBuffer();
    if (buffer == nullptr) return range;
    range.generation_ = internal::g_generation.load(std::memory_order_relaxed);
    if (range.generation_ == 0) return range;  // the session ended meanwhile
    range.begin_thread_ = buffer->index();
    range.phase_ = phase;
    range.name_ = name;
    range.step_ = CurrentStep();
    if (internal::NvtxOn()) {
      range.nvtx_ = true;
      range.nvtx_id_ = internal::NvtxStart(name, phase, range.step_);
    }
    // Before the start is read: the drain waits for open ranges.
    internal::g_async.fetch_add(internal::kAsyncBegun + 1, std::memory_order_seq_cst);
    range.start_ns_ = ReadTicks();
    return range;
  }
  static AsyncRange Begin(Phase phase) noexcept { return Begin(phase, static_cast<NameId>(phase)); }

  // Ends the range on the calling thread and records it. Idempotent. Dropped
  // if the session that saw it begin is no longer the active one.
  void End() noexcept {
    if (generation_ == 0) return;
    const TimestampNs end_ns = ReadTicks();
    if (nvtx_) internal::NvtxEnd(nvtx_id_);
    ThreadBuffer* buffer = internal::ScopeBuffer();
    if (buffer != nullptr &&
        internal::g_generation.load(std::memory_order_relaxed) == generation_) {
      buffer->Push(
          Event{start_ns_, end_ns, step_, name_, EventKind::kAsync, phase_, begin_thread_});
    }
    // After the push (release): a drain that sees none open sees the Event.
    internal::g_async.fetch_sub(1, std::memory_order_release);
    generation_ = 0;
  }

  // True between Begin() and End().
  bool active() const noexcept { return generation_ != 0; }

  AsyncRange(AsyncRange&& other) noexcept { *this = std::move(other); }
  AsyncRange& operator=(AsyncRange&& other) noexcept {
    if (this != &other) {
      End();
      start_ns_ = other.start_ns_;
      step_ = other.step_;
      nvtx_id_ = other.nvtx_id_;
      name_ = other.name_;
      generation_ = other.generation_;
      begin_thread_ = other.begin_thread_;
      phase_ = other.phase_;
      nvtx_ = other.nvtx_;
      other.generation_ = 0;
    }
    return *this;
  }
  ~AsyncRange() { End(); }

 private:
  TimestampNs start_ns_ = 0;
  int64_t step_ = -1;
  uint64_t nvtx_id_ = 0;
  NameId name_ = 0;
  uint32_t generation_ = 0;
  uint16_t begin_thread_ = 0;
  Phase phase_ = Phase::kOther;
  bool nvtx_ = false;
};

}  // namespace trainscope

#define TRAINSCOPE_CONCAT_INNER(a, b) a##b
#define TRAINSCOPE_CONCAT(a, b) TRAINSCOPE_CONCAT_INNER(a, b)

#ifdef TRAINSCOPE_DISABLE
#define TRAINSCOPE_PHASE(phase) static_cast<void>(0)
#define TRAINSCOPE_RANGE(name) static_cast<void>(0)
#define TRAINSCOPE_RANGE_IN(phase, name) static_cast<void>(0)
#else
// Marks the rest of the block as a standard phase: TRAINSCOPE_PHASE(kForward).
#define TRAINSCOPE_PHASE(phase)                                 \
  ::trainscope::PhaseScope TRAINSCOPE_CONCAT(trainscope_scope_, \
                                             __LINE__)(::trainscope::Phase::phase)
// Marks the rest of the block as a custom range counted as `phase`; the name
// is interned once per call site (a function-local static).
#define TRAINSCOPE_RANGE_IN(phase, name)                                            \
  static const ::trainscope::NameId TRAINSCOPE_CONCAT(trainscope_name_, __LINE__) = \
      ::trainscope::InternName(name);                                               \
  ::trainscope::PhaseScope TRAINSCOPE_CONCAT(trainscope_scope_, __LINE__)(          \
      ::trainscope::Phase::phase, TRAINSCOPE_CONCAT(trainscope_name_, __LINE__))
// Marks the rest of the block as a custom range "name" (phase kOther).
#define TRAINSCOPE_RANGE(name) TRAINSCOPE_RANGE_IN(kOther, name)
#endif

#endif  // TRAINSCOPE_SCOPE_H_
