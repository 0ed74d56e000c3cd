// trainscope/checkpoint.h: checkpoints that survive a kill at any moment.
//
//   absl::StatusOr<trainscope::CheckpointStore> store =
//       trainscope::CheckpointStore::Open({.dir = "ckpt", .keep_last = 3});
//   std::vector<trainscope::CheckpointFile> files = {{"model.pt", bytes}, ...};
//   absl::Status saved = store->Save(step, files, {{"epoch", "3"}});
//   ...
//   absl::StatusOr<trainscope::LoadedCheckpoint> latest = store->LoadLatest();
//   if (latest.ok()) { resume from latest->manifest.step, latest->files ... }
//
// A save writes every file under a temporary directory, fsyncs each, writes
// MANIFEST.json (sizes and XXH3-64 checksums) last and fsyncs it, renames
// the directory into place (step-<step>) and fsyncs the store directory;
// then it updates the `latest` pointer (written and renamed atomically) and
// applies retention. A checkpoint without a valid manifest does not exist.
// Loading verifies every checksum before returning a byte, newest first,
// and falls back to the previous valid checkpoint, saying why. The
// guarantees, per filesystem, are in docs/checkpoint.md.
#ifndef TRAINSCOPE_CHECKPOINT_H_
#define TRAINSCOPE_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trainscope {

class Session;
class CheckpointStore;
struct CheckpointStoreOptions;
namespace internal {
struct CheckpointFaults;
absl::StatusOr<CheckpointStore> OpenCheckpointStoreWithFaults(CheckpointStoreOptions options,
                                                              CheckpointFaults faults);
}  // namespace internal

// One file of a checkpoint. Names are plain file names: letters, digits,
// '.', '_' and '-', not starting with '.', at most 128 bytes.
struct CheckpointFile {
  std::string name;
  std::string bytes;
};

// What MANIFEST.json records about a file.
struct ManifestEntry {
  std::string name;
  uint64_t size = 0;
  uint64_t xxh3 = 0;  // XXH3-64 of the bytes
};

// The manifest: written last, so its presence means the checkpoint is whole.
struct CheckpointManifest {
  int format_version = 1;
  int64_t step = 0;
  double wall_time_unix_s = 0;
  std::vector<ManifestEntry> files;
  std::vector<std::pair<std::string, std::string>> metadata;  // the application's
};

// A verified checkpoint.
struct LoadedCheckpoint {
  CheckpointManifest manifest;
  std::string path;                   // its directory
  std::vector<CheckpointFile> files;  // in manifest order, every checksum verified
  // Newer checkpoints that were skipped, and why: "fell back from step 1200
  // to 1100: checksum mismatch in model.pt".
  std::vector<std::string> fallbacks;
};

// The moments of a save, for tests that kill a writer in each of them and
// for the report's measurements.
enum class SavePhase : int {
  kWritingFiles = 0,
  kSyncingFiles = 1,
  kWritingManifest = 2,
  kRenaming = 3,
  kSyncingDirectory = 4,
  kUpdatingLatest = 5,
  kRetention = 6,
  kDone = 7,
};
const char* SavePhaseName(SavePhase phase);

struct CheckpointStoreOptions {
  std::string dir;
  // Retention: keep the newest keep_last checkpoints, plus every one whose
  // step is a multiple of keep_every (0: none). keep_last >= 1.
  int keep_last = 3;
  int64_t keep_every = 0;
  // Open without the writer's lock, to load only: no cleanup, no saves.
  bool read_only = false;
  // In a multi-rank job, this process's rank: rank 0 takes the lock and
  // cleans up; the others take no lock and only SaveSharded() and load.
  int rank = 0;
  // Faults for tests: trainscope/internal/checkpoint_faults.h.
};

// How the ranks of a multi-rank save agree (trainscope::libtorch::ProcessGroup
// implements it over c10d: an all-reduce of one flag per rank).
class SaveCoordinator {
 public:
  virtual ~SaveCoordinator() = default;
  // Called by every rank with whether its part failed; returns the ranks
  // whose part failed, the same list on every rank. An error when a rank
  // cannot be reached (it died or timed out), naming what is known.
  virtual absl::StatusOr<std::vector<int>> FailedRanks(bool failed) = 0;
};

// A directory of checkpoints, one writer at a time. Movable.
class CheckpointStore {
 public:
  // Opens (creating) the store. A writer takes DIR/.lock (flock); a second
  // writer gets FailedPrecondition naming the holder's pid. A writer removes
  // what crashed saves left: temporary directories (.tmp-*), directories of
  // replaced checkpoints (.trash-*) and step directories without a valid
  // manifest. Errors: the directory's error naming it; InvalidArgument for
  // bad options.
  static absl::StatusOr<CheckpointStore> Open(CheckpointStoreOptions options);
  CheckpointStore(CheckpointStore&&) noexcept;
  CheckpointStore& operator=(CheckpointStore&&) noexcept;
  ~CheckpointStore();

  // Writes checkpoint `step` as described above. A checkpoint of the same
  // step is replaced atomically (renameat2 RENAME_EXCHANGE). On any error
  // (a full disk: ResourceExhausted naming the file) the temporary
  // directory is removed and every committed checkpoint is as it was.
  // Errors: InvalidArgument for a bad file name or a negative step;
  // FailedPrecondition for a read-only store. Cost: the bytes written and
  // fsynced, plus XXH3 over them (memory speed).
  absl::Status Save(int64_t step, const std::vector<CheckpointFile>& files,
                    const std::vector<std::pair<std::string, std::string>>& metadata = {});

