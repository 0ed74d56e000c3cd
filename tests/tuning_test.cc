// Experiments' statistics and verdict (sdk/tuning) on seeded synthetic
// trials: the rank test against brute-force enumeration, Holm, the
// bootstrap, and the error rates the verdict is held to, with and
// without sequential stopping.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "sdk/tuning/experiment.h"
#include "sdk/tuning/experiment_fields.h"
#include "sdk/tuning/gpu_covariates.h"
#include "sdk/tuning/statistics.h"
#include "sdk/tuning/verdict.h"
#include "tests/json_fields_testing.h"
#include "tests/test_util.h"

namespace trainscope::tuning {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(StatisticsTest, MediansAndRatiosNeverComeOutNaN) {
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(Median({1, kInf, kInf}), kInf);
  EXPECT_EQ(Median({1, 2, kInf, kInf}), kInf);  // half failed: the median failed
  EXPECT_EQ(Median({1, 2, 3, kInf}), 2.5);
  EXPECT_TRUE(std::isnan(Median({})));
  EXPECT_EQ(RatioOfMedians(2, 1), 0.5);
  EXPECT_EQ(RatioOfMedians(kInf, kInf), 1);
  EXPECT_EQ(RatioOfMedians(kInf, 3), 0);
  EXPECT_EQ(RatioOfMedians(3, kInf), kInf);
  EXPECT_EQ(RatioOfMedians(0, 0), 1);
  EXPECT_EQ(RatioOfMedians(0, 2), kInf);
  EXPECT_EQ(RatioOfMedians(2, 0), 0);
}

// The p-value by enumerating every way to split the pooled values.
double BruteForceP(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> pooled = a;
  pooled.insert(pooled.end(), b.begin(), b.end());
  const size_t n = pooled.size();
  std::vector<double> ranks(n);
  for (size_t i = 0; i < n; ++i) {
    double less = 0, equal = 0;
    for (size_t j = 0; j < n; ++j) {
      less += pooled[j] < pooled[i];
      equal += pooled[j] == pooled[i];
    }
    ranks[i] = less + (equal + 1) / 2;
  }
  double observed = 0;
  for (size_t i = 0; i < a.size(); ++i) observed += ranks[i];
  const double expected = a.size() * (n + 1) / 2.0;
  int64_t extreme = 0, total = 0;
  for (uint32_t mask = 0; mask < (1u << n); ++mask) {
    if (static_cast<size_t>(__builtin_popcount(mask)) != a.size()) continue;
    double sum = 0;
    for (size_t i = 0; i < n; ++i) {
      if (mask & (1u << i)) sum += ranks[i];
    }
    ++total;
    extreme += std::fabs(sum - expected) >= std::fabs(observed - expected) - 1e-9;
  }
  return static_cast<double>(extreme) / total;
}

TEST(StatisticsTest, MannWhitneyIsTheExactPermutationTestWithTies) {
  EXPECT_NEAR(MannWhitneyP({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}), 2.0 / 252, 1e-12);
  EXPECT_EQ(MannWhitneyP({1, 2, 3}, {1, 2, 3}), 1);
  EXPECT_EQ(MannWhitneyP({}, {1}), 1);
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int> value(0, 6);  // coarse: many ties
  std::uniform_int_distribution<int> size(1, 7);
  for (int round = 0; round < 200; ++round) {
    std::vector<double> a(size(rng)), b(size(rng));
    for (double& x : a) x = value(rng) == 6 ? kInf : value(rng);  // failures as +inf
    for (double& x : b) x = value(rng) == 6 ? kInf : value(rng) + 1;
    EXPECT_NEAR(MannWhitneyP(a, b), BruteForceP(a, b), 1e-12) << round;
  }
}

TEST(StatisticsTest, LargeSamplesUseTheNormalApproximation) {
  std::vector<double> a, b;
  for (int i = 0; i < 40; ++i) {
    a.push_back(i);
    b.push_back(i);
  }
  EXPECT_NEAR(MannWhitneyP(a, b), 1, 1e-9);
  for (double& x : b) x += 40;
  EXPECT_LT(MannWhitneyP(a, b), 1e-10);
  // b = a + 10, by hand: R_a = 55 + sum over v = 10..39 of (2v - 8.5) =
  // 1270, U = 1270 - 820 = 450; 30 ties of two: sigma^2 = 40 * 40 / 12 *
  // (81 - 180 / 6320) = 10796.2; z = (|450 - 800| - 0.5) / 103.905 = 3.3637;
  // two-sided p = erfc(z / sqrt 2) = 7.6917e-4.
  for (double& x : b) x -= 30;
  EXPECT_NEAR(MannWhitneyP(a, b), 7.6917e-4, 1e-8);
}

TEST(StatisticsTest, HolmStepsDown) {
  const std::vector<double> adjusted = HolmAdjust({0.01, 0.04, 0.03});
  EXPECT_NEAR(adjusted[0], 0.03, 1e-12);
  EXPECT_NEAR(adjusted[1], 0.06, 1e-12);
  EXPECT_NEAR(adjusted[2], 0.06, 1e-12);
  EXPECT_EQ(HolmAdjust({0.6, 0.7})[1], 1.0);
}

// The smallest p the exact test can give is that of a complete ordering,
// and the repeats it takes to go below the level after Holm follow.
TEST(StatisticsTest, TheFewestRepeatsThatCanReachTheLevel) {
  EXPECT_DOUBLE_EQ(SmallestRankTestP(3, 3), 0.1);        // 2 / C(6, 3)
  EXPECT_DOUBLE_EQ(SmallestRankTestP(4, 4), 2.0 / 70);   // 0.029
  EXPECT_DOUBLE_EQ(SmallestRankTestP(6, 6), 2.0 / 924);  // 0.0022
  EXPECT_DOUBLE_EQ(SmallestRankTestP(2, 5), 2.0 / 21);   // unequal sizes
  EXPECT_EQ(SmallestRankTestP(0, 5), 1);
  EXPECT_EQ(SmallestRankTestP(1, 1), 1);  // 2 / 2
  // It is the test's own smallest value: two complete orderings.
  EXPECT_DOUBLE_EQ(MannWhitneyP({1, 2, 3, 4}, {5, 6, 7, 8}), SmallestRankTestP(4, 4));
  EXPECT_DOUBLE_EQ(MannWhitneyP({1, 2, 3}, {4, 5, 6}), SmallestRankTestP(3, 3));
  EXPECT_EQ(MinimumRepeats(1, 0.05), 4);
  EXPECT_EQ(MinimumRepeats(2, 0.05), 5);
  EXPECT_EQ(MinimumRepeats(6, 0.05), 5);
  EXPECT_EQ(MinimumRepeats(7, 0.05), 6);
  EXPECT_EQ(MinimumRepeats(23, 0.05), 6);
  EXPECT_EQ(MinimumRepeats(24, 0.05), 7);
  EXPECT_EQ(MinimumRepeats(1, 0.01), 5);  // 2/252 = 0.0079
}

TEST(StatisticsTest, TheBootstrapIsDeterministicAndCoversTheTrueRatio) {
  EXPECT_EQ(BootstrapRatioOfMedians({2, 2, 2}, {1, 1, 1}, 0.95, 1000, 1).low, 0.5);
  const Interval once = BootstrapRatioOfMedians({1, 2, 3, 4}, {2, 3, 4, 5}, 0.95, 2000, 7);
  const Interval again = BootstrapRatioOfMedians({1, 2, 3, 4}, {2, 3, 4, 5}, 0.95, 2000, 7);
  EXPECT_EQ(once.low, again.low);
  EXPECT_EQ(once.high, again.high);
  // Coverage with 10 trials a side, 3% noise, true ratio 0.9.
  std::mt19937_64 rng(11);
  std::lognormal_distribution<double> noise(0, 0.03);
  int covered = 0;
  for (int round = 0; round < 200; ++round) {
    std::vector<double> a(10), b(10);
    for (double& x : a) x = 100 * noise(rng);
    for (double& x : b) x = 90 * noise(rng);
    const Interval ci = BootstrapRatioOfMedians(a, b, 0.95, 2000, round);
    covered += ci.low <= 0.9 && 0.9 <= ci.high;
  }
  EXPECT_GE(covered, 180);  // nominal 190; the percentile bootstrap runs a little narrow
}

// --- The verdict on synthetic experiments -------------------------------

// Times to target with 3% lognormal noise (run-to-run noise of a training
// job on a quiet machine); `factor` scales the variant's.
struct Scenario {
  double factor = 1;
  double fail_probability = 0;  // the variant's
};

TrialOutcome SyntheticTrial(std::mt19937_64& rng, double median) {
  std::lognormal_distribution<double> noise(0, 0.03);
  TrialOutcome t;
  t.objective = median * noise(rng);
  t.resource_hours = t.objective / 3600;
  t.p99_step_ms = 20 * noise(rng);
  t.peak_memory_bytes = 1e9;
  return t;
}

struct Run {
  bool accepted = false;
  int trials = 0;
  std::string reason;
};

// A fixed design of `repeats` per variant, or a sequential one up to
// `repeats` when `sequential`.
Run Experiment(uint64_t seed, const Scenario& s, int repeats, bool sequential) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution fails(s.fail_probability);
  std::vector<VariantOutcomes> variants = {{"A", {}, {}}, {"B", {}, {}}};
  VerdictOptions options;
  options.seed = seed;
  SequentialOptions stop;
  stop.max_repeats = repeats;
  while (true) {
    variants[0].trials.push_back(SyntheticTrial(rng, 100));
    TrialOutcome b = SyntheticTrial(rng, 100 * s.factor);
    b.failed = fails(rng);
    if (b.failed) b.objective = 0;
    variants[1].trials.push_back(b);
    const int done = static_cast<int>(variants[0].trials.size());
    if (sequential ? ShouldContinue(variants, options, stop) != Continue::kYes : done >= repeats) {
      break;
    }
  }
  const Verdict v = Decide(variants, options);
  return {v.accepted.has_value(), static_cast<int>(2 * variants[0].trials.size()), v.reason};
}

