// report.json: written, read back, rejected with clear errors; the CLI's
// `summary` on good and bad files, run as a real process.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "fmt/format.h"
#include "sdk/export/rank_files.h"
#include "sdk/export/report_fields.h"
#include "sdk/export/report_json.h"
#include "sdk/export/steps_file.h"
#include "sdk/export/summary.h"
#include "tests/json_fields_testing.h"
#include "tests/test_util.h"

namespace trainscope {
namespace {

using testing::RunProcess;
using testing::TempDir;

Report SampleReport() {
  Report r;
  r.run.name = "resnet \"quoted\"\nname";
  r.run.code_version = "deadbeef";
  r.environment.accelerator = "NVIDIA H200";
  r.config = {{"lr", "0.1"}, {"batch", "256"}};
  r.timing.queue_delay_s = 12.5;
  r.timing.startup_s = 3.25;
  r.timing.warmup_steps = 4;
  r.timing.total_s = 100;
  r.timing.steps = 1000;
  r.throughput.steady_samples_per_s = 2560.5;
  r.throughput.steady_steps_per_s = 10.002;
  r.resource_hours = 0.25;
  PhaseStat forward;
  forward.phase = "forward";
  forward.steps = 1000;
  forward.median_ms = 31.5;
  forward.p90_ms = 33;
  forward.max_ms = 80;
  r.phases = {forward};
  r.idle.share = 0.42;
  r.idle.by_cause = {{"data_wait", 30.5}, {"sync", 2}};
  r.idle.top_cause = "data_wait";
  r.events.dropped = 3;
  r.events.clock = "tsc";
  r.events.tsc_hz = 2.595e9;
  r.events.clock_calibrations = 1234;
  r.events.clock_max_error_ns = 58;
  r.overhead.estimated_share = 0.0004;
  r.acceptance.metric = "top1";
  r.acceptance.target = 0.75;
  r.acceptance.value = 0.7;
  r.acceptance.higher_is_better = true;
  r.acceptance.passed = false;
  r.serving.emplace();
  r.serving->requests = 4000;
  r.serving->p50_ms = 1.5;
  r.serving->p90_ms = 3.25;
  r.serving->p99_ms = 9.5;
  r.serving->max_ms = 21;
  r.serving->requests_per_s = 1998.5;
  r.recommendation = "42% of step time waits on input";
  return r;
}

TEST(ReportJsonTest, RoundTripsEveryDocumentedField) {
  const Report in = SampleReport();
  const absl::StatusOr<Report> out = exporter::ParseReportJson(exporter::ReportToJson(in), "mem");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->run.name, in.run.name);
  EXPECT_EQ(out->environment.accelerator, "NVIDIA H200");
  EXPECT_EQ(out->config, in.config);
  EXPECT_EQ(out->timing.queue_delay_s, 12.5);
  EXPECT_EQ(out->timing.warmup_steps, 4);
  EXPECT_EQ(out->throughput.steady_samples_per_s, 2560.5);
  EXPECT_EQ(out->resource_hours, 0.25);
  ASSERT_EQ(out->phases.size(), 1u);
  EXPECT_EQ(out->phases[0].p90_ms, 33);
  EXPECT_EQ(out->idle.by_cause, in.idle.by_cause);
  EXPECT_EQ(out->events.dropped, 3);
  EXPECT_EQ(out->events.clock, "tsc");
  EXPECT_EQ(out->events.tsc_hz, 2.595e9);
  EXPECT_EQ(out->events.clock_calibrations, 1234);
  EXPECT_EQ(out->events.clock_max_error_ns, 58);
  EXPECT_EQ(out->acceptance.passed, false);
  EXPECT_EQ(out->acceptance.target, 0.75);
  ASSERT_TRUE(out->serving.has_value());
  EXPECT_EQ(out->serving->requests, 4000);
  EXPECT_EQ(out->serving->p99_ms, 9.5);
  EXPECT_EQ(out->serving->requests_per_s, 1998.5);
  EXPECT_EQ(exporter::ReportToJson(*out), exporter::ReportToJson(in));
}

// The dotted keys in the "Field" column of docs/report-schema.md's tables,
// from "## Fields" to the next level-2 heading.
std::set<std::string> DocumentedReportKeys() {
  std::ifstream doc(std::string(TRAINSCOPE_SOURCE_DIR) + "/docs/report-schema.md");
  EXPECT_TRUE(doc.good());
  std::set<std::string> keys;
  bool in_fields = false;
  bool field_table = false;
  for (std::string line; std::getline(doc, line);) {
    if (absl::StartsWith(line, "## ")) in_fields = line == "## Fields";
    if (!in_fields || !absl::StartsWith(line, "|")) {
      field_table = false;
      continue;
    }
    const std::string first = line.substr(1, line.find('|', 1) - 1);
    if (absl::AsciiStrToLower(first) == " field ") field_table = true;
    if (!field_table) continue;
    // Each `quoted` token made of key characters only ("a.b", "<phase>",
    // "slowest[]"), not a condition such as `timing.steps == 0`.
    const std::vector<std::string> parts = absl::StrSplit(first, '`');
    for (size_t i = 1; i < parts.size(); i += 2) {
      const std::string& token = parts[i];
      if (!token.empty() && absl::ascii_islower(token[0]) &&
          token.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_.<>[]") ==
              std::string::npos) {
        keys.insert(token);
      }
    }
  }
  return keys;
}

// Every documented key is a field the writer and the reader know, every
// field is documented, and a report with every field set apart from its
// default reads back the same.
TEST(ReportSchemaTest, EveryDocumentedKeyIsAFieldAndEveryFieldRoundTrips) {
  Report unused;
  testing::FieldPaths described;
  exporter::report_fields::DescribeReport(unused, described);
  const std::set<std::string> documented = DocumentedReportKeys();
  std::vector<std::string> undocumented, unknown;
  std::set_difference(described.paths.begin(), described.paths.end(), documented.begin(),
                      documented.end(), std::back_inserter(undocumented));
  std::set_difference(documented.begin(), documented.end(), described.paths.begin(),
                      described.paths.end(), std::back_inserter(unknown));
  EXPECT_TRUE(undocumented.empty())
      << "fields missing from report-schema.md: " << absl::StrJoin(undocumented, ", ");
  EXPECT_TRUE(unknown.empty()) << "report-schema.md keys that are no field: "
                               << absl::StrJoin(unknown, ", ");
  EXPECT_GT(described.paths.size(), 100u);

  Report filled;
  testing::FillEveryField fill;
  exporter::report_fields::DescribeReport(filled, fill);
  filled.schema_version = kReportSchemaVersion;
  const std::string json = exporter::ReportToJson(filled);
  const absl::StatusOr<Report> back = exporter::ParseReportJson(json, "filled");
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << json;
  EXPECT_EQ(exporter::ReportToJson(*back), json);
  // Not the defaults: a field the reader skipped would differ above.
  EXPECT_NE(exporter::ReportToJson(Report()), json);
  EXPECT_EQ(back->counters.size(), 2u);
  EXPECT_EQ(back->trace.slowest.size(), 2u);
  EXPECT_EQ(back->distributed.missing_ranks.size(), 2u);
  EXPECT_TRUE(back->serving.has_value());
  EXPECT_EQ(back->acceptance.metric, filled.acceptance.metric);
}

// A field a report lacks is named by its dotted path, in each kind of
// section: plain, keyed by data, an array element, and one that may be null.
TEST(ReportSchemaTest, AFieldMissingInAnySectionIsNamedByItsPath) {
  Report r = SampleReport();
  r.counters.push_back({"loader.queue_depth", 3, 0, 4, 1.5, {}});
  r.trace.slowest.push_back({7, 12.5});
  const std::string json = exporter::ReportToJson(r);
  for (const auto& [field, path] : std::vector<std::pair<std::string, std::string>>{
           {"\"share_of_steps\"", "phases.forward.share_of_steps"},
           {"\"mean\"", "counters.loader.queue_depth.mean"},
           {"\"duration_ms\"", "trace.slowest[0].duration_ms"},
           {"\"p99_ms\"", "serving.p99_ms"},
           {"\"expected_lost_s_per_failure\"", "checkpoint.expected_lost_s_per_failure"}}) {
    std::string broken = json;
    const size_t at = broken.find(field);
    ASSERT_NE(at, std::string::npos) << field;
    broken.replace(at, field.size(), "\"renamed\"");
    const absl::StatusOr<Report> out = exporter::ParseReportJson(broken, "r.json");
    ASSERT_FALSE(out.ok()) << field;
    EXPECT_EQ(out.status().message(), "r.json: field '" + path + "' is missing");
  }
}

// ground/json_fields.h's reader: an integer that does not fit its field
// is refused (not wrapped), and a required section that is null is named.
TEST(ReportSchemaTest, AnIntegerOutOfRangeOrANullSectionIsNamed) {
  const std::string json = exporter::ReportToJson(SampleReport());
  std::string wide = json;
  const size_t rank = wide.find("\"rank\": ");
  ASSERT_NE(rank, std::string::npos);
  wide.insert(rank + 8, "4294967296");  // "rank": 4294967296<the digits>: over int's range
  absl::StatusOr<Report> out = exporter::ParseReportJson(wide, "r.json");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "r.json: field 'run.rank' is out of range");

