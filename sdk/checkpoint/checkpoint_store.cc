// CheckpointStore: atomic, verified checkpoints. See trainscope/checkpoint.h
// and docs/checkpoint.md. The manifest is manifest.cc, the background saves
// async_checkpointer.cc, the names in a store layout.h.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "sdk/checkpoint/layout.h"
#include "sdk/ground/files.h"
#include "trainscope/checkpoint.h"
#include "trainscope/internal/checkpoint_faults.h"

namespace trainscope {
namespace {

using checkpoint::kLatest;
using checkpoint::kLock;
using checkpoint::kManifest;
using checkpoint::kMaxStep;
using checkpoint::StepDirName;
using checkpoint::StepOfDirName;
using checkpoint::ValidFileName;
using ground::FsyncPath;
using ground::ListDir;
using ground::ReadRegular;
using ground::ReadRegularAt;

absl::Status Errno(int error, std::string_view what) { return ground::ErrnoStatus(error, what); }

// A checkpoint directory of the store, opened without following a symlink
// (a step-* link to a directory elsewhere is not a checkpoint of this store).
class StepDir {
 public:
  explicit StepDir(const std::string& path)
      : path_(path), fd_(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) {
    if (fd_ < 0) error_ = errno;
  }
  ~StepDir() {
    if (fd_ >= 0) close(fd_);
  }
  StepDir(const StepDir&) = delete;
  StepDir& operator=(const StepDir&) = delete;
  bool ok() const { return fd_ >= 0; }
  // The size of the regular file `name`, or -1 (absent, not regular, a link).
  int64_t Size(const std::string& name) const {
    struct stat st;
    if (!ok() || fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode)) {
      return -1;
    }
    return static_cast<int64_t>(st.st_size);
  }
  // A step-* name that is a symlink or a file, not a directory.
  bool not_a_directory() const { return error_ == ELOOP || error_ == ENOTDIR; }
  // Whether `name` is certainly absent (ENOENT), as opposed to present or
  // unreadable for another reason (EIO, EACCES, EMFILE, ...).
  bool Lacks(const std::string& name) const {
    struct stat st;
    return ok() && fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT;
  }
  // Why it could not be opened.
  std::string problem() const {
    return not_a_directory() ? "not a directory of the store (a symlink or a file)"
                             : std::string(Errno(error_, "opening " + path_).message());
  }
  absl::StatusOr<std::string> Read(const std::string& name) const {
    return ReadRegularAt(fd_, name, path_ + "/" + name);
  }

 private:
  std::string path_;
  int fd_ = -1;
  int error_ = 0;
};

}  // namespace

const char* SavePhaseName(SavePhase phase) {
  switch (phase) {
    case SavePhase::kWritingFiles:
      return "writing_files";
    case SavePhase::kSyncingFiles:
      return "syncing_files";
    case SavePhase::kWritingManifest:
      return "writing_manifest";
    case SavePhase::kRenaming:
      return "renaming";
    case SavePhase::kSyncingDirectory:
      return "syncing_directory";
    case SavePhase::kUpdatingLatest:
      return "updating_latest";
    case SavePhase::kRetention:
      return "retention";
    case SavePhase::kDone:
      return "done";
  }
  return "?";
}

struct CheckpointStore::Impl {
  CheckpointStoreOptions options;
  internal::CheckpointFaults faults;
  int lock_fd = -1;
  int64_t bytes_written = 0;

  ~Impl() {
    if (lock_fd >= 0) close(lock_fd);  // releases the flock
  }

  void Phase(SavePhase phase) const {
    if (faults.on_phase) faults.on_phase(phase);
  }

