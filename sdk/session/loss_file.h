// sdk/session/loss_file.h: RecordLoss's file, loss.jsonl (one line a call),
// and its counts for report.loss_curve. Internal.
//
// Its own lock (absl::Mutex, checked by Clang's thread-safety analysis):
// writing a line never waits on the run notes. Memory: a 64 KiB write
// buffer from the first line to Close (docs/architecture.md, "Memory").
#ifndef TRAINSCOPE_SDK_SESSION_LOSS_FILE_H_
#define TRAINSCOPE_SDK_SESSION_LOSS_FILE_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "trainscope/report.h"

namespace trainscope {

class LossFile {
 public:
  // `name` in `dir`, created at the first Append.
  LossFile(std::string dir, std::string name);
  ~LossFile();
  LossFile(const LossFile&) = delete;
  LossFile& operator=(const LossFile&) = delete;

  // One line, {"step": S, "loss": V} (null when not finite; "skipped": true
  // when the step's update was skipped). Cost: a lock and a buffered write.
  // Errors: FailedPrecondition after Close; the file's creation or write
  // error, naming it, returned again by every later call (the lines are
  // counted as lost).
  absl::Status Append(int64_t step, double value, bool skipped) ABSL_LOCKS_EXCLUDED(mu_);
  // Closes the file; its counts, when any line was asked for.
  std::optional<LossCurve> Close() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Status Open() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string dir_, name_;
  absl::Mutex mu_;
  LossCurve curve_ ABSL_GUARDED_BY(mu_);  // `file` empty until the first call
  std::string path_ ABSL_GUARDED_BY(mu_);
  std::FILE* file_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::unique_ptr<char[]> buffer_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);  // the first error
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_SDK_SESSION_LOSS_FILE_H_
