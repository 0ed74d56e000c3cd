// `trainscope html` (sdk/html): pages written by the command, opened in a
// real browser (Debian's chromium, headless). The page marks its <body>
// when its code finished: how many charts it made and how many drew
// something (a pixel that is not transparent), and the script errors it
// caught. A machine without chromium skips the browser tests.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "fmt/format.h"
#include "sdk/export/report_json.h"
#include "sdk/export/steps_file.h"
#include "sdk/tuning/experiment.h"
#include "tests/test_util.h"
#include "trainscope/trainscope.h"

namespace trainscope {
namespace {

using testing::RunProcess;
using testing::TempDir;

const char kChromium[] = "/usr/bin/chromium";

// The DOM after the page's code ran, from headless chromium; `fragment`
// ("#timeline-test") is added to the page's URL.
std::string RenderedDom(const std::string& html_path, const TempDir& dir,
                        const std::string& fragment = "") {
  const testing::ProcessResult run =
      RunProcess({kChromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                  "--user-data-dir=" + dir.File("chromium-profile"), "--virtual-time-budget=10000",
                  "--dump-dom", "file://" + html_path + fragment});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  return run.out;
}

// The value of attribute `name` of the first element that has it, or "".
std::string Attribute(const std::string& dom, const std::string& name) {
  const std::string key = " " + name + "=\"";
  const size_t at = dom.find(key);
  if (at == std::string::npos) return "";
  const size_t begin = at + key.size();
  return dom.substr(begin, dom.find('"', begin) - begin);
}

// Renders `page` and expects that its code finished without a script
// error and that every chart it made drew (the timeline is one); `charts`
// of them when >= 0.
std::string DrawnDom(const std::string& page, const TempDir& dir, int charts = -1,
                     const std::string& fragment = "") {
  const std::string dom = RenderedDom(page, dir, fragment);
  EXPECT_EQ(Attribute(dom, "data-rendered"), "yes") << dom.substr(0, 2000);
  EXPECT_EQ(Attribute(dom, "data-errors"), "0") << Attribute(dom, "data-error-text");
  if (charts >= 0) {
    EXPECT_EQ(Attribute(dom, "data-charts"), std::to_string(charts));
  }
  EXPECT_EQ(Attribute(dom, "data-charts-drawn"), Attribute(dom, "data-charts"));
  return dom;
}

std::string Html(const std::string& dir) {
  const testing::ProcessResult run = RunProcess({TRAINSCOPE_CLI_PATH, "html", dir});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("wrote " + dir + "/report.html"), std::string::npos) << run.out;
  return dir + "/report.html";
}

// A run whose name and configuration try to inject markup and script.
constexpr char kHostileName[] = "<script>document.body.setAttribute('data-pwned','1')</script>";
constexpr char kHostileKey[] =
    "\"><img src=x onerror=\"document.body.setAttribute('data-pwned','2')\">";
constexpr char kHostileValue[] =
    "</script><script>document.body.setAttribute('data-pwned','3')</script>";
#define TRAINSCOPE_HOSTILE_RANGE \
  "<img src=x onerror=\"document.body.setAttribute('data-pwned','5')\">"

void RecordRun(const std::string& dir, int steps) {
  Options options = testing::QuietOptions(dir, kHostileName);
  options.sinks = Sink::kReportJson | Sink::kTraceJson;
  auto session = Session::Start(options);
  ASSERT_TRUE(session.ok()) << session.status();
  session->SetConfig(kHostileKey, kHostileValue);
  for (int64_t i = 0; i < steps; ++i) {
    StepScope step(*session, i, Samples(8));
    {
      TRAINSCOPE_PHASE(kDataWait);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    {
      TRAINSCOPE_PHASE(kForward);
      std::this_thread::sleep_for(std::chrono::microseconds(250));
      // A range whose name tries to inject markup: on the timeline.
      TRAINSCOPE_RANGE(TRAINSCOPE_HOSTILE_RANGE);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (i % 10 == 9) {
      TRAINSCOPE_PHASE(kEval);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  auto report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
}

TEST(HtmlRunPageTest, DrawsEveryChartInChromiumAndShowsHostileNamesAsText) {
  if (access(kChromium, X_OK) != 0)
    GTEST_SKIP() << kChromium << " not installed (apt-get install chromium)";
  TempDir dir;
  RecordRun(dir.path(), 30);
  const std::string page = Html(dir.path());
  const std::string text = testing::ReadAll(page);
  EXPECT_LT(text.size(), 1u << 20);
  // Self-contained: nothing loaded from elsewhere.
  for (const char* outward : {"<script src", "<link", "url(", "<iframe", "fetch("}) {
    EXPECT_EQ(text.find(outward), std::string::npos) << outward;
  }
  const std::string dom = DrawnDom(page, dir, 4, "#timeline-test");
  EXPECT_EQ(Attribute(dom, "data-steps"), "30");
  EXPECT_EQ(Attribute(dom, "data-bars"), "30");
  EXPECT_NE(Attribute(dom, "data-gaps"), "0");
  // No injected script ran and no injected element exists: the names are text.
  EXPECT_EQ(dom.find(" data-pwned=\""), std::string::npos) << "an injected script ran";
  EXPECT_NE(dom.find("data-pwned"), std::string::npos) << "the names are shown, as text";
  EXPECT_EQ(dom.find("<img"), std::string::npos);
  EXPECT_NE(dom.find("<h1 id=\"title\">trainscope · &lt;script&gt;document.body.setAttribute("
                     "'data-pwned','1')&lt;/script&gt;</h1>"),
            std::string::npos);
  EXPECT_NE(dom.find("<td>\"&gt;&lt;img src=x onerror=\"document.body.setAttribute("
                     "'data-pwned','2')\"&gt;</td>"),
            std::string::npos);
  EXPECT_NE(dom.find("<td>&lt;/script&gt;&lt;script&gt;document.body.setAttribute("
                     "'data-pwned','3')&lt;/script&gt;</td>"),
            std::string::npos);
  EXPECT_NE(dom.find("id=\"verdict\""), std::string::npos);
  // The verdict's next steps link to the docs that explain them.
  EXPECT_NE(dom.find("<ul id=\"next-steps\"><li>"), std::string::npos);
  EXPECT_NE(dom.find("<a href=\"file://"), std::string::npos);
  // The timeline: three steps of the trace, the main thread's ranges
  // nested (step, phase, the range in forward); zoomed in by Ctrl + wheel
  // (a plain wheel scrolls the page); the pointer over the hostile range
  // shows its name as text.
  EXPECT_EQ(Attribute(dom, "data-lanes"), "1");
  EXPECT_NE(Attribute(dom, "data-boxes"), "");
  EXPECT_GE(std::stoi(Attribute(dom, "data-boxes")), 3 * 4);
  EXPECT_NE(text.find("\"choice\":\"Steps "), std::string::npos);
  const std::string view = Attribute(dom, "data-view");
  const double from = std::stod(view), to = std::stod(view.substr(view.find(' ') + 1));
  const size_t window = text.find("\"window_us\":");
  ASSERT_NE(window, std::string::npos);
  const double full = std::stod(text.substr(window + 12));
  EXPECT_EQ(Attribute(dom, "data-plain-wheel"), "left to the page") << "it scrolls the page";
  EXPECT_GT(from, 0) << view;
  EXPECT_LT(to - from, 0.8 * full) << view << " of " << full;
  EXPECT_NE(dom.find("<div class=\"tip\" id=\"timeline-tip\" style=\"display: block;"),
            std::string::npos);
  EXPECT_NE(dom.find("&lt;img src=x onerror=\"document.body.setAttribute('data-pwned','5')\"&gt;"
                     "\nother"),
            std::string::npos)
      << dom.substr(dom.find("timeline-tip"), 400);
}

// Each verdict's next steps: the experiment that would test the change,
// as a command line, where one applies. A run with device records gets
// HTA's breakdowns drawn.
TEST(HtmlRunPageTest, NextStepsNameTheExperimentAndDeviceRunsGetHtasBreakdowns) {
  TempDir dir;
  RecordRun(dir.path(), 3);
  auto report = exporter::ReadReportFile(dir.File("report.json"));
  ASSERT_TRUE(report.ok()) << report.status();
  auto page_of = [&](double share, const std::string& cause) {
    report->idle.share = share;
    report->idle.top_cause = cause;
    testing::WriteAll(dir.File("report.json"), exporter::ReportToJson(*report));
    return testing::ReadAll(Html(dir.path()));
  };
  std::string page = page_of(0.02, "");
  EXPECT_NE(page.find("\"command\":\"trainscope tune amp -- YOUR_TRAINER "
                      "--precision={precision} --seed={repeat}\""),
            std::string::npos);
  EXPECT_NE(page.find("\"command\":\"trainscope tune batch --lr_rule=linear"), std::string::npos);
  page = page_of(0.4, "data_wait");
  EXPECT_NE(page.find("\"command\":\"trainscope tune loader --coload=cpu=2 -- YOUR_TRAINER "
                      "--workers={workers} --prefetch={prefetch}\""),
            std::string::npos);
  EXPECT_NE(page.find("guide-map.md#input-pipeline"), std::string::npos);
  EXPECT_EQ(page.find("trainscope tune amp"), std::string::npos);
  page = page_of(0.4, "launch");
  EXPECT_NE(page.find("\"command\":\"trainscope tune batch -- YOUR_TRAINER --batch={batch}\""),
            std::string::npos);
  page = page_of(0.4, "sync");
  EXPECT_NE(page.find("\"doc\":\"gap-analysis.md\""), std::string::npos);
  // With device records, HTA's breakdowns of the run are drawn too.
  Report::DeviceTimeline::Hta& hta = report->device_timeline.hta;
  hta.rows = 1200;
  hta.kernel_s = 2;
  hta.idle_s = 0.5;
  hta.compute_s = 1.2;
  hta.non_compute_s = 0.3;
  hta.idle_by_stream = {{7, 0.3, 0.01, 0.1}, {13, 0.05, 0, 0.2}};
  page_of(0.4, "sync");
  if (access(kChromium, X_OK) != 0) GTEST_SKIP() << kChromium << " not installed";
  const std::string dom = DrawnDom(dir.File("report.html"), dir, 6);
  EXPECT_EQ(Attribute(dom, "data-streams"), "2");
}

// A run that described its loader gets the input-pipeline section: the
// settings and figures in a table (a hostile loader name as text) and the
// queue's depth over time drawn, a gap where a window had no sample.
TEST(HtmlRunPageTest, ALoaderGetsItsSettingsAndItsQueueOverTime) {
  if (access(kChromium, X_OK) != 0)
    GTEST_SKIP() << kChromium << " not installed (apt-get install chromium)";
  TempDir dir;
  {
    Options options = testing::QuietOptions(dir.path(), "loader-run");
    auto session = Session::Start(options);
    ASSERT_TRUE(session.ok()) << session.status();
    LoaderSettings settings;
    settings.name = "<b>decode</b>";
    settings.kind = "torch::data::DataLoader";
    settings.workers = 2;
    settings.prefetch = 4;
    ASSERT_TRUE(session->RecordLoader(settings).ok());
    const NameId depth = InternName(settings.name + ".queue_depth");
    const NameId cpu = InternName(settings.name + ".cpu_us");
    for (int64_t i = 0; i < 12; ++i) {
      StepScope step(*session, i, Samples(8));
      RecordCounter(depth, i % 5);
      RecordCounter(cpu, 6000);
      // A pause past a window's width: a window with no sample.
      std::this_thread::sleep_for(std::chrono::milliseconds(i == 5 ? 600 : 20));
    }
    ASSERT_TRUE(session->Finish().ok());
  }
  const std::string page = Html(dir.path());
  const std::string text = testing::ReadAll(page);
  const size_t queue = text.find("\"queue\":{");
  ASSERT_NE(queue, std::string::npos);
  const std::string series = text.substr(queue, text.find('}', queue) - queue);
  EXPECT_NE(series.find(",null,"), std::string::npos)
      << "a window without samples is a gap: " << series;
  const std::string dom = DrawnDom(page, dir, 5);
  EXPECT_NE(dom.find("id=\"loaders\""), std::string::npos);
  EXPECT_NE(dom.find("<td>&lt;b&gt;decode&lt;/b&gt;</td><td>torch::data::DataLoader</td>"
                     "<td class=\"num\">2</td><td class=\"num\">4</td><td>no</td>"
                     "<td class=\"num\">12</td><td class=\"num\">6.00</td>"),
            std::string::npos)
      << dom.substr(dom.find("loader-table"), 600);
  EXPECT_EQ(dom.find("<b>decode"), std::string::npos);
}

// 5000 steps: at most 2 x 1000 bars of consecutive steps, each with its
// slowest step kept, so that one slow step still shows.
TEST(HtmlRunPageTest, ManyStepsAreBarsOfConsecutiveStepsThatKeepTheSlowest) {
  TempDir dir;
  RecordRun(dir.path(), 3);
  std::string rows;
  for (int64_t i = 0; i < 5000; ++i) {
    Report::Step row;
    row.index = i;
    row.start_s = 0.001 * static_cast<double>(i);
    row.duration_ms = i == 3333 ? 250.0 : 1.0;
    row.phase_ms[static_cast<int>(Phase::kForward)] = row.duration_ms * 0.5;
    rows += exporter::StepRowToJsonLine(row);
  }
  testing::WriteAll(dir.File("steps.jsonl"), rows);
  const std::string page = Html(dir.path());
  const std::string text = testing::ReadAll(page);
  EXPECT_NE(text.find("\"count\":5000,\"per_bar\":4,"), std::string::npos);
  EXPECT_NE(text.find(",250,"), std::string::npos) << "the slow step is a bar's slowest";
  if (access(kChromium, X_OK) != 0) GTEST_SKIP() << kChromium << " not installed";
  const std::string dom = DrawnDom(page, dir);
  EXPECT_EQ(Attribute(dom, "data-steps"), "5000");
  EXPECT_EQ(Attribute(dom, "data-bars"), "1250");
  EXPECT_EQ(Attribute(dom, "data-charts-drawn"), Attribute(dom, "data-charts"));
}

TEST(HtmlRunPageTest, BadInputIsNamedWithANonZeroExit) {
  TempDir dir;
  testing::ProcessResult run = RunProcess({TRAINSCOPE_CLI_PATH, "html", dir.path()});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find(dir.File("report.json")), std::string::npos) << run.err;
  RecordRun(dir.path(), 3);
  testing::WriteAll(dir.File("steps.jsonl"),
                    testing::ReadAll(dir.File("steps.jsonl")) + "{\"step\": 1e400}\n");
  run = RunProcess({TRAINSCOPE_CLI_PATH, "html", dir.path()});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("steps.jsonl:4: not a JSON object (a number is malformed or too large "
                         "for a double)"),
            std::string::npos)
      << run.err;
  EXPECT_FALSE(std::ifstream(dir.File("report.html")).good()) << "nothing half written";
  run = RunProcess({TRAINSCOPE_CLI_PATH, "html"});
  EXPECT_EQ(run.exit_code, 2);
  // A rank's report gets a page of its own name.
  std::filesystem::remove(dir.File("steps.jsonl"));
  std::filesystem::copy_file(dir.File("report.json"), dir.File("report-rank3.json"));
  run = RunProcess({TRAINSCOPE_CLI_PATH, "html", dir.File("report-rank3.json")});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("wrote " + dir.File("report-rank3.html")), std::string::npos) << run.out;
  run = RunProcess({TRAINSCOPE_CLI_PATH, "html", dir.File("report-rank3.html")});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("report-rank3.html: not a run's or a distributed run's directory, nor "
                         "a report.json, experiment.json or trace.json[.gz]"),
            std::string::npos)
      << run.err;
  // A trace that is not JSON: the reader's error, naming it.
  testing::WriteAll(dir.File("broken.json"), "{\"traceEvents\": [{\"ph\": ");
  run = RunProcess({TRAINSCOPE_CLI_PATH, "html", dir.File("broken.json")});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find(dir.File("broken.json")), std::string::npos) << run.err;
  EXPECT_FALSE(std::ifstream(dir.File("broken.html")).good());
}

