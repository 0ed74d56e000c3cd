// train_mlp: a LibTorch MLP on a synthetic regression task, instrumented
// end to end with trainscope. The main job of the README.
//
//   train_mlp --steps=200 --batch_size=64 --loader_delay_ms=5 --out=out/train_mlp
//
// Prints the trainscope summary and writes out/train_mlp/{trace.json,report.json}.
// --loader_delay_ms simulates a slow input pipeline (decode, storage): the
// report's idle share rises with it, and its top cause becomes data_wait;
// --loader_workers=N moves it onto N prefetching threads.
//
//   train_mlp --world_size=2 --out=out/ddp          # two Gloo ranks on this machine
//   train_mlp --world_size=3 --slow_rank=1 --slow_rank_ms=20
//
// With --world_size=N (and no --rank) it starts N copies of itself as ranks
// 0..N-1 (c10d over a FileStore in --out), each writing
// trace-rank<R>.json and report-rank<R>.json, waits for them and prints the
// straggler report (`trainscope ranks --out` prints it again). Gradients are
// averaged with one all-reduce per step. A rank whose collective fails (a
// peer died or timed out) stops, writes its report naming the missing ranks
// and exits with 3.
//
// --memory_budget_mb caps what LibTorch may allocate on the device
// (trainscope::libtorch::LimitMemory; on CPU a budget for tensor memory
// allocated after the data set is made): a batch that does not fit ends the
// run with LibTorch's typed c10::OutOfMemoryError, recorded in the report
// (trainscope::libtorch::CatchOutOfMemory) and exit 4.
#include <signal.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "trainscope/checkpoint.h"
#include "trainscope/internal/checkpoint_faults.h"
#include "trainscope/ranks.h"
#include "trainscope/torch/amp.h"
#include "trainscope/torch/device.h"
#include "trainscope/torch/distributed.h"
#include "trainscope/torch/loader.h"
#include "trainscope/torch/state.h"
#include "trainscope/torch/torch.h"
#include "trainscope/trainscope.h"

ABSL_FLAG(int64_t, steps, 200, "training steps to run");
ABSL_FLAG(int64_t, batch_size, 64, "samples per step");
ABSL_FLAG(int64_t, loader_delay_ms, 0, "simulated input-pipeline latency per batch, in ms");
ABSL_FLAG(std::string, out, "out/train_mlp", "output directory for trace.json and report.json");
ABSL_FLAG(int64_t, hidden, 256, "width of the two hidden layers");
ABSL_FLAG(double, lr, 0.003, "Adam learning rate");
ABSL_FLAG(int64_t, seed, 1, "seed of the synthetic data and the model");
ABSL_FLAG(int64_t, warmup_steps, -1, "steps the report treats as warmup (-1: automatic rule)");
ABSL_FLAG(double, target_mse, 0.1, "acceptance: the held-out MSE the run must reach");
ABSL_FLAG(int64_t, eval_every, 50,
          "evaluate the held-out MSE every N steps (0: only at the end); the first evaluation "
          "that meets --target_mse is the report's time to target");
ABSL_FLAG(bool, stop_at_target, false,
          "end training at the first evaluation that meets --target_mse (MLPerf's rule: time to "
          "the required result)");
ABSL_FLAG(int64_t, sync_every, 10, "read the loss on the host every N steps (a sync point)");
ABSL_FLAG(bool, device_timeline, true,
          "collect the CUDA device timeline with CUPTI (when a GPU and driver are present)");
ABSL_FLAG(int, threads, 1,
          "LibTorch intra-op threads (0: LibTorch's default). One is fastest for this small "
          "model, and avoids OpenMP spinning when the machine is shared");
ABSL_FLAG(int, loader_workers, 0,
          "threads that prepare batches ahead (trainscope::libtorch::PrefetchLoader); 0: the "
          "training thread loads each batch itself");
