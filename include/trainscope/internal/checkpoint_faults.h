// trainscope/internal/checkpoint_faults.h: faults injected into a
// CheckpointStore, for tests and the samples' kill and full-disk drills.
// Not part of the public API: it may change without notice.
//
//   trainscope::internal::CheckpointFaults faults;
//   faults.fail_writes_after_bytes = 60000;  // a disk that fills up
//   absl::StatusOr<trainscope::CheckpointStore> store =
//       trainscope::internal::OpenCheckpointStoreWithFaults(options, faults);
#ifndef TRAINSCOPE_INTERNAL_CHECKPOINT_FAULTS_H_
#define TRAINSCOPE_INTERNAL_CHECKPOINT_FAULTS_H_

#include <cerrno>
#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "trainscope/checkpoint.h"

namespace trainscope::internal {

struct CheckpointFaults {
  // Called as a save enters each phase, on the saving thread (a test kills
  // the writer there).
  std::function<void(SavePhase)> on_phase;
  // >= 0: file writes fail with `fail_errno` once the store has written
  // that many bytes (ENOSPC: a full disk).
  int64_t fail_writes_after_bytes = -1;
  int fail_errno = ENOSPC;
};

// CheckpointStore::Open with `faults` injected. Errors as Open's.
absl::StatusOr<CheckpointStore> OpenCheckpointStoreWithFaults(CheckpointStoreOptions options,
                                                              CheckpointFaults faults);

}  // namespace trainscope::internal

#endif  // TRAINSCOPE_INTERNAL_CHECKPOINT_FAULTS_H_