// The timeline comes from the trace beside the report, gzipped or not. A
// run without one, or with one that does not read, still gets its page:
// the section says why there is no timeline, and the command warns about
// a broken trace, naming it.
TEST(HtmlRunPageTest, ATimelineFromTheTraceBesideTheReportOrWhyThereIsNone) {
  TempDir dir;
  RecordRun(dir.path(), 3);
  const std::string trace = dir.File("trace.json");
  ASSERT_EQ(RunProcess({"/usr/bin/gzip", trace}).exit_code, 0);
  std::string text = testing::ReadAll(Html(dir.path()));
  EXPECT_NE(text.find("id=\"trainscope-timeline\""), std::string::npos);
  std::filesystem::remove(trace + ".gz");
  text = testing::ReadAll(Html(dir.path()));
  EXPECT_EQ(text.find("id=\"trainscope-timeline\""), std::string::npos);
  EXPECT_NE(text.find("No timeline: " + trace + " does not exist"), std::string::npos);
  testing::WriteAll(trace, "{\"traceEvents\": [{\"ph\": ");
  const testing::ProcessResult run = RunProcess({TRAINSCOPE_CLI_PATH, "html", dir.path()});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("trainscope html: warning: No timeline: " + trace + ": byte "),
            std::string::npos)
      << run.err;
  text = testing::ReadAll(dir.File("report.html"));
  EXPECT_NE(text.find("No timeline: " + trace + ": byte "), std::string::npos);
  if (access(kChromium, X_OK) != 0) GTEST_SKIP() << kChromium << " not installed";
  const std::string dom = DrawnDom(dir.File("report.html"), dir, 3);
  EXPECT_NE(dom.find("<p id=\"no-timeline\">No timeline: " + trace + ": byte "), std::string::npos);
}