  // Writes `bytes` to a new file at path and fsyncs it (entering
  // kSyncingFiles for a checkpoint's own files).
  absl::Status WriteFile(const std::string& path, std::string_view bytes, bool data_file = false) {
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return Errno(errno, fmt::format("creating {}", path));
    // In runs of at most 8 MiB, so that the fault hook (tests) can cut the
    // file short where it says.
    const std::string what = fmt::format("writing {}", path);
    for (size_t done = 0; done < bytes.size();) {
      size_t chunk = std::min<size_t>(bytes.size() - done, 8 << 20);
      if (faults.fail_writes_after_bytes >= 0) {
        const int64_t left = faults.fail_writes_after_bytes - bytes_written;
        if (left <= 0) {
          close(fd);
          return Errno(faults.fail_errno, what);
        }
        chunk = std::min<size_t>(chunk, static_cast<size_t>(left));
      }
      if (absl::Status status = ground::WriteAll(fd, bytes.substr(done, chunk), what);
          !status.ok()) {
        close(fd);
        return status;
      }
      done += chunk;
      bytes_written += static_cast<int64_t>(chunk);
    }
    if (data_file) Phase(SavePhase::kSyncingFiles);
    const int rc = fsync(fd);
    const int error = errno;
    if (close(fd) != 0 && rc == 0) return Errno(errno, fmt::format("closing {}", path));
    if (rc != 0) return Errno(error, fmt::format("fsync of {}", path));
    return absl::OkStatus();
  }

  // Step directories whose manifest parses, with it, ascending.
  std::vector<std::pair<int64_t, std::string>> Committed() const {
    std::vector<std::pair<int64_t, std::string>> out;
    for (const std::string& name : ListDir(options.dir)) {
      const int64_t step = StepOfDirName(name);
      if (step < 0) continue;
      const std::string path = options.dir + "/" + name;
      const StepDir step_dir(path);
      if (!step_dir.ok()) continue;
      absl::StatusOr<std::string> json = step_dir.Read(kManifest);
      if (!json.ok()) continue;
      absl::StatusOr<CheckpointManifest> m = ParseManifest(*json, path);
      if (m.ok() && m->step == step) out.emplace_back(step, path);
    }
    return out;
  }

  // Removes what crashed saves left: temporaries, trash, step directories
  // with no manifest at all (a save renames only after its manifest is
  // durable, so these are torn by a lost directory update) and step-*
  // links. A step directory whose manifest exists but cannot be read or
  // does not parse is kept: LoadLatest skips it and says why, and an
  // unreadable manifest (EIO, EACCES, EMFILE) may belong to a good
  // checkpoint.
  void CleanUp() {
    for (const std::string& name : ListDir(options.dir)) {
      const std::string path = options.dir + "/" + name;
      bool remove = name.rfind(".tmp-", 0) == 0 || name.rfind(".trash-", 0) == 0;
      if (!remove && StepOfDirName(name) >= 0) {
        const StepDir step_dir(path);
        remove = step_dir.not_a_directory() || step_dir.Lacks(kManifest);
      }
      if (remove) ground::RemoveFlatDirectory(path);
    }
  }

  absl::Status UpdateLatest(const std::string& name) {
    const std::string tmp = fmt::format("{}/.tmp-latest-{}", options.dir, getpid());
    unlink(tmp.c_str());
    if (absl::Status s = WriteFile(tmp, name + "\n"); !s.ok()) {
      unlink(tmp.c_str());
      return s;
    }
    const std::string latest = options.dir + "/" + kLatest;
    if (rename(tmp.c_str(), latest.c_str()) != 0) {
      const int error = errno;
      unlink(tmp.c_str());
      return Errno(error, fmt::format("renaming {} to {}", tmp, latest));
    }
    return FsyncPath(options.dir, O_RDONLY | O_DIRECTORY);
  }

  absl::StatusOr<LoadedCheckpoint> Load(const std::string& prefix) const;
  // Rename into place, fsync, latest, retention: the commit of `tmp` as `step`.
  absl::Status Commit(const std::string& tmp, int64_t step);
  // SaveSharded's stages: this rank's files and marker in `tmp`; rank 0's
  // manifest of every rank's part, and the commit.
  absl::Status WriteShard(const std::string& tmp, int rank, int64_t step,
                          const std::vector<CheckpointFile>& files);
  absl::Status CommitShards(const std::string& tmp, int64_t step, int world_size,
                            const std::vector<std::pair<std::string, std::string>>& metadata);

