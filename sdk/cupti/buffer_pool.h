// sdk/cupti/buffer_pool.h: the fixed pool of activity buffers handed to CUPTI.
//
// CUPTI asks for an empty buffer (bufferRequested) whenever it needs room for
// records and gives it back full (bufferCompleted). The pool owns at most
// `max_buffers` buffers of `buffer_bytes`, allocated on first use and then
// reused; when all of them are with CUPTI it refuses (nullptr), CUPTI drops
// the records that had no room, and the refusal is counted. Every buffer it
// hands out is all zeros (new ones come zeroed from the OS, returned ones
// are zeroed on Release), so CUPTI is told not to zero them itself
// (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER): that would happen on the
// thread whose CUDA call needed room. Needs no GPU.
//
//   BufferPool pool(8 << 20, 16);
//   uint8_t* buffer = pool.Acquire();  // nullptr: exhausted, counted
//   ...                                 // CUPTI fills it
//   pool.Release(buffer);               // free for the next request
#ifndef TRAINSCOPE_SDK_CUPTI_BUFFER_POOL_H_
#define TRAINSCOPE_SDK_CUPTI_BUFFER_POOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace trainscope::cupti {

// CUPTI requires activity buffers aligned to 8 bytes.
inline constexpr size_t kBufferAlignment = 8;

class BufferPool {
 public:
  // A pool of at most `max_buffers` (at least 1) buffers of `buffer_bytes`
  // (rounded up to kBufferAlignment). Allocates nothing yet.
  BufferPool(size_t buffer_bytes, int max_buffers);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A free, zeroed buffer of buffer_bytes(), allocating one (calloc: pages
  // the OS zeroes as they are first touched) while fewer than capacity()
  // exist; nullptr (counted in refused()) when all are in flight.
  // Thread-safe: CUPTI calls it from whichever thread needs room.
  uint8_t* Acquire();

  // Whether `buffer` is one of this pool's, handed out and not yet back.
  // A buffer CUPTI returns that is not (one of an earlier collector's pool)
  // must not be read as this collector's records. Thread-safe.
  bool InFlight(const uint8_t* buffer) const;

  // Takes back a buffer from Acquire and zeroes it (buffer_bytes(), outside
  // the lock). Returns false, and changes nothing, for a pointer the pool
  // did not hand out or already has back. Thread-safe.
  bool Release(uint8_t* buffer);

  size_t buffer_bytes() const { return buffer_bytes_; }
  int capacity() const { return capacity_; }
  // Counters; each takes the lock.
  int in_flight() const;     // handed out and not yet released
  int allocated() const;     // buffers that exist (<= capacity())
  int64_t acquired() const;  // successful Acquire calls
  int64_t refused() const;   // Acquire calls that returned nullptr

 private:
  struct FreeDelete {
    void operator()(uint8_t* p) const;
  };
  using Buffer = std::unique_ptr<uint8_t[], FreeDelete>;

  const size_t buffer_bytes_;
  const int capacity_;
  mutable std::mutex mu_;
  std::vector<Buffer> buffers_;  // all allocated buffers
  std::vector<bool> in_flight_;  // parallel to buffers_
  std::vector<size_t> free_;     // indices into buffers_, reused last-in first-out
  int64_t acquired_ = 0;
  int64_t refused_ = 0;
};

}  // namespace trainscope::cupti

#endif  // TRAINSCOPE_SDK_CUPTI_BUFFER_POOL_H_