// A rank of a two-rank run: compute, then a sync phase that waits for the
// slower rank (here: sleeps the difference).
void RecordRank(const std::string& dir, int rank, int steps, int compute_us, int sync_us) {
  Options options = testing::QuietOptions(dir, "ranks");
  options.sinks = Sink::kReportJson;
  options.rank = rank;
  options.world_size = 2;
  auto session = Session::Start(options);
  ASSERT_TRUE(session.ok()) << session.status();
  for (int64_t i = 0; i < steps; ++i) {
    StepScope step(*session, i, Samples(8));
    {
      TRAINSCOPE_PHASE(kForward);
      std::this_thread::sleep_for(std::chrono::microseconds(compute_us));
    }
    TRAINSCOPE_PHASE(kSync);
    std::this_thread::sleep_for(std::chrono::microseconds(sync_us));
  }
  ASSERT_TRUE(session->Finish().ok());
}

// A folder of per-rank reports: the straggler verdict, each rank's
// compute and sync, and each rank's step time over the run.
TEST(HtmlRanksPageTest, NamesTheStragglerAndDrawsEveryRank) {
  TempDir dir;
  RecordRank(dir.path(), 0, 40, 300, 2000);
  RecordRank(dir.path(), 1, 40, 2300, 50);
  testing::ProcessResult run = RunProcess({TRAINSCOPE_CLI_PATH, "html", dir.path()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("wrote " + dir.File("ranks.html")), std::string::npos) << run.out;
  const std::string text = testing::ReadAll(dir.File("ranks.html"));
  EXPECT_NE(text.find("\"slowest_rank\": 1"), std::string::npos);
  if (access(kChromium, X_OK) != 0) GTEST_SKIP() << kChromium << " not installed";
  const std::string dom = DrawnDom(dir.File("ranks.html"), dir, 2);
  EXPECT_EQ(Attribute(dom, "data-ranks"), "2");
  EXPECT_NE(dom.find("rank 1 is the straggler"), std::string::npos) << dom.substr(0, 3000);
  // One rank left: nothing to compare it with, said so.
  std::filesystem::remove(dir.File("report-rank1.json"));
  run = RunProcess({TRAINSCOPE_CLI_PATH, "html", dir.path()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string one = DrawnDom(dir.File("ranks.html"), dir, 2);
  EXPECT_NE(one.find("no straggler to name: fewer than two ranks"), std::string::npos);
  // A directory holding one run's directory is not a distributed run's.
  TempDir parent;
  std::filesystem::create_directory(parent.File("run"));
  std::filesystem::copy_file(dir.File("report-rank0.json"), parent.File("run/report.json"));
  run = RunProcess({TRAINSCOPE_CLI_PATH, "html", parent.path()});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find(parent.File("report.json")), std::string::npos) << run.err;
}

// An experiment.json as `trainscope experiment run` writes it: a baseline
// and two variants, one accepted, one with a failed trial; the names try
// to inject markup.
std::string ExperimentJson() {
  tuning::ExperimentSpec spec;
  spec.hypothesis = "<script>document.body.setAttribute('data-pwned','5')</script>";
  spec.command = {"build/bin/train_mlp", "--out={out}"};
  spec.variants = {{"fp32", {}, {}, {}},
                   {"bf16", {"--amp=bf16"}, {}, {}},
                   {"\"><img src=x onerror=\"document.body.setAttribute('data-pwned','6')\">",
                    {"--amp=fp16"},
                    {},
                    {}}};
  tuning::ExperimentResult result;
  result.complete = true;
  for (int k = 0; k < 12; ++k) {
    tuning::Trial& t = result.trials.emplace_back();
    t.order = k;
    t.variant = k % 3;
    t.round = k / 3;
    t.wall_s = 10;
    if (k == 5) {
      t.failed = true;
      t.failure = "exit 1";
    } else {
      t.time_to_target_s = (t.variant == 1 ? 6.0 : 9.0) + 0.1 * t.round;
    }
  }
  result.verdict.accepted = "bf16";
  result.verdict.reason = "bf16 reaches the target 33% sooner";
  // The third variant's failed trial makes its interval's upper end
  // infinite (a median that never reached the target): null in the file.
  const double inf = std::numeric_limits<double>::infinity();
  result.verdict.comparisons = {
      {"bf16", 0.67, 0.64, 0.70, 0.03, 0.06, 0, 4, true, {}, true, "x"},
      {spec.variants[2].name, 1.01, 0.97, inf, 0.8, 0.8, 1, 4, false, {}, false, "y"}};
  return tuning::ExperimentJson(spec, result);
}

// The page of an experiment, under any file name: the verdict, each
// variant's ratio with its interval, the trials; names as text.
TEST(HtmlExperimentPageTest, DrawsTheVerdictTheIntervalsAndTheTrials) {
  TempDir dir;
  testing::WriteAll(dir.File("loader.json"), ExperimentJson());
  testing::ProcessResult run = RunProcess({TRAINSCOPE_CLI_PATH, "html", dir.File("loader.json")});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("wrote " + dir.File("loader.html")), std::string::npos) << run.out;
  // A malformed one is named as the experiment reader names it.
  std::string bad = ExperimentJson();
  const std::string objective = "\"objective\": \"time_to_target\"";
  bad.replace(bad.find(objective), objective.size(), "\"objective\": 7");
  testing::WriteAll(dir.File("bad.json"), bad);
  run = RunProcess({TRAINSCOPE_CLI_PATH, "html", dir.File("bad.json")});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find(dir.File("bad.json") + ": field 'spec.objective'"), std::string::npos)
      << run.err;
  if (access(kChromium, X_OK) != 0) GTEST_SKIP() << kChromium << " not installed";
  const std::string dom = DrawnDom(dir.File("loader.html"), dir, 2);
  EXPECT_EQ(Attribute(dom, "data-variants"), "3");
  EXPECT_EQ(Attribute(dom, "data-trials"), "12");
  EXPECT_EQ(Attribute(dom, "data-accepted"), "bf16");
  EXPECT_NE(dom.find("bf16 reaches the target 33% sooner"), std::string::npos);
  EXPECT_NE(dom.find("<td>exit 1</td>"), std::string::npos) << "the failure, listed";
  EXPECT_NE(dom.find(">0.970 \u2013 \u221e</td>"), std::string::npos) << "an open interval";
  EXPECT_EQ(dom.find(" data-pwned=\""), std::string::npos) << "an injected script ran";
  EXPECT_EQ(dom.find("<img"), std::string::npos);
}

