// analyze_bench, Part 1: gap analysis of a synthetic timeline. See analyze_bench.h.

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/analyze/analyze_bench.h"

namespace trainscope::analyze_bench {

struct Rng {
  uint64_t s = 0x9E3779B97F4A7C15ull;
  uint64_t operator()() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 2685821657736338717ull;
  }
};

Synthetic* BuildSynthetic(int64_t n, bool with_launches) {
  const double t0 = NowS();
  auto* syn = new Synthetic;
  Timeline& tl = syn->timeline;
  constexpr std::array<int64_t, 4> kStreams = {7, 20, 24, 28};
  std::array<uint32_t, 4> tracks{};
  for (size_t s = 0; s < kStreams.size(); ++s) {
    tracks[s] = tl.AddTrack(
        {TrackKind::kDeviceStream, 0, kStreams[s], "GPU 0 stream " + std::to_string(kStreams[s])});
  }
  const uint32_t host = tl.AddTrack({TrackKind::kHostThread, 4515, 4515, "thread 4515"});
  // Kernel names of a real trace, with HTA's other classes among them.
  std::vector<uint32_t> names;
  for (const char* name :
       {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
        "ampere_sgemm_128x64_tn", "ampere_sgemm_64x32_sliced1x4_nn",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>",
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>",
        "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>",
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "Memcpy DtoD (Device -> Device)",
        "Memset (Device)",
        "void at::native::unrolled_elementwise_kernel<at::native::MulFunctor<float>>",
        "void at::native::(anonymous namespace)::softmax_warp_forward<float, float, 10>",
        "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3"}) {
    names.push_back(tl.Intern(name));
  }
  const uint32_t launch_name = tl.Intern("cudaLaunchKernel");
  const uint32_t step_name = tl.Intern("ProfilerStep#0");
  std::array<uint32_t, 6> phase_names{};
  constexpr std::array<Phase, 6> kPhases = {Phase::kDataWait, Phase::kHostToDevice, Phase::kForward,
                                            Phase::kBackward, Phase::kOptimizer,    Phase::kSync};
  constexpr std::array<double, 7> kPhaseCuts = {0, 0.05, 0.08, 0.40, 0.80, 0.90, 0.99};
  for (size_t p = 0; p < kPhases.size(); ++p) {
    phase_names[p] = tl.Intern(std::string(trainscope::PhaseName(kPhases[p])));
  }

  const int64_t per_step = std::max<int64_t>(1, n / 1000);
  syn->generated.reserve(static_cast<size_t>(n * (with_launches ? 2 : 1) + n / per_step * 8 + 16));
  auto add = [&](const Interval& i) {
    tl.Add(i);
    syn->generated.push_back(i);
  };
  constexpr TimestampNs kBase = 1'683'564'901'540'885'000;
  std::array<TimestampNs, 4> clock;
  clock.fill(kBase);
  TimestampNs step_start = kBase;
  int64_t step = 0;
  Rng rng;
  for (int64_t i = 0; i < n; ++i) {
    const size_t s = rng() % kStreams.size();
    const uint64_t r = rng();
    const uint64_t bucket = r % 100;
    const uint64_t x = r >> 8;
    TimestampNs gap;
    if (bucket < 70) {
      gap = 1'000 + static_cast<TimestampNs>(x % 4'000);  // 1-5 us
    } else if (bucket < 90) {
      gap = 5'000 + static_cast<TimestampNs>(x % 25'000);  // 5-30 us
    } else if (bucket < 99) {
      gap = 30'000 + static_cast<TimestampNs>(x % 170'000);  // 30-200 us
    } else {
      gap = 1'000'000 + static_cast<TimestampNs>(x % 4'000'000);  // 1-5 ms
    }
    const auto d = static_cast<TimestampNs>((r >> 40) % 1000);
    const TimestampNs dur = 2'000 + d * d / 5;  // 2-202 us, mostly short
    Interval k;
    k.start_ns = clock[s] + gap;
    k.end_ns = k.start_ns + dur;
    clock[s] = k.end_ns;
    k.step = step;
    k.value = i;  // correlation id
    k.name = names[(r >> 20) % names.size()];
    k.track = tracks[s];
    k.kind = IntervalKind::kKernel;
    add(k);
    ++syn->kernels;
    if (with_launches) {
      Interval call;
      const auto latency = static_cast<TimestampNs>(2'000 + (r >> 24) % 60'000);
      call.start_ns = k.start_ns - latency;
      call.end_ns = call.start_ns + 3'000;
      call.step = step;
      call.value = i;
      call.name = launch_name;
      call.track = host;
      call.kind = IntervalKind::kRuntimeCall;
      add(call);
      ++syn->launches;
    }
    if ((i + 1) % per_step == 0 || i + 1 == n) {
      const TimestampNs step_end = *std::max_element(clock.begin(), clock.end());
      const TimestampNs span = step_end - step_start;
      Interval st;
      st.start_ns = step_start;
      st.end_ns = step_start + static_cast<TimestampNs>(span * kPhaseCuts.back());
      st.step = step;
      st.value = 32;
      st.name = step_name;
      st.track = host;
      st.kind = IntervalKind::kStep;
      add(st);
      ++syn->steps;
      for (size_t p = 0; p < kPhases.size(); ++p) {
        Interval h;
        h.start_ns = step_start + static_cast<TimestampNs>(span * kPhaseCuts[p]);
        h.end_ns = step_start + static_cast<TimestampNs>(span * kPhaseCuts[p + 1]);
        h.step = step;
        h.name = phase_names[p];
        h.track = host;
        h.kind = IntervalKind::kHostRange;
        h.phase = kPhases[p];
        add(h);
        ++syn->host_ranges;
      }
      syn->facts.last_step_start_ns = step_start;
      syn->window_end = st.end_ns;
      step_start = step_end;
      ++step;
    }
  }
  syn->window_start = kBase;
  // Without launches there is nothing for HTA's iteration cut to keep, so
  // the facts say "no ProfilerStep annotations" (every row is kept).
  syn->facts.profiler_steps = with_launches ? syn->steps : 0;
  tl.Sort();
  syn->build_s = NowS() - t0;
  return syn;
}

