// CheckpointStore on real files and real processes: round trip, retention,
// corruption of every kind, a second writer, a full disk, leftovers of
// crashed saves, and writers SIGKILLed in every phase of a save.
#include "trainscope/checkpoint.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "fmt/format.h"
#include "tests/test_util.h"
#include "trainscope/internal/checkpoint_faults.h"
#include "trainscope/polyaxon/polyaxon.h"
#include "trainscope/preemption.h"
#include "trainscope/trainscope.h"

namespace trainscope {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

// Deterministic content of file `k` of checkpoint `step`.
std::string Content(int64_t step, int k, size_t size) {
  std::mt19937_64 rng(static_cast<uint64_t>(step) * 131 + static_cast<uint64_t>(k));
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; i += 8) {
    const uint64_t v = rng();
    std::memcpy(bytes.data() + i, &v, std::min<size_t>(8, size - i));
  }
  return bytes;
}

std::vector<CheckpointFile> Files(int64_t step, size_t size = 4096) {
  return {{"model.pt", Content(step, 0, size)},
          {"optimizer.pt", Content(step, 1, size / 2 + 7)},
          {"state.json", "{\"step\": " + std::to_string(step) + "}"}};
}

CheckpointStore OpenOrDie(const std::string& dir, int keep_last = 3, int64_t keep_every = 0) {
  CheckpointStoreOptions options;
  options.dir = dir;
  options.keep_last = keep_last;
  options.keep_every = keep_every;
  absl::StatusOr<CheckpointStore> store = CheckpointStore::Open(options);
  EXPECT_TRUE(store.ok()) << store.status();
  return std::move(*store);
}

void FlipByte(const std::string& path, size_t at) {
  std::string bytes = testing::ReadAll(path);
  bytes[at] = static_cast<char>(bytes[at] ^ 0x40);
  testing::WriteAll(path, bytes);
}

TEST(CheckpointStoreTest, SaveThenLoadGivesTheSameBytesAndManifest) {
  TempDir dir;
  CheckpointStore store = OpenOrDie(dir.path());
  ASSERT_TRUE(store.Save(7, Files(7), {{"epoch", "2"}}).ok());
  absl::StatusOr<LoadedCheckpoint> loaded = store.LoadLatest();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->manifest.step, 7);
  ASSERT_EQ(loaded->files.size(), 3u);
  const std::vector<CheckpointFile> want = Files(7);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(loaded->files[k].name, want[k].name);
    EXPECT_EQ(loaded->files[k].bytes, want[k].bytes);
  }
  EXPECT_EQ(loaded->manifest.metadata.at(0).second, "2");
  EXPECT_TRUE(loaded->fallbacks.empty());
  EXPECT_EQ(testing::ReadAll(dir.File("latest")), "step-000000000007\n");
  // The manifest on disk parses back to the same thing.
  absl::StatusOr<CheckpointManifest> m =
      ParseManifest(testing::ReadAll(dir.File("step-000000000007/MANIFEST.json")), "MANIFEST.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->files[0].size, 4096u);
  EXPECT_EQ(m->files[0].xxh3, loaded->manifest.files[0].xxh3);
  // No temporaries stay behind.
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    EXPECT_NE(entry.path().filename().string().rfind(".tmp-", 0), 0u) << entry.path();
  }
}

