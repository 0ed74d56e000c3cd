// `trainscope analyze` (sdk/analyze, sdk/cli) run as a real process.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "fmt/format.h"
#include "sdk/analysis/hta_breakdown.h"
#include "sdk/analysis/trace_analysis.h"
#include "sdk/export/trace_writer.h"
#include "sdk/kineto/gzip_stream.h"
#include "sdk/kineto/json_scanner.h"
#include "sdk/kineto/trace_import.h"
#include "tests/kineto_testing.h"
#include "tests/test_util.h"
#include "trainscope/trainscope.h"

namespace trainscope {
namespace {

using testing::Analyze;
using testing::HtaBreakdown;
using testing::SharedTrace;
using testing::TempDir;

TEST(AnalyzeCliTest, JsonHasTheHtaObjectShapedLikeTheExpectedFile) {
  const testing::ProcessResult run = testing::RunProcess(
      {TRAINSCOPE_CLI_PATH, "analyze", "--format=json", SharedTrace("simple_add.json.gz")});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(run.out).get(doc), simdjson::SUCCESS) << run.out;
  double idle = 0;
  EXPECT_EQ(doc["hta"]["temporal_breakdown_us"]["idle_time(us)"].get_double().get(idle),
            simdjson::SUCCESS);
  simdjson::dom::array rows;
  ASSERT_EQ(doc["hta"]["idle_time_breakdown_us"].get_array().get(rows), simdjson::SUCCESS);
  EXPECT_GT(rows.size(), 0u);
  for (simdjson::dom::element row : rows) {
    EXPECT_TRUE(row["stream"].is_int64());
    EXPECT_TRUE(row["category"].is_string());
    EXPECT_TRUE(row["idle_time"].is_number());
  }
}

TEST(AnalyzeCliTest, DirectoryOfRanksIsAnalysedInParallelWithASummary) {
  TempDir dir;
  for (const char* name : {"sampled_rank-0.json.gz", "sampled_rank-1.json.gz"}) {
    std::filesystem::copy_file(SharedTrace(name), dir.File(name));
  }
  const testing::ProcessResult run = testing::RunProcess(
      {TRAINSCOPE_CLI_PATH, "analyze", "--format=json", "--jobs=2", dir.path()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(run.out).get(doc), simdjson::SUCCESS) << run.out;
  simdjson::dom::array ranks = doc["ranks"].get_array();
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(int64_t(ranks.at(0)["rank"]), 0);
  EXPECT_EQ(int64_t(ranks.at(1)["rank"]), 1);
  EXPECT_EQ(int64_t(doc["summary"]["ranks"]), 2);
  // Each rank's numbers are those of analysing it alone.
  const HtaBreakdown alone = Analyze(SharedTrace("sampled_rank-1.json.gz"));
  EXPECT_DOUBLE_EQ(double(ranks.at(1)["hta"]["temporal_breakdown_us"]["idle_time(us)"]),
                   alone.temporal.idle_us);
  // A trainscope output folder's report.json is not taken for a trace.
  testing::WriteAll(dir.File("report.json"), "{\"schema_version\": 1}");
  const testing::ProcessResult text =
      testing::RunProcess({TRAINSCOPE_CLI_PATH, "analyze", dir.path()});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("across 2 ranks"), std::string::npos) << text.out;
}

// A folder with no trace in it, or none at all, is bad input named with
// its path (exit 1), not an empty analysis.
TEST(AnalyzeCliTest, AFolderWithoutTracesExitsOneNamingIt) {
  TempDir dir;
  testing::WriteAll(dir.File("report.json"), "{\"schema_version\": 1}");
  testing::WriteAll(dir.File("notes.txt"), "not a trace");
  const testing::ProcessResult empty =
      testing::RunProcess({TRAINSCOPE_CLI_PATH, "analyze", dir.path()});
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_NE(empty.err.find(dir.path() + ": no .json or .json.gz traces"), std::string::npos)
      << empty.err;
  const testing::ProcessResult missing =
      testing::RunProcess({TRAINSCOPE_CLI_PATH, "analyze", dir.File("absent")});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find(dir.File("absent") + ": "), std::string::npos) << missing.err;
}