  void ApplyRetention(int64_t newest) {
    std::vector<std::pair<int64_t, std::string>> committed = Committed();
    const size_t n = committed.size();
    for (size_t k = 0; k < n; ++k) {
      const int64_t step = committed[k].first;
      const bool recent = k + static_cast<size_t>(options.keep_last) >= n;
      const bool milestone = options.keep_every > 0 && step % options.keep_every == 0;
      if (recent || milestone || step == newest) continue;
      // Renamed away first, so that a kill mid-delete leaves a .trash-
      // directory (cleaned at the next Open), never a torn step directory.
      const std::string trash =
          fmt::format("{}/.trash-{}-{}", options.dir, StepDirName(step), getpid());
      if (rename(committed[k].second.c_str(), trash.c_str()) == 0)
        ground::RemoveFlatDirectory(trash);
    }
  }
};

CheckpointStore::CheckpointStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CheckpointStore::CheckpointStore(CheckpointStore&&) noexcept = default;
CheckpointStore& CheckpointStore::operator=(CheckpointStore&&) noexcept = default;
CheckpointStore::~CheckpointStore() = default;

const std::string& CheckpointStore::dir() const { return impl_->options.dir; }

absl::StatusOr<CheckpointStore> CheckpointStore::Open(CheckpointStoreOptions options) {
  return internal::OpenCheckpointStoreWithFaults(std::move(options), {});
}

