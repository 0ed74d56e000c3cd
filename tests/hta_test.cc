// The HTA breakdown (sdk/analysis/hta_breakdown) on PyTorch-profiler
// traces: agreement with HTA's own numbers on the shared traces, and its
// rules case by case.
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
using testing::ComputeHtaBreakdown;
using testing::HtaBreakdown;
using testing::IdleRows;
using testing::Kernel;
using testing::Launch;
using testing::Near;
using testing::SharedTrace;
using testing::Step;
using testing::TempDir;
using testing::WriteTrace;

TEST(HtaAgreementTest, SharedTracesMatchHtaWithinHalfAPercent) {
  simdjson::dom::parser parser;
  simdjson::dom::element expected;
  ASSERT_EQ(parser.load(SharedTrace("expected-hta.json")).get(expected), simdjson::SUCCESS)
      << "missing " << SharedTrace("expected-hta.json");
  int traces = 0;
  for (auto [file, entry] : expected.get_object()) {
    SCOPED_TRACE(std::string(file));
    ++traces;
    const HtaBreakdown hta = Analyze(SharedTrace(std::string(file)));
    simdjson::dom::object temporal = entry["temporal_breakdown_us"].get_object();
    EXPECT_PRED2(Near, hta.temporal.idle_us, double(temporal["idle_time(us)"]));
    EXPECT_PRED2(Near, hta.temporal.compute_us, double(temporal["compute_time(us)"]));
    EXPECT_PRED2(Near, hta.temporal.non_compute_us, double(temporal["non_compute_time(us)"]));
    EXPECT_PRED2(Near, hta.temporal.kernel_us, double(temporal["kernel_time(us)"]));
    const auto ours = IdleRows(hta);
    size_t rows = 0;
    for (simdjson::dom::element row : entry["idle_time_breakdown_us"].get_array()) {
      ++rows;
      const int64_t stream = row["stream"].get_int64().value();
      const std::string category(row["category"].get_string().value());
      const std::pair<int64_t, std::string> key{stream, category};
      auto it = ours.find(key);
      ASSERT_NE(it, ours.end()) << "stream " << key.first << " " << key.second;
      EXPECT_PRED2(Near, it->second, double(row["idle_time"]))
          << "stream " << key.first << " " << key.second;
    }
    EXPECT_EQ(ours.size(), rows);
  }
  EXPECT_EQ(traces, 5);
}

// A hand-written Kineto trace; each line is one event.

TEST(HtaBreakdownTest, OverlappingStreamsZeroLengthAndOutOfOrderRecords) {
  TempDir dir;
  // Written out of order on purpose. Stream 7: gemm [100,110), relu
  // [105,115) overlapping it, a zero-length kernel at 120, a copy
  // [130,135), and a late kernel [200,210). Stream 8: conv [120,140).
  const std::string path = WriteTrace(
      dir, "t.json",
      {Kernel("Memcpy HtoD (Pageable -> Device)", 130, 5, 7, 4, "gpu_memcpy"),
       Kernel("relu", 105, 10, 7, 2), Kernel("gemm", 100, 10, 7, 1), Kernel("empty", 120, 0, 7, 3),
       Kernel("conv", 120, 20, 8, 5), Kernel("late", 200, 10, 7, 6), Launch(90, 1), Launch(91, 2),
       Launch(118, 3), Launch(110, 4), Launch(115, 5), Launch(190, 6)});
  absl::StatusOr<kineto::ImportedTrace> trace = kineto::ImportTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->rank, 3);
  EXPECT_EQ(trace->kernels, 5);
  EXPECT_EQ(trace->memcpys, 1);
  const HtaBreakdown hta = ComputeHtaBreakdown(trace->timeline, trace->hta);
  // Union: [100,115) [120,140) [200,210) = 15 + 20 + 10 = 45 of a 110 span.
  EXPECT_DOUBLE_EQ(hta.temporal.kernel_us, 110);
  EXPECT_DOUBLE_EQ(hta.temporal.idle_us, 65);
  // Compute excludes the copy: [100,115) [120,140) [200,210) still = 45.
  EXPECT_DOUBLE_EQ(hta.temporal.compute_us, 45);
  EXPECT_DOUBLE_EQ(hta.temporal.non_compute_us, 0);
  const auto rows = IdleRows(hta);
  // Stream 7 in start order: gemm, relu (gap -5: launched at 91 < 110, so
  // kernel_wait), empty (gap 120-115 = 5, launched at 118 > 115: host_wait),
  // memcpy (gap 10, launched at 110 < 120: kernel_wait), late (gap 65,
  // launched at 190 > 135: host_wait).
  EXPECT_DOUBLE_EQ(rows.at({7, "kernel_wait"}), -5 + 10);
  EXPECT_DOUBLE_EQ(rows.at({7, "host_wait"}), 5 + 65);
  EXPECT_DOUBLE_EQ(rows.at({7, "other"}), 0);  // the first kernel's row
  EXPECT_DOUBLE_EQ(rows.at({8, "other"}), 0);  // one kernel: no gap
  EXPECT_EQ(rows.count({8, "host_wait"}), 0u);
}

