// The activity buffer pool. See buffer_pool.h.
#include "sdk/cupti/buffer_pool.h"

#include <new>

namespace trainscope::cupti {
namespace {

size_t RoundUp(size_t bytes) {
  const size_t rounded = (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  return rounded == 0 ? kBufferAlignment : rounded;
}

}  // namespace

void BufferPool::AlignedDelete::operator()(uint8_t* p) const {
  ::operator delete[](p, std::align_val_t(kBufferAlignment));
}

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
    auto* memory = static_cast<uint8_t*>(
        ::operator new[](buffer_bytes_, std::align_val_t(kBufferAlignment), std::nothrow));
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

bool BufferPool::Release(uint8_t* buffer) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (buffers_[i].get() != buffer) continue;
    if (!in_flight_[i]) return false;
    in_flight_[i] = false;
    free_.push_back(i);
    return true;
  }
  return false;
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
