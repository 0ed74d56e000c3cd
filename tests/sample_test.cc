// The main job's promise: on CPU the compute phases are the busy time, so a
// slower loader must show up as a larger idle share blamed on data_wait.
// Runs the real train_mlp sample as a process and reads its report.json.
#include <gtest/gtest.h>

#include "sdk/export/report_json.h"
#include "tests/test_util.h"

namespace trainscope {
namespace {

Report RunSample(const testing::TempDir& dir, int delay_ms) {
  const std::string out = dir.File("delay" + std::to_string(delay_ms));
  const testing::ProcessResult run =
      testing::RunProcess({TRAIN_MLP_PATH, "--steps=40", "--batch_size=32", "--hidden=64",
                           "--loader_delay_ms=" + std::to_string(delay_ms), "--out=" + out});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("idle:"), std::string::npos) << "summary printed at Finish()";
  absl::StatusOr<Report> report = exporter::ReadReportFile(out + "/report.json");
  EXPECT_TRUE(report.ok()) << report.status();
  return report.ok() ? *report : Report{};
}

TEST(TrainMlpSampleTest, IdleShareRisesWithLoaderDelay) {
  testing::TempDir dir;
  const Report fast = RunSample(dir, 0);
  const Report slow = RunSample(dir, 4);
  const Report slower = RunSample(dir, 16);
  EXPECT_EQ(fast.timing.steps, 40);
  EXPECT_LT(fast.idle.share, slow.idle.share);
  EXPECT_LT(slow.idle.share, slower.idle.share);
  EXPECT_GT(slower.idle.share, 0.5);
  EXPECT_EQ(slow.idle.top_cause, "data_wait");
  EXPECT_EQ(slower.idle.top_cause, "data_wait");
  EXPECT_NE(slower.recommendation.find("waits on input"), std::string::npos)
      << slower.recommendation;
  EXPECT_GT(fast.throughput.steady_samples_per_s, slower.throughput.steady_samples_per_s);
}

TEST(TrainMlpSampleTest, BadFlagIsRefused) {
  const testing::ProcessResult run = testing::RunProcess({TRAIN_MLP_PATH, "--steps=-3"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--steps"), std::string::npos) << run.err;
}

TEST(TrainMlpSampleTest, UnwritableOutputDirectoryFailsWithItsName) {
  testing::TempDir dir;
  testing::WriteAll(dir.File("file"), "x");
  const testing::ProcessResult run =
      testing::RunProcess({TRAIN_MLP_PATH, "--steps=2", "--out=" + dir.File("file") + "/sub"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find(dir.File("file") + "/sub"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace trainscope