struct Rates {
  int accepted = 0;
  double mean_trials = 0;
};

Rates Repeat(const Scenario& s, int repeats, bool sequential) {
  Rates r;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    const Run run = Experiment(seed, s, repeats, sequential);
    r.accepted += run.accepted;
    r.mean_trials += run.trials / 100.0;
  }
  return r;
}

TEST(VerdictTest, NoiseAloneIsNotAccepted) {
  const Rates aa = Repeat({1.0}, 5, false);
  std::printf("A/A, 5 repeats: %d of 100 accepted (goal <= 5)\n", aa.accepted);
  EXPECT_LE(aa.accepted, 5);
  const Rates aa10 = Repeat({1.0}, 10, false);
  std::printf("A/A, 10 repeats: %d of 100 accepted (goal <= 5)\n", aa10.accepted);
  EXPECT_LE(aa10.accepted, 5);
}

TEST(VerdictTest, ATrueTenPercentGainIsAcceptedWithFiveRepeats) {
  const Rates ab = Repeat({0.9}, 5, false);
  std::printf("10%% gain, 5 repeats: %d of 100 accepted (goal >= 90)\n", ab.accepted);
  EXPECT_GE(ab.accepted, 90);
}

TEST(VerdictTest, SequentialStoppingReachesTheSameErrorRatesWithFewerTrials) {
  const Rates fixed_aa = Repeat({1.0}, 10, false), fixed_ab = Repeat({0.9}, 10, false);
  const Rates seq_aa = Repeat({1.0}, 10, true), seq_ab = Repeat({0.9}, 10, true);
  const double fixed = (fixed_aa.mean_trials + fixed_ab.mean_trials) / 2;
  const double seq = (seq_aa.mean_trials + seq_ab.mean_trials) / 2;
  std::printf(
      "fixed 10 repeats: A/A %d accepted, 10%% gain %d accepted, %.1f trials per experiment\n"
      "sequential (3 to 10): A/A %d accepted (%.1f trials), 10%% gain %d accepted (%.1f "
      "trials); mean %.1f trials = %.0f%% of the fixed design (goal <= 60%%)\n",
      fixed_aa.accepted, fixed_ab.accepted, fixed, seq_aa.accepted, seq_aa.mean_trials,
      seq_ab.accepted, seq_ab.mean_trials, seq, 100 * seq / fixed);
  EXPECT_LE(seq_aa.accepted, 5);
  EXPECT_GE(seq_ab.accepted, 90);
  EXPECT_LE(seq, 0.6 * fixed);
}

VariantOutcomes Trials(const std::string& name, std::vector<double> values,
                       std::vector<bool> failed = {}) {
  VariantOutcomes v{name, {}, {}};
  for (size_t i = 0; i < values.size(); ++i) {
    TrialOutcome t;
    t.objective = values[i];
    t.failed = i < failed.size() && failed[i];
    t.resource_hours = values[i] / 3600;
    v.trials.push_back(t);
  }
  return v;
}

TEST(VerdictTest, AFasterVariantWithMoreFailuresIsRolledBack) {
  const Verdict v =
      Decide({Trials("fp32", {100, 101, 99, 102, 100, 98}),
              Trials("fp16", {80, 81, 79, 80, 82, 80}, {false, true, false, false, false, false})},
             {});
  EXPECT_FALSE(v.accepted.has_value()) << v.reason;
  ASSERT_EQ(v.comparisons.size(), 1u);
  EXPECT_NE(v.comparisons[0].reason.find("failure rate rose from 0 of 6 to 1 of 6"),
            std::string::npos)
      << v.reason;
}

TEST(VerdictTest, AFasterVariantThatMissesTheTargetIsRejected) {
  // Throughput is the objective here; the variant's runs are faster but
  // never reach the quality target, so every one of them failed.
  VerdictOptions options;
  options.lower_is_better = false;
  options.objective_name = "steady samples/s";
  const Verdict v =
      Decide({Trials("bs64", {1000, 1010, 990, 1005, 995}),
              Trials("bs512", {1900, 1910, 1890, 1905, 1895}, {true, true, true, true, true})},
             options);
  EXPECT_FALSE(v.accepted.has_value());
  EXPECT_NE(v.reason.find("bs512 failed every trial (5 of 5)"), std::string::npos) << v.reason;
  // Missing it in some runs: a worse failure rate.
  const Verdict some =
      Decide({Trials("bs64", {1000, 1010, 990, 1005, 995}),
              Trials("bs512", {1900, 1910, 1890, 1905, 1895}, {false, true, false, true, false})},
             options);
  EXPECT_FALSE(some.accepted.has_value());
  EXPECT_NE(some.reason.find("failure rate rose"), std::string::npos) << some.reason;
}

TEST(VerdictTest, AVariantThatFailsEveryTrialIsRejectedWithThatReason) {
  const Verdict v =
      Decide({Trials("base", {100, 101, 99}), Trials("broken", {0, 0, 0}, {true, true, true})}, {});
  EXPECT_FALSE(v.accepted.has_value());
  EXPECT_EQ(v.comparisons[0].reason, "broken failed every trial (3 of 3)");
  EXPECT_EQ(v.comparisons[0].ratio, kInf);
}

