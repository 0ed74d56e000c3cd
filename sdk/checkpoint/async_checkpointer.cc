// AsyncCheckpointer: saves persisted on a background thread. See
// trainscope/checkpoint.h and docs/checkpoint.md, "Asynchronous saves".
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "trainscope/checkpoint.h"
#include "trainscope/scope.h"
#include "trainscope/session.h"

namespace trainscope {

struct AsyncCheckpointer::Impl {
  CheckpointStore& store;
  WhenBusy when_busy;
  mutable std::mutex mu;
  std::condition_variable cv;
  struct Job {
    int64_t step;
    std::vector<CheckpointFile> files;
    std::vector<std::pair<std::string, std::string>> metadata;
    double blocking_s = 0;  // the caller's snapshot plus Submit's wait
  };
  std::optional<Session> session;  // borrowed: stays valid when the caller's Session moves
  int hook = 0;
  std::optional<Job> job;             // queued or being written
  std::vector<CheckpointFile> spare;  // the last finished job's buffers
  bool stop = false;
  absl::Status first_error;
  Stats stats;
  std::thread thread;

  Impl(CheckpointStore& s, WhenBusy w) : store(s), when_busy(w) {}

  void Loop() {
    NameThisThread("checkpoint");
    static const NameId name = InternName("checkpoint.persist");
    std::unique_lock<std::mutex> lock(mu);
    while (true) {
      cv.wait(lock, [&] { return stop || job.has_value(); });
      if (!job) return;
      Job& j = *job;
      lock.unlock();
      const auto started = std::chrono::steady_clock::now();
      absl::Status status;
      uint64_t bytes = 0;
      {
        PhaseScope persist(Phase::kCheckpoint, name);
        status = store.Save(j.step, j.files, j.metadata);
        for (const CheckpointFile& f : j.files) bytes += f.bytes.size();
      }
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      lock.lock();
      if (session.has_value())
        session->NoteCheckpointSave(j.blocking_s, seconds, bytes, status.ok());
      if (status.ok()) {
        ++stats.committed;
        stats.persist_s += seconds;
        stats.bytes += bytes;
      } else {
        ++stats.failed;
        if (first_error.ok()) first_error = status;
      }
      spare = std::move(job->files);
      job.reset();
      cv.notify_all();
    }
  }
};

AsyncCheckpointer::AsyncCheckpointer(CheckpointStore& store, WhenBusy when_busy, Session* session)
    : impl_(std::make_unique<Impl>(store, when_busy)) {
  if (session != nullptr) impl_->session.emplace(internal::BorrowSession(*session));
  impl_->thread = std::thread([this] { impl_->Loop(); });
  if (session != nullptr) {
    impl_->hook = impl_->session->AddFinishHook([this] {
      std::unique_lock<std::mutex> lock(impl_->mu);
      impl_->cv.wait(lock, [&] { return !impl_->job.has_value(); });
    });
  }
}

AsyncCheckpointer::~AsyncCheckpointer() {
  if (impl_->session.has_value()) impl_->session->RemoveFinishHook(impl_->hook);
  {
    std::unique_lock<std::mutex> lock(impl_->mu);
    impl_->cv.wait(lock, [&] { return !impl_->job.has_value(); });
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  impl_->thread.join();
}

bool AsyncCheckpointer::Submit(int64_t step, std::vector<CheckpointFile> files,
                               std::vector<std::pair<std::string, std::string>> metadata,
                               double snapshot_s) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  ++impl_->stats.submitted;
  double waited = 0;
  if (impl_->job.has_value()) {
    if (impl_->when_busy == WhenBusy::kSkip) {
      ++impl_->stats.skipped;
      return false;
    }
    const auto started = std::chrono::steady_clock::now();
    impl_->cv.wait(lock, [&] { return !impl_->job.has_value(); });
    waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    impl_->stats.wait_s += waited;
  }
  impl_->job = Impl::Job{step, std::move(files), std::move(metadata), snapshot_s + waited};
  // A spare the caller did not take back is not wanted: freed (outside the
  // lock), so at most two checkpoints are in memory (this one and the next
  // snapshot), not three.
  std::vector<CheckpointFile> unused;
  unused.swap(impl_->spare);
  lock.unlock();
  impl_->cv.notify_all();
  return true;
}

std::vector<CheckpointFile> AsyncCheckpointer::TakeBuffers() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait(lock, [&] { return !impl_->job.has_value(); });
  return std::move(impl_->spare);
}

absl::Status AsyncCheckpointer::Wait() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait(lock, [&] { return !impl_->job.has_value(); });
  absl::Status status = impl_->first_error;
  impl_->first_error = absl::OkStatus();
  return status;
}

AsyncCheckpointer::Stats AsyncCheckpointer::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

}  // namespace trainscope