  // A multi-rank save: every rank calls it with its own files (named as
  // Save's; stored as "r<rank>.<name>"). Each rank writes and fsyncs its
  // files and a marker (r<rank>.done) into one temporary directory; the
  // coordinator tells every rank whether all parts succeeded; only then does
  // rank 0 write the manifest, listing every rank's files, and commit as
  // Save does, and a second round tells the others whether that worked. A
  // checkpoint some rank did not finish is therefore never committed.
  // Errors (on every rank): Aborted naming the ranks whose part failed;
  // Unavailable when a rank died or timed out (the coordinator's error);
  // then nothing is committed and rank 0 removes the temporary directory.
  absl::Status SaveSharded(int64_t step, int rank, int world_size,
                           const std::vector<CheckpointFile>& files, SaveCoordinator& coordinator,
                           const std::vector<std::pair<std::string, std::string>>& metadata = {});

  // LoadLatest for one rank of a multi-rank checkpoint: returns only that
  // rank's files, with the "r<rank>." prefix removed. Every rank's files are
  // verified, so all ranks settle on the same step (the newest one whole on
  // every rank) even when one shard of a newer step is damaged. Cost: each
  // rank reads the whole checkpoint once.
  absl::StatusOr<LoadedCheckpoint> LoadLatestForRank(int rank) const;

  // The newest checkpoint whose manifest parses and whose every file has
  // the recorded size and checksum, with the reasons newer ones were
  // skipped. Errors: NotFound when there is none (with the reasons).
  absl::StatusOr<LoadedCheckpoint> LoadLatest() const;

  // Steps of the directories that have a manifest that parses, ascending
  // (files are not verified: LoadLatest does that).
  std::vector<int64_t> CommittedSteps() const;

  const std::string& dir() const;

 private:
  friend absl::StatusOr<CheckpointStore> internal::OpenCheckpointStoreWithFaults(
      CheckpointStoreOptions options, internal::CheckpointFaults faults);
  struct Impl;
  explicit CheckpointStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Persists checkpoints on a background thread while training goes on, in
// two phases like CheckFreq: the caller snapshots the state into host memory
// at a step boundary (the blocking part, e.g. TrainingState::Snapshot) and
// hands the bytes to Submit(); the thread writes and commits them through
// the store. At most one save is in flight, so snapshot memory is bounded by
// two checkpoints; the next Submit() waits (kWait) or is skipped (kSkip)
// while one is, and never touches the one being written. The thread's work
// is a kCheckpoint range ("checkpoint.persist").
class AsyncCheckpointer {
 public:
  enum class WhenBusy { kWait, kSkip };

  // Running totals. persist_s and bytes count committed saves only.
  struct Stats {
    int64_t submitted = 0;
    int64_t committed = 0;
    int64_t skipped = 0;  // Submit() calls dropped by kSkip
    int64_t failed = 0;
    double persist_s = 0;  // background write + commit time
    double wait_s = 0;     // time Submit() waited for the previous save
    uint64_t bytes = 0;
  };

  // `store` must outlive this. Starts the thread. With a `session`, each
  // finished save is recorded in it (Session::NoteCheckpointSave: blocking
  // = the snapshot time given to Submit plus its wait) and the session's
  // Finish() waits for the save in flight. The Session may be moved
  // afterwards (this keeps a handle on its run, not on the object); saves
  // after its Finish() are still written, just not reported.
  explicit AsyncCheckpointer(CheckpointStore& store, WhenBusy when_busy = WhenBusy::kWait,
                             Session* session = nullptr);
  // Waits for the save in flight.
  ~AsyncCheckpointer();
  AsyncCheckpointer(const AsyncCheckpointer&) = delete;
  AsyncCheckpointer& operator=(const AsyncCheckpointer&) = delete;

  // Queues checkpoint `step`. Returns false when skipped (kSkip, a save in
  // flight). Cost: a move of the vectors; with kWait, the wait.
  // `snapshot_s`: how long the caller's snapshot took (for the report).
  bool Submit(int64_t step, std::vector<CheckpointFile> files,
              std::vector<std::pair<std::string, std::string>> metadata = {},
              double snapshot_s = 0);
  // The files of the last save the thread finished, for the next snapshot
  // to copy into: their memory is already mapped, so a snapshot costs about
  // one memcpy (bench/checkpoint_bench). Empty when there are none (each
  // finished save's files are handed out once; the next Submit frees them
  // if they were not taken). Waits for the save in flight.
  std::vector<CheckpointFile> TakeBuffers();
  // Waits until nothing is in flight; returns the first error of a save
  // since the last Wait() (the store's, naming the file), or OK.
  absl::Status Wait();
  Stats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The manifest as JSON, and back. Parse errors name `source` and the field;
// a manifest whose file names leave the store (a '/', "..", an absolute
// path) is InvalidArgument.
std::string ManifestToJson(const CheckpointManifest& manifest);
absl::StatusOr<CheckpointManifest> ParseManifest(std::string_view json, std::string_view source);

}  // namespace trainscope

#endif  // TRAINSCOPE_CHECKPOINT_H_