// The page of a trace: `trainscope analyze`'s analysis drawn, for a real
// PyTorch-profiler trace (rank0_queue: 6080 kernels on 6 streams) under a
// file name that tries to inject markup, and for trainscope's own CPU-only
// trace.json (no device time to break down, said so).
TEST(HtmlTracePageTest, DrawsTheAnalysisOfARealTraceAndOfACpuOnlyOne) {
  TempDir dir;
  const std::string hostile =
      dir.File("\"><img src=x onerror=\"document.body.setAttribute('data-pwned','4')\">.json.gz");
  std::filesystem::copy_file(std::string(TRAINSCOPE_SHARED_KINETO_DIR) + "/rank0_queue.json.gz",
                             hostile);
  testing::ProcessResult run = RunProcess({TRAINSCOPE_CLI_PATH, "html", hostile});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string page = hostile + ".html";
  EXPECT_NE(run.out.find("wrote " + page), std::string::npos) << run.out;
  const std::string text = testing::ReadAll(page);
  EXPECT_LT(text.size(), 1u << 20) << "a 26 MB trace, a page of its analysis";
  EXPECT_NE(text.find("\"kernels\": 6080"), std::string::npos);
  RecordRun(dir.path(), 12);
  run = RunProcess({TRAINSCOPE_CLI_PATH, "html", dir.File("trace.json")});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("wrote " + dir.File("trace.html")), std::string::npos) << run.out;
  if (access(kChromium, X_OK) != 0) GTEST_SKIP() << kChromium << " not installed";
  const std::string dom = DrawnDom(page, dir, 5, "#timeline-test");
  EXPECT_EQ(Attribute(dom, "data-kernels"), "6080");
  // The timeline of steps 552 to 554: 6 host threads above 6 streams.
  EXPECT_EQ(Attribute(dom, "data-lanes"), "12");
  EXPECT_NE(text.find("\"choice\":\"Steps 552 to 554:"), std::string::npos);
  EXPECT_NE(Attribute(dom, "data-view").find(' '), std::string::npos);
  EXPECT_EQ(Attribute(dom, "data-streams"), "6");
  EXPECT_NE(Attribute(dom, "data-gaps"), "0");
  EXPECT_NE(dom.find("id=\"verdict\""), std::string::npos);
  EXPECT_EQ(dom.find(" data-pwned=\""), std::string::npos) << "an injected script ran";
  EXPECT_EQ(dom.find("<img"), std::string::npos);
  EXPECT_NE(dom.find("&lt;img src=x onerror="), std::string::npos) << "the name, as text";
  const std::string cpu = DrawnDom(dir.File("trace.html"), dir);
  EXPECT_EQ(Attribute(cpu, "data-kernels"), "0");
  EXPECT_NE(cpu.find("id=\"no-device\""), std::string::npos);
  EXPECT_EQ(Attribute(cpu, "data-charts-drawn"), Attribute(cpu, "data-charts"));
}

