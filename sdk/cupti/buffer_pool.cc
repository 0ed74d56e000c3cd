// The activity buffer pool. See buffer_pool.h.
#include "sdk/cupti/buffer_pool.h"

#include <cstdlib>
#include <cstring>

namespace trainscope::cupti {
namespace {

size_t RoundUp(size_t bytes) {
  const size_t rounded = (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  return rounded == 0 ? kBufferAlignment : rounded;
}

}  // namespace

void BufferPool::FreeDelete::operator()(uint8_t* p) const { std::free(p); }

BufferPool::BufferPool(size_t buffer_bytes, int max_buffers)
    : buffer_bytes_(RoundUp(buffer_bytes)), capacity_(max_buffers < 1 ? 1 : max_buffers) {
  buffers_.reserve(static_cast<size_t>(capacity_));
}

BufferPool::~BufferPool() = default;

uint8_t* BufferPool::Acquire() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else if (buffers_.size() < static_cast<size_t>(capacity_)) {
    // calloc's memory is aligned for any type (16 bytes), and a large block
    // comes zeroed from the OS without a pass over it.
    auto* memory = static_cast<uint8_t*>(std::calloc(1, buffer_bytes_));
    if (memory == nullptr) {
      ++refused_;
      return nullptr;
    }
    buffers_.emplace_back(memory);
    in_flight_.push_back(false);
    index = buffers_.size() - 1;
  } else {
    ++refused_;
    return nullptr;
  }
  in_flight_[index] = true;
  ++acquired_;
  return buffers_[index].get();
}

bool BufferPool::InFlight(const uint8_t* buffer) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (buffers_[i].get() == buffer) return in_flight_[i];
  }
  return false;
}

bool BufferPool::Release(uint8_t* buffer) {
  size_t index = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    index = buffers_.size();
    for (size_t i = 0; i < buffers_.size(); ++i) {
      if (buffers_[i].get() == buffer) index = i;
    }
    if (index == buffers_.size() || !in_flight_[index]) return false;
  }
  // Still in flight, so no one else touches it: zeroed outside the lock.
  std::memset(buffer, 0, buffer_bytes_);
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_[index] = false;
  free_.push_back(index);
  return true;
}

int BufferPool::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(buffers_.size() - free_.size());
}

int BufferPool::allocated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(buffers_.size());
}

int64_t BufferPool::acquired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return acquired_;
}

int64_t BufferPool::refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

}  // namespace trainscope::cupti