absl::StatusOr<CheckpointStore> internal::OpenCheckpointStoreWithFaults(
    CheckpointStoreOptions options, CheckpointFaults faults) {
  using Impl = CheckpointStore::Impl;
  if (options.dir.empty()) return absl::InvalidArgumentError("CheckpointStore: dir is empty");
  if (options.keep_last < 1) {
    return absl::InvalidArgumentError("CheckpointStore: keep_last must be at least 1");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->faults = std::move(faults);
  const std::string& dir = impl->options.dir;
  if (impl->options.read_only) {
    struct stat st;
    if (stat(dir.c_str(), &st) != 0) return Errno(errno, fmt::format("checkpoint store {}", dir));
    return CheckpointStore(std::move(impl));
  }
  if (absl::Status s = ground::EnsureWritableDirectory(dir); !s.ok()) return s;
  if (impl->options.rank > 0) return CheckpointStore(std::move(impl));  // rank 0 owns the store
  const std::string lock = dir + "/" + kLock;
  impl->lock_fd = open(lock.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (impl->lock_fd < 0) return Errno(errno, fmt::format("opening {}", lock));
  if (flock(impl->lock_fd, LOCK_EX | LOCK_NB) != 0) {
    if (const int error = errno; error != EWOULDBLOCK) {
      // Not "in use": this filesystem cannot lock (ENOLCK, EOPNOTSUPP on
      // some NFS or FUSE mounts). The destructor closes the fd.
      return absl::UnavailableError(fmt::format(
          "checkpoint store {}: cannot lock {} ({}); keep the store on a filesystem with flock "
          "(docs/checkpoint.md)",
          dir, lock, std::strerror(error)));
    }
    char holder[32] = {0};
    const ssize_t n = pread(impl->lock_fd, holder, sizeof holder - 1, 0);
    std::string who = n > 0 ? std::string(holder, static_cast<size_t>(n)) : "unknown";
    while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
    return absl::FailedPreconditionError(fmt::format(
        "checkpoint store {} is in use by another writer (pid {}); one writer per store", dir,
        who));
  }
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(impl->lock_fd, 0) == 0) {
    const ssize_t written = pwrite(impl->lock_fd, pid.data(), pid.size(), 0);
    static_cast<void>(written);
  }
  impl->CleanUp();
  return CheckpointStore(std::move(impl));
}

absl::Status CheckpointStore::Save(
    int64_t step, const std::vector<CheckpointFile>& files,
    const std::vector<std::pair<std::string, std::string>>& metadata) {
  Impl& s = *impl_;
  if (s.options.read_only) {
    return absl::FailedPreconditionError(
        fmt::format("checkpoint store {} was opened read-only", s.options.dir));
  }
  if (step < 0 || step > kMaxStep) {
    return absl::InvalidArgumentError(
        fmt::format("CheckpointStore::Save: step {} is outside 0..{}", step, kMaxStep));
  }
  CheckpointManifest manifest;
  manifest.step = step;
  manifest.wall_time_unix_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  manifest.metadata = metadata;
  for (const CheckpointFile& f : files) {
    if (!ValidFileName(f.name)) {
      return absl::InvalidArgumentError(fmt::format(
          "CheckpointStore::Save: \"{}\" is not a plain file name (letters, digits, '.', '_', "
          "'-'; no leading '.'; not {})",
          f.name, kManifest));
    }
    for (const ManifestEntry& e : manifest.files) {
      if (e.name == f.name) {
        return absl::InvalidArgumentError(
            fmt::format("CheckpointStore::Save: \"{}\" appears twice", f.name));
      }
    }
    manifest.files.push_back({f.name, f.bytes.size(), XXH3_64bits(f.bytes.data(), f.bytes.size())});
  }
  const std::string name = StepDirName(step);
  const std::string tmp = fmt::format("{}/.tmp-{}-{}", s.options.dir, name, getpid());
  ground::RemoveFlatDirectory(tmp);
  auto fail = [&](absl::Status status) {
    ground::RemoveFlatDirectory(tmp);
    return status;
  };
  if (mkdir(tmp.c_str(), 0755) != 0) return Errno(errno, fmt::format("creating {}", tmp));
  for (const CheckpointFile& f : files) {
    s.Phase(SavePhase::kWritingFiles);
    if (absl::Status st = s.WriteFile(tmp + "/" + f.name, f.bytes, /*data_file=*/true); !st.ok()) {
      return fail(st);
    }
  }
  s.Phase(SavePhase::kWritingManifest);
  if (absl::Status st = s.WriteFile(tmp + "/" + kManifest, ManifestToJson(manifest)); !st.ok()) {
    return fail(st);
  }
  if (absl::Status st = FsyncPath(tmp, O_RDONLY | O_DIRECTORY); !st.ok()) return fail(st);
  return s.Commit(tmp, step);
}

absl::Status CheckpointStore::Impl::Commit(const std::string& tmp, int64_t step) {
  const std::string name = StepDirName(step);
  Phase(SavePhase::kRenaming);
  const std::string final_path = options.dir + "/" + name;
  std::string replaced;
  if (rename(tmp.c_str(), final_path.c_str()) != 0) {
    if (errno != ENOTEMPTY && errno != EEXIST) {
      const absl::Status status = Errno(errno, fmt::format("renaming {} to {}", tmp, final_path));
      ground::RemoveFlatDirectory(tmp);
      return status;
    }
    // The same step again (after a resume): swap atomically, then drop the
    // old one. At every moment final_path holds a whole checkpoint.
    if (renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_path.c_str(), RENAME_EXCHANGE) != 0) {
      const absl::Status status =
          Errno(errno, fmt::format("exchanging {} with {}", tmp, final_path));
      ground::RemoveFlatDirectory(tmp);
      return status;
    }
    replaced = fmt::format("{}/.trash-{}-{}", options.dir, name, getpid());
    if (rename(tmp.c_str(), replaced.c_str()) != 0) replaced = tmp;
  }
  Phase(SavePhase::kSyncingDirectory);
  if (absl::Status st = FsyncPath(options.dir, O_RDONLY | O_DIRECTORY); !st.ok()) return st;
  if (!replaced.empty()) ground::RemoveFlatDirectory(replaced);
  Phase(SavePhase::kUpdatingLatest);
  if (absl::Status st = UpdateLatest(name); !st.ok()) return st;
  Phase(SavePhase::kRetention);
  ApplyRetention(step);
  Phase(SavePhase::kDone);
  return absl::OkStatus();
}

absl::Status CheckpointStore::Impl::WriteShard(const std::string& tmp, int rank, int64_t step,
                                               const std::vector<CheckpointFile>& files) {
  const std::string prefix = fmt::format("r{}.", rank);
  CheckpointManifest part;
  part.step = step;
  if (mkdir(tmp.c_str(), 0755) != 0 && errno != EEXIST) {
    return Errno(errno, fmt::format("creating {}", tmp));
  }
  for (const CheckpointFile& f : files) {
    if (!ValidFileName(f.name)) {
      return absl::InvalidArgumentError(fmt::format("\"{}\" is not a plain file name", f.name));
    }
    Phase(SavePhase::kWritingFiles);
    absl::Status written = WriteFile(tmp + "/" + prefix + f.name, f.bytes, /*data_file=*/true);
    part.files.push_back(
        {prefix + f.name, f.bytes.size(), XXH3_64bits(f.bytes.data(), f.bytes.size())});
    if (!written.ok()) return written;
  }
  absl::Status marked = WriteFile(fmt::format("{}/r{}.done", tmp, rank), ManifestToJson(part));
  if (!marked.ok()) return marked;
  return FsyncPath(tmp, O_RDONLY | O_DIRECTORY);
}