Synthetic& GetSynthetic() {
  static Synthetic* syn = BuildSynthetic(Opt().records, Opt().launches);
  return *syn;
}

void BM_sort_baseline(benchmark::State& state) {
  Synthetic& syn = GetSynthetic();
  std::vector<Interval> work;
  for (auto _ : state) {
    work = syn.generated;  // not timed
    const double w0 = NowS(), c0 = ThreadCpuS();
    std::sort(work.begin(), work.end(),
              [](const Interval& a, const Interval& b) { return a.start_ns < b.start_ns; });
    const Sample s{NowS() - w0, ThreadCpuS() - c0};
    benchmark::DoNotOptimize(work.data());
    Record(state, "BM_sort_baseline", s);
  }
  state.counters["Mrec/s"] =
      static_cast<double>(syn.generated.size()) / WallS("BM_sort_baseline") / 1e6;
}

void BM_gap_analyze(benchmark::State& state) {
  Synthetic& syn = GetSynthetic();
  for (auto _ : state) {
    const double w0 = NowS(), c0 = ThreadCpuS();
    syn.idle = GapAnalyzer::Analyze(syn.timeline, syn.window_start, syn.window_end);
    const Sample s{NowS() - w0, ThreadCpuS() - c0};
    benchmark::DoNotOptimize(syn.idle.idle_ns);
    Record(state, "BM_gap_analyze", s);
  }
  state.counters["Mrec/s"] =
      static_cast<double>(syn.timeline.size()) / WallS("BM_gap_analyze") / 1e6;
}

void BM_hta_breakdown(benchmark::State& state) {
  Synthetic& syn = GetSynthetic();
  for (auto _ : state) {
    const double w0 = NowS(), c0 = ThreadCpuS();
    syn.hta = ComputeHtaBreakdown(syn.timeline, syn.facts);
    const Sample s{NowS() - w0, ThreadCpuS() - c0};
    benchmark::DoNotOptimize(syn.hta.rows);
    Record(state, "BM_hta_breakdown", s);
  }
  state.counters["Mrec/s"] =
      static_cast<double>(syn.timeline.size()) / WallS("BM_hta_breakdown") / 1e6;
}

}  // namespace trainscope::analyze_bench
