// Thread registration, the rings and the name table. See recorder.h.
#include "trainscope/recorder.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

#include "sdk/nvtx/nvtx.h"
#include "sdk/recorder/thread_registry.h"

namespace trainscope {

namespace internal {
std::atomic<uint32_t> g_generation{0};
std::atomic<int64_t> g_current_step{-1};
std::atomic<int64_t> g_step_open_since{-1};
std::atomic<uint64_t> g_async{0};
std::atomic<bool> g_ticks_are_tsc{false};
std::atomic<bool> g_nvtx_enabled{false};
std::atomic<bool> g_step_hook{false};
TRAINSCOPE_THREAD_LOCAL ThreadState t_thread = {nullptr, 0};

ThreadBuffer* RegisterCurrentThread(uint32_t generation) {
  return recorder::ThreadRegistry::Get().RegisterCurrentThread(generation, /*counts_event=*/true);
}
}  // namespace internal

namespace {
size_t FloorPowerOfTwo(size_t n) {
  size_t p = 64;
  while (p * 2 <= n) p *= 2;
  return p;
}

// Keeps the calling thread's rings alive while it may still write to them:
// the current one, and the previous one for a scope that spans a change of
// session.
// At thread exit it retires them: the session frees a retired ring's slot
// once it has drained it.
struct ThreadOwner {
  std::shared_ptr<ThreadBuffer> current;
  std::shared_ptr<ThreadBuffer> previous;
  ~ThreadOwner();
};
thread_local ThreadOwner t_owner;
// Set when t_owner is destroyed: a scope in a later thread_local destructor
// records nothing (and registers nothing).
thread_local bool t_exited = false;
ThreadOwner::~ThreadOwner() {
  t_exited = true;
  internal::t_thread = internal::ThreadState{nullptr, 0};
  if (current != nullptr) current->Retire();
  if (previous != nullptr) previous->Retire();
}
}  // namespace

ThreadBuffer::ThreadBuffer(size_t capacity, uint32_t os_tid, uint16_t index)
    : capacity_(FloorPowerOfTwo(capacity)), mask_(capacity_ - 1), os_tid_(os_tid), index_(index) {
  events_ = std::make_unique<Event[]>(capacity_);
}

ThreadBuffer::~ThreadBuffer() = default;

namespace recorder {

uint32_t CurrentOsTid() {
  static thread_local uint32_t tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return tid;
}

ThreadRegistry& ThreadRegistry::Get() {
  static ThreadRegistry* registry = new ThreadRegistry();
  return *registry;
}

void ThreadRegistry::BeginSession(uint32_t generation, size_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  generation_ = generation;
  capacity_ = capacity;
  threads_.clear();
  free_.clear();
  live_ = peak_live_ = registered_ = refused_ = 0;
}

void ThreadRegistry::EndSession() {
  std::lock_guard<std::mutex> lock(mu_);
  generation_ = 0;
  threads_.clear();
  free_.clear();
  live_ = 0;
}

ThreadBuffer* ThreadRegistry::RegisterCurrentThread(uint32_t generation, bool counts_event) {
  if (t_exited) return nullptr;
  const uint32_t tid = CurrentOsTid();
  // The ring is allocated (and zeroed: 64 MiB takes tens of milliseconds)
  // before the lock, so that the drainer and other threads never wait for it.
  size_t capacity = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (generation == 0 || generation != generation_) return nullptr;
    if (free_.empty() && threads_.size() >= 0xFFFF) {  // refused before allocating
      if (counts_event) ++refused_;
      return nullptr;
    }
    capacity = capacity_;
  }
  auto buffer = std::make_shared<ThreadBuffer>(capacity, tid, 0);
  // This thread's ring of two sessions ago, freed after the lock: unmapping
  // a large ring takes milliseconds (25 ms for 256 MiB), and the drainer
  // waits for the lock at every drain.
  std::shared_ptr<ThreadBuffer> retired;
  std::lock_guard<std::mutex> lock(mu_);
  if (generation == 0 || generation != generation_ || capacity != capacity_) return nullptr;
  if (free_.empty() && threads_.size() >= 0xFFFF) {
    if (counts_event) ++refused_;
    return nullptr;
  }
  uint16_t index = 0;
  if (free_.empty()) {
    index = static_cast<uint16_t>(threads_.size());
    threads_.emplace_back();
  } else {
    index = free_.back();
    free_.pop_back();
  }
  buffer->index_ = index;
  threads_[index] = ThreadEntry{buffer, tid};
  ++registered_;
  registrations_.fetch_add(1, std::memory_order_release);
  peak_live_ = std::max(peak_live_, ++live_);
  if (names_.find(tid) == names_.end()) {
    char name[32] = {};
    if (static_cast<pid_t>(tid) == getpid()) {
      names_[tid] = Name{"main", false};
    } else if (pthread_getname_np(pthread_self(), name, sizeof(name)) == 0 && name[0] != '\0') {
      names_[tid] = Name{name, false};
    }
  }
  retired = std::move(t_owner.previous);
  t_owner.previous = std::move(t_owner.current);
  t_owner.current = buffer;
  internal::t_thread = internal::ThreadState{buffer.get(), generation};
  return buffer.get();
}

void ThreadRegistry::Release(uint16_t index, const ThreadBuffer* buffer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (index >= threads_.size() || threads_[index].buffer.get() != buffer) return;
  if (auto it = names_.find(threads_[index].os_tid); it != names_.end() && !it->second.explicit_) {
    names_.erase(it);
  }
  threads_[index] = ThreadEntry{};
  free_.push_back(index);
  --live_;
}

std::vector<ThreadEntry> ThreadRegistry::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_;
}