TEST(HtaBreakdownTest, GapsOfThirtyMicrosecondsOrMoreAreOther) {
  TempDir dir;
  const std::string path =
      WriteTrace(dir, "t.json",
                 {Kernel("a", 0, 10, 7, 1), Kernel("b", 39, 1, 7, 2), Kernel("c", 70, 1, 7, 3),
                  Launch(0, 1), Launch(1, 2), Launch(2, 3)});
  const auto rows = IdleRows(Analyze(path));
  EXPECT_DOUBLE_EQ(rows.at({7, "kernel_wait"}), 29);  // 39 - 10 < 30
  EXPECT_DOUBLE_EQ(rows.at({7, "other"}), 30);        // 70 - 40 = 30, not < 30
}

TEST(HtaBreakdownTest, LastProfilerStepIsDroppedByLaunchTime) {
  TempDir dir;
  // Steps #1 [0,100) and #2 [100,200): the cut is at 100. The kernel
  // launched at 95 runs at 150 and is kept; the one launched at 120 is
  // dropped; so is the kernel with no launch call at all.
  const std::string path =
      WriteTrace(dir, "t.json",
                 {Step(1, 0, 100), Step(2, 100, 100), Kernel("a", 10, 10, 7, 1),
                  Kernel("b", 150, 10, 7, 2), Kernel("c", 160, 10, 7, 3),
                  Kernel("orphan", 50, 5, 7, 9), Launch(5, 1), Launch(95, 2), Launch(120, 3)});
  absl::StatusOr<kineto::ImportedTrace> trace = kineto::ImportTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->hta.profiler_steps, 2);
  EXPECT_EQ(trace->steps, 2);
  const HtaBreakdown hta = ComputeHtaBreakdown(trace->timeline, trace->hta);
  EXPECT_EQ(hta.rows, 2);
  EXPECT_DOUBLE_EQ(hta.temporal.kernel_us, 150);  // [10, 160)
  EXPECT_DOUBLE_EQ(hta.temporal.idle_us, 130);
  const auto rows = IdleRows(hta);
  EXPECT_DOUBLE_EQ(rows.at({7, "host_wait"}), 130);  // launched at 95 > 20
}

// The same cut when the steps start before time 0 (negative timestamps):
// steps #1 at -1,000,000 and #2 at -999,900 cut at -999,900, so the kernel
// launched at -999,890 is dropped and one [-999,980, -999,970) is left.
TEST(HtaBreakdownTest, StepsBeforeTimeZeroAreCutToo) {
  TempDir dir;
  const std::string path =
      WriteTrace(dir, "t.json",
                 {Step(1, -1000000, 100), Launch(-999990, 1), Kernel("gemm", -999980, 10, 7, 1),
                  Step(2, -999900, 100), Launch(-999890, 2), Kernel("gemm", -999880, 10, 7, 2)});
  const HtaBreakdown hta = Analyze(path);
  EXPECT_EQ(hta.rows, 1);
  EXPECT_DOUBLE_EQ(hta.temporal.kernel_us, 10);
  EXPECT_DOUBLE_EQ(hta.temporal.idle_us, 0);
}

