// sdk/ground/locks.h: absl::Mutex as ThreadSanitizer sees it.
//
// Debian's Abseil is not built with -fsanitize=thread: TSan cannot see the
// order absl::Mutex imposes, and reports every field it guards as a race.
// These take and give back an absl::Mutex and also tell TSan, on the
// mutex's address (acquire after the lock, release before the unlock and
// around a wait); in other builds they are the plain calls. Clang's
// thread-safety analysis sees them as absl::MutexLock and Mutex::Lock.
// Cost: absl::Mutex's.
#ifndef TRAINSCOPE_SDK_GROUND_LOCKS_H_
#define TRAINSCOPE_SDK_GROUND_LOCKS_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#if defined(__SANITIZE_THREAD__)
#define TRAINSCOPE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TRAINSCOPE_TSAN 1
#endif
#endif
#ifdef TRAINSCOPE_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace trainscope::ground {

// What a lock and an unlock of `mu` order, told to TSan.
inline void TsanAcquired([[maybe_unused]] absl::Mutex* mu) {
#ifdef TRAINSCOPE_TSAN
  __tsan_acquire(mu);
#endif
}
inline void TsanReleasing([[maybe_unused]] absl::Mutex* mu) {
#ifdef TRAINSCOPE_TSAN
  __tsan_release(mu);
#endif
}

inline void Lock(absl::Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) {
  mu->Lock();
  TsanAcquired(mu);
}

inline void Unlock(absl::Mutex* mu) ABSL_UNLOCK_FUNCTION(mu) {
  TsanReleasing(mu);
  mu->Unlock();
}

// absl::CondVar::WaitWithTimeout: `mu` is given back during the wait and
// held again after it. True when the wait timed out.
inline bool WaitWithTimeout(absl::CondVar* cv, absl::Mutex* mu, absl::Duration timeout)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
  TsanReleasing(mu);
  const bool timed_out = cv->WaitWithTimeout(mu, timeout);
  TsanAcquired(mu);
  return timed_out;
}

// absl::MutexLock: holds `mu` for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(absl::Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { Lock(mu_); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { Unlock(mu_); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  absl::Mutex* const mu_;
};

}  // namespace trainscope::ground

#endif  // TRAINSCOPE_SDK_GROUND_LOCKS_H_