TEST(VerdictTest, TheBestOfSeveralAcceptedVariantsWinsAndTheReasonSaysWhy) {
  const Verdict v = Decide(
      {Trials("fp32", {100, 101, 99, 102, 100, 98, 100}),
       Trials("bf16", {80, 81, 79, 80, 82, 80, 81}), Trials("tf32", {90, 91, 89, 90, 92, 90, 91}),
       Trials("same", {100, 99, 101, 100, 98, 102, 100})},
      {});
  ASSERT_TRUE(v.accepted.has_value()) << v.reason;
  EXPECT_EQ(*v.accepted, "bf16");
  EXPECT_TRUE(v.comparisons[1].accepted) << v.comparisons[1].reason;
  EXPECT_FALSE(v.comparisons[2].accepted);
  EXPECT_NE(v.reason.find("time to target 20% lower than fp32's"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("after Holm"), std::string::npos) << v.reason;
  EXPECT_NE(v.comparisons[2].reason.find("no gain beyond the noise"), std::string::npos)
      << v.comparisons[2].reason;
  std::printf("%s\n", v.reason.c_str());
}

TEST(VerdictTest, MorePeakMemoryOrAWorseTailRollsBack) {
  VariantOutcomes base = Trials("base", {100, 101, 99, 102, 100});
  VariantOutcomes fast = Trials("fast", {80, 81, 79, 80, 82});
  for (TrialOutcome& t : base.trials) t.peak_memory_bytes = 1e9, t.p99_step_ms = 20;
  for (TrialOutcome& t : fast.trials) t.peak_memory_bytes = 1.5e9, t.p99_step_ms = 30;
  const Verdict v = Decide({base, fast}, {});
  EXPECT_FALSE(v.accepted.has_value());
  EXPECT_NE(v.reason.find("peak memory rose 50% (1e+03 to 1.5e+03 MB)"), std::string::npos)
      << v.reason;
  EXPECT_NE(v.reason.find("the p99 step time rose 50%"), std::string::npos) << v.reason;
}

// --- Specs and the engine ------------------------------------------------

// Training curves (curves.h): the file format, and the band.
void WriteLines(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

TEST(CurveTest, WindowMeansNonFiniteValuesAndSkippedStepsAreRead) {
  testing::TempDir dir;
  CurveSpec spec;
  spec.file = "loss.jsonl";
  spec.window_steps = 2;
  WriteLines(dir.File("loss.jsonl"),
             "{\"step\": 0, \"loss\": 4}\n{\"step\": 1, \"loss\": 2}\n"
             "{\"step\": 2, \"loss\": null, \"skipped\": true}\n{\"step\": 3, \"loss\": 1}\n"
             "{\"step\": 4, \"loss\": null}\n{\"step\": 5, \"loss\": null}\n"
             "{\"step\": 6, \"lo");  // cut short by a crash: ignored
  absl::StatusOr<TrialCurve> curve = ReadCurve(dir.File("loss.jsonl"), spec);
  ASSERT_TRUE(curve.ok()) << curve.status();
  ASSERT_EQ(curve->means.size(), 3u);
  EXPECT_EQ(curve->means[0], 3);
  EXPECT_EQ(curve->means[1], 1);
  EXPECT_TRUE(std::isnan(curve->means[2]));  // steps 4 and 5: nothing finite
  EXPECT_EQ(curve->points, 6);
  EXPECT_EQ(curve->nonfinite, 3);
  EXPECT_EQ(curve->skipped, 1);
  EXPECT_EQ(curve->last_step, 5);

  WriteLines(dir.File("bad.jsonl"),
             "{\"step\": 0, \"loss\": 1}\n{\"step\": 1, \"loss\": \"x\"}\n"
             "{\"step\": 2, \"loss\": 1}\n");
  absl::StatusOr<TrialCurve> bad = ReadCurve(dir.File("bad.jsonl"), spec);
  EXPECT_EQ(bad.status().message(),
            dir.File("bad.jsonl") + ":2: \"loss\" must be a number or null");
  WriteLines(dir.File("nostep.jsonl"), "{\"loss\": 1}\n");
  EXPECT_EQ(ReadCurve(dir.File("nostep.jsonl"), spec).status().message(),
            dir.File("nostep.jsonl") + ":1: \"step\" must be an integer >= 0");
  EXPECT_EQ(ReadCurve(dir.File("none.jsonl"), spec).status().code(), absl::StatusCode::kNotFound);
}

// A loss curve: exponential decay to a floor, per-step noise, and a seed
// effect; `rate` < 1 trains slower (a corrupted gradient), `diverge_at`
// turns it NaN from that step.
TrialCurve SyntheticCurve(std::mt19937_64& rng, int steps, double rate, int diverge_at,
                          const CurveSpec& spec) {
  std::normal_distribution<double> noise(0, 0.05), seed_effect(0, 0.05);
  const double offset = seed_effect(rng);
  std::vector<double> sums(static_cast<size_t>(steps / spec.window_steps + 1), 0);
  std::vector<int> counts(sums.size(), 0);
  TrialCurve c;
  for (int s = 0; s < steps; ++s) {
    ++c.points;
    c.last_step = s;
    if (diverge_at >= 0 && s >= diverge_at) {
      ++c.nonfinite;
      continue;
    }
    const double loss = 0.1 + (1 + offset) * std::exp(-rate * s / 50.0) + noise(rng);
    sums[static_cast<size_t>(s / spec.window_steps)] += loss;
    ++counts[static_cast<size_t>(s / spec.window_steps)];
  }
  c.means.assign(static_cast<size_t>((steps - 1) / spec.window_steps + 1),
                 std::numeric_limits<double>::quiet_NaN());
  for (size_t w = 0; w < c.means.size(); ++w) {
    if (counts[w] > 0) c.means[w] = sums[w] / counts[w];
  }
  return c;
}

// A run checks its curves after every trial: with a cache each file is
// read once (here, the second check still sees a file since removed), and
// a trial without a readable curve stays without one.
TEST(CurveTest, TheCacheReadsEachTrialsCurveOnce) {
  testing::TempDir dir;
  ExperimentSpec spec;
  spec.curve.file = "loss.jsonl";
  spec.curve.window_steps = 1;
  spec.variants.resize(2);
  spec.variants[0].name = "a";
  spec.variants[1].name = "b";
  std::vector<Trial> trials(3);
  for (int i = 0; i < 3; ++i) {
    trials[i].variant = i % 2;
    trials[i].output_dir = dir.File("t" + std::to_string(i));
    std::filesystem::create_directories(trials[i].output_dir);
  }
  WriteLines(trials[0].output_dir + "/loss.jsonl", "{\"step\": 0, \"loss\": 1}\n");
  WriteLines(trials[1].output_dir + "/loss.jsonl",
             "{\"step\": 0, \"loss\": 1}\n{\"step\": 1, \"loss\": 0.5}\n");
  CurveCache cache;
  std::vector<VariantOutcomes> outcomes(2);
  CheckTrialCurves(spec, &trials, &outcomes, &cache);
  EXPECT_EQ(trials[1].curve_points, 2);
  EXPECT_EQ(trials[2].curve_points, -1) << "no file";
  EXPECT_EQ(cache.size(), 3u);
  std::filesystem::remove(trials[1].output_dir + "/loss.jsonl");
  WriteLines(trials[2].output_dir + "/loss.jsonl", "{\"step\": 0, \"loss\": 1}\n");
  trials[1].curve_points = 0;
  CheckTrialCurves(spec, &trials, &outcomes, &cache);
  EXPECT_EQ(trials[1].curve_points, 2) << "read once, from the cache";
  EXPECT_EQ(trials[2].curve_points, -1) << "its first look is what counts";
  CheckTrialCurves(spec, &trials, &outcomes);  // without a cache: the files as they are now
  EXPECT_EQ(trials[1].curve_points, -1);
  EXPECT_EQ(trials[2].curve_points, 1);
}

TEST(CurveTest, SeedNoiseStaysInsideTheBandAndABrokenCurveIsFlagged) {
  CurveSpec spec;
  spec.file = "loss.jsonl";
  int same_flagged = 0, slow_flagged = 0, nan_flagged = 0;
  for (uint64_t seed = 0; seed < 100; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<std::vector<TrialCurve>> curves(4);
    for (int k = 0; k < 4; ++k) {
      curves[0].push_back(SyntheticCurve(rng, 300, 1.0, -1, spec));   // fp32
      curves[1].push_back(SyntheticCurve(rng, 300, 1.0, -1, spec));   // the same training
      curves[2].push_back(SyntheticCurve(rng, 300, 0.6, -1, spec));   // trains slower
      curves[3].push_back(SyntheticCurve(rng, 300, 1.0, 150, spec));  // NaN from step 150
    }
    const std::vector<CurveCheck> checks =
        CheckCurves({"fp32", "same", "slow", "nan"}, curves, spec);
    ASSERT_EQ(checks.size(), 4u);
    EXPECT_FALSE(checks[0].flagged);
    EXPECT_EQ(checks[1].windows, 30);
    same_flagged += checks[1].flagged;
    slow_flagged += checks[2].flagged;
    nan_flagged += checks[3].flagged;
    if (seed == 0) {
      EXPECT_EQ(checks[3].nonfinite, 4 * 150);
      EXPECT_EQ(checks[3].first_outside_step, 150);
      EXPECT_NE(checks[2].phrase.find("its loss curve left the baseline's noise band in "),
                std::string::npos)
          << checks[2].phrase;
    }
  }
  std::printf(
      "curve check, 100 seeded experiments of 4 seeds a variant: the same training "
      "flagged %d, 40%% slower training %d, NaN from half-way %d\n",
      same_flagged, slow_flagged, nan_flagged);
  EXPECT_LE(same_flagged, 5);
  EXPECT_GE(slow_flagged, 95);
  EXPECT_EQ(nan_flagged, 100);
}

TEST(VerdictTest, AFasterVariantWhoseCurveLeftTheBandIsRolledBack) {
  VariantOutcomes fast = Trials("bf16_bug", {80, 81, 79, 80, 82, 80});
  fast.vetoes.push_back("its loss curve left the baseline's noise band in 20 of 30 windows");
  const Verdict v = Decide({Trials("fp32", {100, 101, 99, 102, 100, 98}), fast}, {});
  EXPECT_FALSE(v.accepted.has_value()) << v.reason;
  ASSERT_EQ(v.comparisons.size(), 1u);
  EXPECT_TRUE(v.comparisons[0].clears_threshold);  // faster beyond the noise
  EXPECT_NE(v.comparisons[0].reason.find("bf16_bug is rolled back: its loss curve left"),
            std::string::npos)
      << v.comparisons[0].reason;
}

TEST(ExperimentSpecTest, BadSpecsAreNamedByKey) {
  auto error = [](const std::string& json) {
    absl::StatusOr<ExperimentSpec> spec = ParseSpec(json, "spec.json");
    return spec.ok() ? std::string("ok") : std::string(spec.status().message());
  };
  const std::string command = R"("command": ["prog", "--out={out}"])";
  const std::string variants = R"("variants": [{"name": "a"}, {"name": "b", "args": ["-x"]}])";
  EXPECT_EQ(error(R"({"hypothesis": "h", )" + command + ", " + variants + "}"), "ok");
  EXPECT_EQ(error(R"({"hypothesis": "h", "repeat": 3, )" + command + ", " + variants + "}"),
            "spec.json: repeat: unknown key");
  EXPECT_EQ(error(R"({"hypothesis": "h", )" + command +
                  R"(, "variants": [{"name": "a"}, {"name": "b", "argz": []}]})"),
            "spec.json: variants[1].argz: unknown key");
  EXPECT_EQ(error(R"({"hypothesis": "h", )" + command +
                  R"(, "variants": [{"name": "a"}, {"name": "a"}]})"),
            "spec.json: variants[1].name: \"a\" is used twice");
  EXPECT_EQ(error("{" + command + ", " + variants + "}"),
            "spec.json: hypothesis: required: a non-empty string saying what should improve");
  EXPECT_EQ(error(R"({"hypothesis": "h", "repeats": 0, )" + command + ", " + variants + "}"),
            "spec.json: repeats: must be >= 1");
  // Three repeats a side cannot reach p < 0.05: refused before any trial,
  // naming the minimum; with two variants Holm's adjustment asks for five.
  EXPECT_EQ(error(R"({"hypothesis": "h", "repeats": 3, )" + command + ", " + variants + "}"),
            "spec.json: repeats: 3 a variant can never be accepted: with 3 trials a side the "
            "rank test's smallest p is 0.1, not below 0.05; at least 4 are needed");
  EXPECT_EQ(error(R"({"hypothesis": "h", "repeats": 4, )" + command +
                  R"(, "variants": [{"name": "a"}, {"name": "b"}, {"name": "c"}]})"),
            "spec.json: repeats: 4 a variant can never be accepted: with 4 trials a side the "
            "rank test's smallest p is 0.0286, 0.0571 after Holm's adjustment for 2 variants, "
            "not below 0.05; at least 5 are needed");
  EXPECT_EQ(error(R"({"hypothesis": "h", "repeats": 4, )" + command + ", " + variants + "}"), "ok");
  // A variant's own placeholders: names of lower-case letters, digits and
  // _, never the engine's; values are strings.
  EXPECT_EQ(error(R"({"hypothesis": "h", )" + command +
                  R"(, "variants": [{"name": "a"}, {"name": "b", "values": {"out": "x"}}]})"),
            "spec.json: variants[1].values.out: must be a placeholder's name: lower-case "
            "letters, digits and _, not \"out\" or \"repeat\" (the engine's own)");
  EXPECT_EQ(error(R"({"hypothesis": "h", )" + command +
                  R"(, "variants": [{"name": "a"}, {"name": "b", "values": {"Workers": "4"}}]})"),
            "spec.json: variants[1].values.Workers: must be a placeholder's name: lower-case "
            "letters, digits and _, not \"out\" or \"repeat\" (the engine's own)");
  EXPECT_EQ(error(R"({"hypothesis": "h", )" + command +
                  R"(, "variants": [{"name": "a"}, {"name": "b", "values": {"workers": 4}}]})"),
            "spec.json: variants[1].values.workers: must be a string");
  {
    absl::StatusOr<ExperimentSpec> spec = ParseSpec(
        R"({"hypothesis": "h", "command": ["prog", "--workers={workers}", "--out={out}"],
            "variants": [{"name": "w0", "values": {"workers": "0"}},
                         {"name": "w4", "args": ["--seed={repeat}", "-w{workers}"],
                          "values": {"workers": "4"}}]})",
        "spec.json");
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ(TrialArgv(*spec, spec->variants[1], "/tmp/t", 2),
              (std::vector<std::string>{"prog", "--workers=4", "--out=/tmp/t", "--seed=2", "-w4"}));
    EXPECT_EQ(TrialArgv(*spec, spec->variants[0], "{out}", 0),
              (std::vector<std::string>{"prog", "--workers=0", "--out={out}"}));
  }
  EXPECT_EQ(error(R"({"hypothesis": "h", "objective": "loss", )" + command + ", " + variants + "}"),
            "spec.json: objective: must be \"time_to_target\", \"steady_samples_per_s\", "
            "\"median_step_ms\", \"latency_p50_ms\", \"latency_p90_ms\" or \"latency_p99_ms\"");
  EXPECT_EQ(
      error(R"({"hypothesis": "h", "notes": {"lr_rule": 1}, )" + command + ", " + variants + "}"),
      "spec.json: notes.lr_rule: must be a string");
  EXPECT_EQ(
      error(R"({"hypothesis": "h", "rollback": {"memory": 1}, )" + command + ", " + variants + "}"),
      "spec.json: rollback.memory: unknown key");
  EXPECT_EQ(error(R"({"hypothesis": "h", "curve": {"file": "loss.jsonl", "window": 5}, )" +
                  command + ", " + variants + "}"),
            "spec.json: curve.window: unknown key");
  EXPECT_EQ(error(R"({"hypothesis": "h", "curve": {"window_steps": 5}, )" + command + ", " +
                  variants + "}"),
            "spec.json: curve.file: required: the curve's file name in each trial's output "
            "directory");
  EXPECT_EQ(error(R"({"hypothesis": "h", "curve": {"file": "l", "max_outside": 1}, )" + command +
                  ", " + variants + "}"),
            "spec.json: curve.max_outside: must be below 1 (a share)");
  EXPECT_EQ(error(R"({"hypothesis": "h", )" + command + R"(, "variants": [{"name": "a"}]})"),
            "spec.json: variants: needs a baseline and at least one variant");
  EXPECT_NE(error("{"), "ok");
}