int64_t ThreadRegistry::registered() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registered_;
}

int64_t ThreadRegistry::refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

int64_t ThreadRegistry::peak_live() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_live_;
}

std::string ThreadRegistry::ThreadName(uint32_t os_tid) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = names_.find(os_tid);
  return it == names_.end() ? std::string() : it->second.text;
}

void ThreadRegistry::SetThreadName(uint32_t os_tid, std::string name) {
  std::lock_guard<std::mutex> lock(mu_);
  names_[os_tid] = Name{std::move(name), true};
}

}  // namespace recorder

namespace {
// Interned names. A deque keeps every string at a stable address.
struct NameTable {
  std::mutex mu;
  std::deque<std::string> names;  // index = id - kFirstCustomNameId
  std::unordered_map<std::string, NameId> ids;
};
NameTable& Names() {
  static NameTable* table = new NameTable();
  return *table;
}
}  // namespace

NameId InternName(std::string_view name) {
  NameTable& table = Names();
  std::lock_guard<std::mutex> lock(table.mu);
  auto it = table.ids.find(std::string(name));
  if (it != table.ids.end()) return it->second;
  const NameId id = kFirstCustomNameId + static_cast<NameId>(table.names.size());
  table.names.emplace_back(name);
  table.ids.emplace(table.names.back(), id);
  nvtx::RegisterName(id, name);
  return id;
}

std::string_view LookupName(NameId id) {
  if (id < static_cast<NameId>(kPhaseCount)) return PhaseName(static_cast<Phase>(id));
  if (id == kStepNameId) return "step";
  if (id < kFirstCustomNameId) return {};
  NameTable& table = Names();
  std::lock_guard<std::mutex> lock(table.mu);
  const size_t index = id - kFirstCustomNameId;
  return index < table.names.size() ? std::string_view(table.names[index]) : std::string_view();
}

void NameThisThread(std::string_view name) {
  const uint32_t tid = recorder::CurrentOsTid();
  recorder::ThreadRegistry::Get().SetThreadName(tid, std::string(name));
  nvtx::NameThread(tid, name);
  // Register now, so the thread shows even if it records nothing.
  const uint32_t generation = internal::g_generation.load(std::memory_order_acquire);
  if (generation != 0 && internal::t_thread.generation != generation) {
    recorder::ThreadRegistry::Get().RegisterCurrentThread(generation, /*counts_event=*/false);
  }
}

}  // namespace trainscope