ABSL_FLAG(int, queue_depth, 4, "with --loader_workers: batches prepared ahead, at most");
ABSL_FLAG(std::string, amp, "off",
          "mixed precision: off (or fp32), bf16 (autocast, no scaler needed) or fp16 (autocast and "
          "trainscope::libtorch::GradScaler)");
ABSL_FLAG(int, world_size, 1, "ranks (torch.distributed, Gloo on CPU); > 1 starts them all");
ABSL_FLAG(int, rank, -1, "this process's rank (set by the launcher; -1: launch the ranks)");
ABSL_FLAG(int, slow_rank, -1, "this rank's forward pass is slowed down on purpose");
ABSL_FLAG(int, slow_rank_ms, 0, "how much --slow_rank's forward is slowed, per step");
ABSL_FLAG(int, dist_timeout_s, 30, "how long a collective waits for the other ranks");
ABSL_FLAG(int, die_rank, -1, "fault injection: this rank kills itself (SIGKILL) ...");
ABSL_FLAG(int64_t, die_at_step, -1, "... at the start of this step");
ABSL_FLAG(bool, loss_curve, false,
          "write the training loss of every step to loss.jsonl beside the report "
          "(Session::RecordLoss), read at each sync point so that it adds no sync: "
          "`trainscope tune amp`'s curve check reads it");
ABSL_FLAG(bool, corrupt_grad, false,
          "fault injection: a numeric bug that silently flips the sign of the first layer's "
          "weight gradient every step (the AMP harness must reject it)");
ABSL_FLAG(bool, die_in_save, false,
          "fault injection: --die_rank dies inside its part of the first checkpoint save at or "
          "after --die_at_step instead (while its files are being synced)");
ABSL_FLAG(int64_t, memory_budget_mb, 0,
          "cap LibTorch's allocations on the device at this many MiB (0: none); past it the "
          "run stops with c10::OutOfMemoryError, recorded in report.failure, and exit code 4 "
          "(what `trainscope tune batch`'s probe reads: {memory_mb})");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "save checkpoints here (with --world_size, every rank writes its shard and rank 0 "
          "commits once all have: CheckpointStore::SaveSharded)");
ABSL_FLAG(int64_t, save_every, 0, "with --checkpoint_dir: commit a checkpoint every N steps");

constexpr int kExitCollectiveFailed = 3;
constexpr int kExitOutOfMemory = 4;

namespace {

constexpr int64_t kFeatures = 32;

// A synthetic regression set made in-process: y = x·w + 0.1·noise.
struct SyntheticData {
  torch::Tensor x, y, eval_x, eval_y;
};

SyntheticData MakeData(int64_t samples, int64_t seed) {
  torch::manual_seed(seed);
  const torch::Tensor w = torch::randn({kFeatures, 1});
  SyntheticData data;
  data.x = torch::randn({samples, kFeatures});
  data.y = data.x.matmul(w) + 0.1 * torch::randn({samples, 1});
  data.eval_x = torch::randn({1024, kFeatures});
  data.eval_y = data.eval_x.matmul(w);
  return data;
}

// Hands out batches in order, taking `delay` per batch like a slow pipeline.
class SlowLoader {
 public:
  SlowLoader(const SyntheticData& data, int64_t batch_size, std::chrono::milliseconds delay)
      : data_(data), batch_size_(batch_size), delay_(delay) {}

  // Batch `index` of a rank's shard (ranks interleave: batch i of rank r is
  // slot i * world + r). Thread-safe.
  std::vector<torch::Tensor> Load(int64_t index, int rank, int world) const {
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    const int64_t n = data_.x.size(0);
    const int64_t start = ((index * world + rank) * batch_size_) % (n - batch_size_ + 1);
    return {data_.x.narrow(0, start, batch_size_), data_.y.narrow(0, start, batch_size_)};
  }