// A manifest's bad values are named by file and field.
TEST(CheckpointStoreTest, ABadManifestIsNamedByField) {
  CheckpointManifest m;
  m.step = 7;
  m.wall_time_unix_s = 1.5;
  m.files.push_back({"model.pt", 4096, 0x0123456789abcdefULL});
  m.metadata = {{"epoch", "2"}};
  const std::string good = ManifestToJson(m);
  absl::StatusOr<CheckpointManifest> back = ParseManifest(good, "M.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->files[0].xxh3, 0x0123456789abcdefULL);
  EXPECT_EQ(back->files[0].size, 4096u);
  EXPECT_EQ(back->metadata, m.metadata);
  auto with = [&](std::string_view key, std::string_view value) {
    std::string text = good;
    const std::string k = fmt::format("\"{}\": ", key);
    const size_t at = text.find(k);
    EXPECT_NE(at, std::string::npos) << key << " in " << good;
    const size_t begin = at + k.size();
    text.replace(begin, text.find_first_of(",\n}", begin) - begin, value);
    return text;
  };
  const struct {
    std::string text, error;
  } cases[] = {
      {"", "M.json: the file is empty"},
      {"[]", "M.json: the top level is not an object"},
      {with("format_version", "2"),
       "M.json: field 'format_version' is not 1, the format this trainscope reads"},
      {with("step", "-1"), "M.json: field 'step' is negative"},
      {with("step", "9223372036854775808"), "M.json: field 'step' is out of range"},
      {with("wall_time_unix_s", "1e400"),
       "M.json: not valid JSON (a number is malformed or too large for a double)"},
      {with("wall_time_unix_s", "\"noon\""), "M.json: field 'wall_time_unix_s' is not a number"},
      {with("size", "18446744073709551615"), "M.json: field 'files[0].size' is out of range"},
      {with("size", "-4"), "M.json: field 'files[0].size' is negative"},
      {with("xxh3", "\"0123\""), "M.json: field 'files[0].xxh3' is not 16 lowercase hex digits"},
      {with("name", "\"../x\""),
       "M.json: field 'files[0].name' \"../x\" is not a plain file name inside the store (no "
       "'/', no '..', no leading '.')"},
      {with("epoch", "2"), "M.json: field 'metadata.epoch' is not a string"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(ParseManifest(c.text, "M.json").status().message(), c.error) << c.text;
  }
}

TEST(CheckpointStoreTest, RetentionKeepsTheLastNAndEveryKth) {
  TempDir dir;
  CheckpointStore store = OpenOrDie(dir.path(), /*keep_last=*/2, /*keep_every=*/5);
  for (int64_t step = 1; step <= 12; ++step) ASSERT_TRUE(store.Save(step, Files(step, 64)).ok());
  EXPECT_EQ(store.CommittedSteps(), (std::vector<int64_t>{5, 10, 11, 12}));
}

TEST(CheckpointStoreTest, TheSameStepIsReplacedWhole) {
  TempDir dir;
  CheckpointStore store = OpenOrDie(dir.path());
  ASSERT_TRUE(store.Save(3, Files(3)).ok());
  std::vector<CheckpointFile> again = Files(99);
  ASSERT_TRUE(store.Save(3, again).ok()) << "a leftover of the same step never blocks a save";
  absl::StatusOr<LoadedCheckpoint> loaded = store.LoadLatest();
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->manifest.step, 3);
  EXPECT_EQ(loaded->files[0].bytes, again[0].bytes);
  EXPECT_EQ(store.CommittedSteps(), std::vector<int64_t>{3});
}

TEST(CheckpointStoreTest, EveryKindOfCorruptionIsNamedAndFallsBack) {
  struct Case {
    const char* what;
    std::function<void(const std::string& step_dir)> damage;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {"flipped byte", [](const std::string& d) { FlipByte(d + "/model.pt", 100); },
       "checksum mismatch in model.pt"},
      {"truncated file", [](const std::string& d) { fs::resize_file(d + "/optimizer.pt", 100); },
       "optimizer.pt is 100 bytes, the manifest says 2055 (truncated?)"},
      {"missing file", [](const std::string& d) { fs::remove(d + "/state.json"); },
       "missing or unreadable state.json"},
      {"manifest with bad JSON",
       [](const std::string& d) {
         testing::WriteAll(d + "/MANIFEST.json", "{\"format_version\": 1,");
       },
       "not valid JSON"},
      {"manifest pointing outside the store",
       [](const std::string& d) {
         std::string m = testing::ReadAll(d + "/MANIFEST.json");
         m.replace(m.find("\"model.pt\""), 10, "\"../../etc/passwd\"");
         testing::WriteAll(d + "/MANIFEST.json", m);
       },
       "is not a plain file name inside the store"},
      {"a file replaced by a symlink",
       [](const std::string& d) {
         fs::remove(d + "/model.pt");
         fs::create_symlink("/etc/hostname", d + "/model.pt");
       },
       "missing or unreadable model.pt"},
  };
  for (const Case& c : cases) {
    TempDir dir;
    CheckpointStore store = OpenOrDie(dir.path());
    ASSERT_TRUE(store.Save(1100, Files(1100)).ok());
    ASSERT_TRUE(store.Save(1200, Files(1200)).ok());
    c.damage(dir.File("step-000000001200"));
    absl::StatusOr<LoadedCheckpoint> loaded = store.LoadLatest();
    ASSERT_TRUE(loaded.ok()) << c.what << ": " << loaded.status();
    EXPECT_EQ(loaded->manifest.step, 1100) << c.what;
    ASSERT_EQ(loaded->fallbacks.size(), 1u) << c.what;
    EXPECT_EQ(loaded->fallbacks[0].rfind("fell back from step 1200 to 1100: ", 0), 0u)
        << loaded->fallbacks[0];
    EXPECT_NE(loaded->fallbacks[0].find(c.reason), std::string::npos)
        << c.what << ": " << loaded->fallbacks[0];
    EXPECT_EQ(loaded->files[0].bytes, Files(1100)[0].bytes);
    // With the older one damaged too, nothing valid is left: a clear NotFound.
    FlipByte(dir.File("step-000000001100/model.pt"), 5);
    absl::StatusOr<LoadedCheckpoint> none = store.LoadLatest();
    EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound) << c.what;
    EXPECT_NE(std::string(none.status().message()).find("step 1100: checksum mismatch"),
              std::string::npos)
        << none.status();
    std::printf("corruption (%s): %s\n", c.what, loaded->fallbacks[0].c_str());
  }
}