  std::string null_section = json;
  const size_t timing = null_section.find("\"timing\": {");
  ASSERT_NE(timing, std::string::npos);
  null_section.replace(timing, null_section.find('}', timing) + 1 - timing, "\"timing\": null");
  out = exporter::ParseReportJson(null_section, "r.json");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "r.json: field 'timing' is not an object");
}

TEST(ReportJsonTest, ARunThatServedNothingHasNullServing) {
  Report r = SampleReport();
  r.serving.reset();
  const std::string json = exporter::ReportToJson(r);
  EXPECT_NE(json.find("\"serving\": null"), std::string::npos);
  const absl::StatusOr<Report> out = exporter::ParseReportJson(json, "mem");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE(out->serving.has_value());
  // Reports written before the section existed read the same.
  std::string old = json;
  old.erase(old.find("  \"serving\": null,\n"), std::string("  \"serving\": null,\n").size());
  const absl::StatusOr<Report> before = exporter::ParseReportJson(old, "old");
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_FALSE(before->serving.has_value());
}

TEST(ReportJsonTest, MissingQueueDelayIsNull) {
  Report r = SampleReport();
  r.timing.queue_delay_s.reset();
  const std::string json = exporter::ReportToJson(r);
  EXPECT_NE(json.find("\"queue_delay_s\": null"), std::string::npos);
  const absl::StatusOr<Report> out = exporter::ParseReportJson(json, "mem");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE(out->timing.queue_delay_s.has_value());
}

