// checkpoint_resume: deterministic CPU training that survives being killed.
//
//   checkpoint_resume --dir=ckpt --steps=100 --save_every=10
//
// Resumes from the newest valid checkpoint in --dir (or starts fresh),
// trains an MLP with dropout on batches drawn from the global RNG (so the
// model, Adam's state, the RNG and the step must all come back for the run
// to continue identically), prints one line per finished step:
//
//   step=<i> loss=<loss as a %a hex float>
//
// and exits 0 after step --steps. Kill it with SIGKILL at any moment and
// start it again with the same flags, as often as you like: the losses of
// every step are those of one uninterrupted run. SIGTERM (or SIGUSR1) makes
// it save at the next step boundary and exit with 75 (PreemptionGuard).
// Measurements go to stderr: blocking save time, restart delay (process
// start -> state restored -> first step finished) and recomputation (steps
// re-done after a kill: the last finished step, from DIR/progress, minus the
// step of the checkpoint it resumed from). The trainscope report, with the
// same figures and the Young/Daly interval advice, goes to DIR/report/.
#include <ATen/CPUGeneratorImpl.h>
#include <fcntl.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "trainscope/checkpoint.h"
#include "trainscope/internal/checkpoint_faults.h"
#include "trainscope/polyaxon/polyaxon.h"
#include "trainscope/preemption.h"
#include "trainscope/torch/state.h"
#include "trainscope/trainscope.h"

ABSL_FLAG(std::string, dir, "",
          "the checkpoint store (default: <Polyaxon outputs>/checkpoints in a Polyaxon run, else "
          "out/checkpoint_resume)");
ABSL_FLAG(int64_t, steps, 100, "train until this step (1-based) has finished");
ABSL_FLAG(int64_t, save_every, 10, "commit a checkpoint after every K steps");
ABSL_FLAG(int, keep_last, 3, "checkpoints kept (plus none other)");
ABSL_FLAG(int64_t, seed, 7, "seed of the model and the data");
ABSL_FLAG(double, lr, 1e-2, "Adam learning rate");
ABSL_FLAG(bool, async, false,
          "persist checkpoints on a background thread (AsyncCheckpointer): only the snapshot "
          "blocks training");
ABSL_FLAG(std::string, on_save_error, "stop",
          "when a save fails (a full disk): 'stop' (exit 1; the previous checkpoint stays valid) "
          "or 'continue' (train on, try again at the next save)");
ABSL_FLAG(int64_t, fail_writes_after_bytes, -1,
          "testing: checkpoint writes fail with ENOSPC once this many bytes were written");
ABSL_FLAG(double, target_mse, 0.25,
          "acceptance: the held-out MSE to reach; evaluated at every save and at the end (the "
          "report's time to target counts from this process's start)");