TEST(HtaBreakdownTest, FloatTimestampsAreRoundedToWholeMicroseconds) {
  TempDir dir;
  // One float ts switches HTA to whole microseconds for every event:
  // start = ceil(ts), end = floor(ts + dur).
  const std::string path = WriteTrace(
      dir, "t.json",
      {Kernel("a", 10.4, 5.2, 7, 1), Kernel("b", 20, 3, 7, 2), Launch(1, 1), Launch(2, 2)});
  const HtaBreakdown hta = Analyze(path);
  // a becomes [11, 15), b [20, 23): span 12, covered 7.
  EXPECT_DOUBLE_EQ(hta.temporal.kernel_us, 12);
  EXPECT_DOUBLE_EQ(hta.temporal.idle_us, 5);
}

// HTA's rule on a nanosecond trace at an epoch-sized time B = 1.7e15 us,
// where doubles are 0.25 us apart. pandas reads ts and dur as the nearest
// doubles, adds them in float64, then takes ceil(ts) and floor(ts + dur).
// By hand, in us after B:
//   a  ts 0.100 dur 2.000: ts reads 0.0 -> start 0 (exactly, ceil is 1);
//      0.0 + 2.0 = 2.0 -> end 2.                           row [0, 2]
//   b  ts 10.400 dur 4.500: ts reads 10.5 -> start 11; 10.5 + 4.5 = 15.0
//      -> end 15 (exactly, 14.9 -> 14).                    row [11, 15]
//   c  ts 20.900 dur 0.200: ts reads 21.0 -> start 21; 21.0 + 0.2 = 21.2
//      rounds to 21.25 -> end 21.                          row [21, 21]
//   d  ts 30.000 dur 1.880: 30.0 + 1.88 = 31.88 rounds to 32.0 (0.12 away,
//      31.75 is 0.13) -> end 32 (exactly, 31).             row [30, 32]
// Temporal: span 32 - 0 = 32, covered 2 + 4 + 0 + 2 = 8, idle 24, all
// computation. Launches: b's at 1.000 (before a's end 2: kernel_wait 9);
// c's at 15.100, which reads 15.0 -> 15, not after b's end 15 (kernel_wait
// 6; exactly, ceil 16 would make it host_wait); d's at 21.200, which reads
// 21.25 -> 22, after c's end 21 (host_wait 9).
TEST(HtaBreakdownTest, NanosecondTimestampsRoundAsPandasFloat64Does) {
  TempDir dir;
  const std::string base = "1700000000000000";  // B: 2^50 < B < 2^51
  auto kernel = [&](const char* name, const char* ts, const char* dur, int corr) {
    return fmt::format(R"({{"ph": "X", "cat": "kernel", "name": "{}", "pid": 0, "tid": 7, )"
                       R"("ts": {}{}, "dur": {}, "args": {{"stream": 7, "correlation": {}}}}})",
                       name, base.substr(0, base.size() - 2), ts, dur, corr);
  };
  auto launch = [&](const char* ts, int corr) {
    return fmt::format(R"({{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", )"
                       R"("pid": 9, "tid": 9, "ts": {}{}, "dur": 1.000, )"
                       R"("args": {{"correlation": {}}}}})",
                       base.substr(0, base.size() - 2), ts, corr);
  };
  const std::string path =
      WriteTrace(dir, "ns.json",
                 {launch("00.000", 1), kernel("gemm_a", "00.100", "2.000", 1), launch("01.000", 2),
                  kernel("gemm_b", "10.400", "4.500", 2), launch("15.100", 3),
                  kernel("gemm_c", "20.900", "0.200", 3), launch("21.200", 4),
                  kernel("gemm_d", "30.000", "1.880", 4)});
  absl::StatusOr<kineto::ImportedTrace> trace = kineto::ImportTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_TRUE(trace->hta.round_to_us);
  // The timeline itself keeps the nanoseconds as written.
  std::vector<int64_t> starts;
  for (const auto& i : trace->timeline.intervals()) {
    if (i.kind == ground::IntervalKind::kKernel) starts.push_back(i.start_ns);
  }
  EXPECT_EQ(starts, (std::vector<int64_t>{1700000000000000100, 1700000000000010400,
                                          1700000000000020900, 1700000000000030000}));
  const HtaBreakdown hta = ComputeHtaBreakdown(trace->timeline, trace->hta);
  EXPECT_DOUBLE_EQ(hta.temporal.kernel_us, 32);
  EXPECT_DOUBLE_EQ(hta.temporal.idle_us, 24);
  EXPECT_DOUBLE_EQ(hta.temporal.compute_us, 8);
  EXPECT_DOUBLE_EQ(hta.temporal.non_compute_us, 0);
  const auto rows = IdleRows(hta);
  EXPECT_DOUBLE_EQ(rows.at({7, "kernel_wait"}), 9 + 6);
  EXPECT_DOUBLE_EQ(rows.at({7, "host_wait"}), 9);
  EXPECT_DOUBLE_EQ(rows.at({7, "other"}), 0);
}