// Crashes and timeouts are failures and the experiment goes on; variants
// run in randomised blocks, each round every variant once; each trial gets
// its own directory through {out} and TRAINSCOPE_OUTPUT_DIR.
// Serving objectives: the rollback watches the requests' p99 latency, not
// the p99 time of a step (a larger batch's step takes longer by design).
TEST(ExperimentTest, ServingObjectivesRollBackOnTheRequestsTailNotTheBatches) {
  ExperimentSpec spec;
  spec.objective = ObjectiveId::kLatencyP50Ms;
  spec.variants = {{"max1", {}, {}, {}}, {"max8", {}, {}, {}}};
  std::vector<Trial> trials;
  for (int k = 0; k < 6; ++k) {
    for (int v = 0; v < 2; ++v) {
      Trial t;
      t.variant = v;
      t.round = k;
      t.latency_p50_ms = v == 0 ? 2.0 + 0.01 * k : 1.0 + 0.01 * k;  // max8 halves the median
      t.latency_p99_ms = v == 0 ? 10.0 + 0.1 * k : 30.0 + 0.1 * k;  // and triples the tail
      t.p99_step_ms = 0.3;                                          // steps alike
      trials.push_back(t);
    }
  }
  const std::vector<VariantOutcomes> outcomes = Outcomes(spec, trials);
  EXPECT_EQ(outcomes[1].trials[0].objective, 1.0);
  EXPECT_EQ(outcomes[1].trials[0].p99_step_ms, 30.0);
  const VerdictOptions options = VerdictOptionsOf(spec);
  EXPECT_EQ(options.objective_name, "p50 latency");
  const Verdict v = Decide(outcomes, options);
  EXPECT_FALSE(v.accepted.has_value()) << v.reason;
  ASSERT_EQ(v.comparisons.size(), 1u);
  EXPECT_TRUE(v.comparisons[0].clears_threshold);
  ASSERT_EQ(v.comparisons[0].rollbacks.size(), 1u) << v.reason;
  EXPECT_EQ(v.comparisons[0].rollbacks[0].rfind("the p99 latency rose 195% (10.2 to 30.2 ms)", 0),
            0u)
      << v.comparisons[0].rollbacks[0];
}