TEST(ReportJsonTest, ReportsWrittenBeforeTheDeviceSectionsStillRead) {
  // Schema 1 reports from before device_timeline and utilization existed.
  std::string json = exporter::ReportToJson(SampleReport());
  const size_t start = json.find("  \"device_timeline\"");
  const size_t end = json.find("  \"events\"");
  ASSERT_LT(start, end);
  json.erase(start, end - start);
  ASSERT_EQ(json.find("utilization"), std::string::npos) << json;
  const auto out = exporter::ParseReportJson(json, "old.json");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->device_timeline.status, "");
  EXPECT_EQ(out->timing.steps, 1000);
}

TEST(ReportJsonTest, ReportsWrittenBeforeTheClockFieldsStillRead) {
  std::string json = exporter::ReportToJson(SampleReport());
  const size_t start = json.find(",\n    \"clock\"");
  const size_t end = json.find("\n", json.find("\"clock_max_error_ns\""));
  ASSERT_NE(start, std::string::npos) << json;
  json.erase(start, end - start);
  ASSERT_EQ(json.find("tsc_hz"), std::string::npos) << json;
  const auto out = exporter::ParseReportJson(json, "old.json");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->events.clock, "");
  EXPECT_EQ(out->events.clock_calibrations, 0);
}

TEST(ReportJsonTest, MalformedJsonNamesTheSource) {
  const auto out = exporter::ParseReportJson("{\"schema_version\": 1,", "runs/a/report.json");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("runs/a/report.json: not valid JSON"), std::string::npos)
      << out.status();
}

// Bad input names the file and what is wrong with it.
TEST(ReportJsonTest, AnEmptyFileAndNumbersTooBigAreNamed) {
  for (const char* empty : {"", "  \n\t"}) {
    const auto out = exporter::ParseReportJson(empty, "runs/a/report.json");
    EXPECT_EQ(out.status().message(), "runs/a/report.json: the file is empty") << out.status();
  }
  const std::string json = exporter::ReportToJson(SampleReport());
  const std::string key = "\"recorded\": ";
  const size_t at = json.find(key);
  ASSERT_NE(at, std::string::npos) << json;
  const size_t value = at + key.size(), end = json.find_first_of(",}", value);
  // Past int64 (a uint64 to simdjson), then past uint64 and a double's range.
  std::string big = json;
  big.replace(value, end - value, "9223372036854775808");
  auto out = exporter::ParseReportJson(big, "r.json");
  EXPECT_EQ(out.status().message(), "r.json: field 'events.recorded' is out of range");
  for (const char* huge : {"99999999999999999999999", "1e400"}) {
    big = json;
    big.replace(value, end - value, huge);
    out = exporter::ParseReportJson(big, "r.json");
    EXPECT_EQ(out.status().message(),
              "r.json: not valid JSON (a number is malformed or too large for a double)")
        << huge;
  }
  big = json;
  big.replace(value, end - value, "1.5");
  out = exporter::ParseReportJson(big, "r.json");
  EXPECT_EQ(out.status().message(), "r.json: field 'events.recorded' is not an integer");
  big = json;
  big.replace(value, end - value, "NaN");
  out = exporter::ParseReportJson(big, "r.json");
  EXPECT_NE(out.status().message().find("r.json: not valid JSON"), std::string::npos)
      << out.status();
}

TEST(ReportJsonTest, MissingOrMistypedFieldIsNamedByItsPath) {
  std::string json = exporter::ReportToJson(SampleReport());
  const std::string missing = json.substr(0, json.find("\"total_s\"")) +
                              json.substr(json.find("\"steps\"", json.find("\"total_s\"")));
  auto out = exporter::ParseReportJson(missing, "r.json");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("field 'timing.total_s' is missing"), std::string::npos)
      << out.status();

  const size_t at = json.find("\"share\": 0.42");
  ASSERT_NE(at, std::string::npos);
  json.replace(at, 13, "\"share\": \"high\"");
  out = exporter::ParseReportJson(json, "r.json");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("field 'idle.share' is not a number"), std::string::npos)
      << out.status();
}

TEST(ReportJsonTest, NewerSchemaVersionIsRefused) {
  std::string json = exporter::ReportToJson(SampleReport());
  const std::string version = "\"schema_version\": " + std::to_string(kReportSchemaVersion);
  json.replace(json.find(version), version.size(), "\"schema_version\": 99");
  const auto out = exporter::ParseReportJson(json, "r.json");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(out.status().message().find("schema_version 99"), std::string::npos);
}

TEST(SummaryTest, ShowsPhasesIdleShareTopCauseAndRecommendation) {
  const std::string text = exporter::FormatSummary(SampleReport());
  EXPECT_NE(text.find("forward"), std::string::npos);
  EXPECT_NE(text.find("31.500"), std::string::npos);
  EXPECT_NE(text.find("idle: 42.0%"), std::string::npos);
  EXPECT_NE(text.find("top cause data_wait"), std::string::npos);
  EXPECT_NE(text.find("3 events dropped"), std::string::npos);
  EXPECT_NE(text.find("acceptance: top1 = 0.7 (target >= 0.75) FAIL"), std::string::npos);
  EXPECT_NE(text.find("→ 42% of step time waits on input"), std::string::npos);
}

