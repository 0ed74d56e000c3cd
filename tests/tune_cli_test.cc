// `trainscope tune amp|batch|loader -- COMMAND` as a user runs it, on
// tests/trial_program (trainscope's core alone: it starts in milliseconds,
// so the sweeps run here in seconds and under the sanitizers). The tuning
// of a real LibTorch program built against the installed package is
// tests/consumer's (find_package_consumer).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "sdk/ground/cuda_devices.h"
#include "sdk/tuning/experiment.h"
#include "sdk/tuning/tune.h"
#include "tests/test_util.h"

namespace trainscope {
namespace {

using testing::ProcessResult;
using testing::RunProcess;
using testing::TempDir;

const std::string kProgram = TRIAL_PROGRAM_PATH;
const std::string kCli = TRAINSCOPE_CLI_PATH;

std::vector<std::string> Tune(const std::string& sub, const std::string& output,
                              std::vector<std::string> flags, const std::vector<std::string>& cmd) {
  std::vector<std::string> argv = {kCli, "tune", sub, "-o", output};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.emplace_back("--");
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  return argv;
}

// The stderr lines that start with "trainscope: ".
std::vector<std::string> ErrorLines(const std::string& err) {
  std::vector<std::string> lines;
  size_t at = 0;
  while (at < err.size()) {
    size_t end = err.find('\n', at);
    if (end == std::string::npos) end = err.size();
    if (err.compare(at, 12, "trainscope: ") == 0) lines.push_back(err.substr(at, end - at));
    at = end + 1;
  }
  return lines;
}

// Each bad input: exit 2, one line naming what is wrong, and nothing run
// (no trial directory) unless the program itself breaks the contract,
// which one trial shows.
TEST(TuneCliTest, BadInputIsOneLineAndExitTwoWithNothingRun) {
  TempDir dir;
  const std::string noexec = dir.File("not-executable");
  testing::WriteAll(noexec, "#!/bin/sh\n");
  chmod(noexec.c_str(), 0644);
  struct Case {
    std::vector<std::string> argv;
    std::string says;
    int trials_run;
  };
  const std::string out = dir.File("t.json");
  const std::vector<Case> cases = {
      {Tune("amp", out, {"--repeats=3"}, {kProgram, "--precision={precision}"}),
       "trainscope: tune amp: repeats: 3 a variant can never be accepted: with 3 trials a side "
       "the rank test's smallest p is 0.1, not below 0.05; at least 4 are needed",
       0},
      {Tune("loader", out, {"--repeats=4", "--workers=0,1,2"}, {kProgram, "--workers={workers}"}),
       "trainscope: tune loader: repeats: 4 a variant can never be accepted: with 4 trials a side "
       "the rank test's smallest p is 0.0286, 0.0571 after Holm's adjustment for 2 variants, not "
       "below 0.05; at least 5 are needed",
       0},
      {Tune("amp", out, {}, {kProgram, "--out={out}"}),
       "trainscope: tune amp: the command has no {precision}: put it where your program takes "
       "that value (for example --precision={precision}); each trial gets its own",
       0},
      {Tune("batch", out, {"--lr_rule=linear"}, {kProgram, "--batch={batch}"}),
       "trainscope: tune batch: the command has no {lr}: put it where your program takes that "
       "value (for example --lr={lr}); each trial gets its own",
       0},
      {Tune("loader", out, {}, {kProgram, "--workers={workers}", "--seed={sed}"}),
       "trainscope: tune loader: the command has {sed}, which is not a placeholder of tune loader "
       "(it knows {workers}, {prefetch}, {pin}, {out} and {repeat})",
       0},
      {Tune("loader", out, {"--pin=0,2"}, {kProgram, "--workers={workers}", "--pin={pin}"}),
       "trainscope: tune loader: --pin: 2 is not 0 (off) or 1 (on)", 0},
      {Tune("loader", out, {}, {}),
       "trainscope: tune loader: no command: give the program to tune after --, with {workers} "
       "where it takes the value (trainscope tune loader [flags] -- ./train --workers=...)",
       0},
      {Tune("amp", out, {}, {dir.File("missing"), "--precision={precision}"}),
       "trainscope: tune amp: " + dir.File("missing") + ": no such program", 0},
      {Tune("amp", out, {}, {"no-such-trainer-on-path", "--precision={precision}"}),
       "trainscope: tune amp: no-such-trainer-on-path: no such program on PATH", 0},
      {Tune("amp", out, {}, {noexec, "--precision={precision}"}),
       "trainscope: tune amp: " + noexec + ": not an executable program", 0},
      {Tune("batch", out, {"--lr_rule=cubic"}, {kProgram, "--batch={batch}"}),
       "trainscope: tune batch: --lr_rule=cubic: expected none, linear or sqrt", 0},
      // Refused before the probe, not after it.
      {Tune("batch", out, {"--repeats=3", "--budget_mb=100"},
            {kProgram, "--batch={batch}", "--memory_limit={memory_mb}"}),
       "trainscope: tune batch: repeats: 3 a variant can never be accepted: with 3 trials a "
       "side the rank test's smallest p is 0.1, 0.2 after Holm's adjustment for 2 variants, not "
       "below 0.05; at least 5 are needed",
       0},
      {Tune("loader", out, {"--coload=gpu=1"}, {kProgram, "--workers={workers}"}),
       "trainscope: --coload: \"gpu=1\": expected cpu=N or io=M", 0},
      {{kCli, "tune", "amp", "-o", out, kProgram, "--precision={precision}"},
       "trainscope: tune amp: put the program to tune after -- (trainscope tune "
       "amp|batch|loader [flags] -- COMMAND [ARGS...])",
       0},
      // The program keeps no quality target: said after its first trial.
      {Tune("amp", out, {}, {kProgram, "--precision={precision}", "--no_target", "--steps=2"}),
       "ran, and its report has no quality target, so no trial can reach one: the program must "
       "call Session::SetQualityTarget(metric, target, higher_is_better)",
       1},
      // tune amp holds the curve against the band: no curve, no check.
      {Tune("amp", out, {}, {kProgram, "--precision={precision}", "--no_loss", "--steps=2"}),
       "and wrote no loss.jsonl: the curve check needs the training curve, so the program must "
       "call Session::RecordLoss(step, loss) at each step",
       1},
  };
  for (const Case& c : cases) {
    std::filesystem::remove_all(dir.File("t-trials"));
    std::filesystem::remove(out);
    const ProcessResult run = RunProcess(c.argv);
    EXPECT_EQ(run.exit_code, 2) << c.says << "\n" << run.err;
    const std::vector<std::string> lines = ErrorLines(run.err);
    ASSERT_EQ(lines.size(), 1u) << run.err;
    if (c.trials_run == 0) {
      EXPECT_EQ(lines[0], c.says);
      EXPECT_FALSE(std::filesystem::exists(dir.File("t-trials"))) << c.says;
      EXPECT_FALSE(std::filesystem::exists(dir.File("t-probes"))) << c.says;
    } else {
      EXPECT_NE(lines[0].find(c.says), std::string::npos) << lines[0];
      int trials = 0;
      for (const auto& e : std::filesystem::directory_iterator(dir.File("t-trials"))) {
        trials += e.is_directory();
      }
      EXPECT_EQ(trials, c.trials_run) << c.says;
    }
  }
}

// A trial that hangs is killed at its timeout and counts as a failure; the
// others go on, and the record says which and why.
TEST(TuneCliTest, AHangingTrialIsKilledAtItsTimeoutAndCountsAsAFailure) {
  TempDir dir;
  const std::string out = dir.File("amp.json");
  // "--{precision}" is --fp32 for the baseline (a setting the program
  // records) and --hang for the variant.
  const auto started = std::chrono::steady_clock::now();
  const ProcessResult run =
      RunProcess(Tune("amp", out, {"--precisions=hang", "--trial_timeout_s=0.5", "--repeats=4"},
                      {kProgram, "--{precision}", "--steps=5", "--out={out}"}));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_LT(seconds, 60);  // not the hour a hung trial sleeps; no timing claim beyond that
  absl::StatusOr<tuning::ExperimentRecord> record = tuning::ReadExperiment(out);
  ASSERT_TRUE(record.ok()) << record.status();
  ASSERT_EQ(record->trials.size(), 8u);
  for (const tuning::Trial& t : record->trials) {
    if (t.variant == 1) {
      EXPECT_TRUE(t.failed);
      EXPECT_TRUE(t.timed_out);
      EXPECT_EQ(t.failure, "timed out after 0.5 s");
    } else {
      EXPECT_FALSE(t.failed) << t.failure;
    }
  }
  EXPECT_NE(record->reason.find("hang failed every trial (4 of 4)"), std::string::npos)
      << record->reason;
  EXPECT_NE(run.err.find("FAILED: timed out after 0.5 s"), std::string::npos) << run.err;
  // The configuration kept, as a Polyaxon preset beside it.
  const std::string preset = testing::ReadAll(dir.File("amp.polyaxon.yaml"));
  EXPECT_NE(preset.find("isPreset: true"), std::string::npos) << preset;
  EXPECT_NE(preset.find("\"--fp32\""), std::string::npos) << preset;
}

// The loader sweep on a simulated input pipeline: each batch costs 8 ms to
// decode and a step 2 ms, so W workers keep up from W = 4. The knee is the
// fewest workers within the threshold of the best (4), not the most (8).
TEST(TuneCliTest, TheLoaderKneeIsTheFewestWorkersWithinTheThresholdOfTheBest) {
  TempDir dir;
  const std::string out = dir.File("loader.json");
  const ProcessResult run = RunProcess(Tune(
      "loader", out, {"--workers=0,1,2,4,8", "--objective=steady_samples_per_s", "--threshold=0.1"},
      {kProgram, "--workers={workers}", "--decode_ms=8", "--step_ms=2", "--steps=40",
       "--out={out}"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("the knee is w4"), std::string::npos) << run.err;
  const std::string knee = testing::ReadAll(dir.File("loader-knee.json"));
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  ASSERT_EQ(parser.parse(knee).get(root), simdjson::SUCCESS) << knee;
  EXPECT_EQ(std::string_view(root["quiet"]["knee"].get_string()), "w4") << knee;
  EXPECT_TRUE(root["coload"].is_null());
  // Input wait falls as workers are added: all of the step with none.
  double previous = 2;
  for (simdjson::dom::element s : root["quiet"]["settings"].get_array()) {
    const double wait = s["data_wait_share"].get_double();
    EXPECT_LE(wait, previous + 0.02) << knee;
    previous = wait;
    EXPECT_GT(double(s["cpu_s"]), 0) << knee;
  }
}

// {pin} is a sweep dimension where it can matter: by default only on a
// machine with a CUDA device (this one says why it stays 0), always with
// --pin=0,1; each pinned setting follows its unpinned twin.
TEST(TuneCliTest, PinnedMemoryIsSweptWhereACudaDeviceIsOrWhenAskedFor) {
  if (ground::ProbeCudaDevices().count > 0) GTEST_SKIP() << "a CUDA device: {pin} is swept";
  TempDir dir;
  const std::vector<std::string> command = {kProgram, "--workers={workers}", "--pin={pin}",
                                            "--steps=3", "--out={out}"};
  const std::string auto_out = dir.File("auto.json");
  const ProcessResult by_default =
      RunProcess(Tune("loader", auto_out, {"--workers=0,1", "--repeats=4"}, command));
  ASSERT_EQ(by_default.exit_code, 0) << by_default.err;
  EXPECT_NE(by_default.err.find("tune loader: {pin} stays 0: pinned memory speeds only copies "
                                "to a CUDA device, and this machine has none ("),
            std::string::npos)
      << by_default.err;
  absl::StatusOr<tuning::ExperimentRecord> unpinned = tuning::ReadExperiment(auto_out);
  ASSERT_TRUE(unpinned.ok()) << unpinned.status();
  ASSERT_EQ(unpinned->spec.variants.size(), 2u);
  EXPECT_EQ(unpinned->spec.variants[1].name, "w1");
  EXPECT_EQ(tuning::TrialArgv(unpinned->spec, unpinned->spec.variants[1], "d", 0)[2], "--pin=0");

  const std::string out = dir.File("pin.json");
  const ProcessResult asked =
      RunProcess(Tune("loader", out, {"--workers=0,1", "--pin=1,0", "--repeats=5"}, command));
  ASSERT_EQ(asked.exit_code, 0) << asked.err;
  EXPECT_EQ(asked.err.find("{pin} stays 0"), std::string::npos) << asked.err;
  absl::StatusOr<tuning::ExperimentRecord> swept = tuning::ReadExperiment(out);
  ASSERT_TRUE(swept.ok()) << swept.status();
  std::vector<std::string> names;
  for (const tuning::VariantSpec& v : swept->spec.variants) names.push_back(v.name);
  EXPECT_EQ(names, (std::vector<std::string>{"w0", "w0-pin", "w1", "w1-pin"}));
  EXPECT_EQ(tuning::TrialArgv(swept->spec, swept->spec.variants[1], "d", 0)[2], "--pin=1");
  const std::string knee = testing::ReadAll(dir.File("pin-knee.json"));
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  ASSERT_EQ(parser.parse(knee).get(root), simdjson::SUCCESS) << knee;
  simdjson::dom::array settings = root["quiet"]["settings"].get_array();
  ASSERT_EQ(settings.size(), 4u) << knee;
  EXPECT_FALSE(bool(settings.at(0)["pin"])) << knee;
  EXPECT_TRUE(bool(settings.at(1)["pin"])) << knee;
}

// Ctrl-C during a sweep: the trial running is killed and not counted,
// experiment.json keeps the rest, marked incomplete, exit 130; --resume
// with the same flags and command finishes exactly the schedule left.
TEST(TuneCliTest, CtrlCLeavesARecordThatResumeFinishes) {
  TempDir dir;
  const std::string out = dir.File("loader.json");
  const std::vector<std::string> flags = {"--workers=0,2", "--objective=steady_samples_per_s"};
  const std::vector<std::string> command = {kProgram,      "--workers={workers}", "--decode_ms=4",
                                            "--step_ms=2", "--steps=100",         "--out={out}"};
  const std::vector<std::string> argv = Tune("loader", out, flags, command);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int null_fd = open("/dev/null", O_WRONLY);
    dup2(null_fd, STDERR_FILENO);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  // Stop it once three trials are recorded.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    absl::StatusOr<tuning::ExperimentRecord> r = tuning::ReadExperiment(out);
    if (r.ok() && r->trials.size() >= 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  absl::StatusOr<tuning::ExperimentRecord> stopped = tuning::ReadExperiment(out);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_FALSE(stopped->complete);
  const size_t kept = stopped->trials.size();
  EXPECT_GE(kept, 3u);
  EXPECT_LT(kept, 8u);

  std::vector<std::string> resume_flags = flags;
  resume_flags.emplace_back("--resume");
  const ProcessResult resumed = RunProcess(Tune("loader", out, resume_flags, command));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("resuming " + out + ": " + std::to_string(kept) + " trials done"),
            std::string::npos)
      << resumed.err;
  absl::StatusOr<tuning::ExperimentRecord> done = tuning::ReadExperiment(out);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_TRUE(done->complete);
  ASSERT_EQ(done->trials.size(), 8u);  // 2 settings x 4 repeats
  for (size_t k = 0; k < kept; ++k) {
    EXPECT_EQ(done->trials[k].output_dir, stopped->trials[k].output_dir) << k;
  }
  // Another seed is another schedule: refused, as is a changed command.
  std::vector<std::string> reseeded = resume_flags;
  reseeded.emplace_back("--seed=2");
  const ProcessResult other_seed = RunProcess(Tune("loader", out, reseeded, command));
  EXPECT_EQ(other_seed.exit_code, 2);
  EXPECT_NE(other_seed.err.find("an experiment of another spec"), std::string::npos)
      << other_seed.err;
  std::vector<std::string> changed = command;
  changed[3] = "--decode_ms=5";
  const ProcessResult refused = RunProcess(Tune("loader", out, resume_flags, changed));
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("an experiment of another spec"), std::string::npos) << refused.err;
}

// The batch probe reads the program's out-of-memory record (not an exit
// code): powers of two until one does not fit, a binary search after; then
// the sizes that fit are ranked by time to target with the learning rate
// the rule gives them.
TEST(TuneCliTest, TheBatchProbeReadsTheOutOfMemoryRecord) {
  TempDir dir;
  const std::string out = dir.File("batch.json");
  const ProcessResult run =
      RunProcess(Tune("batch", out,
                      {"--budget_mb=1000", "--margin=0", "--min_batch=64", "--base_batch=256",
                       "--sizes=3", "--lr_rule=linear", "--base_lr=0.01", "--probe_args=--steps=2"},
                      {kProgram, "--batch={batch}", "--lr={lr}", "--memory_limit={memory_mb}",
                       "--steps=5", "--out={out}"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("probe batch    1024: out of memory: batch 1024 needs more than the "
                         "memory limit 1000, going on"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("largest batch that fits: 960"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("ranked by time to target, then resource-hours per accepted result"),
            std::string::npos);
  absl::StatusOr<tuning::ExperimentRecord> record = tuning::ReadExperiment(out);
  ASSERT_TRUE(record.ok()) << record.status();
  ASSERT_EQ(record->spec.variants.size(), 2u);  // 256 and 512 fit; 1024 does not
  EXPECT_EQ(record->spec.variants[1].values,
            (std::vector<std::pair<std::string, std::string>>{
                {"batch", "512"}, {"lr", "0.02"}, {"memory_mb", "1000"}}));
  std::string largest;
  for (const auto& [k, v] : record->spec.notes) {
    if (k == "largest_batch_that_fits") largest = v;
  }
  EXPECT_EQ(largest, "960");
  // Every trial got all of its placeholders: none failed.
  for (const tuning::Trial& t : record->trials) EXPECT_FALSE(t.failed) << t.failure;
  EXPECT_GE(record->trials.size(), 6u);

  // A probe that fails without saying it ran out of memory says nothing
  // of the size: the search stops and names its log.
  const ProcessResult crash =
      RunProcess(Tune("batch", dir.File("crash.json"), {"--budget_mb=100"},
                      {kProgram, "--batch={batch}", "--memory_limit=x{memory_mb}"}));
  EXPECT_EQ(crash.exit_code, 2);
  EXPECT_NE(crash.err.find("the probe of batch 64 failed without an out-of-memory record "
                           "(exit code 2, no report)"),
            std::string::npos)
      << crash.err;
}

// --coload: parsed strictly; its processes run while the object lives,
// burning CPU and writing their scratch files, and are gone after.
TEST(CoLoadTest, ProcessesRunForTheSweepAndAreGoneAfter) {
  EXPECT_EQ(tuning::ParseCoLoad("cpu=2,io=1")->cpu, 2);
  EXPECT_EQ(tuning::ParseCoLoad("io=3")->io, 3);
  EXPECT_FALSE(tuning::ParseCoLoad("")->any());
  EXPECT_EQ(tuning::ParseCoLoad("cpu=x").status().message(),
            "--coload: \"cpu=x\": expected cpu=N or io=M (N, M from 0 to 256)");
  EXPECT_EQ(tuning::ParseCoLoad("gpu=1").status().message(),
            "--coload: \"gpu=1\": expected cpu=N or io=M");
  TempDir dir;
  const std::string scratch = dir.File("scratch");
  {
    tuning::CoLoadProcesses load({2, 1}, scratch);
    ASSERT_TRUE(load.status().ok()) << load.status();
    EXPECT_EQ(load.running(), 3);
    // The I/O process writes its file; the busy ones burn CPU.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!std::filesystem::exists(scratch + "/coload-io-0") &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(std::filesystem::exists(scratch + "/coload-io-0"));
  }
  // All reaped: no child of this process is left.
  errno = 0;
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
  EXPECT_FALSE(std::filesystem::exists(scratch + "/coload-io-0"));
}

}  // namespace
}  // namespace trainscope
