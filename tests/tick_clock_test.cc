// The recorder's TSC clock: the calibration that turns ticks into
// CLOCK_MONOTONIC nanoseconds (fed simulated drift), the machine check, and
// a session's ranges on the clock CUPTI uses, with either clock.
#include "sdk/ground/tick_clock.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "simdjson.h"
#include "tests/test_util.h"
#include "trainscope/trainscope.h"

namespace trainscope {
namespace {

using ground::TickCalibration;
using ground::TickPair;
using testing::TempDir;

constexpr double kPi = 3.14159265358979323846;

// A TSC of nominally 2.6 GHz whose rate against CLOCK_MONOTONIC drifts by
// 30 ppm over the hour and swings by +-20 ppm with a 10-minute period (NTP
// slewing the clock, a VM's counter): ticks at true time t seconds.
double TicksAt(double t) {
  return 2.6e9 * (t + 30e-6 * t * t / (2 * 3600) +
                  20e-6 * 600 / (2 * kPi) * (1 - std::cos(2 * kPi * t / 600))) +
         5e12;
}

TEST(TickCalibrationTest, ConvertsWithinAMicrosecondThroughAnHourOfDrift) {
  TickCalibration calibration;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> jitter(-25e-9, 25e-9);  // a read's noise, s
  std::uniform_real_distribution<double> unit(0, 1);
  constexpr double kDrain = 0.05;  // a point per 50 ms drain
  constexpr double kStart = 1000;  // CLOCK_MONOTONIC at the start, s
  double worst_recent = 0, worst_old = 0;
  int checked_old = 0;
  for (int k = 0; k <= 72000; ++k) {
    const double t = k * kDrain;
    calibration.Add({static_cast<int64_t>(TicksAt(t)),
                     static_cast<TimestampNs>(std::llround((kStart + t + jitter(rng)) * 1e9))});
    if (k == 0) continue;
    // What this drain converts: events since the last point, and those
    // pushed while it runs (after this point).
    for (int e = 0; e < 8; ++e) {
      const double when = t - kDrain + unit(rng) * (kDrain + 0.005);
      const double got = static_cast<double>(calibration.ToNs(static_cast<int64_t>(TicksAt(when))));
      worst_recent = std::max(worst_recent, std::abs(got - (kStart + when) * 1e9));
    }
    // The start of a long range: 10 s to an hour back.
    if (k % 500 == 0) {
      for (double back : {10.0, 300.0, 1800.0, 3500.0}) {
        if (back > t) continue;
        const double when = t - back + unit(rng);
        const double got =
            static_cast<double>(calibration.ToNs(static_cast<int64_t>(TicksAt(when))));
        worst_old = std::max(worst_old, std::abs(got - (kStart + when) * 1e9));
        ++checked_old;
      }
    }
  }
  EXPECT_LE(worst_recent, 1000.0);
  EXPECT_LE(worst_old, 1000.0);
  EXPECT_GT(checked_old, 300);
  EXPECT_EQ(calibration.points(), 72001);
  EXPECT_NEAR(calibration.tsc_hz(), 2.6e9, 2.6e9 * 50e-6);
  // The worst extrapolation error it reports covers what was seen ahead of
  // the last point.
  EXPECT_GT(calibration.max_error_ns(), 0);
  EXPECT_LE(calibration.max_error_ns(), 1000);
}

// A ring's ticks converted with a hint (the span the last one fell in)
// land where they land without: in order, out of order, before the first
// point and after the last.
TEST(TickCalibrationTest, AHintChangesNothingButTheSearch) {
  TickCalibration calibration;
  for (int k = 0; k <= 3000; ++k) {
    const double t = k * 0.05;
    calibration.Add({static_cast<int64_t>(TicksAt(t)), static_cast<TimestampNs>(t * 1e9) + 7});
  }
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> unit(-1, 151);
  std::vector<int64_t> ticks;
  for (int e = 0; e < 20000; ++e) ticks.push_back(static_cast<int64_t>(TicksAt(unit(rng))));
  std::sort(ticks.begin(), ticks.begin() + 15000);  // a ring's order, then a shuffled tail
  TickCalibration::Hint hint;
  for (const int64_t tick : ticks) {
    ASSERT_EQ(calibration.ToNs(tick, &hint), calibration.ToNs(tick)) << tick;
  }
}

TEST(TickCalibrationTest, OneRateForTheWholeRunWouldMissByFarMore) {
  // The same drift converted with the first minute's rate only: the check
  // above can fail.
  const double t0 = TicksAt(0), t1 = TicksAt(60);
  const double rate = 60e9 / (t1 - t0);
  const double at_hour = (TicksAt(3600) - t0) * rate;
  EXPECT_GT(std::abs(at_hour - 3600e9), 1e6);  // over a millisecond
}

TEST(TickCalibrationTest, PointsThatDoNotMoveForwardAreIgnored) {
  TickCalibration calibration;
  calibration.Add({1000, 5000});
  calibration.Add({3000, 6000});
  calibration.Add({2000, 7000});  // ticks went back
  calibration.Add({4000, 6000});  // ns did not move
  EXPECT_EQ(calibration.points(), 2);
  EXPECT_EQ(calibration.ToNs(2000), 5500);  // between the two points
  EXPECT_EQ(calibration.ToNs(5000), 7000);  // ahead, at their rate
  EXPECT_EQ(calibration.ToNs(0), 4500);     // before, at their rate
}

TEST(TickCalibrationTest, WithOnePointTicksCountAsNanoseconds) {
  TickCalibration calibration;
  EXPECT_EQ(calibration.tsc_hz(), 0);
  calibration.Add({100, 5000});
  EXPECT_EQ(calibration.ToNs(150), 5050);
  EXPECT_EQ(calibration.tsc_hz(), 0);
}

// ---- on this machine ------------------------------------------------------

std::string FileFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

TEST(TscUsableTest, AgreesWithTheKernelsClocksourceAndCpuFlags) {
  std::string why;
  const bool usable = ground::TscUsable(&why);
  const std::string source =
      FileFirstLine("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, flags;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) == 0) {
      flags = line + " ";
      break;
    }
  }
  const bool expected = source == "tsc" && flags.find(" constant_tsc ") != std::string::npos &&
                        flags.find(" nonstop_tsc ") != std::string::npos;
#if !defined(__x86_64__)
  EXPECT_FALSE(usable);
#else
  EXPECT_EQ(usable, expected) << why;
#endif
  if (!usable) {
    EXPECT_FALSE(why.empty());
  }
}

// A range timed by the session clock around it: its converted times fall
// between the NowNs() reads that bracket it (the clock CUPTI's records use).
void ExpectRangeOnTheSessionClock(Options::Clock clock, const std::string& expected_clock) {
  TempDir dir;
  Options options;
  options.output_dir = dir.path();
  options.sinks = Sink::kTraceJson | Sink::kReportJson;
  options.warmup_steps = 0;
  options.clock = clock;
  options.trace_first_steps = 100;  // every step in trace.json, in order
  options.device_timeline = false;
  auto session = Session::Start(options);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<std::pair<TimestampNs, TimestampNs>> brackets;
  for (int64_t i = 0; i < 30; ++i) {
    StepScope step(*session, StepIndex(i), Samples(1));
    const TimestampNs before = NowNs();
    {
      TRAINSCOPE_PHASE(kForward);
      const TimestampNs until = NowNs() + 300000;
      while (NowNs() < until) {
      }
    }
    brackets.emplace_back(before, NowNs());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // drains in between
  }
  auto report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->events.clock.rfind(expected_clock, 0), 0u) << report->events.clock;
  if (expected_clock == "tsc") {
    EXPECT_GT(report->events.tsc_hz, 1e8);
    EXPECT_GE(report->events.clock_calibrations, 3);
  }

  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.load(dir.File("trace.json")).get(doc), simdjson::SUCCESS);
  size_t k = 0;
  for (simdjson::dom::element e : doc["traceEvents"].get_array()) {
    std::string_view name;
    if (e["name"].get_string().get(name) != simdjson::SUCCESS || name != "forward") continue;
    ASSERT_LT(k, brackets.size());
    const double start_ns = e["ts"].get_double().value() * 1000;
    const double end_ns = start_ns + e["dur"].get_double().value() * 1000;
    // 1 us of slack: the conversion's error bound, and the trace's rounding.
    EXPECT_GE(start_ns, static_cast<double>(brackets[k].first) - 1000) << "range " << k;
    EXPECT_LE(end_ns, static_cast<double>(brackets[k].second) + 1000) << "range " << k;
    EXPECT_GE(end_ns - start_ns, 300000 - 1000) << "range " << k;
    ++k;
  }
  EXPECT_EQ(k, brackets.size());
}

TEST(SessionClockTest, RangesReadWithTheTscLandOnTheSessionClock) {
  std::string why;
  if (!ground::TscUsable(&why)) GTEST_SKIP() << "the TSC is not usable here: " << why;
  ExpectRangeOnTheSessionClock(Options::Clock::kAuto, "tsc");
}

TEST(SessionClockTest, RangesReadWithClockMonotonicLandOnTheSessionClock) {
  ExpectRangeOnTheSessionClock(Options::Clock::kMonotonic, "clock_monotonic (Options::clock)");
}

}  // namespace
}  // namespace trainscope