TEST(ExperimentTest, FailuresCountAndTheExperimentGoesOnInterleaved) {
  testing::TempDir dir;
  ExperimentSpec spec;
  spec.hypothesis = "synthetic";
  spec.command = {"/bin/sh", "-c",
                  "echo \"$TRAINSCOPE_OUTPUT_DIR\" > {out}/seen; case \"$MODE\" in crash) exit 3;; "
                  "hang) sleep 30;; esac; exit 0"};
  spec.variants = {{"ok", {}, {}, {}},
                   {"crash", {}, {{"MODE", "crash"}}, {}},
                   {"hang", {}, {{"MODE", "hang"}}, {}}};
  spec.repeats = 5;  // the fewest with which two variants could be accepted
  spec.trial_timeout_s = 0.5;
  RunOptions options;
  options.output = dir.File("experiment.json");
  options.progress = nullptr;
  absl::StatusOr<ExperimentResult> result = RunExperiment(spec, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->trials.size(), 15u);
  EXPECT_TRUE(result->complete);
  std::vector<std::vector<int>> rounds(5);
  for (const Trial& t : result->trials) {
    rounds[static_cast<size_t>(t.round)].push_back(t.variant);
    EXPECT_TRUE(t.failed) << t.order;  // no report.json: even "ok" failed
    EXPECT_EQ(testing::ReadAll(t.output_dir + "/seen"), t.output_dir + "\n");
    if (t.variant == 1) {
      EXPECT_EQ(t.exit_code, 3);
      EXPECT_EQ(t.failure, "exit code 3");
    }
    if (t.variant == 2) {
      EXPECT_TRUE(t.timed_out);
      EXPECT_EQ(t.failure, "timed out after 0.5 s");
    }
    if (t.variant == 0) {
      EXPECT_EQ(t.failure.rfind("no readable report: ", 0), 0u) << t.failure;
    }
  }
  std::set<std::vector<int>> orders;
  for (std::vector<int> r : rounds) {
    orders.insert(r);
    std::sort(r.begin(), r.end());
    EXPECT_EQ(r, (std::vector<int>{0, 1, 2}));
  }
  EXPECT_GT(orders.size(), 1u);  // the blocks are shuffled, not A B C every time
  const std::string json = testing::ReadAll(options.output);
  EXPECT_NE(json.find("\"schema_version\": 1"), std::string::npos) << json;
  EXPECT_NE(json.find("\"accepted\": null"), std::string::npos);
  EXPECT_NE(json.find("crash failed every trial (5 of 5)"), std::string::npos);
}