// With every ts an integer, HTA rounds nothing, and adds dur only after
// subtracting the trace's first ts, where float64 is exact: a fractional dur
// keeps its fraction (checked against HTA 0.5.0). Rows after B: a [0, 1.88],
// b [10, 12.1], c [40, 40.13]: span 40.13, covered 4.11, idle 36.02. A sum
// at the full magnitude would have given a [0, 2.0] and b [10, 12.0].
TEST(HtaBreakdownTest, IntegerTimestampsWithFractionalDurationsAreNotRounded) {
  TempDir dir;
  constexpr int64_t kB = 1700000000000000;
  auto kernel = [&](const char* name, int64_t ts, const char* dur, int corr) {
    return fmt::format(R"({{"ph": "X", "cat": "kernel", "name": "{}", "pid": 0, "tid": 7, )"
                       R"("ts": {}, "dur": {}, "args": {{"stream": 7, "correlation": {}}}}})",
                       name, kB + ts, dur, corr);
  };
  const std::string path = WriteTrace(
      dir, "t.json",
      {Launch(kB - 5, 1), kernel("gemm_a", 0, "1.880", 1), Launch(kB + 11, 2),
       kernel("gemm_b", 10, "2.100", 2), Launch(kB + 13, 3), kernel("gemm_c", 40, "0.130", 3)});
  absl::StatusOr<kineto::ImportedTrace> trace = kineto::ImportTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_FALSE(trace->hta.round_to_us);
  const HtaBreakdown hta = ComputeHtaBreakdown(trace->timeline, trace->hta);
  EXPECT_NEAR(hta.temporal.kernel_us, 40.13, 1e-9);
  EXPECT_NEAR(hta.temporal.compute_us, 4.11, 1e-9);
  EXPECT_NEAR(hta.temporal.idle_us, 36.02, 1e-9);
  EXPECT_DOUBLE_EQ(IdleRows(hta).at({7, "host_wait"}), 36.02);
}

// NanosToMicros is the double nearest ns / 1000: what a correctly rounding
// parser (glibc's strtod, Python's float) makes of "{ns / 1000}.{ns % 1000}",
// for every time a trace can hold (below 2^53 us).
TEST(HtaBreakdownTest, NanosToMicrosIsTheParsersDouble) {
  auto text_of = [](int64_t ns) {
    const uint64_t magnitude = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
    return fmt::format("{}{}.{:03}", ns < 0 ? "-" : "", magnitude / 1000, magnitude % 1000);
  };
  constexpr int64_t kLimit = (int64_t{1} << 53) * 1000;  // 2^53 us
  std::vector<int64_t> values = {0,
                                 1,
                                 100,
                                 300,
                                 2752,
                                 12300,
                                 999999,
                                 -700,
                                 int64_t{1700000000000000100},
                                 int64_t{1700000000000000125},
                                 int64_t{1712195495505772800},
                                 -int64_t{1712195495505772100},
                                 (int64_t{1} << 53) - 1,
                                 (int64_t{1} << 53),
                                 (int64_t{1} << 53) + 1,
                                 kLimit - 1,
                                 1 - kLimit};
  // And 200,000 more of every magnitude, either sign, from a fixed seed.
  std::mt19937_64 random(14);
  for (int k = 0; k < 200000; ++k) {
    const auto ns = static_cast<int64_t>((random() >> (random() % 63)) % kLimit);
    values.push_back(k % 2 ? ns : -ns);
  }
  int wrong = 0;
  for (const int64_t ns : values) {
    const std::string text = text_of(ns);
    if (ground::NanosToMicros(ns) != std::strtod(text.c_str(), nullptr) && ++wrong <= 5) {
      ADD_FAILURE() << text << ": " << fmt::format("{}", ground::NanosToMicros(ns));
    }
  }
  EXPECT_EQ(wrong, 0);
}

