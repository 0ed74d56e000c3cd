// analyze_bench, The summary: every figure against its goal. See analyze_bench.h.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "bench/analyze/analyze_bench.h"

namespace trainscope::analyze_bench {

std::string Fmt(const char* format, double v) {
  if (std::isnan(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

struct Goal {
  std::string what;
  std::string figure;
  std::optional<bool> pass;  // nullopt: not measured
};

void PrintSummary() {
  std::vector<Goal> goals;
  printf("\n==== analyze_bench summary (medians of every timed iteration, same run) ====\n");
  printf(
      "machine: %s, %d CPU(s); %s\n", E().cpu_model.c_str(), E().cpus,
      E().cpu >= 0
          ? ("benchmark thread and its children pinned to CPU " + std::to_string(E().cpu)).c_str()
          : "not pinned");
  bool preempted = false;
  auto note_preempted = [&](const std::string& name) {
    const double w = WallS(name), c = CpuS(name);
    if (!std::isnan(w) && !std::isnan(c) && w > 1.1 * c) {
      preempted = true;
      return "  (preempted)";
    }
    return "";
  };

  // 1.
  printf("\n1. Gap analysis of a synthetic timeline\n");
  if (Find("BM_gap_analyze") || Find("BM_hta_breakdown") || Find("BM_sort_baseline")) {
    const Synthetic& syn = GetSynthetic();
    const double n = static_cast<double>(syn.timeline.size());
    printf(
        "   %lld records: %lld kernels on 4 streams, %lld runtime calls, %lld steps, "
        "%lld host ranges (built in %.1f s)\n",
        static_cast<long long>(syn.timeline.size()), static_cast<long long>(syn.kernels),
        static_cast<long long>(syn.launches), static_cast<long long>(syn.steps),
        static_cast<long long>(syn.host_ranges), syn.build_s);
    const double sort_s = WallS("BM_sort_baseline");
    printf("   %-28s %10s %12s %14s\n", "", "median", "M records/s", "x std::sort");
    for (const char* name : {"BM_sort_baseline", "BM_gap_analyze", "BM_hta_breakdown"}) {
      const double w = WallS(name);
      printf("   %-28s %8s ms %12s %14s%s\n", name, Fmt("%.1f", w * 1e3).c_str(),
             Fmt("%.2f", n / w / 1e6).c_str(), Fmt("%.2f", w / sort_s).c_str(),
             note_preempted(name));
    }
    const double both = WallS("BM_gap_analyze") + WallS("BM_hta_breakdown");
    printf("   %-28s %8s ms %12s %14s\n", "both analyses", Fmt("%.1f", both * 1e3).c_str(),
           Fmt("%.2f", n / both / 1e6).c_str(), Fmt("%.2f", both / sort_s).c_str());
    if (Find("BM_gap_analyze")) {
      printf("   sanity: gap analysis: idle %.3f%% of the window in %lld gaps\n",
             syn.idle.share * 100, static_cast<long long>(syn.idle.gaps));
    }
    if (Find("BM_hta_breakdown")) {
      printf("   sanity: HTA breakdown: %lld rows, idle %.0f us of %.0f us\n",
             static_cast<long long>(syn.hta.rows), syn.hta.temporal.idle_us,
             syn.hta.temporal.kernel_us);
    }
    for (const char* name : {"BM_gap_analyze", "BM_hta_breakdown"}) {
      const double rate = n / WallS(name);
      goals.push_back(
          {std::string(name) + " >= 20 M records/s (1 core)", Fmt("%.1f M records/s", rate / 1e6),
           std::isnan(rate) ? std::nullopt : std::optional<bool>(rate >= kGapGoalRecordsPerS)});
    }
  } else {
    printf("   not run\n");
  }

  // 2.
  printf(
      "\n2. trainscope analyze throughput (ImportTrace + ComputeHtaBreakdown + GapAnalyzer),\n"
      "   MB = 10^6 bytes of uncompressed JSON\n");
  printf("   %-16s %7s %8s %8s %8s %7s %8s %8s %7s %8s %7s\n", "trace", "MB", "read()", "plain",
         "plain", "x read", "zlib", ".gz", "x zlib", "inflate", "kept");
  printf("   %-16s %7s %8s %8s %8s %7s %8s %8s %7s %8s %7s\n", "", "", "MB/s", "MB/s", "best",
         "time", "MB/s", "MB/s", "time", "share", "events");
  double total_bytes = 0, total_plain = 0, total_plain_cpu = 0, total_plain_best = 0, total_gz = 0;
  for (const TraceFiles& t : Traces()) {
    const double mb = t.plain_bytes / 1e6;
    const double read = WallS("BM_read_plain/" + t.name);
    const double plain = WallS("BM_analyze_plain/" + t.name);
    const double plain_cpu = CpuS("BM_analyze_plain/" + t.name);
    const double plain_best = BestWallS("BM_analyze_plain/" + t.name);
    const double inflate = WallS("BM_inflate_gz/" + t.name);
    const double gz = WallS("BM_analyze_gz/" + t.name);
    if (std::isnan(read) && std::isnan(plain) && std::isnan(inflate) && std::isnan(gz)) continue;
    printf("   %-16s %7.2f %8s %8s %8s %7s %8s %8s %7s %8s %7s%s%s\n", t.name.c_str(), mb,
           Fmt("%.0f", mb / read).c_str(), Fmt("%.0f", mb / plain).c_str(),
           Fmt("%.0f", mb / plain_best).c_str(), Fmt("%.1f", plain / read).c_str(),
           Fmt("%.0f", mb / inflate).c_str(), Fmt("%.0f", mb / gz).c_str(),
           Fmt("%.2f", gz / inflate).c_str(),
           Fmt("%.0f%%", 100 * Extra("BM_analyze_gz/" + t.name, "inflate_share")).c_str(),
           Fmt("%.0f", Extra("BM_analyze_plain/" + t.name, "intervals")).c_str(),
           note_preempted("BM_analyze_plain/" + t.name), note_preempted("BM_analyze_gz/" + t.name));
    if (!std::isnan(plain) && !std::isnan(gz)) {
      total_bytes += mb;
      total_plain += plain;
      total_plain_cpu += plain_cpu;
      total_plain_best += plain_best;
      total_gz += gz;
    }
  }
  for (const TraceFiles& t : Traces()) {
    const double plain_all = WallS("BM_analyze_plain_all/" + t.name);
    const double gz_all = WallS("BM_analyze_gz_all/" + t.name);
    if (std::isnan(plain_all) && std::isnan(gz_all)) continue;
    const double mb = t.plain_bytes / 1e6;
    printf(
        "   %-16s on all %d CPUs (%.0f parsing threads): plain %s MB/s (%s x one core), "
        ".gz %s MB/s (%s x one core)\n",
        t.name.c_str(), E().cpus, Extra("BM_analyze_plain_all/" + t.name, "threads"),
        Fmt("%.0f", mb / plain_all).c_str(),
        Fmt("%.2f", WallS("BM_analyze_plain/" + t.name) / plain_all).c_str(),
        Fmt("%.0f", mb / gz_all).c_str(),
        Fmt("%.2f", WallS("BM_analyze_gz/" + t.name) / gz_all).c_str());
  }
  for (const TraceFiles& t : Traces()) {
    const std::string name = "BM_analyze_plain/" + t.name;
    if (!Find(name)) continue;
    printf("   %-16s plain: import %.0f%%, HTA breakdown %.0f%%, gap analysis %.0f%% of the time\n",
           t.name.c_str(), 100 * Extra(name, "import_s") / WallS(name),
           100 * Extra(name, "hta_s") / WallS(name), 100 * Extra(name, "gap_s") / WallS(name));
  }
  if (total_plain > 0) {
    const double rate = total_bytes / total_plain;
    printf(
        "   all traces: plain %.0f MB/s (by CPU time %.0f, best iterations %.0f), .gz %.0f MB/s\n",
        rate, total_bytes / total_plain_cpu, total_bytes / total_plain_best,
        total_bytes / total_gz);
    goals.push_back({"plain .json >= 500 MB/s (all traces, 1 core)", Fmt("%.0f MB/s", rate),
                     rate >= kPlainGoalMBps});
    if (const TraceFiles* big = Largest(); Find("BM_analyze_plain/" + big->name)) {
      const double r = big->plain_bytes / 1e6 / WallS("BM_analyze_plain/" + big->name);
      goals.push_back({"plain .json >= 500 MB/s (" + big->name + ")", Fmt("%.0f MB/s", r),
                       r >= kPlainGoalMBps});
    }
  }

  // 3.
  printf("\n3. Holistic Trace Analysis vs trainscope, same traces (.json.gz), same run\n");
  if (E().python.empty()) {
    printf("   HTA not installed: skipped (%s)\n", E().hta_skip_reason.c_str());
  } else {
    printf("   HTA: %s\n", E().python.c_str());
    printf("   %-16s %9s %9s %8s   %9s %9s %8s %9s %9s\n", "trace", "HTA load", "ours", "ratio",
           "HTA proc", "CLI proc", "ratio", "HTA RSS", "CLI RSS");
    printf("   %-16s %9s %9s %8s   %9s %9s %8s %9s %9s\n", "", "+bd (s)", "in-proc", "", "(s)",
           "(s)", "", "(MB)", "(MB)");
    for (const TraceFiles& t : Traces()) {
      const std::string hta = "BM_hta/" + t.name;
      const double hta_in = Extra(hta, "analysis_s");
      const double ours_in = WallS("BM_analyze_gz/" + t.name);
      const double hta_proc = WallS(hta);
      const double cli = WallS("BM_cli_gz/" + t.name);
      const bool failed = Results().count(hta) > 0 && !Results()[hta].note.empty();
      if (std::isnan(hta_in) && std::isnan(ours_in) && std::isnan(cli) && !failed) continue;
      printf("   %-16s %9s %9s %8s   %9s %9s %8s %9s %9s%s\n", t.name.c_str(),
             Fmt("%.3f", hta_in).c_str(), Fmt("%.4f", ours_in).c_str(),
             Fmt("%.0fx", hta_in / ours_in).c_str(), Fmt("%.3f", hta_proc).c_str(),
             Fmt("%.4f", cli).c_str(), Fmt("%.0fx", hta_proc / cli).c_str(),
             Fmt("%.0f", Extra(hta, "rss_bytes") / 1e6).c_str(),
             Fmt("%.1f", Extra("BM_cli_gz/" + t.name, "rss_bytes") / 1e6).c_str(),
             Results().count(hta) && !Results()[hta].note.empty()
                 ? ("  " + Results()[hta].note).c_str()
                 : "");
      if (!std::isnan(hta_in) && !std::isnan(ours_in)) {
        const double a = Extra(hta, "idle_us"), b = Extra("BM_analyze_gz/" + t.name, "idle_us");
        printf("   %-16s HTA idle %.0f us, ours %.0f us; HTA's import of pandas etc. %.2f s\n", "",
               a, b, Extra(hta, "import_s"));
        goals.push_back({"HTA/ours >= 50x in-process, " + t.name, Fmt("%.0fx", hta_in / ours_in),
                         hta_in / ours_in >= kHtaGoalRatio});
      }
      if (!std::isnan(hta_proc) && !std::isnan(cli)) {
        goals.push_back({"HTA/ours >= 50x whole process, " + t.name, Fmt("%.0fx", hta_proc / cli),
                         hta_proc / cli >= kHtaGoalRatio});
      }
    }
  }

  if (!E().python.empty()) {
    for (const TraceFiles& t : Traces()) {
      const std::string hta = "BM_hta/" + t.name;
      const double hta_in = Extra(hta, "analysis_s"), hta_proc = WallS(hta);
      const double ours_all = WallS("BM_analyze_gz_all/" + t.name);
      const double cli_all = WallS("BM_cli_gz_all/" + t.name);
      if (std::isnan(ours_all) && std::isnan(cli_all)) continue;
      printf(
          "   %-16s on all %d CPUs (HTA uses one): in-process %s s, %s; whole process %s s, %s\n",
          t.name.c_str(), E().cpus, Fmt("%.4f", ours_all).c_str(),
          Fmt("%.0fx", hta_in / ours_all).c_str(), Fmt("%.4f", cli_all).c_str(),
          Fmt("%.0fx", hta_proc / cli_all).c_str());
      const std::string cpus = " (" + std::to_string(E().cpus) + " CPUs)";
      if (!std::isnan(hta_in) && !std::isnan(ours_all)) {
        goals.push_back({"HTA/ours >= 50x in-process, " + t.name + cpus,
                         Fmt("%.0fx", hta_in / ours_all), hta_in / ours_all >= kHtaGoalRatio});
      }
      if (!std::isnan(hta_proc) && !std::isnan(cli_all)) {
        goals.push_back({"HTA/ours >= 50x whole process, " + t.name + cpus,
                         Fmt("%.0fx", hta_proc / cli_all), hta_proc / cli_all >= kHtaGoalRatio});
      }
    }
  }

  // 4.
  printf("\n4. Memory on a big trace\n");
  if (Find("BM_big_cli") || Find("BM_big_inprocess")) {
    const BigTrace& big = GetBig();
    const double rss = Extra("BM_big_cli", "rss_bytes");
    const double floor = Extra("BM_floor_cli", "rss_bytes");
    const double device = Extra("BM_big_inprocess", "device");
    const double intervals = Extra("BM_big_inprocess", "intervals");
    printf("   BIG.json: %.1f MB, %d copies of %s (written in %.1f s)\n", big.bytes / 1e6,
           big.copies, fs::path(big.source).filename().c_str(), big.write_s);
    printf(
        "   trainscope analyze: peak RSS %s MB in %s s (%s MB/s in-process); kept %s "
        "device events, %s intervals\n",
        Fmt("%.1f", rss / 1e6).c_str(), Fmt("%.2f", WallS("BM_big_cli")).c_str(),
        Fmt("%.0f", big.bytes / 1e6 / WallS("BM_big_inprocess")).c_str(),
        Fmt("%.0f", device).c_str(), Fmt("%.0f", intervals).c_str());
    printf(
        "   peak RSS / file size = %s; per kept device event %s bytes (%s above the %s MB a "
        "run on %s needs); per kept interval %s bytes\n",
        Fmt("%.3f", rss / big.bytes).c_str(), Fmt("%.0f", rss / device).c_str(),
        Fmt("%.0f", (rss - floor) / device).c_str(), Fmt("%.1f", floor / 1e6).c_str(),
        Smallest()->name.c_str(), Fmt("%.0f", rss / intervals).c_str());
    if (!std::isnan(rss)) {
      goals.push_back({"peak RSS / file size <= 0.5 (" + Fmt("%.0f", big.bytes / 1e6) + " MB)",
                       Fmt("%.3f", rss / big.bytes), rss / big.bytes <= kRssGoalRatio});
    }
    const double page = Extra("BM_big_html", "page_bytes");
    if (!std::isnan(page) && !std::isnan(WallS("BM_big_cli"))) {
      const double ratio = WallS("BM_big_html") / WallS("BM_big_cli");
      printf("   trainscope html: a %s KB page in %s s (%sx analyze's time), peak RSS %s MB\n",
             Fmt("%.0f", page / 1e3).c_str(), Fmt("%.2f", WallS("BM_big_html")).c_str(),
             Fmt("%.2f", ratio).c_str(),
             Fmt("%.1f", Extra("BM_big_html", "rss_bytes") / 1e6).c_str());
      goals.push_back(
          {"html page of the big trace <= 5 MB", Fmt("%.2f MB", page / 1e6), page <= 5e6});
      goals.push_back({"html time / analyze time <= 1.25", Fmt("%.2f", ratio), ratio <= 1.25});
    }
    const double hta_rss = Extra("BM_hta_big", "rss_bytes");
    if (!std::isnan(hta_rss)) {
      printf(
          "   HTA: peak RSS %.0f MB (%.1fx the file, %.0fx ours), %.1f s (load + breakdowns "
          "%.1f s; %.0fx ours whole-process)\n",
          hta_rss / 1e6, hta_rss / big.bytes, hta_rss / rss, WallS("BM_hta_big"),
          Extra("BM_hta_big", "analysis_s"), WallS("BM_hta_big") / WallS("BM_big_cli"));
      printf("   HTA idle %.0f us, ours %.0f us (of %.0f us kernel time)\n",
             Extra("BM_hta_big", "idle_us"), Extra("BM_big_inprocess", "idle_us"),
             Extra("BM_big_inprocess", "kernel_us"));
    } else if (E().python.empty()) {
      printf("   HTA not installed: skipped\n");
    } else {
      const auto it = Results().find("BM_hta_big");
      printf("   HTA on the big trace: %s\n", it != Results().end() && !it->second.note.empty()
                                                  ? it->second.note.c_str()
                                                  : "not run");
    }
  } else {
    printf("   not run\n");
  }

  printf("\ngoals:\n");
  for (const Goal& g : goals) {
    printf("  %-56s %-22s %s\n", g.what.c_str(), g.figure.c_str(),
           g.pass ? PassMiss(*g.pass) : "n/a");
  }
  if (preempted) {
    printf(
        "note: real time > 1.1 x CPU time marks a thread that was preempted (another process\n"
        "was using the cores); rerun on a quiet machine for firm figures.\n");
  }
  fflush(stdout);
}

}  // namespace trainscope::analyze_bench