// GPU covariates through NVML, loaded at run time: a stand-in library with
// two GPUs gives each trial the lowest SM clock and highest temperature
// seen while it ran, and the clock-event reasons other than idle; without
// NVML the run says why in one line and the fields are null.
TEST(ExperimentTest, GpuCovariatesAreSampledWhileEachTrialRuns) {
  ExperimentSpec spec;
  spec.hypothesis = "synthetic";
  spec.command = {"/bin/sh", "-c", "sleep 0.7"};  // sampled at its start and at 0.5 s
  spec.variants = {{"a", {}, {}, {}}, {"b", {}, {}, {}}};
  spec.repeats = 4;
  for (const bool with_nvml : {true, false}) {
    testing::TempDir dir;
    setenv("TRAINSCOPE_NVML_PATH", with_nvml ? NVML_STUB_PATH : dir.File("missing.so").c_str(), 1);
    RunOptions options;
    options.output = dir.File("experiment.json");
    options.progress = nullptr;
    absl::StatusOr<ExperimentResult> result = RunExperiment(spec, options);
    unsetenv("TRAINSCOPE_NVML_PATH");
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->trials.size(), 8u);
    const std::string json = testing::ReadAll(options.output);
    if (!with_nvml) {
      EXPECT_EQ(result->gpu_covariates.rfind(
                    "unavailable (cannot load " + dir.File("missing.so") + ": ", 0),
                0u)
          << result->gpu_covariates;
      for (const Trial& t : result->trials) {
        EXPECT_FALSE(t.gpu_sm_clock_mhz_min.has_value());
        EXPECT_FALSE(t.gpu_clock_events.has_value());
      }
      EXPECT_NE(json.find("\"gpu_clock_events\": null"), std::string::npos) << json;
      continue;
    }
    EXPECT_EQ(result->gpu_covariates, std::string("NVML: 2 GPUs (") + NVML_STUB_PATH + ")");
    // The first trial saw GPU 1's clock drop from 1980 to 1410 MHz; the
    // idle GPU 0 at 210 MHz never sets the minimum.
    for (const Trial& t : result->trials) {
      ASSERT_TRUE(t.gpu_sm_clock_mhz_min.has_value()) << t.order;
      EXPECT_EQ(*t.gpu_sm_clock_mhz_min, 1410);
      EXPECT_EQ(t.gpu_temperature_c_max, 71);
      EXPECT_EQ(t.gpu_clock_events, "sw_thermal_slowdown");
    }
    EXPECT_NE(json.find("\"gpu_sm_clock_mhz_min\": 1410"), std::string::npos) << json;
    absl::StatusOr<std::vector<Trial>> read = ReadExperimentTrials(options.output, spec);
    ASSERT_TRUE(read.ok()) << read.status();
    ASSERT_EQ(read->size(), 8u);
    EXPECT_EQ((*read)[1].gpu_temperature_c_max, 71);
    EXPECT_EQ((*read)[1].gpu_clock_events, "sw_thermal_slowdown");
  }
  EXPECT_EQ(ClockEventReasonNames(0x1), "");
  EXPECT_EQ(ClockEventReasonNames(0x4 | 0x40 | 0x1000),
            "sw_power_cap, hw_thermal_slowdown, 0x1000");
}

// Prints each field of sdk/tuning/experiment_fields.h as path=value, and
// collects every key, at any depth.
class PrintFields {
 public:
  template <typename T>
  void Field(std::string_view key, const T& v, unsigned) {
    if constexpr (std::is_same_v<T, std::optional<double>> ||
                  std::is_same_v<T, std::optional<std::string>>) {
      out.push_back(v ? fmt::format("{}{}={}", prefix_, key, *v)
                      : fmt::format("{}{}=null", prefix_, key));
    } else {
      out.push_back(fmt::format("{}{}={}", prefix_, key, v));
    }
    keys.insert(std::string(key));
  }
  void WriteOnly(std::string_view key, bool) { keys.insert(std::string(key)); }
  void Check(std::string_view, bool, std::string_view) {}
  template <typename T>
  void List(std::string_view key, const T& v, unsigned) {
    out.push_back(fmt::format("{}{}=[{}]", prefix_, key, fmt::join(v, ",")));
    keys.insert(std::string(key));
  }
  template <typename T>
  void Strings(std::string_view key, const T& v, unsigned) {
    for (const auto& [k, value] : v)
      out.push_back(fmt::format("{}{}.{}={}", prefix_, key, k, value));
    keys.insert(std::string(key));
  }
  template <typename Fn>
  void ObjectOrNull(std::string_view key, bool, unsigned flags, Fn&& fn) {
    Object(key, flags, fn);
  }
  template <typename Fn>
  void Object(std::string_view key, unsigned, Fn&& fn) {
    keys.insert(std::string(key));
    const std::string outer = prefix_;
    prefix_ += std::string(key) + ".";
    fn();
    prefix_ = outer;
  }

  std::vector<std::string> out;
  std::set<std::string> keys;  // every key, at any depth

 private:
  std::string prefix_;
};

std::vector<std::string> Printed(const ExperimentSpec& spec, const std::vector<Trial>& trials) {
  PrintFields print;
  experiment_fields::DescribeSpec(spec, print);
  for (size_t v = 0; v < spec.variants.size(); ++v) {
    experiment_fields::DescribeVariant(spec.variants[v], v == 0, print);
  }
  for (const Trial& t : trials) experiment_fields::DescribeTrial(t, print);
  return print.out;
}

// Every field experiment.json writes for the spec, the variants and the
// trials reads back as written (`trainscope compare` and --resume rely on
// it), and docs/experiments.md names each.
TEST(ExperimentJsonTest, EveryFieldReadsBackAndIsDocumented) {
  testing::TempDir dir;
  ExperimentSpec spec;
  testing::FillEveryField fill;
  experiment_fields::DescribeSpec(spec, fill);
  spec.hypothesis = "every field";
  spec.variants.resize(2);
  for (VariantSpec& v : spec.variants) experiment_fields::DescribeVariant(v, false, fill);
  ExperimentResult result;
  for (int k = 0; k < 4; ++k) {
    Trial& t = result.trials.emplace_back();
    experiment_fields::DescribeTrial(t, fill);
    t.order = k;  // the reader checks the run order
    t.variant = k % 2;
  }
  const std::string path = dir.File("experiment.json");
  testing::WriteAll(path, ExperimentJson(spec, result));
  const absl::StatusOr<ExperimentRecord> record = ReadExperiment(path);
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->spec.hypothesis, spec.hypothesis);
  EXPECT_EQ(Printed(record->spec, record->trials), Printed(spec, result.trials));
  EXPECT_NE(Printed(ExperimentSpec(), std::vector<Trial>(4)), Printed(spec, result.trials));

  PrintFields keys;
  experiment_fields::DescribeSpec(spec, keys);
  experiment_fields::DescribeVariant(spec.variants[0], true, keys);
  experiment_fields::DescribeTrial(result.trials[0], keys);
  // The "experiment.json" section of the doc, not the whole page (generic
  // keys such as `value` appear elsewhere).
  std::string doc = testing::ReadAll(std::string(TRAINSCOPE_SOURCE_DIR) + "/docs/experiments.md");
  const size_t section = doc.find("\n## experiment.json\n");
  ASSERT_NE(section, std::string::npos);
  doc = doc.substr(section, doc.find("\n## ", section + 1) - section);
  for (const std::string& key : keys.keys) {
    EXPECT_NE(doc.find("`" + key + "`"), std::string::npos) << key << " is not in experiments.md";
  }
}

// A field of the wrong type is named by its path; an absent one (a file
// written before it was added) keeps its default.
// experiment.json of two variants, a trial each of 1.5 s (and a p99 latency
// of 3 ms when `latency`).
std::string TwoTrialExperimentJson(const std::string& hypothesis, bool latency) {
  ExperimentSpec spec;
  spec.hypothesis = hypothesis;
  spec.command = {"/bin/true"};
  spec.variants = {{"a", {}, {}, {}}, {"b", {}, {}, {}}};
  ExperimentResult result;
  for (int k = 0; k < 2; ++k) {
    Trial& t = result.trials.emplace_back();
    t.order = k;
    t.variant = k;
    t.wall_s = 1.5;
    if (latency) t.latency_p99_ms = 3;
  }
  return ExperimentJson(spec, result);
}