TEST(CheckpointStoreTest, ASecondWriterIsRefusedWithTheHoldersPid) {
  TempDir dir;
  CheckpointStore first = OpenOrDie(dir.path());
  const pid_t child = fork();
  if (child == 0) {
    CheckpointStoreOptions options;
    options.dir = dir.path();
    absl::StatusOr<CheckpointStore> second = CheckpointStore::Open(options);
    const bool refused =
        !second.ok() && second.status().code() == absl::StatusCode::kFailedPrecondition &&
        std::string(second.status().message()).find("pid " + std::to_string(getppid())) !=
            std::string::npos;
    _exit(refused ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // A reader needs no lock.
  CheckpointStoreOptions reader;
  reader.dir = dir.path();
  reader.read_only = true;
  EXPECT_TRUE(CheckpointStore::Open(reader).ok());
}

TEST(CheckpointStoreTest, AFullDiskFailsTheSaveCleanlyAndKeepsThePreviousCheckpoint) {
  TempDir dir;
  {
    CheckpointStore store = OpenOrDie(dir.path());
    ASSERT_TRUE(store.Save(1, Files(1)).ok());
  }
  CheckpointStoreOptions options;
  options.dir = dir.path();
  internal::CheckpointFaults faults;
  faults.fail_writes_after_bytes = 3000;  // inside the first file of the next save
  absl::StatusOr<CheckpointStore> store = internal::OpenCheckpointStoreWithFaults(options, faults);
  ASSERT_TRUE(store.ok());
  const absl::Status failed = store->Save(2, Files(2));
  EXPECT_EQ(failed.code(), absl::StatusCode::kResourceExhausted) << failed;
  EXPECT_NE(std::string(failed.message()).find("model.pt"), std::string::npos) << failed;
  absl::StatusOr<LoadedCheckpoint> loaded = store->LoadLatest();
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->manifest.step, 1);
  EXPECT_EQ(store->CommittedSteps(), std::vector<int64_t>{1});
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    EXPECT_NE(entry.path().filename().string().rfind(".tmp-", 0), 0u) << entry.path();
  }
}

TEST(CheckpointStoreTest, LeftoversOfACrashedSaveAreCleanedAndNeverLoaded) {
  TempDir dir;
  {
    CheckpointStore store = OpenOrDie(dir.path());
    ASSERT_TRUE(store.Save(4, Files(4)).ok());
  }
  fs::create_directory(dir.File(".tmp-step-000000000005-123"));
  testing::WriteAll(dir.File(".tmp-step-000000000005-123/model.pt"), "partial");
  fs::create_directory(dir.File("step-000000000006"));  // torn: no manifest
  testing::WriteAll(dir.File("step-000000000006/model.pt"), "partial");
  CheckpointStore store = OpenOrDie(dir.path());
  EXPECT_FALSE(fs::exists(dir.File(".tmp-step-000000000005-123")));
  EXPECT_FALSE(fs::exists(dir.File("step-000000000006")));
  absl::StatusOr<LoadedCheckpoint> loaded = store.LoadLatest();
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->manifest.step, 4);
  EXPECT_TRUE(store.Save(5, Files(5)).ok());
}

// A step-* symlink to a directory elsewhere is not a checkpoint of the
// store: it is never loaded, and cleaning it up removes the link, not the
// files it points at.
TEST(CheckpointStoreTest, SymlinkedStepDirectoriesAreNeitherLoadedNorEmptied) {
  TempDir dir, elsewhere;
  {
    // A valid checkpoint, step 9, in another store.
    CheckpointStore other = OpenOrDie(elsewhere.File("other"));
    ASSERT_TRUE(other.Save(9, Files(9)).ok());
  }
  fs::create_directory(elsewhere.File("not-a-checkpoint"));
  testing::WriteAll(elsewhere.File("not-a-checkpoint/precious.txt"), "keep me");
  {
    CheckpointStore store = OpenOrDie(dir.path());
    ASSERT_TRUE(store.Save(4, Files(4)).ok());
    fs::create_directory_symlink(elsewhere.File("other/step-000000000009"),
                                 dir.File("step-000000000009"));
    absl::StatusOr<LoadedCheckpoint> loaded = store.LoadLatest();
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(loaded->manifest.step, 4);
    ASSERT_EQ(loaded->fallbacks.size(), 1u);
    EXPECT_NE(loaded->fallbacks[0].find("fell back from step 9 to 4: not a directory of the store"),
              std::string::npos)
        << loaded->fallbacks[0];
    EXPECT_EQ(store.CommittedSteps(), std::vector<int64_t>{4});
  }
  // The next writer cleans both links up (they are not checkpoints) and
  // leaves what they point at alone.
  fs::create_directory_symlink(elsewhere.File("not-a-checkpoint"), dir.File("step-000000000010"));
  CheckpointStore store = OpenOrDie(dir.path());
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir.File("step-000000000009"))));
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir.File("step-000000000010"))));
  EXPECT_EQ(testing::ReadAll(elsewhere.File("not-a-checkpoint/precious.txt")), "keep me");
  EXPECT_TRUE(fs::exists(elsewhere.File("other/step-000000000009/MANIFEST.json")));
  absl::StatusOr<LoadedCheckpoint> loaded = store.LoadLatest();
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->manifest.step, 4);
}