 private:
  const SyntheticData& data_;
  int64_t batch_size_;
  std::chrono::milliseconds delay_;
};

// Starts --world_size copies of this program as ranks 0..N-1, waits for
// them, and prints the straggler report. Returns the exit code.
int LaunchRanks(int argc, char** argv, int world_size, const std::string& out) {
  const std::string store = out + "/c10d.store";
  std::error_code ignored;
  std::filesystem::create_directories(out, ignored);
  std::filesystem::remove(store, ignored);  // a stale store would confuse the rendezvous
  for (int r = 0; r < world_size; ++r) {
    std::filesystem::remove(out + "/report-rank" + std::to_string(r) + ".json", ignored);
  }
  std::vector<pid_t> children;
  for (int r = 0; r < world_size; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("train_mlp: fork");
      return 1;
    }
    if (pid == 0) {
      std::vector<std::string> args(argv, argv + argc);
      args.push_back("--rank=" + std::to_string(r));
      std::vector<char*> raw;
      for (std::string& a : args) raw.push_back(a.data());
      raw.push_back(nullptr);
      execv("/proc/self/exe", raw.data());
      std::perror("train_mlp: exec");
      _exit(127);
    }
    children.push_back(pid);
  }
  int worst = 0;
  for (size_t r = 0; r < children.size(); ++r) {
    int status = 0;
    waitpid(children[r], &status, 0);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0) std::fprintf(stderr, "train_mlp: rank %zu exited with %d\n", r, code);
    worst = std::max(worst, code);
  }
  absl::StatusOr<std::string> report = trainscope::RanksReport(out, trainscope::RanksFormat::kText);
  if (report.ok()) {
    std::printf("\n== ranks (trainscope ranks %s) ==\n%s", out.c_str(), report->c_str());
  } else {
    std::fprintf(stderr, "train_mlp: %s\n", report.status().ToString().c_str());
  }
  return worst == 0 ? 0 : 1;
}