// The idle gaps get a line when the run had any: how many, the longest
// (its step and cause) and the length that holds the most idle time.
TEST(SummaryTest, GapsLineWhenTheRunHadGaps) {
  Report r = SampleReport();
  EXPECT_EQ(exporter::FormatSummary(r).find("gaps:"), std::string::npos) << "no gaps, no line";
  r.gaps.count = 812;
  r.gaps.largest_ms = 52.1;
  r.gaps.histogram = {{"<10us", 700, 2.5}, {"10ms-100ms", 12, 640}, {"100ms-1s", 0, 0}};
  r.gaps.largest = {{3.5, 52.1, 17, "data_wait"}, {4.0, 40, -1, "host"}};
  const std::string text = exporter::FormatSummary(r);
  EXPECT_NE(text.find("\ngaps: 812 idle gaps; the longest 52.100 ms (step 17, data_wait); most "
                      "idle time in gaps of 10ms-100ms (640.000 ms)\n"),
            std::string::npos)
      << text;
  r.gaps.count = 1;
  r.gaps.largest = {{3.5, 52.1, -1, ""}};
  EXPECT_NE(exporter::FormatSummary(r).find("gaps: 1 idle gap; the longest 52.100 ms (between "
                                            "steps); most"),
            std::string::npos)
      << exporter::FormatSummary(r);
}

TEST(CliTest, SummaryPrintsTheSameSummaryAsTheLibrary) {
  TempDir dir;
  testing::WriteAll(dir.File("report.json"), exporter::ReportToJson(SampleReport()));
  const testing::ProcessResult run =
      RunProcess({TRAINSCOPE_CLI_PATH, "summary", dir.File("report.json")});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, exporter::FormatSummary(SampleReport()));
}

TEST(CliTest, MissingReportFileExitsOneNamingThePath) {
  const testing::ProcessResult run =
      RunProcess({TRAINSCOPE_CLI_PATH, "summary", "/nonexistent/report.json"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("/nonexistent/report.json"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("No such file"), std::string::npos) << run.err;
}

TEST(CliTest, CorruptReportFileExitsOneWithTheReason) {
  TempDir dir;
  testing::WriteAll(dir.File("report.json"), "{\"schema_version\": 1, \"run\": [}");
  const testing::ProcessResult run =
      RunProcess({TRAINSCOPE_CLI_PATH, "summary", dir.File("report.json")});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("report.json: not valid JSON"), std::string::npos) << run.err;
}

TEST(CliTest, BadUsageExitsTwo) {
  EXPECT_EQ(RunProcess({TRAINSCOPE_CLI_PATH}).exit_code, 2);
  EXPECT_EQ(RunProcess({TRAINSCOPE_CLI_PATH, "frobnicate"}).exit_code, 2);
  const auto bad_flag = RunProcess({TRAINSCOPE_CLI_PATH, "summary", "--no_such_flag", "x"});
  EXPECT_NE(bad_flag.exit_code, 0);
  EXPECT_NE(bad_flag.err.find("no_such_flag"), std::string::npos) << bad_flag.err;
  const auto bad_format = RunProcess({TRAINSCOPE_CLI_PATH, "summary", "--format=xml", "x"});
  EXPECT_EQ(bad_format.exit_code, 2);
  EXPECT_NE(bad_format.err.find("--format=xml"), std::string::npos);
}

TEST(CliTest, HelpDescribesTheCommandsAndTheirFlags) {
  for (const char* flag : {"--help", "-h", "--helpfull"}) {
    const auto help = RunProcess({TRAINSCOPE_CLI_PATH, flag});
    EXPECT_EQ(help.exit_code, 0) << flag;
    const std::string& text = help.out;
    EXPECT_EQ(text.rfind("trainscope: where accelerator time goes", 0), 0u)
        << flag << " starts with the tool's line, once:\n"
        << text;
    EXPECT_NE(text.find("summary REPORT.json"), std::string::npos) << text;
    EXPECT_NE(text.find("\nflags:\n"), std::string::npos) << text;
    for (const char* line :
         {"  --format=text|json", "  --jobs=N", "  --threads=N", "  --version"}) {
      EXPECT_NE(text.find(line), std::string::npos) << flag << " lists " << line << ":\n" << text;
    }
    EXPECT_EQ(text.find("Flags from"), std::string::npos) << "no source paths:\n" << text;
    EXPECT_EQ(text.find(".cc"), std::string::npos) << "no source paths:\n" << text;
  }
  const auto version = RunProcess({TRAINSCOPE_CLI_PATH, "--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("trainscope ", 0), 0u) << version.out;
}

// `trainscope compare`: run against run.
Report TimedRun(double time_to_target_s, const std::string& amp) {
  Report r = SampleReport();
  r.config = {{"amp", amp}, {"batch", "256"}};
  r.acceptance.time_to_target_s = time_to_target_s;
  r.acceptance.passed = true;
  return r;
}

TEST(CompareTest, OneRunASideIsASideBySideWithWhatDiffers) {
  TempDir dir;
  testing::WriteAll(dir.File("a.json"), exporter::ReportToJson(TimedRun(10, "off")));
  testing::WriteAll(dir.File("b.json"), exporter::ReportToJson(TimedRun(8, "bf16")));
  const testing::ProcessResult run =
      RunProcess({TRAINSCOPE_CLI_PATH, "compare", dir.File("a.json"), dir.File("b.json")});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("time to target (s)               10.000            8.000    0.800"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("One run on a side: a side-by-side, no verdict."), std::string::npos);
  EXPECT_NE(run.out.find("  config.amp: off -> bf16\n"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("config.batch"), std::string::npos) << run.out;  // the same
}

TEST(CompareTest, RepeatsOnBothSidesGetTheExperimentsVerdict) {
  TempDir dir;
  for (int k = 0; k < 5; ++k) {
    const std::string a = dir.File("a/run" + std::to_string(k)),
                      b = dir.File("b/run" + std::to_string(k));
    std::filesystem::create_directories(a);
    std::filesystem::create_directories(b);
    testing::WriteAll(a + "/report.json", exporter::ReportToJson(TimedRun(10 + 0.1 * k, "off")));
    testing::WriteAll(b + "/report.json", exporter::ReportToJson(TimedRun(8 + 0.1 * k, "bf16")));
  }
  testing::ProcessResult run =
      RunProcess({TRAINSCOPE_CLI_PATH, "compare", dir.File("a"), dir.File("b")});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("(5 runs), B = "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("accepted B: time to target 20% lower than A's"), std::string::npos)
      << run.out;
  // The same runs on both sides: no verdict for either.
  run = RunProcess({TRAINSCOPE_CLI_PATH, "compare", dir.File("a"), dir.File("a")});
  EXPECT_NE(run.out.find("no variant accepted"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("the same on both sides"), std::string::npos) << run.out;
}

// Most runs of each side never reach the target: both medians are
// infinite, and their ratio of 1 says nothing about which side is faster.
TEST(CompareTest, BothMediansInfiniteAreNoComparison) {
  TempDir dir;
  for (int k = 0; k < 5; ++k) {
    for (const char* side : {"a", "b"}) {
      const std::string run = dir.File(fmt::format("{}/run{}", side, k));
      std::filesystem::create_directories(run);
      Report r = TimedRun(10 + 0.1 * k, "off");
      if (k < 3) {  // never reached the target
        r.acceptance.time_to_target_s.reset();
        r.acceptance.passed = false;
      }
      testing::WriteAll(run + "/report.json", exporter::ReportToJson(r));
    }
  }
  const testing::ProcessResult run =
      RunProcess({TRAINSCOPE_CLI_PATH, "compare", dir.File("a"), dir.File("b")});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("B: both medians of time to target are infinite: no comparison"),
            std::string::npos)
      << run.out;
  EXPECT_EQ(run.out.find("0% higher"), std::string::npos) << run.out;
}

TEST(CompareTest, BadInputsAreNamed) {
  TempDir dir;
  testing::WriteAll(dir.File("a.json"), exporter::ReportToJson(TimedRun(10, "off")));
  testing::WriteAll(dir.File("broken.json"), "{\"schema_version\": 1,");
  testing::WriteAll(dir.File("experiment.json"), "{\"schema_version\": 1, \"hypothesis\": \"h\"}");
  testing::ProcessResult run =
      RunProcess({TRAINSCOPE_CLI_PATH, "compare", dir.File("a.json"), dir.File("none.json")});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find(dir.File("none.json") + ": no such file or directory"), std::string::npos)
      << run.err;
  run = RunProcess({TRAINSCOPE_CLI_PATH, "compare", dir.File("a.json"), dir.File("broken.json")});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("broken.json: not valid JSON"), std::string::npos) << run.err;
  run =
      RunProcess({TRAINSCOPE_CLI_PATH, "compare", dir.File("a.json"), dir.File("experiment.json")});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("compare needs two of a kind"), std::string::npos) << run.err;
  run = RunProcess(
      {TRAINSCOPE_CLI_PATH, "compare", dir.File("experiment.json"), dir.File("experiment.json")});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("experiment.json: not an experiment.json"), std::string::npos) << run.err;
  EXPECT_EQ(RunProcess({TRAINSCOPE_CLI_PATH, "compare", dir.File("a.json")}).exit_code, 2);
}