// A step directory whose manifest exists but does not parse is damage, not
// a leftover: a new writer keeps it, and a fresh process's LoadLatest still
// says why it fell back. A step directory without any manifest is removed.
TEST(CheckpointStoreTest, AFreshWriterKeepsDamagedCheckpointsAndTheFallbackIsReported) {
  TempDir dir;
  {
    CheckpointStore store = OpenOrDie(dir.path());
    ASSERT_TRUE(store.Save(1100, Files(1100)).ok());
    ASSERT_TRUE(store.Save(1200, Files(1200)).ok());
  }
  testing::WriteAll(dir.File("step-000000001200/MANIFEST.json"), "{\"format_version\": 1,");
  fs::create_directory(dir.File("step-000000001300"));  // no manifest: torn
  CheckpointStore store = OpenOrDie(dir.path());
  EXPECT_TRUE(fs::exists(dir.File("step-000000001200/model.pt")));
  EXPECT_FALSE(fs::exists(dir.File("step-000000001300")));
  absl::StatusOr<LoadedCheckpoint> loaded = store.LoadLatest();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->manifest.step, 1100);
  ASSERT_EQ(loaded->fallbacks.size(), 1u);
  EXPECT_NE(loaded->fallbacks[0].find("fell back from step 1200 to 1100:"), std::string::npos);
  EXPECT_NE(loaded->fallbacks[0].find("not valid JSON"), std::string::npos) << loaded->fallbacks[0];
  // A file far larger than its manifest says is refused by its size, unread.
  std::string big(1 << 20, 'x');
  testing::WriteAll(dir.File("step-000000001100/model.pt"), big);
  absl::StatusOr<LoadedCheckpoint> none = store.LoadLatest();
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(
      std::string(none.status().message()).find("model.pt is 1048576 bytes, the manifest says"),
      std::string::npos)
      << none.status();
  // Steps past the directory names' 12 digits are refused, not hidden.
  EXPECT_EQ(store.Save(int64_t{1} << 40, Files(1)).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CheckpointStoreTest, BadNamesAreRefused) {
  TempDir dir;
  CheckpointStore store = OpenOrDie(dir.path());
  for (const char* name : {"../x", "a/b", ".hidden", "", "MANIFEST.json"}) {
    EXPECT_EQ(store.Save(1, {{name, "x"}}).code(), absl::StatusCode::kInvalidArgument) << name;
  }
  EXPECT_EQ(store.Save(1, {{"a", "x"}, {"a", "y"}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(store.CommittedSteps().empty());
}

// A writer saves checkpoints 0, 1, 2, ... in a loop; the parent SIGKILLs it
// at a moment chosen in a target phase of a save (round robin over the
// phases, at once or after a random delay; it is stopped first so that the
// phase it dies in is known exactly), then a fresh store in the parent must load
// the newest committed checkpoint, verified, with exactly the bytes the
// writer meant for that step. 240 trials, seeded.
TEST(CheckpointFaultTest, KillDuringSaveNeverExposesAPartialCheckpoint) {
  TempDir dir;
  constexpr int kTrials = 240;
  constexpr SavePhase kTargets[] = {SavePhase::kWritingFiles,     SavePhase::kSyncingFiles,
                                    SavePhase::kWritingManifest,  SavePhase::kRenaming,
                                    SavePhase::kSyncingDirectory, SavePhase::kUpdatingLatest,
                                    SavePhase::kRetention,        SavePhase::kDone};
  // Shared with the writer: the phase it is in and the step it saves.
  struct Shared {
    std::atomic<int> phase;
    std::atomic<int64_t> step;
  };
  auto* shared = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(shared, MAP_FAILED);
  std::mt19937 rng(20261202);
  std::map<std::string, int> kills_by_phase;
  int loaded_ok = 0, fallbacks = 0;
  int64_t next_step = 0;
  int64_t previous = -1;    // the step the last trial restored
  int never_committed = 0;  // trials killed before the first checkpoint ever committed
  for (int trial = 0; trial < kTrials; ++trial) {
    shared->phase.store(-1);
    shared->step.store(-1);
    const int64_t first = next_step;
    const pid_t writer = fork();
    ASSERT_GE(writer, 0);
    if (writer == 0) {
      CheckpointStoreOptions options;
      options.dir = dir.path();
      options.keep_last = 2;
      // Each phase is held open a random 0 to 400 µs, so that kills also land
      // in the short ones (a rename is a few µs).
      std::mt19937 jitter(static_cast<uint32_t>(getpid()));
      internal::CheckpointFaults faults;
      faults.on_phase = [&](SavePhase p) {
        shared->phase.store(static_cast<int>(p));
        const auto until =
            std::chrono::steady_clock::now() + std::chrono::microseconds(jitter() % 400);
        while (std::chrono::steady_clock::now() < until) {
        }
      };
      absl::StatusOr<CheckpointStore> store =
          internal::OpenCheckpointStoreWithFaults(options, faults);
      if (!store.ok()) _exit(3);
      for (int64_t step = first;; ++step) {
        shared->step.store(step);
        if (!store->Save(step, Files(step, 64 << 10)).ok()) _exit(4);
      }
    }
    const SavePhase target = kTargets[trial % 8];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (shared->phase.load() != static_cast<int>(target) &&
           std::chrono::steady_clock::now() < deadline) {
    }
    // Half the kills land at once (short phases), half after up to 300 µs.
    if (trial % 2 == 1) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
    // Stopped first, so that the phase read is the one it dies in.
    kill(writer, SIGSTOP);
    int status = 0;
    waitpid(writer, &status, WUNTRACED);
    const int phase = shared->phase.load();
    kill(writer, SIGKILL);
    waitpid(writer, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "trial " << trial << ": the writer exited "
                                     << WEXITSTATUS(status) << " instead of being killed";
    kills_by_phase[phase >= 0 ? SavePhaseName(static_cast<SavePhase>(phase)) : "opening"]++;
    const int64_t in_flight = shared->step.load();

    // A fresh store, as a replacement process would open it.
    CheckpointStore store = OpenOrDie(dir.path(), 2);
    absl::StatusOr<LoadedCheckpoint> loaded = store.LoadLatest();
    if (!loaded.ok() && previous < 0 && in_flight == first) {
      ++never_committed;
      next_step = std::max<int64_t>(next_step, in_flight + 1);
      continue;  // killed before anything was ever committed
    }
    ASSERT_TRUE(loaded.ok()) << "trial " << trial << ": " << loaded.status();
    ++loaded_ok;
    fallbacks += loaded->fallbacks.empty() ? 0 : 1;
    const int64_t step = loaded->manifest.step;
    // The step being saved (if the kill came after its rename), else the one
    // before it: this writer's previous save, or what the last trial left.
    const int64_t before = in_flight > first ? in_flight - 1 : previous;
    EXPECT_TRUE(step == in_flight || step == before)
        << "trial " << trial << ": loaded " << step << " while saving " << in_flight << " ("
        << (phase >= 0 ? SavePhaseName(static_cast<SavePhase>(phase)) : "opening") << "); " << [&] {
             std::string names;
             for (const auto& e : fs::directory_iterator(dir.path())) {
               names += e.path().filename().string() + " ";
             }
             return names;
           }();
    const std::vector<CheckpointFile> want = Files(step, 64 << 10);
    ASSERT_EQ(loaded->files.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(loaded->files[k].bytes, want[k].bytes) << "trial " << trial << " file " << k;
    }
    next_step = in_flight + 1;
    previous = step;
  }
  munmap(shared, sizeof(Shared));
  std::string tally;
  for (const auto& [phase, n] : kills_by_phase) tally += " " + phase + "=" + std::to_string(n);
  std::printf(
      "kill-during-save: %d trials, %d restored a verified checkpoint (%d after a "
      "fallback), %d before anything was committed; kills by phase:%s\n",
      kTrials, loaded_ok, fallbacks, never_committed, tally.c_str());
  for (SavePhase p : kTargets) {
    EXPECT_GT(kills_by_phase[SavePhaseName(p)], 0) << "no kill landed in " << SavePhaseName(p);
  }
  EXPECT_EQ(loaded_ok + never_committed, kTrials);
  EXPECT_LE(never_committed, 8) << "only the first trials can find nothing committed";
}

TEST(PreemptionGuardTest, SigtermAndSigusr1SetTheFlagAndHandlersAreRestored) {
  {
    PreemptionGuard guard;
    EXPECT_FALSE(guard.requested());
    ASSERT_EQ(kill(getpid(), SIGTERM), 0);
    EXPECT_TRUE(guard.requested());
    EXPECT_EQ(guard.signal(), SIGTERM);
    guard.Reset();
    ASSERT_EQ(kill(getpid(), SIGUSR1), 0);
    EXPECT_EQ(guard.signal(), SIGUSR1);
    guard.Reset();
  }
  // After the guard, SIGTERM has its default action again: it terminates.
  const pid_t child = fork();
  if (child == 0) {
    { PreemptionGuard guard; }
    kill(getpid(), SIGTERM);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
}

TEST(AsyncCheckpointerTest, PersistsInTheBackgroundOneAtATime) {
  TempDir dir;
  CheckpointStore store = OpenOrDie(dir.path(), 10);
  {
    AsyncCheckpointer async(store);
    for (int64_t step = 1; step <= 4; ++step) EXPECT_TRUE(async.Submit(step, Files(step, 1 << 20)));
    EXPECT_TRUE(async.Wait().ok());
    const AsyncCheckpointer::Stats stats = async.stats();
    EXPECT_EQ(stats.submitted, 4);
    EXPECT_EQ(stats.committed, 4);
    EXPECT_GT(stats.bytes, 4u << 20);
    EXPECT_GT(stats.persist_s, 0);
  }
  EXPECT_EQ(store.CommittedSteps(), (std::vector<int64_t>{1, 2, 3, 4}));

  // kSkip: while one is in flight (held in its first phase), the next is
  // dropped, and the one in flight still commits whole.
  std::mutex gate;
  gate.lock();
  CheckpointStoreOptions options;
  options.dir = dir.File("skip");
  internal::CheckpointFaults faults;
  faults.on_phase = [&](SavePhase p) {
    if (p == SavePhase::kWritingFiles) {
      std::lock_guard<std::mutex> wait(gate);
    }
  };
  absl::StatusOr<CheckpointStore> held = internal::OpenCheckpointStoreWithFaults(options, faults);
  ASSERT_TRUE(held.ok());
  {
    AsyncCheckpointer async(*held, AsyncCheckpointer::WhenBusy::kSkip);
    EXPECT_TRUE(async.Submit(10, Files(10)));
    EXPECT_FALSE(async.Submit(11, Files(11))) << "one in flight: skipped";
    gate.unlock();
    EXPECT_TRUE(async.Wait().ok());
    EXPECT_EQ(async.stats().skipped, 1);
  }
  EXPECT_EQ(held->CommittedSteps(), std::vector<int64_t>{10});
}

TEST(AsyncCheckpointerTest, AFailedBackgroundSaveIsReportedByWaitAndThePreviousStays) {
  TempDir dir;
  { ASSERT_TRUE(OpenOrDie(dir.path()).Save(1, Files(1)).ok()); }
  CheckpointStoreOptions full;
  full.dir = dir.path();
  internal::CheckpointFaults faults;
  faults.fail_writes_after_bytes = 100;
  absl::StatusOr<CheckpointStore> store = internal::OpenCheckpointStoreWithFaults(full, faults);
  ASSERT_TRUE(store.ok());
  AsyncCheckpointer async(*store);
  ASSERT_TRUE(async.Submit(2, Files(2)));
  const absl::Status status = async.Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_TRUE(async.Wait().ok()) << "reported once";
  EXPECT_EQ(async.stats().failed, 1);
  absl::StatusOr<LoadedCheckpoint> loaded = store->LoadLatest();
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->manifest.step, 1);
}

// TakeBuffers hands back the files of the save that finished last, once;
// a spare not taken back before the next Submit is freed, not kept.
TEST(AsyncCheckpointerTest, TakeBuffersReturnsTheLastSavesFilesOnce) {
  TempDir dir;
  CheckpointStore store = OpenOrDie(dir.path());
  AsyncCheckpointer async(store);
  ASSERT_TRUE(async.Submit(1, Files(1, 1000)));
  ASSERT_TRUE(async.Wait().ok());
  std::vector<CheckpointFile> back = async.TakeBuffers();
  ASSERT_EQ(back.size(), Files(1).size());
  EXPECT_EQ(back[0].bytes, Files(1, 1000)[0].bytes);
  EXPECT_TRUE(async.TakeBuffers().empty()) << "handed out once";
  ASSERT_TRUE(async.Submit(2, Files(2, 2000)));
  ASSERT_TRUE(async.Wait().ok());
  ASSERT_TRUE(async.Submit(3, Files(3, 3000)));  // step 2's files not taken: freed here
  ASSERT_TRUE(async.Wait().ok());
  back = async.TakeBuffers();
  ASSERT_FALSE(back.empty());
  EXPECT_EQ(back[0].bytes, Files(3, 3000)[0].bytes);
  EXPECT_EQ(async.stats().committed, 3);
}

TEST(PolyaxonTest, InsideARunTheOutputsPathIsTheDefault) {
  unsetenv("POLYAXON_RUN_OUTPUTS_PATH");
  Options outside;
  CheckpointStoreOptions outside_store;
  EXPECT_FALSE(polyaxon::ApplyDefaults(&outside, &outside_store));
  EXPECT_EQ(outside.output_dir, Options().output_dir);
  EXPECT_TRUE(outside_store.dir.empty());

  setenv("POLYAXON_RUN_OUTPUTS_PATH", "/plx/outputs/", 1);
  setenv("POLYAXON_RUN_UUID", "f00d", 1);
  Options options;
  CheckpointStoreOptions store;
  EXPECT_TRUE(polyaxon::ApplyDefaults(&options, &store));
  EXPECT_EQ(options.output_dir, "/plx/outputs/trainscope");
  EXPECT_EQ(store.dir, "/plx/outputs/checkpoints");
  bool has_uuid = false;
  for (const auto& [k, v] : options.config) has_uuid |= k == "polyaxon.run_uuid" && v == "f00d";
  EXPECT_TRUE(has_uuid);
  // What the user set stays.
  Options mine;
  mine.output_dir = "mine";
  CheckpointStoreOptions my_store;
  my_store.dir = "ckpt";
  polyaxon::ApplyDefaults(&mine, &my_store);
  EXPECT_EQ(mine.output_dir, "mine");
  EXPECT_EQ(my_store.dir, "ckpt");
  unsetenv("POLYAXON_RUN_OUTPUTS_PATH");
  unsetenv("POLYAXON_RUN_UUID");
}

// The ranks of a sharded save as threads, agreeing through a shared
// rendezvous (a stand-in for c10d here; train_mlp's test runs the real thing
// over Gloo). A rank that never arrives makes the others time out.
class ThreadRendezvous {
 public:
  explicit ThreadRendezvous(int world) : world_(world) {}
  absl::StatusOr<std::vector<int>> FailedRanks(int rank, bool failed) {
    std::unique_lock<std::mutex> lock(mu_);
    const int round = round_;
    if (failed) failed_.push_back(rank);
    if (++arrived_ == world_) {
      std::sort(failed_.begin(), failed_.end());
      result_ = failed_;
      failed_.clear();
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
      return result_;
    }
    if (!cv_.wait_for(lock, std::chrono::milliseconds(500), [&] { return round_ != round; })) {
      return absl::DeadlineExceededError("a rank did not arrive within 500 ms");
    }
    return result_;
  }

 private:
  int world_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0, round_ = 0;
  std::vector<int> failed_, result_;
};

class RankCoordinator : public SaveCoordinator {
 public:
  RankCoordinator(ThreadRendezvous* r, int rank) : r_(r), rank_(rank) {}
  absl::StatusOr<std::vector<int>> FailedRanks(bool failed) override {
    return r_->FailedRanks(rank_, failed);
  }

 private:
  ThreadRendezvous* r_;
  int rank_;
};

std::vector<absl::Status> SaveOnRanks(const std::string& dir, int64_t step, int world,
                                      int failing_rank, int absent_rank) {
  ThreadRendezvous rendezvous(world);
  std::vector<absl::Status> results(world);
  std::vector<std::thread> ranks;
  std::vector<std::optional<CheckpointStore>> stores(world);
  for (int r = 0; r < world; ++r) {  // rank 0 first: it owns (and cleans) the store
    CheckpointStoreOptions options;
    options.dir = dir;
    options.rank = r;
    internal::CheckpointFaults faults;
    if (r == failing_rank) faults.fail_writes_after_bytes = 1000;
    absl::StatusOr<CheckpointStore> store =
        internal::OpenCheckpointStoreWithFaults(options, faults);
    EXPECT_TRUE(store.ok()) << store.status();
    stores[r].emplace(std::move(*store));
  }
  for (int r = 0; r < world; ++r) {
    if (r == absent_rank) continue;  // it died before saving
    ranks.emplace_back([&, r] {
      RankCoordinator coordinator(&rendezvous, r);
      results[r] = stores[r]->SaveSharded(step, r, world, Files(step * 10 + r), coordinator);
    });
  }
  for (std::thread& t : ranks) t.join();
  return results;
}

TEST(ShardedCheckpointTest, CommitsOnlyWhenEveryRankFinished) {
  TempDir dir;
  for (const absl::Status& s : SaveOnRanks(dir.path(), 5, 3, -1, -1)) EXPECT_TRUE(s.ok()) << s;
  CheckpointStoreOptions reader;
  reader.dir = dir.path();
  reader.read_only = true;
  absl::StatusOr<CheckpointStore> store = CheckpointStore::Open(reader);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(store->CommittedSteps(), std::vector<int64_t>{5});
  for (int r = 0; r < 3; ++r) {
    absl::StatusOr<LoadedCheckpoint> mine = store->LoadLatestForRank(r);
    ASSERT_TRUE(mine.ok()) << mine.status();
    ASSERT_EQ(mine->files.size(), 3u);
    EXPECT_EQ(mine->files[0].name, "model.pt");
    EXPECT_EQ(mine->files[0].bytes, Files(50 + r)[0].bytes);
  }
  EXPECT_EQ(store->LoadLatest()->files.size(), 9u) << "the manifest lists every rank's files";
  {
    // A damaged shard of a newer step sends every rank back to the same
    // older step, not only the rank whose shard it is.
    for (const absl::Status& s : SaveOnRanks(dir.path(), 7, 3, -1, -1)) ASSERT_TRUE(s.ok()) << s;
    const std::string shard = dir.File("step-000000000007/r1.model.pt");
    std::string bytes = testing::ReadAll(shard);
    bytes[3] = static_cast<char>(bytes[3] ^ 1);
    testing::WriteAll(shard, bytes);
    for (int r = 0; r < 3; ++r) {
      absl::StatusOr<LoadedCheckpoint> mine = store->LoadLatestForRank(r);
      ASSERT_TRUE(mine.ok()) << mine.status();
      EXPECT_EQ(mine->manifest.step, 5) << "rank " << r;
      ASSERT_EQ(mine->fallbacks.size(), 1u);
      EXPECT_NE(mine->fallbacks[0].find("checksum mismatch in r1.model.pt"), std::string::npos)
          << mine->fallbacks[0];
    }
    fs::remove_all(dir.File("step-000000000007"));
  }

  // Rank 1's disk is full: every rank gets Aborted naming rank 1; step 10 is
  // not committed and no temporary directory stays.
  const std::vector<absl::Status> failed = SaveOnRanks(dir.path(), 10, 3, 1, -1);
  for (const absl::Status& s : failed) {
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
    EXPECT_NE(std::string(s.message()).find("rank(s) 1 failed"), std::string::npos) << s;
  }
  EXPECT_EQ(store->CommittedSteps(), std::vector<int64_t>{5});

  // Rank 2 never arrives (died): the others time out, nothing is committed.
  const std::vector<absl::Status> dead = SaveOnRanks(dir.path(), 15, 3, -1, 2);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(dead[r].code(), absl::StatusCode::kUnavailable) << dead[r];
    EXPECT_NE(std::string(dead[r].message()).find("not committed"), std::string::npos) << dead[r];
  }
  EXPECT_EQ(store->CommittedSteps(), std::vector<int64_t>{5});
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    EXPECT_NE(entry.path().filename().string().rfind(".tmp-", 0), 0u) << entry.path();
  }
  std::printf(
      "multi-rank (3 ranks, threads): all finished -> step 5 committed; rank 1 failed -> "
      "%s; rank 2 died -> %s; committed steps still [5]\n",
      std::string(failed[0].message()).c_str(), std::string(dead[0].message()).c_str());
}

TEST(AsyncCheckpointerTest, SessionFinishWaitsForThePersistAndReportsIt) {
  TempDir dir;
  Options session_options;
  session_options.output_dir = dir.File("report");
  session_options.sinks = Sink::kReportJson;
  session_options.device_timeline = false;
  absl::StatusOr<Session> session = Session::Start(session_options);
  ASSERT_TRUE(session.ok()) << session.status();
  CheckpointStoreOptions options;
  options.dir = dir.File("ckpt");
  internal::CheckpointFaults faults;
  faults.on_phase = [](SavePhase p) {  // a slow disk
    if (p == SavePhase::kWritingFiles) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  };
  absl::StatusOr<CheckpointStore> store = internal::OpenCheckpointStoreWithFaults(options, faults);
  ASSERT_TRUE(store.ok());
  AsyncCheckpointer async(*store, AsyncCheckpointer::WhenBusy::kWait, &*session);
  ASSERT_TRUE(async.Submit(3, Files(3), {}, /*snapshot_s=*/0.002));
  absl::StatusOr<Report> report = session->Finish();  // returns only after the persist
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->checkpoint.saves, 1);
  EXPECT_GE(report->checkpoint.persist_s, 0.3) << "three files, 100 ms each";
  EXPECT_GE(report->checkpoint.blocking_s, 0.002);
  EXPECT_LT(report->checkpoint.blocking_s, 0.1) << "training only paid for the snapshot";
  EXPECT_EQ(store->CommittedSteps(), std::vector<int64_t>{3});
}

// A session moved after the checkpointer took it (into a struct, out of a
// StatusOr) stays the one the checkpointer reports to: the saves land in
// the moved-to session's report and its Finish() still waits for them.
TEST(AsyncCheckpointerTest, TheSessionMayMoveAfterTheCheckpointerTookIt) {
  TempDir dir;
  Options session_options;
  session_options.output_dir = dir.File("report");
  session_options.sinks = Sink::kReportJson;
  session_options.device_timeline = false;
  absl::StatusOr<Session> started = Session::Start(session_options);
  ASSERT_TRUE(started.ok()) << started.status();
  CheckpointStoreOptions options;
  options.dir = dir.File("ckpt");
  internal::CheckpointFaults faults;
  faults.on_phase = [](SavePhase p) {
    if (p == SavePhase::kWritingFiles) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  };
  absl::StatusOr<CheckpointStore> store = internal::OpenCheckpointStoreWithFaults(options, faults);
  ASSERT_TRUE(store.ok());
  AsyncCheckpointer async(*store, AsyncCheckpointer::WhenBusy::kWait, &*started);
  Session session = std::move(*started);  // what a trainer's setup does
  EXPECT_FALSE(started->active());
  ASSERT_TRUE(async.Submit(1, Files(1)));
  ASSERT_TRUE(async.Wait().ok());
  ASSERT_TRUE(async.Submit(2, Files(2)));
  Session moved_again = std::move(session);
  absl::StatusOr<Report> report = moved_again.Finish();  // waits for step 2's persist
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->checkpoint.saves, 2);
  EXPECT_EQ(store->CommittedSteps(), (std::vector<int64_t>{1, 2}));
  ASSERT_TRUE(async.Submit(3, Files(1)));  // after Finish: saved, not reported
  ASSERT_TRUE(async.Wait().ok());
  EXPECT_EQ(store->CommittedSteps(), (std::vector<int64_t>{1, 2, 3}));
}

}  // namespace
}  // namespace trainscope