TEST(ExperimentJsonTest, AMistypedFieldIsNamedAndAnAbsentOneIsItsDefault) {
  testing::TempDir dir;
  const std::string json = TwoTrialExperimentJson("types", true);
  const std::string path = dir.File("experiment.json");
  std::string mistyped = json;
  const size_t wall = mistyped.rfind("\"wall_s\": 1.5");
  ASSERT_NE(wall, std::string::npos);
  mistyped.replace(wall, 13, "\"wall_s\": \"1.5\"");
  testing::WriteAll(path, mistyped);
  absl::StatusOr<ExperimentRecord> record = ReadExperiment(path);
  ASSERT_FALSE(record.ok());
  EXPECT_EQ(record.status().message(),
            path + ": field 'variants[1].trials[0].wall_s' is not a number");

  // The objective decides which way is better: never defaulted.
  std::string no_objective = json;
  const size_t objective = no_objective.find("\"objective\": \"time_to_target\",");
  ASSERT_NE(objective, std::string::npos);
  no_objective.erase(objective, std::string("\"objective\": \"time_to_target\",").size());
  testing::WriteAll(path, no_objective);
  record = ReadExperiment(path);
  ASSERT_FALSE(record.ok());
  EXPECT_EQ(record.status().message(), path + ": field 'spec.objective' is missing");

  // An objective is looked up by name where it is read: one there is not
  // is named with the names there are.
  std::string unknown = json;
  unknown.replace(objective, std::string("\"objective\": \"time_to_target\"").size(),
                  "\"objective\": \"loss\"");
  testing::WriteAll(path, unknown);
  record = ReadExperiment(path);
  ASSERT_FALSE(record.ok());
  EXPECT_EQ(record.status().message(),
            path +
                ": field 'spec.objective' is \"loss\", not \"time_to_target\", "
                "\"steady_samples_per_s\", \"median_step_ms\", \"latency_p50_ms\", "
                "\"latency_p90_ms\" or \"latency_p99_ms\"");

  std::string older = json;
  for (size_t at; (at = older.find("\"latency_p99_ms\": 3,")) != std::string::npos;) {
    older.erase(at, std::string("\"latency_p99_ms\": 3,").size());
  }
  testing::WriteAll(path, older);
  record = ReadExperiment(path);
  ASSERT_TRUE(record.ok()) << record.status();
  ASSERT_EQ(record->trials.size(), 2u);
  EXPECT_FALSE(record->trials[1].latency_p99_ms.has_value());
  EXPECT_EQ(record->trials[1].wall_s, 1.5);
}

// An empty file and numbers too big for their type.
TEST(ExperimentJsonTest, AnEmptyFileAndNumbersTooBigAreNamed) {
  testing::TempDir dir;
  const std::string path = dir.File("experiment.json");
  testing::WriteAll(path, "\n");
  EXPECT_EQ(ReadExperiment(path).status().message(), path + ": the file is empty");
  const std::string json = TwoTrialExperimentJson("numbers", false);
  const size_t order = json.rfind("\"order\": 1");
  ASSERT_NE(order, std::string::npos) << json;
  auto with_order = [&](std::string_view value) {
    std::string text = json;
    text.replace(order, std::string("\"order\": 1").size(), fmt::format("\"order\": {}", value));
    return text;
  };
  const struct {
    std::string value, error;
  } cases[] = {
      {"2147483648", "field 'variants[1].trials[0].order' is out of range"},
      {"9223372036854775808", "field 'variants[1].trials[0].order' is out of range"},
      {"1e400", "not valid JSON (a number is malformed or too large for a double)"},
      {"1.5", "field 'variants[1].trials[0].order' is not an integer"},
  };
  for (const auto& c : cases) {
    testing::WriteAll(path, with_order(c.value));
    EXPECT_EQ(ReadExperiment(path).status().message(), path + ": " + c.error) << c.value;
  }
  // And the spec an experiment is started from.
  EXPECT_EQ(ParseSpec(" ", "spec.json").status().message(), "spec.json: the file is empty");
}

// A spec made in code with too few repeats is refused as a parsed one is,
// before its program runs once.
TEST(ExperimentTest, TooFewRepeatsAreRefusedBeforeAnyTrialRuns) {
  testing::TempDir dir;
  ExperimentSpec spec;
  spec.hypothesis = "underpowered";
  spec.command = {"/bin/sh", "-c", "touch " + dir.File("ran")};
  spec.variants = {{"a", {}, {}, {}}, {"b", {}, {}, {}}};
  spec.repeats = 2;
  RunOptions options;
  options.output = dir.File("experiment.json");
  options.progress = nullptr;
  absl::StatusOr<ExperimentResult> result = RunExperiment(spec, options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("repeats: 2 a variant can never be accepted"),
            std::string::npos)
      << result.status();
  EXPECT_NE(result.status().message().find("at least 4 are needed"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.File("ran")));
  EXPECT_FALSE(std::filesystem::exists(options.output));
}

// A trial whose report says it ran out of memory fails for that reason,
// whatever its exit code, and its record says so (the batch probe's input).
TEST(ExperimentTest, AnOutOfMemoryRecordIsTheTrialsFailure) {
  testing::TempDir dir;
  ExperimentSpec spec;
  spec.hypothesis = "memory";
  spec.command = {TRIAL_PROGRAM_PATH, "--out={out}", "--steps=3", "--memory_limit=64",
                  "--batch={batch}"};
  spec.variants = {{"b32", {}, {}, {{"batch", "32"}}}, {"b128", {}, {}, {{"batch", "128"}}}};
  spec.repeats = 4;
  RunOptions options;
  options.output = dir.File("experiment.json");
  options.progress = nullptr;
  absl::StatusOr<ExperimentResult> result = RunExperiment(spec, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->trials.size(), 8u);
  for (const Trial& t : result->trials) {
    if (t.variant == 0) {
      EXPECT_FALSE(t.failed) << t.failure;
      EXPECT_FALSE(t.out_of_memory);
    } else {
      EXPECT_TRUE(t.out_of_memory);
      EXPECT_EQ(t.exit_code, 3);
      EXPECT_EQ(t.failure, "out of memory: batch 128 needs more than the memory limit 64");
    }
  }
  absl::StatusOr<std::vector<Trial>> read = ReadExperimentTrials(options.output, spec);
  ASSERT_TRUE(read.ok()) << read.status();
  int oom = 0;
  for (const Trial& t : *read) oom += t.out_of_memory;
  EXPECT_EQ(oom, 4);
  // The variant's values are in the record and in the preset's command.
  const std::string json = testing::ReadAll(options.output);
  EXPECT_NE(json.find("\"values\": {\n        \"batch\": \"128\"\n      }"), std::string::npos)
      << json;
  EXPECT_EQ(result->preset.variant, "b32");
  EXPECT_EQ(result->preset.argv.back(), "--batch=32");
  EXPECT_EQ(result->preset.argv[1], "--out={out}");
}

// A program that never declares its quality target is stopped after its
// first trial, not after all of them, and the error names the call.
TEST(ExperimentTest, AProgramWithoutAQualityTargetStopsAfterItsFirstTrial) {
  testing::TempDir dir;
  ExperimentSpec spec;
  spec.hypothesis = "no target";
  spec.command = {TRIAL_PROGRAM_PATH, "--out={out}", "--steps=2", "--no_target"};
  spec.variants = {{"a", {}, {}, {}}, {"b", {}, {}, {}}};
  spec.repeats = 4;
  RunOptions options;
  options.output = dir.File("experiment.json");
  options.progress = nullptr;
  absl::StatusOr<ExperimentResult> result = RunExperiment(spec, options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(result.status().message().find("its report has no quality target"), std::string::npos)
      << result.status();
  EXPECT_NE(result.status().message().find("Session::SetQualityTarget(metric, target"),
            std::string::npos);
  // That trial is not kept: a --resume after the fix runs it again.
  absl::StatusOr<std::vector<Trial>> read = ReadExperimentTrials(options.output, spec);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->size(), 0u);
  EXPECT_NE(testing::ReadAll(options.output).find("\"complete\": false"), std::string::npos);
}