TEST(StepsFileTest, RowsRoundTripAndACutLastLineIsNotARow) {
  TempDir dir;
  Report::Step a;
  a.index = 7;
  a.start_s = 1.25;
  a.duration_ms = 101.5;
  a.samples = 64;
  a.sync_ms = 2;
  a.data_wait_ms = 12.5;
  a.phase_ms[static_cast<int>(Phase::kForward)] = 40.25;
  a.phase_ms[static_cast<int>(Phase::kDataWait)] = 12.5;
  a.idle_ms = 13;
  a.top_cause = "data_wait";
  a.memory_bytes = 1 << 30;
  Report::Step b = a;
  b.index = 8;
  b.top_cause = "";
  b.phase_ms = {};
  const std::string whole = exporter::StepRowToJsonLine(a) + exporter::StepRowToJsonLine(b);
  EXPECT_EQ(std::count(whole.begin(), whole.end(), '\n'), 2);
  // A crash in the middle of the third line.
  testing::WriteAll(dir.File("steps.jsonl"), whole + exporter::StepRowToJsonLine(a).substr(0, 30));
  const auto rows = exporter::ReadStepsFile(dir.File("steps.jsonl"));
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].index, 7);
  EXPECT_EQ((*rows)[0].start_s, 1.25);
  EXPECT_EQ((*rows)[0].samples, 64);
  EXPECT_EQ((*rows)[0].phase_ms, a.phase_ms);
  EXPECT_EQ((*rows)[0].top_cause, "data_wait");
  EXPECT_EQ((*rows)[0].memory_bytes, 1 << 30);
  EXPECT_EQ((*rows)[0].peak_memory_bytes, -1);
  EXPECT_EQ((*rows)[1].index, 8);
  EXPECT_EQ((*rows)[1].phase_ms, b.phase_ms);
}

