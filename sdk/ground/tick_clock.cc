// TSC ticks to the session clock. See tick_clock.h.
#include "sdk/ground/tick_clock.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace trainscope::ground {

namespace {

std::string FirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

bool HasCpuFlag(const std::string& flags, const std::string& flag) {
  std::istringstream words(flags);
  for (std::string word; words >> word;) {
    if (word == flag) return true;
  }
  return false;
}

}  // namespace

bool TscUsable(std::string* why_not) {
#if !defined(__x86_64__)
  *why_not = "not an x86-64 CPU";
  return false;
#else
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string flags;
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("flags", 0) == 0) {
      flags = line.substr(line.find(':') + 1);
      break;
    }
  }
  for (const char* flag : {"constant_tsc", "nonstop_tsc"}) {
    if (!HasCpuFlag(flags, flag)) {
      *why_not = std::string("the CPU flags lack ") + flag;
      return false;
    }
  }
  const std::string source =
      FirstLine("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  if (source != "tsc") {
    *why_not = "the kernel's clocksource is " + (source.empty() ? "unknown" : source);
    return false;
  }
  return true;
#endif
}

TickPair ReadTickPair() {
#if defined(__x86_64__)
  TickPair best;
  int64_t best_width = -1;
  for (int attempt = 0; attempt < 4; ++attempt) {
    const auto t1 = static_cast<int64_t>(__rdtsc());
    const TimestampNs ns = NowNs();
    const auto t2 = static_cast<int64_t>(__rdtsc());
    const int64_t width = t2 - t1;
    if (best_width < 0 || width < best_width) {
      best_width = width;
      best = {t1 + width / 2, ns};
    }
  }
  return best;
#else
  const TimestampNs ns = NowNs();
  return {ns, ns};
#endif
}

void TickCalibration::Ring::Push(const TickPair& p, size_t capacity) {
  if (slots.size() < capacity) {
    slots.push_back(p);
    ++size;
    return;
  }
  slots[(first + size) % capacity] = p;
  if (size == capacity) {
    first = (first + 1) % capacity;
  } else {
    ++size;
  }
}

TimestampNs TickCalibration::Line(const TickPair& a, const TickPair& b, int64_t ticks) {
  const double rate = static_cast<double>(b.ns - a.ns) / static_cast<double>(b.ticks - a.ticks);
  return a.ns + static_cast<TimestampNs>(Round(static_cast<double>(ticks - a.ticks) * rate));
}

const TickPair& TickCalibration::PointAt(size_t i) const {
  return i < coarse_.size ? coarse_.At(i) : fine_.At(i - coarse_.size);
}

void TickCalibration::Add(const TickPair& point) {
  if (points_ > 0 && (point.ticks <= last_.ticks || point.ns <= last_.ns)) return;
  // How far the rate of the last second (or more) was from this point; once
  // that rate spans a second, so that the first quick estimate is not counted.
  if (points_ >= 2 && last_.ns - anchor_.ns >= 1'000'000'000) {
    max_error_ns_ = std::max(max_error_ns_, std::abs(ToNs(point.ticks) - point.ns));
  }
  if (points_ == 0) first_ = point;
  ++points_;
  // The oldest fine point moves to the coarse ring, if the spacing allows.
  if (fine_.size == kFine) {
    const TickPair& oldest = fine_.At(0);
    if (coarse_.size == 0 || oldest.ns - coarse_.back().ns >= kCoarseSpacingNs) {
      coarse_.Push(oldest, kCoarse);
    }
  }
  fine_.Push(point, kFine);
  previous_ = points_ >= 2 ? last_ : point;
  last_ = point;
  if (points_ >= 2) {
    span_ns_per_tick_ = static_cast<double>(last_.ns - previous_.ns) /
                        static_cast<double>(last_.ticks - previous_.ticks);
    // The newest point at least a second before this one, else the oldest kept.
    size_t lo = 0, hi = Size() - 1;  // PointAt(hi) is this point
    const TimestampNs target = point.ns - 1'000'000'000;
    if (PointAt(0).ns > target) {
      anchor_ = PointAt(0);
    } else {
      while (hi - lo > 1) {  // PointAt(lo).ns <= target < PointAt(hi).ns
        const size_t mid = lo + (hi - lo) / 2;
        (PointAt(mid).ns <= target ? lo : hi) = mid;
      }
      anchor_ = PointAt(lo);
    }
    ahead_ns_per_tick_ = static_cast<double>(last_.ns - anchor_.ns) /
                         static_cast<double>(last_.ticks - anchor_.ticks);
  }
}

TimestampNs TickCalibration::ToNsElsewhere(int64_t ticks, Hint* hint) const {
  if (points_ == 0) return ticks;
  if (points_ == 1) return last_.ns + (ticks - last_.ticks);  // 1 GHz until a second point
  // Most ticks fall in the last span (or after it: ToNs's inline case).
  if (ticks >= last_.ticks) {
    return last_.ns + static_cast<TimestampNs>(
                          Round(static_cast<double>(ticks - last_.ticks) * ahead_ns_per_tick_));
  }
  if (ticks >= previous_.ticks) {
    *hint = {previous_.ticks, last_.ticks, previous_.ns, span_ns_per_tick_};
  } else {
    // Older: the kept span around it, or the oldest span's rate before them.
    const size_t n = Size();
    if (ticks < PointAt(0).ticks) return Line(PointAt(0), PointAt(1), ticks);
    size_t lo = 0, hi = n - 1;  // PointAt(lo).ticks <= ticks < PointAt(hi).ticks
    while (hi - lo > 1) {
      const size_t mid = lo + (hi - lo) / 2;
      (PointAt(mid).ticks <= ticks ? lo : hi) = mid;
    }
    const TickPair& a = PointAt(lo);
    const TickPair& b = PointAt(hi);
    *hint = {a.ticks, b.ticks, a.ns,
             static_cast<double>(b.ns - a.ns) / static_cast<double>(b.ticks - a.ticks)};
  }
  return hint->ns + Round(static_cast<double>(ticks - hint->from) * hint->ns_per_tick);
}

double TickCalibration::tsc_hz() const {
  if (points_ < 2) return 0;
  return static_cast<double>(last_.ticks - first_.ticks) * 1e9 /
         static_cast<double>(last_.ns - first_.ns);
}

}  // namespace trainscope::ground