// A run's device rows on three streams, each launched by a runtime call,
// some kernels long enough to run past many later ones.
analysis::Timeline DeviceRun(int kernels, uint64_t seed) {
  analysis::Timeline t;
  const uint32_t host = t.AddTrack({analysis::TrackKind::kHostThread, 1, 1, "main"});
  uint32_t streams[3];
  for (int k = 0; k < 3; ++k) {
    streams[k] = t.AddTrack({analysis::TrackKind::kDeviceStream, 0, 7 + k, "stream"});
  }
  const uint32_t launch = t.Intern("cudaLaunchKernel");
  const uint32_t names[3] = {t.Intern("gemm"), t.Intern("Memcpy HtoD"), t.Intern("ncclKernel")};
  std::mt19937_64 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  int64_t now = 1'000'000;
  int64_t free_at[3] = {0, 0, 0};
  for (int n = 0; n < kernels; ++n) {
    analysis::Interval call;
    call.start_ns = now;
    call.end_ns = now + uniform(2'000, 9'000);
    call.kind = analysis::IntervalKind::kRuntimeCall;
    call.track = host;
    call.name = launch;
    call.value = n;
    t.Add(call);
    const int s = static_cast<int>(uniform(0, 2));
    analysis::Interval kernel;
    kernel.start_ns = std::max(call.end_ns + uniform(1'000, 60'000), free_at[s]);
    kernel.end_ns =
        kernel.start_ns + (n % 50 == 7 ? uniform(2'000'000, 9'000'000) : uniform(1'000, 80'000));
    free_at[s] = kernel.end_ns - (n % 9 == 0 ? 3'000 : 0);  // overlaps now and then
    kernel.kind = s == 1 ? analysis::IntervalKind::kMemcpy : analysis::IntervalKind::kKernel;
    kernel.track = streams[s];
    kernel.name = names[s];
    kernel.value = n;
    t.Add(kernel);
    now = call.end_ns + uniform(0, 50'000);
  }
  return t;
}

void ExpectSameBreakdown(const HtaBreakdown& got, const HtaBreakdown& want) {
  EXPECT_EQ(got.rows, want.rows);
  EXPECT_EQ(got.temporal.kernel_us, want.temporal.kernel_us);
  EXPECT_EQ(got.temporal.idle_us, want.temporal.idle_us);
  EXPECT_EQ(got.temporal.compute_us, want.temporal.compute_us);
  EXPECT_EQ(got.temporal.non_compute_us, want.temporal.non_compute_us);
  ASSERT_EQ(got.idle_by_stream.size(), want.idle_by_stream.size());
  for (size_t k = 0; k < want.idle_by_stream.size(); ++k) {
    EXPECT_EQ(got.idle_by_stream[k].stream, want.idle_by_stream[k].stream);
    EXPECT_EQ(got.idle_by_stream[k].category, want.idle_by_stream[k].category);
    EXPECT_EQ(got.idle_by_stream[k].idle_us, want.idle_by_stream[k].idle_us);
    EXPECT_EQ(got.idle_by_stream[k].ratio, want.idle_by_stream[k].ratio);
  }
}

// Rows and calls handed over as they end (the order a Session releases
// them), each Advance up to the earliest start still to come: the same
// breakdowns as the whole run's, with launch calls forgotten as they age.
TEST(HtaFoldTest, RowsReleasedAsTheyEndFoldAsTheWholeRun) {
  analysis::Timeline run = DeviceRun(20000, 5);
  const HtaBreakdown want = ComputeHtaBreakdown(run, analysis::HtaTraceFacts{});
  ASSERT_EQ(want.rows, 20000);
  ASSERT_EQ(want.idle_by_stream.size(), 9u);  // three streams, each kind of wait
  std::vector<analysis::Interval> by_end = run.intervals();
  std::stable_sort(by_end.begin(), by_end.end(),
                   [](const auto& a, const auto& b) { return a.end_ns < b.end_ns; });
  analysis::HtaFold fold(run, /*launch_horizon_ns=*/50'000'000);
  size_t next = 0;
  size_t most_held = 0;
  for (int64_t t = 0; next < by_end.size(); t += 3'000'000) {
    while (next < by_end.size() && by_end[next].end_ns <= t) fold.Add(by_end[next++]);
    int64_t horizon = t;
    for (size_t k = next; k < by_end.size(); ++k) horizon = std::min(horizon, by_end[k].start_ns);
    fold.Advance(horizon);
    most_held = std::max(most_held, fold.held_rows() + fold.held_calls());
  }
  ExpectSameBreakdown(fold.Finish(), want);
  EXPECT_EQ(fold.late_rows(), 0);
  EXPECT_LT(most_held, 5000u) << "calls of the last 50 ms and rows behind the long kernels";
}

// A row that comes after later-starting rows were folded (a kernel that ran
// past kMaxHeldRows others) is folded out of order and counted; what is
// held stays bounded.
TEST(HtaFoldTest, HeldRowsAreBoundedAndALateRowIsCounted) {
  analysis::Timeline t;
  const uint32_t stream = t.AddTrack({analysis::TrackKind::kDeviceStream, 0, 7, "stream 7"});
  analysis::HtaFold fold(t);
  analysis::Interval row;
  row.kind = analysis::IntervalKind::kKernel;
  row.track = stream;
  row.name = t.Intern("gemm");
  const size_t rows = 3 * analysis::HtaFold::kMaxHeldRows;
  for (size_t k = 0; k < rows; ++k) {
    row.start_ns = 1000 + static_cast<int64_t>(k) * 10;
    row.end_ns = row.start_ns + 5;
    row.value = static_cast<int64_t>(k);
    fold.Add(row);  // never advanced: a long row still runs at time 0
    ASSERT_LE(fold.held_rows(), analysis::HtaFold::kMaxHeldRows);
  }
  row.start_ns = 0;
  row.end_ns = 1000 + static_cast<int64_t>(rows) * 10;
  fold.Add(row);
  const HtaBreakdown hta = fold.Finish();
  EXPECT_EQ(hta.rows, static_cast<int64_t>(rows) + 1);
  EXPECT_EQ(fold.late_rows(), 1);
}

TEST(HtaBreakdownTest, KernelClassificationFollowsHtaNames) {
  using analysis::ClassifyKernel;
  using analysis::KernelClass;
  EXPECT_EQ(ClassifyKernel("ncclKernel_AllReduce_RING_LL_Sum_float"), KernelClass::kCommunication);
  EXPECT_EQ(ClassifyKernel("Memcpy HtoD (Pinned -> Device)"), KernelClass::kMemory);
  EXPECT_EQ(ClassifyKernel("Memset (Device)"), KernelClass::kMemory);
  EXPECT_EQ(ClassifyKernel("Stream Wait Event"), KernelClass::kOther);
  EXPECT_EQ(ClassifyKernel("Context Sync"), KernelClass::kOther);
  EXPECT_EQ(ClassifyKernel("void at::native::vectorized_elementwise_kernel<4>"),
            KernelClass::kComputation);
  EXPECT_EQ(ClassifyKernel("sm90_xmma_gemm_bf16bf16_bf16f32"), KernelClass::kComputation);
}

}  // namespace
}  // namespace trainscope