// The writer's thread blocks in write() (a FIFO nobody reads, as a disk
// that throttles writes): Append and Flush still return at once, rows past
// the queue are dropped whole and counted, and what does reach the file is
// whole rows, in order, the rest of them.
TEST(StepsFileTest, AStalledWriteDropsWholeRowsAndNeverBlocksTheCaller) {
  TempDir dir;
  const std::string path = dir.File("steps.jsonl");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
  const int reader = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0) << std::strerror(errno);
  constexpr size_t kQueue = 256 << 10;  // raised to one buffer (1 MiB + 16 KiB)
  auto writer = exporter::StepsWriter::Open(dir.path(), "steps.jsonl", kQueue);
  ASSERT_TRUE(writer.ok()) << writer.status();
  Report::Step row;
  row.samples = 64;
  row.phase_ms[static_cast<int>(Phase::kForward)] = 40.25;
  row.top_cause = "data_wait";
  constexpr int kRows = 40000;  // about 5 MB: far past the pipe's 64 KiB and the queue
  for (int k = 0; k < kRows; ++k) {
    row.index = k;
    (*writer)->Append(row);
    if (k % 1000 == 999) {
      EXPECT_TRUE((*writer)->Flush().ok());
    }
  }
  const int64_t dropped = (*writer)->rows_dropped();
  EXPECT_GT(dropped, kRows / 2);
  EXPECT_EQ((*writer)->rows(), kRows);
  // Now read: Close waits for the thread to write what was queued.
  std::string got;
  std::thread drain([&] {
    ::fcntl(reader, F_SETFL, 0);  // blocking
    char block[1 << 16];
    for (ssize_t n; (n = ::read(reader, block, sizeof block)) > 0;) got.append(block, n);
  });
  const absl::Status closed = (*writer)->Close();
  drain.join();
  ::close(reader);
  EXPECT_TRUE(closed.ok()) << closed;
  EXPECT_EQ((*writer)->rows_dropped(), dropped) << "nothing dropped after the loop";
  testing::WriteAll(dir.File("copy.jsonl"), got);
  const auto rows = exporter::ReadStepsFile(dir.File("copy.jsonl"));
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(static_cast<int64_t>(rows->size()), kRows - dropped);
  EXPECT_FALSE(got.empty());
  EXPECT_EQ(got.back(), '\n');
  for (size_t k = 1; k < rows->size(); ++k) {
    ASSERT_LT((*rows)[k - 1].index, (*rows)[k].index);
  }
  EXPECT_EQ(rows->front().index, 0) << "the first rows went straight to the thread";
}

