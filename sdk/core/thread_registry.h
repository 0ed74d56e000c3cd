// sdk/core/thread_registry.h: which threads record into the active session.
//
// The registry owns (shared with each thread) every ring of the active
// session. Threads register lazily on their first recorded event; the
// Session's drainer takes snapshots of the list to drain it. Internal.
#ifndef TRAINSCOPE_SDK_CORE_THREAD_REGISTRY_H_
#define TRAINSCOPE_SDK_CORE_THREAD_REGISTRY_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "trainscope/recorder.h"

namespace trainscope::core {

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

  // Registers the calling thread (the slow path of ActiveBuffer()).
  ThreadBuffer* RegisterCurrentThread(uint32_t generation);

  // Copies the current list of threads. Cost: a lock and a vector copy.
  std::vector<ThreadEntry> Snapshot() const;

  // Thread names given with NameThisThread, or read from the OS at
  // registration. Empty if unknown.
  std::string ThreadName(uint32_t os_tid) const;
  void SetThreadName(uint32_t os_tid, std::string name);

 private:
  mutable std::mutex mu_;
  uint32_t generation_ = 0;
  size_t capacity_ = 0;
  std::vector<ThreadEntry> threads_;
  std::unordered_map<uint32_t, std::string> names_;
};

// The Linux thread id of the calling thread (cached per thread).
uint32_t CurrentOsTid();

}  // namespace trainscope::core

#endif  // TRAINSCOPE_SDK_CORE_THREAD_REGISTRY_H_