// A sequential experiment resumed in the middle of a round is judged only
// after rounds it ran: the rounds read back also hold the later, partial
// round's trials, and judged then they look unbalanced and decided.
TEST(ExperimentTest, AResumedSequentialExperimentIsJudgedOnlyAfterRoundsItRan) {
  testing::TempDir dir;
  ExperimentSpec spec;
  spec.hypothesis = "sequential resume";
  spec.command = {"/bin/sh", "-c", "exit 0"};  // no report: every trial fails alike
  spec.variants = {{"a", {}, {}, {}}, {"b", {}, {}, {}}};
  spec.repeats = 6;
  RunOptions options;
  options.output = dir.File("whole.json");
  options.progress = nullptr;
  ASSERT_TRUE(RunExperiment(spec, options).ok());
  absl::StatusOr<std::vector<Trial>> read = ReadExperimentTrials(options.output, spec);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 12u);
  // Three whole rounds and one trial of the fourth, resumed sequentially:
  // the answer (all fail alike) is clear at the end of round four, with
  // four trials each; judged after round one it would stop at 4 and 3.
  spec.sequential = true;
  spec.min_repeats = 3;
  options.output = dir.File("resumed.json");
  options.done.assign(read->begin(), read->begin() + 7);
  absl::StatusOr<ExperimentResult> resumed = RunExperiment(spec, options);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_TRUE(resumed->complete);
  ASSERT_EQ(resumed->trials.size(), 8u);
  int a = 0;
  for (const Trial& t : resumed->trials) a += t.variant == 0;
  EXPECT_EQ(a, 4);
}

// Ctrl-C: the running trial is killed and not counted; what was measured
// is written, marked incomplete.
TEST(ExperimentTest, AStoppedExperimentWritesWhatItHasMarkedIncomplete) {
  testing::TempDir dir;
  ExperimentSpec spec;
  spec.hypothesis = "stopped";
  spec.command = {"/bin/sh", "-c", "sleep 30"};
  spec.variants = {{"a", {}, {}, {}}, {"b", {}, {}, {}}};
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop.store(true);
  });
  RunOptions options;
  options.output = dir.File("experiment.json");
  options.progress = nullptr;
  options.stop = &stop;
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<ExperimentResult> result = RunExperiment(spec, options);
  stopper.join();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->complete);
  EXPECT_TRUE(result->trials.empty());
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  EXPECT_NE(testing::ReadAll(options.output).find("\"complete\": false"), std::string::npos);
}

// --resume: the trials read back from experiment.json are skipped and the
// schedule goes on exactly where it stopped; another spec is refused.
TEST(ExperimentTest, AResumedExperimentContinuesTheSameSchedule) {
  testing::TempDir dir;
  ExperimentSpec spec;
  spec.hypothesis = "resume";
  spec.command = {"/bin/sh", "-c", "exit $CODE"};
  spec.variants = {{"a", {}, {{"CODE", "0"}}, {}}, {"b", {}, {{"CODE", "4"}}, {}}};
  spec.repeats = 4;
  RunOptions options;
  options.output = dir.File("whole.json");
  options.progress = nullptr;
  absl::StatusOr<ExperimentResult> whole = RunExperiment(spec, options);
  ASSERT_TRUE(whole.ok()) << whole.status();
  absl::StatusOr<std::vector<Trial>> read = ReadExperimentTrials(options.output, spec);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 8u);
  EXPECT_EQ((*read)[3].exit_code, whole->trials[3].exit_code);
  EXPECT_EQ((*read)[3].failure, whole->trials[3].failure);

  options.output = dir.File("resumed.json");
  options.done.assign(read->begin(), read->begin() + 3);
  absl::StatusOr<ExperimentResult> resumed = RunExperiment(spec, options);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_EQ(resumed->trials.size(), 8u);
  for (size_t k = 0; k < 8; ++k) {
    EXPECT_EQ(resumed->trials[k].order, static_cast<int>(k));
    EXPECT_EQ(resumed->trials[k].variant, whole->trials[k].variant) << k;
    EXPECT_EQ(resumed->trials[k].exit_code, whole->trials[k].exit_code) << k;
  }
  EXPECT_EQ(resumed->trials[3].output_dir.find(dir.File("resumed-trials/003-")), 0u)
      << resumed->trials[3].output_dir;

  ExperimentSpec other = spec;
  other.hypothesis = "something else";
  absl::StatusOr<std::vector<Trial>> refused = ReadExperimentTrials(dir.File("whole.json"), other);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("another spec"), std::string::npos);
}

// {repeat} is the round (a seed shared by the variants), and each trial's
// curve file is read and checked against the baseline's band.
TEST(ExperimentTest, CurvesAreCheckedAgainstTheBaselinesBandAndRepeatIsTheRound) {
  testing::TempDir dir;
  ExperimentSpec spec;
  spec.hypothesis = "curves";
  spec.command = {"/bin/sh", "-c",
                  "echo {repeat} > {out}/repeat; awk -v r={repeat} -v k=\"$SLOW\" 'BEGIN { for "
                  "(s = 0; s < 100; s++) printf \"{\\\"step\\\": %d, \\\"loss\\\": %.6f}\\n\", s, "
                  "0.1 + exp(-s / (20 * (1 + k))) + 0.01 * r }' > {out}/loss.jsonl"};
  spec.variants = {{"base", {}, {{"SLOW", "0"}}, {}},
                   {"same", {}, {{"SLOW", "0"}}, {}},
                   {"slow", {}, {{"SLOW", "2"}}, {}}};
  spec.repeats = 5;
  spec.curve.file = "loss.jsonl";
  RunOptions options;
  options.output = dir.File("experiment.json");
  options.progress = nullptr;
  absl::StatusOr<ExperimentResult> result = RunExperiment(spec, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->trials.size(), 15u);
  for (const Trial& t : result->trials) {
    EXPECT_EQ(testing::ReadAll(t.output_dir + "/repeat"), std::to_string(t.round) + "\n");
    EXPECT_EQ(t.curve_points, 100) << t.output_dir;
    EXPECT_EQ(t.curve_nonfinite, 0);
  }
  ASSERT_EQ(result->curves.size(), 3u);
  EXPECT_EQ(result->curves[1].windows, 10);
  EXPECT_FALSE(result->curves[1].flagged);
  EXPECT_TRUE(result->curves[2].flagged);
  EXPECT_EQ(result->curves[2].first_outside_step, 0);  // the first window already
  const std::string json = testing::ReadAll(options.output);
  EXPECT_NE(json.find("\"first_outside_step\": 0"), std::string::npos) << json;
  EXPECT_NE(json.find("\"points\": 100"), std::string::npos);
  EXPECT_NE(json.find("its loss curve left the baseline's noise band"), std::string::npos);

  // Read back whole (trainscope compare): the spec, the trials, the verdict.
  absl::StatusOr<ExperimentRecord> record = ReadExperiment(options.output);
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->spec.hypothesis, "curves");
  EXPECT_EQ(record->spec.command, spec.command);
  ASSERT_EQ(record->spec.variants.size(), 3u);
  EXPECT_EQ(record->spec.variants[2].name, "slow");
  EXPECT_EQ(record->spec.curve.file, "loss.jsonl");
  EXPECT_EQ(record->trials.size(), 15u);
  EXPECT_TRUE(record->complete);
  EXPECT_FALSE(record->accepted.has_value());
  EXPECT_EQ(record->reason, result->verdict.reason);
  testing::WriteAll(dir.File("not.json"), "{\"schema_version\": 2, \"verdict\": {}}");
  EXPECT_EQ(ReadExperiment(dir.File("not.json")).status().message(),
            dir.File("not.json") + ": schema_version 2: this trainscope reads 1");
}

}  // namespace
}  // namespace trainscope::tuning