ABSL_FLAG(double, mtbf_hours, 24,
          "mean time between failures to plan for: the report's Young/Daly interval advice");

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The last finished step, kept in DIR/progress (page cache: survives a
// SIGKILL, not a power cut), for the recomputation figure.
void WriteProgress(int fd, int64_t step) {
  char text[32];
  const int n = std::snprintf(text, sizeof text, "%020" PRId64 "\n", step);
  if (pwrite(fd, text, static_cast<size_t>(n), 0) != n) std::perror("checkpoint_resume: progress");
}
int64_t ReadProgress(int fd) {
  char text[32] = {0};
  return pread(fd, text, 21, 0) > 0 ? std::strtoll(text, nullptr, 10) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Clock::time_point process_start = Clock::now();
  absl::SetProgramUsageMessage(
      "checkpoint_resume: kill-safe deterministic training.\n"
      "usage: checkpoint_resume --dir=DIR --steps=N --save_every=K");
  absl::ParseCommandLine(argc, argv);
  // First, so a SIGTERM during start-up and restore also ends in a save at
  // the first step boundary and exit 75, not in the default death.
  trainscope::PreemptionGuard guard;
  trainscope::CheckpointStoreOptions store_options;
  store_options.dir = absl::GetFlag(FLAGS_dir);
  trainscope::polyaxon::ApplyDefaults(nullptr, &store_options);
  if (store_options.dir.empty()) store_options.dir = "out/checkpoint_resume";
  const std::string dir = store_options.dir;
  const int64_t steps = absl::GetFlag(FLAGS_steps);
  const int64_t save_every = absl::GetFlag(FLAGS_save_every);
  const std::string on_save_error = absl::GetFlag(FLAGS_on_save_error);
  if (on_save_error != "stop" && on_save_error != "continue") {
    std::fprintf(stderr, "checkpoint_resume: --on_save_error=%s: expected stop or continue\n",
                 on_save_error.c_str());
    return 2;
  }
  if (steps < 1 || save_every < 1 || absl::GetFlag(FLAGS_keep_last) < 1) {
    std::fprintf(stderr, "checkpoint_resume: --steps, --save_every and --keep_last must be >= 1\n");
    return 2;
  }
  torch::set_num_threads(1);  // deterministic reductions

  trainscope::Options options;
  options.output_dir = dir + "/report";
  options.run_name = "checkpoint_resume";
  options.summary_stream = stderr;  // stdout carries only the step lines
  options.device_timeline = false;
  options.checkpoint_mtbf_hours = absl::GetFlag(FLAGS_mtbf_hours);
  options.config = {{"steps", std::to_string(steps)}, {"save_every", std::to_string(save_every)}};
  absl::StatusOr<trainscope::Session> session = trainscope::Session::Start(options);
  if (!session.ok()) {
    std::fprintf(stderr, "checkpoint_resume: %s\n", session.status().ToString().c_str());
    return 1;
  }

  store_options.keep_last = absl::GetFlag(FLAGS_keep_last);
  // --fail_writes_after_bytes's drill: a disk that fills up (an internal hook).
  trainscope::internal::CheckpointFaults faults;
  faults.fail_writes_after_bytes = absl::GetFlag(FLAGS_fail_writes_after_bytes);
  absl::StatusOr<trainscope::CheckpointStore> store =
      trainscope::internal::OpenCheckpointStoreWithFaults(store_options, faults);
  if (!store.ok()) {
    std::fprintf(stderr, "checkpoint_resume: %s\n", store.status().ToString().c_str());
    return 1;
  }
  const int progress_fd = open((dir + "/progress").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (progress_fd < 0) {
    std::perror("checkpoint_resume: opening DIR/progress");
    return 1;
  }

  torch::manual_seed(absl::GetFlag(FLAGS_seed));
  torch::nn::Sequential model(torch::nn::Linear(16, 64), torch::nn::ReLU(), torch::nn::Dropout(0.1),
                              torch::nn::Linear(64, 1));
  torch::optim::Adam optimizer(model->parameters(),
                               torch::optim::AdamOptions(absl::GetFlag(FLAGS_lr)));
  const torch::Tensor w = torch::randn({16, 1});  // the task, from the seed
  // A held-out set from its own generator: evaluating never draws from the
  // global RNG, so resumed runs stay identical to uninterrupted ones.
  at::Generator eval_gen = at::make_generator<at::CPUGeneratorImpl>(absl::GetFlag(FLAGS_seed) + 1);
  const torch::Tensor eval_x = at::randn({256, 16}, eval_gen);
  const torch::Tensor eval_y = eval_x.matmul(w);
  session->SetQualityTarget("eval_mse", absl::GetFlag(FLAGS_target_mse),
                            /*higher_is_better=*/false);
  auto evaluate = [&] {
    TRAINSCOPE_PHASE(kEval);
    torch::NoGradGuard no_grad;
    model->eval();  // no dropout
    const double mse = torch::mse_loss(model->forward(eval_x), eval_y).item<double>();
    model->train();
    if (absl::Status recorded = session->RecordQuality("eval_mse", mse); !recorded.ok()) {
      std::fprintf(stderr, "checkpoint_resume: %s\n", recorded.ToString().c_str());
    }
  };
  trainscope::libtorch::TrainingState state;
  state.Add("model", *model);
  state.Add("optimizer", optimizer);
  state.AddRng();

  int64_t first = 1;  // the next step to run
  double restore_s = 0;
  absl::StatusOr<trainscope::LoadedCheckpoint> latest = store->LoadLatest();
  if (latest.ok()) {
    for (const std::string& why : latest->fallbacks) {
      std::fprintf(stderr, "checkpoint_resume: %s\n", why.c_str());
    }
    if (absl::Status restored = state.Restore(*latest); !restored.ok()) {
      std::fprintf(stderr, "checkpoint_resume: %s\n", restored.ToString().c_str());
      return 1;
    }
    first = latest->manifest.step + 1;
    restore_s = Since(process_start);
    const int64_t interrupted_at = ReadProgress(progress_fd);
    session->NoteResume(latest->manifest.step, interrupted_at, restore_s);
    std::fprintf(stderr,
                 "checkpoint_resume: resumed from step %" PRId64
                 " (%s) in %.3f s; the last "
                 "run had finished step %" PRId64 ": %" PRId64 " steps to recompute\n",
                 latest->manifest.step, latest->path.c_str(), restore_s, interrupted_at,
                 std::max<int64_t>(0, interrupted_at - latest->manifest.step));
  } else if (latest.status().code() != absl::StatusCode::kNotFound) {
    std::fprintf(stderr, "checkpoint_resume: %s\n", latest.status().ToString().c_str());
    return 1;
  } else {
    // None, or none whole (the status lists each damaged one): say why.
    std::fprintf(stderr, "checkpoint_resume: starting from step 1: %s\n",
                 latest.status().ToString().c_str());
  }

  double save_s = 0;
  int64_t saves = 0;
  std::optional<trainscope::AsyncCheckpointer> async;
  if (absl::GetFlag(FLAGS_async))
    async.emplace(*store, trainscope::AsyncCheckpointer::WhenBusy::kWait, &*session);
  int64_t failures_seen = 0;
  // Returns false when training must stop (a failed save and --on_save_error=stop).
  auto failed = [&](int64_t step, const absl::Status& status) -> bool {
    std::fprintf(stderr, "checkpoint_resume: save at step %" PRId64 " failed: %s%s\n", step,
                 status.ToString().c_str(),
                 on_save_error == "continue" ? "; continuing" : "; stopping");
    return on_save_error == "continue";
  };
  auto save = [&](int64_t step) -> bool {
    TRAINSCOPE_PHASE(kCheckpoint);
    const Clock::time_point started = Clock::now();
    absl::StatusOr<std::vector<trainscope::CheckpointFile>> files = state.Snapshot();
    if (!files.ok()) return failed(step, files.status());
    if (async) {
      // A failure of the previous background save shows up here.
      if (async->stats().failed > failures_seen) {
        failures_seen = async->stats().failed;
        if (!failed(step - save_every, async->Wait())) return false;
      }
      async->Submit(step, std::move(*files), {}, Since(started));
      save_s += Since(started);
      ++saves;
      return true;
    }
    const Clock::time_point snapshotted = Clock::now();
    absl::Status saved = store->Save(step, *files);
    uint64_t bytes = 0;
    for (const trainscope::CheckpointFile& f : *files) bytes += f.bytes.size();
    session->NoteCheckpointSave(Since(started),
                                std::chrono::duration<double>(Clock::now() - snapshotted).count(),
                                bytes, saved.ok());
    if (!saved.ok()) return failed(step, saved);
    save_s += Since(started);
    ++saves;
    return true;
  };

  model->train();
  int exit_code = 0;
  for (int64_t i = first; i <= steps && exit_code == 0; ++i) {
    {
      trainscope::StepScope step_scope(*session, trainscope::StepIndex(i), trainscope::Samples(32));
      torch::Tensor x, y, loss;
      {
        TRAINSCOPE_PHASE(kDataWait);
        x = torch::randn({32, 16});
        y = x.matmul(w) + 0.1 * torch::randn({32, 1});
      }
      {
        TRAINSCOPE_PHASE(kForward);
        loss = torch::mse_loss(model->forward(x), y);
      }
      {
        TRAINSCOPE_PHASE(kBackward);
        optimizer.zero_grad();
        loss.backward();
      }
      {
        TRAINSCOPE_PHASE(kOptimizer);
        optimizer.step();
      }
      std::printf("step=%" PRId64 " loss=%a\n", i, loss.item<double>());
      std::fflush(stdout);
      WriteProgress(progress_fd, i);
    }
    if (i == first) {
      std::fprintf(stderr,
                   "checkpoint_resume: first step finished %.3f s after main() began (state "
                   "restored at %.3f s; report.checkpoint.restart_delay_s counts from process "
                   "start)\n",
                   Since(process_start), restore_s);
    }
    const bool preempted = guard.requested();
    if (i % save_every == 0 || i == steps) evaluate();
    if ((i % save_every == 0 || preempted) && !save(i)) exit_code = 1;
    if (preempted && exit_code == 0 && async) {
      if (absl::Status persisted = async->Wait(); !persisted.ok()) {
        std::fprintf(stderr, "checkpoint_resume: the save before exiting failed: %s\n",
                     persisted.ToString().c_str());
        exit_code = 1;
      }
    }
    if (preempted && exit_code == 0) {
      std::fprintf(stderr, "checkpoint_resume: signal %d: saved step %" PRId64 ", exiting %d\n",
                   guard.signal(), i, trainscope::PreemptionGuard::kExitCode);
      exit_code = trainscope::PreemptionGuard::kExitCode;
    }
  }
  if (async) {
    if (absl::Status persisted = async->Wait(); !persisted.ok() && exit_code == 0) {
      failed(steps, persisted);
    }
  }
  if (saves > 0) {
    std::fprintf(stderr, "checkpoint_resume: %" PRId64 " saves, %.2f ms each (blocking)\n", saves,
                 1e3 * save_s / static_cast<double>(saves));
  }
  close(progress_fd);
  if (absl::StatusOr<trainscope::Report> report = session->Finish(); !report.ok()) {
    std::fprintf(stderr, "checkpoint_resume: %s\n", report.status().ToString().c_str());
    return exit_code == 0 ? 1 : exit_code;
  }
  return exit_code;
}