// A disk that is full: the error names the file, and every row the failed
// writes held, and every row after them, counts as dropped, not written.
TEST(StepsFileTest, RowsAWriteErrorLeftOutCountAsDropped) {
  if (access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no writable /dev/full";
  auto writer = exporter::StepsWriter::Open("/dev", "full");
  ASSERT_TRUE(writer.ok()) << writer.status();
  Report::Step row;
  for (int k = 0; k < 3000; ++k) {
    row.index = k;
    (*writer)->Append(row);
    if (k == 999) (void)(*writer)->Flush();
  }
  const absl::Status closed = (*writer)->Close();
  EXPECT_FALSE(closed.ok());
  EXPECT_NE(closed.message().find("/dev/full"), std::string_view::npos) << closed;
  EXPECT_EQ((*writer)->rows(), 3000);
  EXPECT_EQ((*writer)->rows_dropped(), 3000);
}

// Numbers are written exactly: values from integer nanoseconds as plain
// decimals, anything else in its shortest round-trip form; each reads back
// as the same double.
TEST(StepsFileTest, NumbersReadBackAsTheSameDoubles) {
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int64_t> ns(0, int64_t{1} << 45);
  std::vector<double> odd = {1.0 / 3, 2.5e-7, 123456789.123456789, -0.0, 1e300, 4.9e-324};
  for (int k = 0; k < 20000; ++k) {
    Report::Step row;
    const int64_t a = ns(rng), b = ns(rng) % 100000000000;
    row.index = k;
    row.start_s = a / 1e9;
    row.duration_ms = b / 1e6;
    row.sync_ms = k < static_cast<int>(odd.size()) ? odd[k] : -static_cast<double>(b) / 1e6;
    row.data_wait_ms = (b % 1000) / 1e6;
    row.idle_ms = b / 7.0;  // not a whole number of ns
    row.phase_ms[static_cast<int>(Phase::kForward)] = b / 1e6 + 1;
    const std::string line = exporter::StepRowToJsonLine(row);
    const auto back =
        exporter::ParseStepRow(std::string_view(line).substr(0, line.size() - 1), "r");
    ASSERT_TRUE(back.ok()) << back.status() << " " << line;
    ASSERT_EQ(back->start_s, row.start_s) << line;
    ASSERT_EQ(back->duration_ms, row.duration_ms) << line;
    ASSERT_EQ(back->sync_ms, row.sync_ms) << line;
    ASSERT_EQ(back->data_wait_ms, row.data_wait_ms) << line;
    ASSERT_EQ(back->idle_ms, row.idle_ms) << line;
    ASSERT_EQ(back->phase_ms, row.phase_ms) << line;
  }
  Report::Step row;
  row.duration_ms = 0.000001;
  row.start_s = 12.5;
  const std::string line = exporter::StepRowToJsonLine(row);
  EXPECT_NE(line.find("\"duration_ms\":0.000001,"), std::string::npos) << line;
  EXPECT_NE(line.find("\"start_s\":12.5,"), std::string::npos) << line;
}

// Each bad row is named by file, line and field.
TEST(StepsFileTest, BadValuesAreNamedByFileLineAndField) {
  TempDir dir;
  const std::string path = dir.File("steps.jsonl");
  // A run killed before its first step leaves an empty file: no rows.
  testing::WriteAll(path, "");
  auto rows = exporter::ReadStepsFile(path);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_TRUE(rows->empty());
  Report::Step a;
  a.duration_ms = 12.5;
  const std::string good = exporter::StepRowToJsonLine(a);
  auto with = [&](std::string_view key, std::string_view value) {
    std::string line = good;
    const std::string k = fmt::format("\"{}\":", key);
    const size_t at = line.find(k) + k.size();
    line.replace(at, line.find_first_of(",}", at) - at, value);
    return line;
  };
  const struct {
    std::string line;
    std::string error;
  } cases[] = {
      {with("step", "9223372036854775808"), "steps.jsonl:2: field 'step' is out of range"},
      {with("samples", "1e400"),
       "steps.jsonl:2: not a JSON object (a number is malformed or too large for a double)"},
      {with("duration_ms", "-3"), "steps.jsonl:2: field 'duration_ms' is negative"},
      {with("duration_ms", "\"12\""), "steps.jsonl:2: field 'duration_ms' is not a number"},
      {with("memory_bytes", "1.5"), "steps.jsonl:2: field 'memory_bytes' is not an integer"},
      {with("top_cause", "\"\xff\xfe\""),
       "steps.jsonl:2: not a JSON object (The input is not valid UTF-8)"},
      {"[1,2]\n", "steps.jsonl:2: not a JSON object"},
  };
  for (const auto& c : cases) {
    std::string line = c.line;
    if (line.back() != '\n') line += '\n';
    testing::WriteAll(path, good + line);
    rows = exporter::ReadStepsFile(path);
    ASSERT_FALSE(rows.ok()) << c.line;
    EXPECT_EQ(rows.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(rows.status().message());
    EXPECT_EQ(message.substr(message.rfind('/') + 1), c.error) << c.line;
  }
  // A file without newlines is not held whole.
  testing::WriteAll(path, good + std::string(3 << 20, ' '));
  rows = exporter::ReadStepsFile(path);
  EXPECT_NE(rows.status().message().find(
                "steps.jsonl:2: a line of more than 1048576 bytes: not a steps file"),
            std::string::npos)
      << rows.status();
  // What the writer writes for a non-finite number reads back as NaN.
  testing::WriteAll(path, with("idle_ms", "null"));
  rows = exporter::ReadStepsFile(path);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_TRUE(std::isnan((*rows)[0].idle_ms));
  EXPECT_EQ((*rows)[0].duration_ms, 12.5);
}

TEST(StepsFileTest, BadLinesAreNamedByFileAndLine) {
  TempDir dir;
  Report::Step a;
  std::string line = exporter::StepRowToJsonLine(a);
  testing::WriteAll(dir.File("steps.jsonl"), line + "{\"step\": \"x\"}\n");
  auto rows = exporter::ReadStepsFile(dir.File("steps.jsonl"));
  EXPECT_EQ(rows.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(rows.status().message().find("steps.jsonl:2: field 'step'"), std::string::npos)
      << rows.status();
  line.replace(line.find("{}"), 2, "{\"walk\":1}");  // phases_ms of a step without phases
  testing::WriteAll(dir.File("steps.jsonl"), line);
  rows = exporter::ReadStepsFile(dir.File("steps.jsonl"));
  EXPECT_NE(rows.status().message().find("phases_ms.walk"), std::string::npos) << rows.status();
  EXPECT_EQ(exporter::ReadStepsFile(dir.File("absent.jsonl")).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(exporter::StepsFileForReport("out/report.json"), "out/steps.jsonl");
  EXPECT_EQ(exporter::StepsFileForReport("a/b/report-rank3.json"), "a/b/steps-rank3.jsonl");
}

// StepRowReader gives ForEachStepRow's rows one at a time, across blocks
// of any size (lines cut by a block, longer than a block), skipping empty
// lines and a cut last line; Rewind starts over; a bad line is named by
// file and line, and stays the answer.
TEST(StepsFileTest, StepRowReaderReadsRowsOneAtATimeAcrossBlocks) {
  TempDir dir;
  const std::string path = dir.File("steps.jsonl");
  std::string text;
  for (int i = 0; i < 50; ++i) {
    Report::Step row;
    row.index = i;
    row.duration_ms = 100 + i;
    row.top_cause = std::string(i == 7 ? 700 : 3, 'c');  // one line longer than the blocks
    text += exporter::StepRowToJsonLine(row);
    if (i == 20) text += "\n";
  }
  testing::WriteAll(path, text + "{\"step\":50,\"start");  // a cut last line
  const absl::StatusOr<std::vector<Report::Step>> all = exporter::ReadStepsFile(path);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 50u);
  for (const size_t block : {size_t{1}, size_t{64}, size_t{333}, size_t{1} << 20}) {
    absl::StatusOr<std::unique_ptr<exporter::StepRowReader>> reader =
        exporter::StepRowReader::Open(path, block);
    ASSERT_TRUE(reader.ok()) << reader.status();
    for (int pass = 0; pass < 2; ++pass) {
      Report::Step row;
      size_t n = 0;
      for (absl::StatusOr<bool> got; (got = (*reader)->Next(&row)), got.ok() && *got; ++n) {
        ASSERT_LT(n, all->size());
        EXPECT_EQ(row.index, (*all)[n].index) << block;
        EXPECT_EQ(row.duration_ms, (*all)[n].duration_ms) << block;
        EXPECT_EQ(row.top_cause, (*all)[n].top_cause) << block;
      }
      EXPECT_EQ(n, 50u) << block;
      EXPECT_EQ((*reader)->rows(), 50);
      ASSERT_TRUE((*reader)->Rewind().ok());
    }
  }
  testing::WriteAll(path, text.substr(0, text.find('\n') + 1) + "{\"step\": \"x\"}\n");
  std::unique_ptr<exporter::StepRowReader> reader = *exporter::StepRowReader::Open(path, 16);
  Report::Step row;
  EXPECT_TRUE(*reader->Next(&row));
  const absl::StatusOr<bool> bad = reader->Next(&row);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find(path + ":2: field 'step'"), std::string::npos)
      << bad.status();
  EXPECT_EQ(reader->Next(&row).status(), bad.status());
  testing::WriteAll(path, std::string(3 << 20, ' '));
  reader = *exporter::StepRowReader::Open(path);
  EXPECT_NE(reader->Next(&row).status().message().find(
                path + ":1: a line of more than 1048576 bytes: not a steps file"),
            std::string::npos);
  EXPECT_EQ(exporter::StepRowReader::Open(dir.File("absent.jsonl")).status().code(),
            absl::StatusCode::kNotFound);
}

// `trainscope ranks` on real files: three ranks whose loops count from 0
// each epoch, rank 1 a row short and rank 2 the straggler; a bad row in a
// steps file is named by the file, its line and the rank's report.
TEST(RanksReportTest, StepsFilesAreReadAsStreamsAndEpochsMatch) {
  TempDir dir;
  auto write_rank = [&](int rank, const std::string& extra_line) {
    Report report;
    report.run.rank = rank;
    report.run.world_size = 3;
    testing::WriteAll(dir.File(fmt::format("report-rank{}.json", rank)),
                      exporter::ReportToJson(report));
    std::string rows;
    for (int epoch = 0; epoch < 2; ++epoch) {
      for (int i = 0; i < 5; ++i) {
        if (rank == 1 && epoch == 1 && i == 2) continue;
        Report::Step row;
        row.index = i;
        row.duration_ms = 100;
        row.sync_ms = rank == 2 ? 5 : 35;
        rows += exporter::StepRowToJsonLine(row);
      }
    }
    testing::WriteAll(dir.File(fmt::format("steps-rank{}.jsonl", rank)), rows + extra_line);
  };
  for (int rank = 0; rank < 3; ++rank) write_rank(rank, "");
  const testing::ProcessResult run = RunProcess({TRAINSCOPE_CLI_PATH, "ranks", dir.path()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("3 of 3 ranks reported; 9 steps on every rank\n"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("slowest rank: 2 (its compute is 30.000 ms a step longer"),
            std::string::npos)
      << run.out;
  write_rank(1, "{\"step\":5}\n");
  const testing::ProcessResult bad = RunProcess({TRAINSCOPE_CLI_PATH, "ranks", dir.path()});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find(fmt::format("{}:10: field 'start_s' is missing (the per-step rows of {})",
                                     dir.File("steps-rank1.jsonl"), dir.File("report-rank1.json"))),
            std::string::npos)
      << bad.err;
}

// A distributed run's reports in rank order, rank2 before rank10, whether
// side by side or a directory per rank; an unreadable directory is an
// error code, never an exception. The trace beside a report follows its
// name, and a gzipped one is found when only that exists.
TEST(RankFilesTest, ReportsInRankOrderAndTheTraceBesideEach) {
  TempDir dir;
  for (const char* name : {"report-rank10.json", "report-rank2.json", "report-rank1.json",
                           "report.json", "steps-rank2.jsonl", "report-rank3.txt"}) {
    testing::WriteAll(dir.File(name), "{}");
  }
  std::filesystem::create_directory(dir.File("report-rank4.json"));  // not a file
  std::error_code error;
  std::vector<std::string> found = exporter::FindRankReports(dir.path(), &error);
  EXPECT_FALSE(error);
  EXPECT_EQ(found,
            (std::vector<std::string>{dir.File("report-rank1.json"), dir.File("report-rank2.json"),
                                      dir.File("report-rank10.json")}));
  TempDir per_rank;
  for (const char* rank : {"rank11", "rank9", "rank0"}) {
    std::filesystem::create_directory(per_rank.File(rank));
    testing::WriteAll(per_rank.File(std::string(rank) + "/report.json"), "{}");
  }
  found = exporter::FindRankReports(per_rank.path(), &error);
  EXPECT_EQ(found, (std::vector<std::string>{per_rank.File("rank0/report.json"),
                                             per_rank.File("rank9/report.json"),
                                             per_rank.File("rank11/report.json")}));
  found = exporter::FindRankReports(dir.File("missing"), &error);
  EXPECT_TRUE(found.empty());
  EXPECT_EQ(error, std::errc::no_such_file_or_directory);

  EXPECT_EQ(exporter::TraceFileForReport(dir.File("report.json")), dir.File("trace.json"));
  EXPECT_EQ(exporter::TraceFileForReport(dir.File("report-rank2.json")),
            dir.File("trace-rank2.json"));
  testing::WriteAll(dir.File("trace-rank2.json.gz"), "");
  EXPECT_EQ(exporter::TraceFileForReport(dir.File("report-rank2.json")),
            dir.File("trace-rank2.json.gz"));
  testing::WriteAll(dir.File("trace-rank2.json"), "");
  EXPECT_EQ(exporter::TraceFileForReport(dir.File("report-rank2.json")),
            dir.File("trace-rank2.json"));
}

}  // namespace
}  // namespace trainscope