// A trace and its compressed copy side by side: x.json's page is x.html,
// x.json.gz's is x.json.gz.html, whichever is drawn first; neither writes
// over the other's page.
TEST(HtmlTracePageTest, ATraceAndItsCompressedCopyGetPagesOfTheirOwn) {
  TempDir dir;
  const std::string gz = dir.File("x.json.gz");
  std::filesystem::copy_file(std::string(TRAINSCOPE_SHARED_KINETO_DIR) + "/simple_add.json.gz", gz);
  ASSERT_EQ(RunProcess({"/usr/bin/gzip", "-dk", gz}).exit_code, 0);
  ASSERT_TRUE(std::filesystem::exists(dir.File("x.json")));
  testing::ProcessResult run = RunProcess({TRAINSCOPE_CLI_PATH, "html", dir.File("x.json")});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("wrote " + dir.File("x.html") + " "), std::string::npos) << run.out;
  run = RunProcess({TRAINSCOPE_CLI_PATH, "html", gz});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("wrote " + dir.File("x.json.gz.html") + " "), std::string::npos)
      << run.out;
  // Each page names its own input, x.html still x.json's.
  EXPECT_NE(testing::ReadAll(dir.File("x.html")).find("<title>trainscope \u00b7 x.json</title>"),
            std::string::npos);
  EXPECT_NE(testing::ReadAll(dir.File("x.json.gz.html"))
                .find("<title>trainscope \u00b7 x.json.gz</title>"),
            std::string::npos);
  // In the other order too.
  std::filesystem::remove(dir.File("x.html"));
  std::filesystem::remove(dir.File("x.json.gz.html"));
  ASSERT_EQ(RunProcess({TRAINSCOPE_CLI_PATH, "html", gz}).exit_code, 0);
  ASSERT_EQ(RunProcess({TRAINSCOPE_CLI_PATH, "html", dir.File("x.json")}).exit_code, 0);
  EXPECT_NE(testing::ReadAll(dir.File("x.json.gz.html"))
                .find("<title>trainscope \u00b7 x.json.gz</title>"),
            std::string::npos);
  EXPECT_NE(testing::ReadAll(dir.File("x.html")).find("<title>trainscope \u00b7 x.json</title>"),
            std::string::npos);
  // -o still names the page.
  run = RunProcess({TRAINSCOPE_CLI_PATH, "html", gz, "-o", dir.File("chosen.html")});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("wrote " + dir.File("chosen.html") + " "), std::string::npos) << run.out;
}

}  // namespace
}  // namespace trainscope