// A trace without device work: a PyTorch-profiler trace recorded without
// ProfilerActivity.CUDA has nothing to measure idle time against (exit 1,
// the file named), not an all-zero breakdown; trainscope's own CPU trace
// is measured against its compute phases, and says there is no HTA
// breakdown.
TEST(AnalyzeCliTest, ATraceWithoutDeviceWorkSaysSo) {
  TempDir dir;
  testing::WriteAll(dir.File("cpu.json"),
                    R"({"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
     "ts": 90, "dur": 100},
    {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 100, "dur": 50},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1,
     "ts": 195, "dur": 60}]})");
  const testing::ProcessResult kineto =
      testing::RunProcess({TRAINSCOPE_CLI_PATH, "analyze", dir.File("cpu.json")});
  EXPECT_EQ(kineto.exit_code, 1) << kineto.out;
  EXPECT_NE(kineto.err.find(dir.File("cpu.json") +
                            ": a CPU-only trace: no kernels, memory copies or sets, nothing on "
                            "a device stream and no trainscope phases, so nothing to analyse (3 "
                            "events read: user_annotation 2, cpu_op 1); a PyTorch-profiler trace "
                            "has its device work only with ProfilerActivity.CUDA"),
            std::string::npos)
      << kineto.err;
  EXPECT_EQ(kineto.out, "");

  // CUPTI's range profiler: counter ranges, no activity records (HTA stops
  // on this one with an IndexError).
  testing::WriteAll(dir.File("ranges.json"),
                    R"({"traceEvents": [
    {"ph": "X", "cat": "cuda_profiler_range", "name": "range 0", "pid": 1, "tid": 1, "ts": 10,
     "dur": 40, "args": {"smsp__sass_thread_inst_executed_op_dadd_pred_on.sum": 0}},
    {"ph": "X", "cat": "cuda_profiler_range", "name": "range 1", "pid": 1, "tid": 1, "ts": 60,
     "dur": 40, "args": {}}]})");
  const testing::ProcessResult ranges =
      testing::RunProcess({TRAINSCOPE_CLI_PATH, "analyze", dir.File("ranges.json")});
  EXPECT_EQ(ranges.exit_code, 1);
  EXPECT_NE(ranges.err.find(dir.File("ranges.json") +
                            ": a CUPTI range-profiler trace (2 cuda_profiler_range events): it "
                            "holds counter ranges, not the activity records"),
            std::string::npos)
      << ranges.err;

  // Device work, but in a category this reader does not know.
  testing::WriteAll(dir.File("unknown.json"),
                    R"({"traceEvents": [
    {"ph": "X", "cat": "gpu_op", "name": "gemm", "pid": 0, "tid": 7, "ts": 10, "dur": 40,
     "args": {"stream": 7, "correlation": 3, "device": 0}},
    {"ph": "X", "cat": "gpu_op", "name": "gemm", "pid": 0, "tid": 7, "ts": 60, "dur": 40,
     "args": {"stream": 7, "correlation": 4, "device": 0}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 5, "dur": 4}]})");
  const testing::ProcessResult unknown =
      testing::RunProcess({TRAINSCOPE_CLI_PATH, "analyze", dir.File("unknown.json")});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find(dir.File("unknown.json") +
                             ": 2 events carry a stream and a correlation (device work) but in "
                             "categories this reader does not know (gpu_op 2); none is a kernel"),
            std::string::npos)
      << unknown.err;

  Options options;
  options.output_dir = dir.File("run");
  options.sinks = Sink::kTraceJson;
  auto session = Session::Start(options);
  ASSERT_TRUE(session.ok()) << session.status();
  for (int i = 0; i < 3; ++i) {
    StepScope step(*session, i);
    TRAINSCOPE_PHASE(kForward);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(session->Finish().ok());
  const testing::ProcessResult own =
      testing::RunProcess({TRAINSCOPE_CLI_PATH, "analyze", dir.File("run/trace.json")});
  EXPECT_EQ(own.exit_code, 0) << own.err;
  EXPECT_NE(own.out.find("(cpu_compute_phases)"), std::string::npos) << own.out;
  EXPECT_NE(own.out.find("HTA breakdowns: none (no GPU kernels, memory copies or sets in this "
                         "trace; idle gaps are measured against trainscope's compute phases)"),
            std::string::npos)
      << own.out;
  EXPECT_EQ(own.out.find("HTA temporal breakdown"), std::string::npos) << own.out;
  const testing::ProcessResult json = testing::RunProcess(
      {TRAINSCOPE_CLI_PATH, "analyze", "--format=json", dir.File("run/trace.json")});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(json.out).get(doc), simdjson::SUCCESS) << json.out;
  std::string_view note;
  ASSERT_EQ(doc["hta"]["note"].get_string().get(note), simdjson::SUCCESS) << json.out;
  EXPECT_NE(note.find("no GPU kernels"), std::string_view::npos);
  // A trace with kernels has no note.
  const testing::ProcessResult gpu = testing::RunProcess(
      {TRAINSCOPE_CLI_PATH, "analyze", "--format=json", SharedTrace("simple_add.json.gz")});
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  EXPECT_EQ(gpu.out.find("\"note\""), std::string::npos);
}

TEST(AnalyzeCliTest, MalformedTraceExitsOneWithTheOffset) {
  TempDir dir;
  testing::WriteAll(dir.File("bad.json"), "{\"traceEvents\": [{\"ph\": \"X\",]}");
  const testing::ProcessResult run =
      testing::RunProcess({TRAINSCOPE_CLI_PATH, "analyze", dir.File("bad.json")});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("bad.json: byte "), std::string::npos) << run.err;
}

}  // namespace
}  // namespace trainscope
