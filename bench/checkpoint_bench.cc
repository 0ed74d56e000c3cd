// checkpoint_bench: the checkpoint targets, each against a baseline timed in
// the same run, on the same directory:
//   snapshot of a 1 GiB state into host memory (what AsyncCheckpointer takes)
//     <= 1.5x a plain memcpy of 1 GiB;
//   persist (CheckpointStore::Save: write, fsync, manifest, rename, fsync)
//     >= 80% of the throughput of a plain sequential write + fsync of the
//     same bytes;
//   load + verify (LoadLatest: read and XXH3 every byte) in GB/s, next to
//     XXH3 alone and a plain read, so the checksum is shown not to be the
//     bottleneck.
// Flags: --checkpoint_bench_mib=N (1024), --checkpoint_bench_dir=DIR (TMPDIR
// or /tmp), --checkpoint_bench_repetitions=N (4; the snapshot's first is
// warm-up). Always exits 0.
#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "trainscope/checkpoint.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty()      ? 0
         : v.size() % 2 ? v[v.size() / 2]
                        : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 1024;
  int repetitions = 4;
  std::string root = std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR") : "/tmp";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--checkpoint_bench_mib=", 0) == 0) mib = std::stoul(a.substr(23));
    if (a.rfind("--checkpoint_bench_dir=", 0) == 0) root = a.substr(23);
    if (a.rfind("--checkpoint_bench_repetitions=", 0) == 0) repetitions = std::stoi(a.substr(31));
  }
  const size_t bytes = mib << 20;
  const std::string dir = root + "/trainscope-checkpoint-bench-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  // A 1 GiB "state": 8 tensors' worth of bytes, touched so pages are real.
  constexpr int kParts = 8;
  std::vector<std::string> state(kParts, std::string(bytes / kParts, '\0'));
  for (int k = 0; k < kParts; ++k) {
    for (size_t i = 0; i < state[k].size(); i += 4096) state[k][i] = static_cast<char>(i * 31 + k);
  }
  std::vector<char> target(bytes);
  std::vector<trainscope::CheckpointFile> spare;
  std::vector<double> memcpy_s, snapshot_s, plain_write_s, save_s, load_s, xxh_s;
  for (int r = 0; r < repetitions; ++r) {
    // Baseline: one memcpy of the whole state into a buffer already faulted in.
    Clock::time_point t = Clock::now();
    for (int k = 0; k < kParts; ++k) {
      std::memcpy(target.data() + k * (bytes / kParts), state[k].data(), state[k].size());
    }
    memcpy_s.push_back(Seconds(t));
    // Snapshot: the state copied into CheckpointFiles, reusing the buffers
    // of the previous save (AsyncCheckpointer::TakeBuffers); the first
    // repetition allocates them and is not timed.
    t = Clock::now();
    std::vector<trainscope::CheckpointFile> files = std::move(spare);
    files.resize(kParts);
    for (int k = 0; k < kParts; ++k) {
      files[k].name = "part" + std::to_string(k) + ".bin";
      files[k].bytes.assign(state[k]);
    }
    if (r > 0) snapshot_s.push_back(Seconds(t));

    // Baseline: a plain sequential write + fsync of the same bytes; and the
    // same bytes through the store. The order alternates between
    // repetitions, so that neither always follows the other's writeback.
    const std::string plain = dir + "/plain.bin";
    auto plain_write = [&] {
      const Clock::time_point started = Clock::now();
      const int fd = open(plain.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      for (const trainscope::CheckpointFile& f : files) {
        for (size_t done = 0; done < f.bytes.size();) {
          const ssize_t n =
              write(fd, f.bytes.data() + done, std::min<size_t>(8 << 20, f.bytes.size() - done));
          if (n <= 0) break;
          done += static_cast<size_t>(n);
        }
      }
      fsync(fd);
      close(fd);
      plain_write_s.push_back(Seconds(started));
      std::filesystem::remove(plain);
    };
    trainscope::CheckpointStoreOptions options;
    options.dir = dir + "/store";
    options.keep_last = 1;
    absl::StatusOr<trainscope::CheckpointStore> store = trainscope::CheckpointStore::Open(options);
    if (!store.ok()) {
      std::fprintf(stderr, "checkpoint_bench: %s\n", store.status().ToString().c_str());
      return 0;
    }
    auto store_save = [&] {
      const Clock::time_point started = Clock::now();
      if (absl::Status s = store->Save(r, files); !s.ok()) {
        std::fprintf(stderr, "checkpoint_bench: %s\n", s.ToString().c_str());
        std::exit(0);
      }
      save_s.push_back(Seconds(started));
    };
    if (r % 2 == 0) {
      plain_write();
      store_save();
    } else {
      store_save();
      plain_write();
    }

    // Load + verify, and XXH3 alone over the same bytes in memory.
    t = Clock::now();
    absl::StatusOr<trainscope::LoadedCheckpoint> loaded = store->LoadLatest();
    load_s.push_back(Seconds(t));
    if (!loaded.ok() || loaded->files.size() != kParts) {
      std::fprintf(stderr, "checkpoint_bench: load failed\n");
      return 0;
    }
    t = Clock::now();
    uint64_t h = 0;
    for (const trainscope::CheckpointFile& f : loaded->files)
      h ^= XXH3_64bits(f.bytes.data(), f.bytes.size());
    xxh_s.push_back(Seconds(t));
    if (h == 42) std::printf("!");
    spare = std::move(files);
  }
  std::filesystem::remove_all(dir);
  const double gib = static_cast<double>(bytes) / (1 << 30);
  const double snap = Median(snapshot_s) / Median(memcpy_s);
  // Each repetition's Save against the plain write next to it: the ratio of
  // a pair shares the disk's state of the moment, which on a shared virtual
  // disk swings more between repetitions than between the two runs of one.
  std::vector<double> pairs;
  for (size_t k = 0; k < save_s.size() && k < plain_write_s.size(); ++k) {
    pairs.push_back(plain_write_s[k] / save_s[k]);
  }
  const double persist = Median(pairs);
  const auto [lowest, highest] = std::minmax_element(pairs.begin(), pairs.end());
  std::printf("==== checkpoint_bench (%zu MiB state, %d repetitions, medians; dir %s) ====\n", mib,
              repetitions, root.c_str());
  std::printf("memcpy (baseline)            %8.3f s  %6.2f GiB/s\n", Median(memcpy_s),
              gib / Median(memcpy_s));
  std::printf(
      "snapshot into host memory    %8.3f s  %6.2f GiB/s  = %.2fx memcpy (target <= 1.5) %s\n",
      Median(snapshot_s), gib / Median(snapshot_s), snap, snap <= 1.5 ? "PASS" : "MISS");
  std::printf("plain write + fsync (base)   %8.3f s  %6.2f GiB/s\n", Median(plain_write_s),
              gib / Median(plain_write_s));
  std::printf(
      "CheckpointStore::Save        %8.3f s  %6.2f GiB/s  = %.0f%% of plain (median of "
      "pairs, %.0f%% to %.0f%%; target >= 80%%) %s\n",
      Median(save_s), gib / Median(save_s), 100 * persist, pairs.empty() ? 0.0 : 100 * *lowest,
      pairs.empty() ? 0.0 : 100 * *highest, persist >= 0.8 ? "PASS" : "MISS");
  std::printf("LoadLatest (read + verify)   %8.3f s  %6.2f GiB/s (page cache warm)\n",
              Median(load_s), gib / Median(load_s));
  std::printf("XXH3 alone, in memory        %8.3f s  %6.2f GiB/s: %.0f%% of the load time\n",
              Median(xxh_s), gib / Median(xxh_s), 100 * Median(xxh_s) / Median(load_s));
  return 0;
}