absl::Status CheckpointStore::Impl::CommitShards(
    const std::string& tmp, int64_t step, int world_size,
    const std::vector<std::pair<std::string, std::string>>& metadata) {
  CheckpointManifest manifest;
  manifest.step = step;
  manifest.wall_time_unix_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  manifest.metadata = metadata;
  manifest.metadata.emplace_back("world_size", std::to_string(world_size));
  absl::Status committed = absl::OkStatus();
  for (int r = 0; r < world_size && committed.ok(); ++r) {
    const std::string marker = fmt::format("{}/r{}.done", tmp, r);
    absl::StatusOr<std::string> json = ReadRegular(marker);
    absl::StatusOr<CheckpointManifest> their =
        json.ok() ? ParseManifest(*json, marker)
                  : absl::StatusOr<CheckpointManifest>(json.status());
    if (!their.ok()) {
      committed = their.status();
      break;
    }
    for (ManifestEntry& e : their->files) manifest.files.push_back(std::move(e));
  }
  if (committed.ok()) {
    Phase(SavePhase::kWritingManifest);
    committed = WriteFile(tmp + "/" + kManifest, ManifestToJson(manifest));
  }
  if (committed.ok()) committed = FsyncPath(tmp, O_RDONLY | O_DIRECTORY);
  if (!committed.ok()) {
    ground::RemoveFlatDirectory(tmp);
    return committed;
  }
  return Commit(tmp, step);
}