torch::nn::Sequential MakeModel(int64_t hidden) {
  return torch::nn::Sequential(torch::nn::Linear(kFeatures, hidden), torch::nn::ReLU(),
                               torch::nn::Linear(hidden, hidden), torch::nn::ReLU(),
                               torch::nn::Linear(hidden, 1));
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "train_mlp: an instrumented LibTorch training loop.\n"
      "usage: train_mlp [--steps=N] [--batch_size=N] [--loader_delay_ms=MS] [--out=DIR]\n"
      "                 [--loader_workers=N] [--amp=off|bf16|fp16] [--world_size=N]\n"
      "                 [--slow_rank=R --slow_rank_ms=MS]");
  absl::ParseCommandLine(argc, argv);
  const int64_t steps = absl::GetFlag(FLAGS_steps);
  const int64_t batch_size = absl::GetFlag(FLAGS_batch_size);
  const int64_t delay_ms = absl::GetFlag(FLAGS_loader_delay_ms);
  // "fp32" is "off": `trainscope tune amp -- train_mlp --amp={precision}`.
  const std::string amp = absl::GetFlag(FLAGS_amp) == "fp32" ? "off" : absl::GetFlag(FLAGS_amp);
  const int world_size = absl::GetFlag(FLAGS_world_size);
  const int rank_flag = absl::GetFlag(FLAGS_rank);
  if (steps <= 0 || batch_size <= 0 || delay_ms < 0 || absl::GetFlag(FLAGS_hidden) <= 0 ||
      absl::GetFlag(FLAGS_sync_every) <= 0) {
    std::fprintf(stderr,
                 "train_mlp: --steps, --batch_size, --hidden and --sync_every must be positive "
                 "and --loader_delay_ms not negative\n");
    return 2;
  }
  if (amp != "off" && amp != "bf16" && amp != "fp16") {
    std::fprintf(stderr, "train_mlp: --amp=%s: expected off (or fp32), bf16 or fp16\n",
                 amp.c_str());
    return 2;
  }
  if (world_size < 1 || world_size > 64 || rank_flag >= world_size ||
      absl::GetFlag(FLAGS_loader_workers) < 0 || absl::GetFlag(FLAGS_queue_depth) < 1 ||
      absl::GetFlag(FLAGS_slow_rank_ms) < 0 || absl::GetFlag(FLAGS_dist_timeout_s) < 1) {
    std::fprintf(stderr,
                 "train_mlp: need 1 <= --world_size <= 64, --rank < --world_size, "
                 "--loader_workers >= 0, --queue_depth >= 1, --slow_rank_ms >= 0 and "
                 "--dist_timeout_s >= 1\n");
    return 2;
  }
  if (world_size > 1 && rank_flag < 0) {
    return LaunchRanks(argc, argv, world_size, absl::GetFlag(FLAGS_out));
  }
  const int rank = rank_flag < 0 ? 0 : rank_flag;

  if (absl::GetFlag(FLAGS_threads) > 0) torch::set_num_threads(absl::GetFlag(FLAGS_threads));

  trainscope::Options options;
  options.output_dir = absl::GetFlag(FLAGS_out);
  options.run_name = "train_mlp";
  options.rank = rank;
  options.world_size = world_size;
  options.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
  options.device_timeline = absl::GetFlag(FLAGS_device_timeline);
  options.data_version =
      "synthetic-regression-v1 (seed " + std::to_string(absl::GetFlag(FLAGS_seed)) + ")";
  options.config = {{"steps", std::to_string(steps)},
                    {"batch_size", std::to_string(batch_size)},
                    {"loader_delay_ms", std::to_string(delay_ms)},
                    {"loader_workers", std::to_string(absl::GetFlag(FLAGS_loader_workers))},
                    {"hidden", std::to_string(absl::GetFlag(FLAGS_hidden))},
                    {"lr", std::to_string(absl::GetFlag(FLAGS_lr))},
                    {"amp", amp},
                    {"seed", std::to_string(absl::GetFlag(FLAGS_seed))},
                    {"world_size", std::to_string(world_size)},
                    {"threads", std::to_string(absl::GetFlag(FLAGS_threads))}};
  if (absl::GetFlag(FLAGS_slow_rank) >= 0) {
    options.config.emplace_back("slow_rank", std::to_string(absl::GetFlag(FLAGS_slow_rank)));
    options.config.emplace_back("slow_rank_ms", std::to_string(absl::GetFlag(FLAGS_slow_rank_ms)));
  }
  // One GPU per rank when there are enough (NCCL), else ranks share them
  // (Gloo, which also reduces CUDA tensors). It is the current device before
  // anything touches CUDA: otherwise synchronize() and the workers' pinning
  // make a context on GPU 0 for every rank.
  const int gpus = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  const torch::Device device =
      gpus > 0 ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(rank % gpus))
               : torch::Device(torch::kCPU);
  if (absl::Status on_device = trainscope::libtorch::SetCurrentDevice(device); !on_device.ok()) {
    std::fprintf(stderr, "train_mlp: rank %d: %s\n", rank, on_device.ToString().c_str());
    return 1;
  }
  absl::StatusOr<trainscope::Session> session = trainscope::Session::Start(options);
  if (!session.ok()) {
    std::fprintf(stderr, "train_mlp: %s\n", session.status().ToString().c_str());
    return 1;
  }
  trainscope::libtorch::DescribeTorch(*session);  // torch.device: the current device

  // The run, inside CatchOutOfMemory: a batch that does not fit (LibTorch's
  // typed c10::OutOfMemoryError, from the device or --memory_budget_mb)
  // is recorded in report.failure as it unwinds, the report is written, and
  // the exit code is kExitOutOfMemory.
  int code = 0;
  const absl::Status fits = trainscope::libtorch::CatchOutOfMemory(*session, [&] {
    code = [&]() -> int {
      std::unique_ptr<trainscope::libtorch::ProcessGroup> group;
      if (world_size > 1) {
        // NCCL's default (3) tears the process down when its watchdog sees a
        // collective time out, so a survivor of a dead peer would write no
        // report. 2 only aborts the communicator: the next collective fails
        // here, and the report names the missing rank (docs/distributed.md).
        setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "2", /*overwrite=*/0);
        session->SetConfig("TORCH_NCCL_ASYNC_ERROR_HANDLING",
                           std::getenv("TORCH_NCCL_ASYNC_ERROR_HANDLING"));
        trainscope::libtorch::DistributedOptions dist;
        dist.rank = rank;
        dist.world_size = world_size;
        dist.store_path = absl::GetFlag(FLAGS_out) + "/c10d.store";
        dist.timeout = std::chrono::seconds(absl::GetFlag(FLAGS_dist_timeout_s));
        dist.device = device;
        dist.backend =
            gpus >= world_size && trainscope::libtorch::BuiltWithCuda() ? "auto" : "gloo";
        absl::StatusOr<std::unique_ptr<trainscope::libtorch::ProcessGroup>> created =
            trainscope::libtorch::ProcessGroup::Create(dist, &*session);
        if (!created.ok()) {
          std::fprintf(stderr, "train_mlp: rank %d: %s\n", rank,
                       created.status().ToString().c_str());
          return 1;
        }
        group = std::move(*created);
      }

      const SyntheticData data = MakeData(batch_size * 64, absl::GetFlag(FLAGS_seed));
      // The budget counts what training allocates from here: the model, its
      // gradients and optimizer state, activations, batches in flight. Set
      // before the loader's workers start (the CPU allocator is swapped once).
      if (const int64_t budget_mb = absl::GetFlag(FLAGS_memory_budget_mb); budget_mb > 0) {
        if (budget_mb > (int64_t{1} << 40)) {
          std::fprintf(stderr, "train_mlp: --memory_budget_mb=%lld: more than 2^40 MiB\n",
                       static_cast<long long>(budget_mb));
          return 2;
        }
        if (absl::Status limited = trainscope::libtorch::LimitMemory(device, budget_mb << 20);
            !limited.ok()) {
          std::fprintf(stderr, "train_mlp: --memory_budget_mb=%lld: %s\n",
                       static_cast<long long>(budget_mb), limited.ToString().c_str());
          return 2;
        }
        session->SetConfig("memory_budget_mb", std::to_string(budget_mb));
      }

      SlowLoader source(data, batch_size, std::chrono::milliseconds(delay_ms));
      // Batches: loaded on the training thread (a kDataWait range each), or by
      // --loader_workers threads ahead of it.
      std::unique_ptr<trainscope::libtorch::PrefetchLoader<std::vector<torch::Tensor>>> workers;
      if (absl::GetFlag(FLAGS_loader_workers) > 0) {
        trainscope::libtorch::PrefetchOptions prefetch;
        prefetch.workers = absl::GetFlag(FLAGS_loader_workers);
        prefetch.queue_depth = absl::GetFlag(FLAGS_queue_depth);
        prefetch.session = &*session;  // report.loaders.loader: settings, CPU, queue
        prefetch.pin_memory = device.is_cuda();
        prefetch.batch_size = batch_size;
        workers =
            std::make_unique<trainscope::libtorch::PrefetchLoader<std::vector<torch::Tensor>>>(
                [&](int64_t i) -> std::optional<std::vector<torch::Tensor>> {
                  if (i >= steps) return std::nullopt;
                  std::vector<torch::Tensor> batch = source.Load(i, rank, world_size);
                  // Pinned here, on the worker: the training thread's Submit then
                  // only launches the copies (a no-op on CPU).
                  trainscope::libtorch::PinForDevice(batch, device);
                  return batch;
                },
                prefetch);
      }
      static const trainscope::NameId load_name = trainscope::InternName("loader.next");
      auto next_batch = [&](int64_t i) -> std::optional<std::vector<torch::Tensor>> {
        if (workers) return workers->Next();
        trainscope::PhaseScope wait(trainscope::Phase::kDataWait, load_name);
        return source.Load(i, rank, world_size);
      };
      // Host-to-device copies run one batch ahead (a kHostToDevice range each);
      // on CPU the batches pass through. One batch is pending at a time, so
      // Submit never finds the prefetcher full.
      trainscope::libtorch::DevicePrefetcher to_device(device, /*max_pending=*/1);
      auto submit = [&](int64_t k) {
        const absl::Status submitted = to_device.Submit(next_batch(k));
        if (!submitted.ok()) {
          std::fprintf(stderr, "train_mlp: rank %d: %s\n", rank, submitted.ToString().c_str());
        }
        return submitted.ok();
      };

      torch::manual_seed(absl::GetFlag(FLAGS_seed));  // the same initial model on every rank
      torch::nn::Sequential model = MakeModel(absl::GetFlag(FLAGS_hidden));
      model->to(device);
      torch::optim::Adam optimizer(model->parameters(),
                                   torch::optim::AdamOptions(absl::GetFlag(FLAGS_lr)));
      trainscope::libtorch::GradScalerOptions scaler_options;
      scaler_options.enabled = amp == "fp16";
      trainscope::libtorch::GradScaler scaler(scaler_options);
      const at::ScalarType amp_dtype = amp == "fp16" ? torch::kHalf : torch::kBFloat16;

      // Checkpoints: every rank's shard (model, optimizer, scaler, RNG), then
      // one commit by rank 0 once every rank has written its part.
      std::optional<trainscope::CheckpointStore> store;
      std::unique_ptr<trainscope::SaveCoordinator> coordinator;
      trainscope::libtorch::TrainingState state;
      state.Add("model", *model);
      state.Add("optimizer", optimizer);
      state.Add("scaler", scaler);
      state.AddRng();
      const int64_t save_every = absl::GetFlag(FLAGS_save_every);
      int64_t dying_step = -1;  // set while --die_rank saves at or after --die_at_step
      if (!absl::GetFlag(FLAGS_checkpoint_dir).empty() && save_every > 0) {
        trainscope::CheckpointStoreOptions store_options;
        store_options.dir = absl::GetFlag(FLAGS_checkpoint_dir);
        store_options.rank = rank;
        // --die_rank's drill: a rank killed inside a save (an internal hook).
        trainscope::internal::CheckpointFaults faults;
        faults.on_phase = [&](trainscope::SavePhase phase) {
          if (dying_step >= 0 && phase == trainscope::SavePhase::kSyncingFiles) {
            std::fprintf(stderr,
                         "train_mlp: rank %d: dying inside the save of step %lld on purpose\n",
                         rank, static_cast<long long>(dying_step));
            raise(SIGKILL);
          }
        };
        // Rank 0 creates (and owns) the store before the others open it.
        auto open = [&]() -> bool {
          absl::StatusOr<trainscope::CheckpointStore> opened =
              trainscope::internal::OpenCheckpointStoreWithFaults(store_options, faults);
          if (!opened.ok()) {
            std::fprintf(stderr, "train_mlp: %s\n", opened.status().ToString().c_str());
            return false;
          }
          store.emplace(std::move(*opened));
          return true;
        };
        if (rank == 0 && !open()) return 1;
        if (group) {
          if (absl::Status ready = group->Barrier(); !ready.ok()) {
            std::fprintf(stderr, "train_mlp: rank %d: %s\n", rank, ready.ToString().c_str());
            return kExitCollectiveFailed;
          }
          coordinator = group->MakeSaveCoordinator();
        }
        if (rank != 0 && !open()) return 1;
      }
      auto save = [&](int64_t step) -> absl::Status {
        TRAINSCOPE_PHASE(kCheckpoint);
        if (rank == absl::GetFlag(FLAGS_die_rank) && absl::GetFlag(FLAGS_die_in_save) &&
            step >= absl::GetFlag(FLAGS_die_at_step)) {
          dying_step = step;
        }
        const auto started = std::chrono::steady_clock::now();
        absl::StatusOr<std::vector<trainscope::CheckpointFile>> files = state.Snapshot();
        if (!files.ok()) return files.status();
        const absl::Status saved =
            coordinator ? store->SaveSharded(step, rank, world_size, *files, *coordinator)
                        : store->Save(step, *files);
        uint64_t bytes = 0;
        for (const trainscope::CheckpointFile& f : *files) bytes += f.bytes.size();
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        session->NoteCheckpointSave(seconds, seconds, bytes, saved.ok());
        return saved;
      };

      const double target_mse = absl::GetFlag(FLAGS_target_mse);
      session->SetQualityTarget("eval_mse", target_mse, /*higher_is_better=*/false);
      // The held-out MSE, recorded as the run's quality (same on every rank:
      // the parameters are averaged).
      auto evaluate = [&]() -> double {
        TRAINSCOPE_PHASE(kEval);
        torch::NoGradGuard no_grad;
        const double mse =
            torch::mse_loss(model->forward(data.eval_x.to(device)), data.eval_y.to(device))
                .item<double>();
        if (absl::Status recorded = session->RecordQuality("eval_mse", mse); !recorded.ok()) {
          std::fprintf(stderr, "train_mlp: %s\n", recorded.ToString().c_str());
        }
        return mse;
      };
      const int64_t eval_every = absl::GetFlag(FLAGS_eval_every);
      bool evaluated_last = false;  // the last step ended with an evaluation
      double eval_mse = 0;

      double last_loss = 0;
      int exit_code = 0;
      // The loss curve (Session::RecordLoss): each step's loss stays on the
      // device until the next sync point, then is read in one copy (no sync
      // of its own).
      const bool curve = absl::GetFlag(FLAGS_loss_curve);
      std::vector<torch::Tensor> pending_losses;
      std::vector<bool> pending_skipped;
      int64_t curve_first = 0;  // the step of pending_losses[0]
      absl::Status curve_status;
      auto write_curve = [&]() {
        if (!curve || pending_losses.empty()) return;
        const torch::Tensor values = torch::stack(pending_losses).to(torch::kCPU, torch::kDouble);
        const double* v = values.data_ptr<double>();
        for (size_t k = 0; k < pending_losses.size() && curve_status.ok(); ++k) {
          curve_status =
              session->RecordLoss(curve_first + static_cast<int64_t>(k), v[k], pending_skipped[k]);
        }
        curve_first += static_cast<int64_t>(pending_losses.size());
        pending_losses.clear();
        pending_skipped.clear();
      };
      const bool corrupt_grad = absl::GetFlag(FLAGS_corrupt_grad);
      if (!submit(0)) return 1;
      for (int64_t i = 0; i < steps; ++i) {
        if (rank == absl::GetFlag(FLAGS_die_rank) && i == absl::GetFlag(FLAGS_die_at_step) &&
            !absl::GetFlag(FLAGS_die_in_save)) {
          std::fprintf(stderr, "train_mlp: rank %d: dying at step %lld on purpose\n", rank,
                       static_cast<long long>(i));
          raise(SIGKILL);
        }
        trainscope::StepScope step(*session, trainscope::StepIndex(i),
                                   trainscope::Samples(batch_size));
        std::optional<std::vector<torch::Tensor>> batch = to_device.Next();
        if (!batch) break;
        if (i + 1 < steps && !submit(i + 1)) return 1;
        torch::Tensor loss;
        {
          TRAINSCOPE_PHASE(kForward);
          if (rank == absl::GetFlag(FLAGS_slow_rank) && absl::GetFlag(FLAGS_slow_rank_ms) > 0) {
            std::this_thread::sleep_for(
                std::chrono::milliseconds(absl::GetFlag(FLAGS_slow_rank_ms)));
          }
          std::optional<trainscope::libtorch::AutocastGuard> autocast;
          if (amp != "off") autocast.emplace(device.type(), amp_dtype);
          loss = torch::mse_loss(model->forward((*batch)[0]).to(torch::kFloat), (*batch)[1]);
        }
        {
          TRAINSCOPE_PHASE(kBackward);
          optimizer.zero_grad();
          scaler.Scale(loss).backward();
          if (corrupt_grad) {
            // The injected bug: a sign error in one layer's gradient.
            torch::NoGradGuard no_grad;
            model->parameters()[0].mutable_grad().zero_();
          }
        }
        if (group) {
          if (absl::Status synced = group->AverageGradients(*model); !synced.ok()) {
            std::fprintf(stderr, "train_mlp: rank %d: %s\n", rank, synced.ToString().c_str());
            exit_code = kExitCollectiveFailed;
            break;
          }
        }
        {
          TRAINSCOPE_PHASE(kOptimizer);
          absl::StatusOr<bool> stepped = scaler.Step(optimizer);
          if (!stepped.ok()) {
            std::fprintf(stderr, "train_mlp: %s\n", stepped.status().ToString().c_str());
            return 1;
          }
          if (curve) {
            pending_losses.push_back(loss.detach().to(torch::kFloat));
            pending_skipped.push_back(!*stepped);
          }
          scaler.Update();
        }
        if ((i + 1) % absl::GetFlag(FLAGS_sync_every) == 0 || i + 1 == steps) {
          TRAINSCOPE_PHASE(kSync);
          last_loss = loss.item<double>();
          write_curve();
        }
        evaluated_last = eval_every > 0 && (i + 1) % eval_every == 0;
        if (evaluated_last) eval_mse = evaluate();
        trainscope::libtorch::RecordStepMemory(*session, i, device);
        if (evaluated_last && absl::GetFlag(FLAGS_stop_at_target) && eval_mse <= target_mse) {
          std::fprintf(stderr,
                       "train_mlp: rank %d: eval_mse %.4g met the target %.4g at step %lld\n", rank,
                       eval_mse, target_mse, static_cast<long long>(i));
          break;
        }
        if (store && (i + 1) % save_every == 0) {
          if (absl::Status saved = save(i + 1); !saved.ok()) {
            std::fprintf(stderr, "train_mlp: rank %d: %s\n", rank, saved.ToString().c_str());
            exit_code = kExitCollectiveFailed;
            break;
          }
        }
      }

      if (device.is_cuda()) {
        TRAINSCOPE_PHASE(kSync);
        torch::cuda::synchronize();  // the last kernels complete before CUPTI flushes
      }
      if (!evaluated_last) eval_mse = evaluate();
      session->SetConfig("final_train_loss", std::to_string(last_loss));
      write_curve();
      if (!curve_status.ok()) {
        std::fprintf(stderr, "train_mlp: %s\n", curve_status.ToString().c_str());
        return 1;
      }
      if (const trainscope::libtorch::CpuTensorMemory cpu =
              trainscope::libtorch::CpuTensorMemoryNow();
          cpu.limit_bytes > 0) {
        session->SetConfig("cpu_tensor_peak_bytes", std::to_string(cpu.peak_bytes));
      }
      if (amp == "fp16") {
        session->SetConfig("amp.final_scale", std::to_string(scaler.scale()));
        session->SetConfig("amp.skipped_steps", std::to_string(scaler.skipped_steps()));
      }
      absl::StatusOr<trainscope::Report> report = session->Finish();
      if (!report.ok()) {
        std::fprintf(stderr, "train_mlp: %s\n", report.status().ToString().c_str());
        return 1;
      }
      return exit_code;
    }();
  });
  if (!fits.ok()) {
    std::fprintf(stderr, "train_mlp: out of memory: %s\n", std::string(fits.message()).c_str());
    return kExitOutOfMemory;
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const c10::OutOfMemoryError& e) {
    // Typed, never matched by its text; here only before the session
    // started (Main records the run's own in its report).
    std::fprintf(stderr, "train_mlp: out of memory: %s\n", e.what_without_backtrace());
    return kExitOutOfMemory;
  }
}
