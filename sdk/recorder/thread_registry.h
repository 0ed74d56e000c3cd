// sdk/recorder/thread_registry.h: which threads record into the active session.
//
// The registry owns (shared with each thread) every ring of the active
// session. Threads register lazily on their first recorded event; the
// Session's drainer takes snapshots of the list to drain it. Internal.
#ifndef TRAINSCOPE_SDK_RECORDER_THREAD_REGISTRY_H_
#define TRAINSCOPE_SDK_RECORDER_THREAD_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "trainscope/recorder.h"

namespace trainscope::recorder {

// A registered thread as the drainer sees it.
struct ThreadEntry {
  std::shared_ptr<ThreadBuffer> buffer;
  uint32_t os_tid = 0;
};

class ThreadRegistry {
 public:
  // The process-wide registry.
  static ThreadRegistry& Get();

  // Makes `generation` the active session with rings of `capacity` events,
  // forgetting the threads of any earlier session.
  void BeginSession(uint32_t generation, size_t capacity);
  // Forgets the session's threads (their rings live on while a thread holds
  // them). Call after the final drain.
  void EndSession();

  // Registers the calling thread (the slow path of ActiveBuffer()) in a free
  // slot. With all 65535 slots taken it returns nullptr and, when
  // `counts_event`, counts the event it was called for in refused().
  ThreadBuffer* RegisterCurrentThread(uint32_t generation, bool counts_event = true);
  // Frees slot `index` if it still holds `buffer` (a retired, drained ring):
  // the ring goes when its thread's last reference does, and the slot is
  // reused. Forgets the thread's name unless NameThisThread set it.
  void Release(uint16_t index, const ThreadBuffer* buffer);

  // Copies the current slots (a freed slot has no buffer). Cost: a lock and
  // a vector copy.
  std::vector<ThreadEntry> Snapshot() const;
  // Rings handed out since the process began: the drainer compares it with
  // the value at its last Snapshot to see a new thread without the lock.
  // Cost: one atomic load.
  uint64_t registrations() const { return registrations_.load(std::memory_order_acquire); }

  // This session's counts: threads registered, events refused for want of a
  // slot, and the most rings alive at once.
  int64_t registered() const;
  int64_t refused() const;
  int64_t peak_live() const;

  // Thread names given with NameThisThread, or read from the OS at
  // registration. Empty if unknown.
  std::string ThreadName(uint32_t os_tid) const;
  void SetThreadName(uint32_t os_tid, std::string name);

 private:
  mutable std::mutex mu_;
  uint32_t generation_ = 0;
  size_t capacity_ = 0;
  std::vector<ThreadEntry> threads_;  // slots
  std::vector<uint16_t> free_;        // freed slots
  int64_t live_ = 0;
  int64_t peak_live_ = 0;
  int64_t registered_ = 0;
  int64_t refused_ = 0;
  std::atomic<uint64_t> registrations_{0};
  struct Name {
    std::string text;
    bool explicit_ = false;  // from NameThisThread: kept when the thread exits
  };
  std::unordered_map<uint32_t, Name> names_;
};

// The Linux thread id of the calling thread (cached per thread).
uint32_t CurrentOsTid();

}  // namespace trainscope::recorder

#endif  // TRAINSCOPE_SDK_RECORDER_THREAD_REGISTRY_H_
