// analyze_bench, Part 4: memory on a big trace. See analyze_bench.h.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "bench/analyze/analyze_bench.h"

namespace trainscope::analyze_bench {

// Calls on_scalar(depth, key1, key2, token) for every scalar value of one
// event object (numbers, strings with their quotes, true/false/null):
// key1 is the member name at depth 1, key2 the one at depth 2 (inside e.g.
// "args"). Returns nothing; the callback sees offsets via token.data().
template <class F>
void WalkEvent(std::string_view e, F&& on_scalar) {
  int depth = 0;
  std::array<std::string_view, 3> keys{};
  size_t i = 0;
  const size_t n = e.size();
  while (i < n) {
    const char c = e[i];
    if (c == '"') {
      size_t j = i + 1;
      while (j < n && e[j] != '"') j += e[j] == '\\' ? 2 : 1;
      const std::string_view token = e.substr(i, j + 1 - i);
      size_t k = j + 1;
      while (k < n && (e[k] == ' ' || e[k] == '\n' || e[k] == '\r' || e[k] == '\t')) ++k;
      if (k < n && e[k] == ':') {
        if (depth >= 1 && depth <= 2) keys[depth] = token.substr(1, token.size() - 2);
      } else {
        on_scalar(depth, keys[1], depth >= 2 ? keys[2] : std::string_view(), token);
      }
      i = j + 1;
    } else if (c == '{' || c == '[') {
      ++depth;
      if (depth <= 2) keys[depth] = {};
      ++i;
    } else if (c == '}' || c == ']') {
      --depth;
      ++i;
    } else if (c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n') {
      size_t j = i;
      while (j < n && e[j] != ',' && e[j] != '}' && e[j] != ']' && e[j] != ' ' && e[j] != '\n' &&
             e[j] != '\r' && e[j] != '\t') {
        ++j;
      }
      on_scalar(depth, keys[1], depth >= 2 ? keys[2] : std::string_view(), e.substr(i, j - i));
      i = j;
    } else {
      ++i;
    }
  }
}

bool IsIdKey(int depth, std::string_view k1, std::string_view k2) {
  return (depth == 1 && k1 == "id") ||
         (depth == 2 && k1 == "args" && (k2 == "correlation" || k2 == "External id"));
}

// The events of a trace's traceEvents array, and the text around it.
bool SplitEvents(std::string_view text, std::string_view* head,
                 std::vector<std::string_view>* events, std::string_view* tail) {
  const size_t key = text.find("\"traceEvents\"");
  if (key == std::string_view::npos) return false;
  const size_t open = text.find('[', key);
  if (open == std::string_view::npos) return false;
  *head = text.substr(0, open + 1);
  size_t i = open + 1;
  while (i < text.size()) {
    const char c = text[i];
    if (c == ']') {
      *tail = text.substr(i);
      return true;
    }
    if (c != '{') {
      ++i;
      continue;
    }
    int depth = 0;
    size_t j = i;
    for (; j < text.size(); ++j) {
      const char d = text[j];
      if (d == '"') {
        for (++j; j < text.size() && text[j] != '"'; j += text[j] == '\\' ? 2 : 1) {
        }
      } else if (d == '{' || d == '[') {
        ++depth;
      } else if (d == '}' || d == ']') {
        if (--depth == 0) break;
      }
    }
    if (j >= text.size()) return false;
    events->push_back(text.substr(i, j + 1 - i));
    i = j + 1;
  }
  return false;
}

// Writes >= target_bytes of JSON: the events of `source` (a plain .json)
// repeated, copy k shifted by k x (the trace's span + 1 ms) in ts, by k x
// (max id + 1) in flow ids, correlation and External id, and by k x (the
// number of steps) in ProfilerStep#N; metadata events ("ph": "M") only once.
BigTrace WriteBigTrace(const std::string& source, const std::string& out_path, uint64_t target) {
  BigTrace big;
  big.path = out_path;
  big.source = source;
  const double t0 = NowS();
  const std::string text = ReadText(source);
  std::string_view head, tail;
  std::vector<std::string_view> events;
  if (!SplitEvents(text, &head, &events, &tail)) {
    big.error = "cannot find the traceEvents array of " + source;
    return big;
  }
  // Pass 1: the span, the largest id, the step numbers.
  double min_ts = INFINITY, max_end = -INFINITY;
  int64_t max_id = 0, min_step = INT64_MAX, max_step = INT64_MIN;
  std::vector<bool> metadata(events.size(), false);
  constexpr std::string_view kStep = "\"ProfilerStep#";
  for (size_t e = 0; e < events.size(); ++e) {
    double ts = NAN, dur = 0;
    WalkEvent(events[e], [&](int depth, std::string_view k1, std::string_view k2,
                             std::string_view token) {
      if (depth == 1 && k1 == "ts") ts = std::strtod(std::string(token).c_str(), nullptr);
      if (depth == 1 && k1 == "dur") dur = std::strtod(std::string(token).c_str(), nullptr);
      if (depth == 1 && k1 == "ph" && token == "\"M\"") metadata[e] = true;
      if (IsIdKey(depth, k1, k2)) {
        max_id = std::max<int64_t>(max_id, std::strtoll(std::string(token).c_str(), nullptr, 10));
      }
      if (depth == 1 && k1 == "name" && token.substr(0, kStep.size()) == kStep) {
        const int64_t s =
            std::strtoll(std::string(token.substr(kStep.size())).c_str(), nullptr, 10);
        min_step = std::min(min_step, s);
        max_step = std::max(max_step, s);
      }
    });
    if (!std::isnan(ts)) {
      min_ts = std::min(min_ts, ts);
      max_end = std::max(max_end, ts + dur);
    }
  }
  const auto span_us = static_cast<int64_t>(std::ceil(max_end - min_ts)) + 1000;
  const int64_t id_span = max_id + 1;
  const int64_t step_span = max_step >= min_step ? max_step - min_step + 1 : 0;

  FILE* f = std::fopen(out_path.c_str(), "wb");
  if (f == nullptr) {
    big.error = "cannot write " + out_path;
    return big;
  }
  std::string buf;
  buf.reserve(8 << 20);
  uint64_t written = 0;
  auto put = [&](std::string_view s) {
    buf.append(s);
    if (buf.size() >= (4 << 20)) {
      std::fwrite(buf.data(), 1, buf.size(), f);
      written += buf.size();
      buf.clear();
    }
  };
  put(head);
  bool first = true;
  int copies = 0;
  char number[64];
  while (written + buf.size() < target) {
    const int64_t k = copies++;
    for (size_t e = 0; e < events.size(); ++e) {
      if (k > 0 && metadata[e]) continue;
      put(first ? "\n  " : ",\n  ");
      first = false;
      if (k == 0) {
        put(events[e]);
        continue;
      }
      const std::string_view ev = events[e];
      size_t last = 0;
      WalkEvent(
          ev, [&](int depth, std::string_view k1, std::string_view k2, std::string_view token) {
            const size_t at = static_cast<size_t>(token.data() - ev.data());
            int len = -1;
            if (depth == 1 && k1 == "ts") {
              if (token.find_first_of(".eE") != std::string_view::npos) {
                len = std::snprintf(number, sizeof(number), "%.3f",
                                    std::strtod(std::string(token).c_str(), nullptr) +
                                        static_cast<double>(k * span_us));
              } else {
                len = std::snprintf(
                    number, sizeof(number), "%lld",
                    static_cast<long long>(std::strtoll(std::string(token).c_str(), nullptr, 10) +
                                           k * span_us));
              }
            } else if (IsIdKey(depth, k1, k2) &&
                       token.find_first_of(".eE\"") == std::string_view::npos) {
              len = std::snprintf(
                  number, sizeof(number), "%lld",
                  static_cast<long long>(std::strtoll(std::string(token).c_str(), nullptr, 10) +
                                         k * id_span));
            } else if (depth == 1 && k1 == "name" && token.substr(0, kStep.size()) == kStep) {
              const int64_t s =
                  std::strtoll(std::string(token.substr(kStep.size())).c_str(), nullptr, 10);
              len = std::snprintf(number, sizeof(number), "\"ProfilerStep#%lld\"",
                                  static_cast<long long>(s + k * step_span));
            }
            if (len < 0) return;
            put(ev.substr(last, at - last));
            put(std::string_view(number, static_cast<size_t>(len)));
            last = at + token.size();
          });
      put(ev.substr(last));
    }
  }
  put("\n  ");
  put(tail);
  std::fwrite(buf.data(), 1, buf.size(), f);
  written += buf.size();
  std::fclose(f);
  big.bytes = written;
  big.copies = copies;
  big.write_s = NowS() - t0;
  return big;
}

const TraceFiles* Largest() {
  const TraceFiles* best = nullptr;
  for (const TraceFiles& t : Traces()) {
    if (best == nullptr || t.plain_bytes > best->plain_bytes) best = &t;
  }
  return best;
}
const TraceFiles* Smallest() {
  const TraceFiles* best = nullptr;
  for (const TraceFiles& t : Traces()) {
    if (best == nullptr || t.plain_bytes < best->plain_bytes) best = &t;
  }
  return best;
}

const BigTrace& GetBig() {
  static BigTrace big = [] {
    fs::create_directories(E().tmp + "/big");
    const TraceFiles* source = Largest();
    return WriteBigTrace(source->plain, E().tmp + "/big/BIG.json",
                         static_cast<uint64_t>(Opt().big_mb) * 1000 * 1000);
  }();
  return big;
}

void BM_big_cli(benchmark::State& state) {
  const BigTrace& big = GetBig();
  if (!big.error.empty()) {
    state.SkipWithError(big.error.c_str());
    return;
  }
  CliBench(state, "BM_big_cli", big.path);
}

// `trainscope html BIG.json`: the trace's page, against analyze's time on
// the same file (BM_big_cli) and with the page's size.
void BM_big_html(benchmark::State& state) {
  const BigTrace& big = GetBig();
  if (!big.error.empty()) {
    state.SkipWithError(big.error.c_str());
    return;
  }
  const std::string page = E().tmp + "/big/BIG.html";
  for (auto _ : state) {
    const Child c = RunChild({E().cli, "html", big.path, "-o", page}, E().tmp + "/html.out",
                             E().tmp + "/html.err", 300);
    if (!c.ok()) {
      Results()["BM_big_html"].note = "trainscope html failed: " + Tail(E().tmp + "/html.err");
      state.SkipWithError(Results()["BM_big_html"].note.c_str());
      break;
    }
    std::error_code error;
    const double bytes = static_cast<double>(fs::file_size(page, error));
    Record(state, "BM_big_html", {c.wall_s, c.cpu_s},
           {{"rss_bytes", c.max_rss_bytes}, {"page_bytes", error ? NAN : bytes}});
  }
  state.counters["page_MB"] = Extra("BM_big_html", "page_bytes") / 1e6;
}

void BM_floor_cli(benchmark::State& state) { CliBench(state, "BM_floor_cli", Smallest()->plain); }

void BM_big_inprocess(benchmark::State& state) {
  const BigTrace& big = GetBig();
  if (!big.error.empty()) {
    state.SkipWithError(big.error.c_str());
    return;
  }
  AnalyzeBench(state, "BM_big_inprocess", big.path);
}

void BM_hta_big(benchmark::State& state) {
  const BigTrace& big = GetBig();
  if (!big.error.empty()) {
    state.SkipWithError(big.error.c_str());
    return;
  }
  // HTA's peak RSS per byte of JSON: measured on the largest trace when that
  // ran first, else 12 (about 9 on rank0_queue, with margin).
  double per_byte = 12;
  const TraceFiles* largest = Largest();
  const double measured = Extra("BM_hta/" + largest->name, "rss_bytes");
  if (!std::isnan(measured) && largest->plain_bytes > 0) {
    per_byte = 1.3 * measured / static_cast<double>(largest->plain_bytes);
  }
  const double predicted = per_byte * static_cast<double>(big.bytes);
  std::string why;
  if (big.bytes > 300'000'000) {
    why = "the file is over 300 MB";
  } else if (predicted > 8e9) {
    why = "HTA would need about " + std::to_string(static_cast<int>(predicted / 1e9)) + " GB";
  } else if (predicted > 0.7 * MemAvailableBytes()) {
    why = "not enough free memory";
  }
  if (!why.empty()) {
    Results()["BM_hta_big"].note = why;
    state.SkipWithError(("HTA on the big trace skipped: " + why).c_str());
    return;
  }
  RunHta(state, "BM_hta_big", E().tmp + "/big", 300);
}

}  // namespace trainscope::analyze_bench