namespace {

std::string RankList(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace

absl::Status CheckpointStore::SaveSharded(
    int64_t step, int rank, int world_size, const std::vector<CheckpointFile>& files,
    SaveCoordinator& coordinator,
    const std::vector<std::pair<std::string, std::string>>& metadata) {
  Impl& s = *impl_;
  if (s.options.read_only || rank != s.options.rank || world_size < 1 || rank < 0 ||
      rank >= world_size || step < 0 || step > kMaxStep) {
    return absl::InvalidArgumentError(fmt::format(
        "CheckpointStore::SaveSharded: rank {} of {} at step {} (the store was opened for rank "
        "{}{})",
        rank, world_size, step, s.options.rank, s.options.read_only ? ", read-only" : ""));
  }
  const std::string tmp = fmt::format("{}/.tmp-{}-sharded", s.options.dir, StepDirName(step));
  // This rank's part: its files and its marker, fsynced.
  const absl::Status mine = s.WriteShard(tmp, rank, step, files);
  auto abandon = [&](absl::Status status) {
    if (rank == 0) ground::RemoveFlatDirectory(tmp);
    return status;
  };
  // Round 1: did every part succeed?
  absl::StatusOr<std::vector<int>> failed = coordinator.FailedRanks(!mine.ok());
  if (!failed.ok()) {
    return abandon(absl::UnavailableError(
        fmt::format("checkpoint step {} not committed: the ranks could not agree ({})", step,
                    std::string(failed.status().message()))));
  }
  if (!failed->empty()) {
    return abandon(absl::AbortedError(
        fmt::format("checkpoint step {} not committed: rank(s) {} failed to write their part{}",
                    step, RankList(*failed),
                    mine.ok() ? "" : fmt::format(" (here: {})", std::string(mine.message())))));
  }
  // Rank 0 commits: one manifest listing every rank's files.
  const absl::Status committed =
      rank == 0 ? s.CommitShards(tmp, step, world_size, metadata) : absl::OkStatus();
  // Round 2: did the commit work?
  absl::StatusOr<std::vector<int>> outcome = coordinator.FailedRanks(!committed.ok());
  if (!committed.ok()) return committed;
  if (!outcome.ok()) {
    return absl::UnavailableError(
        fmt::format("checkpoint step {}: cannot learn whether rank 0 committed it ({})", step,
                    std::string(outcome.status().message())));
  }
  if (!outcome->empty()) {
    return absl::AbortedError(
        fmt::format("checkpoint step {} not committed: rank 0 failed to commit it", step));
  }
  return absl::OkStatus();
}

std::vector<int64_t> CheckpointStore::CommittedSteps() const {
  std::vector<int64_t> steps;
  for (const auto& [step, path] : impl_->Committed()) steps.push_back(step);
  return steps;
}

absl::StatusOr<LoadedCheckpoint> CheckpointStore::LoadLatest() const { return impl_->Load(""); }

absl::StatusOr<LoadedCheckpoint> CheckpointStore::LoadLatestForRank(int rank) const {
  return impl_->Load(fmt::format("r{}.", rank));
}

absl::StatusOr<LoadedCheckpoint> CheckpointStore::Impl::Load(const std::string& prefix) const {
  std::vector<std::string> skipped;  // "step 1200: <why>"
  std::vector<int64_t> skipped_steps;
  std::vector<std::string> names = ListDir(options.dir);
  std::reverse(names.begin(), names.end());  // newest step first (zero-padded names)
  for (const std::string& name : names) {
    const int64_t step = StepOfDirName(name);
    if (step < 0) continue;
    const std::string path = options.dir + "/" + name;
    auto skip = [&](const std::string& why) {
      skipped.push_back(why);
      skipped_steps.push_back(step);
    };
    const StepDir step_dir(path);
    if (!step_dir.ok()) {
      skip(step_dir.problem());
      continue;
    }
    absl::StatusOr<std::string> json = step_dir.Read(kManifest);
    if (!json.ok()) {
      skip(fmt::format("no readable manifest ({})", std::string(json.status().message())));
      continue;
    }
    absl::StatusOr<CheckpointManifest> manifest = ParseManifest(*json, path + "/" + kManifest);
    if (!manifest.ok()) {
      skip(std::string(manifest.status().message()));
      continue;
    }
    if (manifest->step != step) {
      skip(fmt::format("its manifest says step {}", manifest->step));
      continue;
    }
    LoadedCheckpoint loaded;
    loaded.path = path;
    std::string problem;
    for (const ManifestEntry& e : manifest->files) {
      // Another rank's file is verified too (and not kept), so that every
      // rank settles on the same step: the newest one whole on all ranks.
      const bool mine = e.name.compare(0, prefix.size(), prefix) == 0;
      // The size first, so a huge planted file is never read into memory.
      if (const int64_t size = step_dir.Size(e.name);
          size >= 0 && static_cast<uint64_t>(size) != e.size) {
        problem =
            fmt::format("{} is {} bytes, the manifest says {} (truncated?)", e.name, size, e.size);
        break;
      }
      absl::StatusOr<std::string> bytes = step_dir.Read(e.name);
      if (!bytes.ok()) {
        problem = fmt::format("missing or unreadable {} ({})", e.name,
                              std::string(bytes.status().message()));
        break;
      }
      if (bytes->size() != e.size) {
        problem = fmt::format("{} is {} bytes, the manifest says {} (truncated?)", e.name,
                              bytes->size(), e.size);
        break;
      }
      if (XXH3_64bits(bytes->data(), bytes->size()) != e.xxh3) {
        problem = fmt::format("checksum mismatch in {}", e.name);
        break;
      }
      if (mine) loaded.files.push_back({e.name.substr(prefix.size()), std::move(*bytes)});
    }
    if (!problem.empty()) {
      skip(problem);
      continue;
    }
    loaded.manifest = std::move(*manifest);
    for (size_t k = 0; k < skipped.size(); ++k) {
      loaded.fallbacks.push_back(
          fmt::format("fell back from step {} to {}: {}", skipped_steps[k], step, skipped[k]));
    }
    return loaded;
  }
  std::string why;
  for (size_t k = 0; k < skipped.size(); ++k) {
    why += fmt::format("; step {}: {}", skipped_steps[k], skipped[k]);
  }
  return absl::NotFoundError(fmt::format("no valid checkpoint in {}{}", options.dir, why));
}

}  // namespace trainscope
