#!/usr/bin/env bash
# tools/gpu-check.sh: the GPU validation of trainscope, one prepared script.
#
# Runs on the GPU machine (the device tool), from the repository root:
#   here:   tools/gpu-deps.sh            # packs Abseil/fmt/simdjson/GoogleTest .debs into .gpu-deps/
#   device: tools/gpu-check.sh           # with carry: [".gpu-deps"]; writes under $OUT
# It builds trainscope against that machine's LibTorch (python3's torch,
# through torch.utils.cmake_prefix_path) and CUDA toolkit, runs the CUPTI
# end-to-end test, runs train_mlp on CUDA with a fast and a slow loader and
# prints the idle share and top cause of each, measures the step-time
# overhead of CUPTI collection against none, with the PyTorch profiler's
# overhead on the same loop as the reference, and analyses the profiler's
# trace with `trainscope analyze`; and, for issue 16, the libcupti found and
# its version, another CUPTI subscriber, backward's device time from
# autograd's thread, NCCL sync time per rank, and a dead NCCL peer.
# Record what it prints in
# docs/gpu-validation.md. On a machine without a GPU it still runs, and says
# so (the CUDA paths report "unavailable").
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-out/gpu-check}"
mkdir -p "$out"
jobs="$(nproc)"
steps="${GPU_CHECK_STEPS:-300}"
say() { printf '\n== %s\n' "$*"; }

say "machine"
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi -L 2>/dev/null || echo "nvidia-smi: no GPU visible"
python3 - <<'PY'
import torch
print("torch", torch.__version__, "CUDA", torch.version.cuda,
      "device:", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")
PY
command -v nvcc >/dev/null && nvcc --version | tail -1 || echo "nvcc: not found"

say "dependencies"
prefix="$PWD/.gpu-deps/root"
if compgen -G ".gpu-deps/*.deb" >/dev/null; then
  mkdir -p "$prefix"
  for deb in .gpu-deps/*.deb; do dpkg -x "$deb" "$prefix"; done
  echo "unpacked $(ls .gpu-deps/*.deb | wc -l) packages into $prefix"
else
  echo "no .gpu-deps/*.deb: using the system's packages"
fi
torch_prefix="$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

say "build (against this machine's LibTorch)"
start=$SECONDS
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTRAINSCOPE_TORCH=ON \
  -DTRAINSCOPE_BUILD_BENCH=OFF -DTORCH_CUDA_ARCH_LIST=9.0 \
  -DCMAKE_PREFIX_PATH="$torch_prefix;$prefix/usr" >"$out/configure.log" 2>&1 ||
  { tail -40 "$out/configure.log"; exit 1; }
grep -E "^-- trainscope:" "$out/configure.log" || true
cmake --build build-gpu -j "$jobs" --target train_mlp trainscope_cli cupti_test torch_test >"$out/build.log" 2>&1 ||
  { tail -40 "$out/build.log"; exit 1; }
echo "built in $((SECONDS - start)) s"

say "CUPTI end to end (tests/cupti_test.cc, CollectorGpu*; issue 16 point 4: another subscriber)"
build-gpu/tests/cupti_test --gtest_filter='CollectorGpu*' 2>&1 |
  grep -E "another subscriber:|OK|FAILED|SKIPPED|PASSED" || true

say "libcupti found and its version (issue 16 point 3)"
build-gpu/tests/cupti_test --gtest_filter='CuptiLibrary*' 2>&1 | grep -E "OK|FAILED|SKIPPED" || true
if python3 - <<'PY'
import ctypes, glob, os, torch
for lib in sorted(set(glob.glob(os.path.dirname(torch.__file__) + "/../nvidia/*/lib/libcupti.so*") +
                      glob.glob("/usr/local/cuda*/extras/CUPTI/lib64/libcupti.so.*"))):
    v = ctypes.c_uint32(0)
    try:
        rc = ctypes.CDLL(lib).cuptiGetVersion(ctypes.byref(v))
        print(f"{lib}: cuptiGetVersion rc {rc}, API version {v.value}")
    except OSError as e:
        print(f"{lib}: {e}")
PY
then :; else echo "the cuptiGetVersion probe crashed (13.2 does without a driver)"; fi

report() {  # report <dir> <label>: idle share, top cause, step time, device timeline
  python3 - "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1] + "/report.json"))
i, t, d = r["idle"], r["throughput"], r["device_timeline"]
print(f"{sys.argv[2]:<22} idle {100 * i['share']:5.1f}% ({i['busy_source']}), top cause "
      f"{i['top_cause'] or '-'}; median step {t['median_step_ms']:.3f} ms, "
      f"{t['steady_steps_per_s']:.1f} steps/s; device timeline: {d['status']}, "
      f"{d['kernels']} kernels, {d['dropped']} dropped")
PY
}

model=(--steps="$steps" --batch_size=512 --hidden=4096)
say "fast and slow loaders (train_mlp on CUDA)"
build-gpu/bin/train_mlp "${model[@]}" --loader_delay_ms=0 --out="$out/fast" >"$out/fast.log" 2>&1
build-gpu/bin/train_mlp "${model[@]}" --loader_delay_ms=5 --out="$out/slow" >"$out/slow.log" 2>&1
report "$out/fast" "fast loader (0 ms)"
report "$out/slow" "slow loader (5 ms)"
grep -h "^→" "$out/fast.log" "$out/slow.log" || true
say "device busy time by launching phase (issue 16 point 2: backward from autograd's thread)"
python3 - "$out/fast/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
busy = r["device_timeline"]["busy_s_by_phase"]
total = sum(busy.values()) or 1
print("busy_s_by_phase:", ", ".join(f"{k} {v:.3f} s ({100 * v / total:.0f}%)" for k, v in busy.items()))
print("backward attributed:", "yes" if busy.get("backward", 0) > 0 else "NO",
      "; unattributed share:", f"{100 * busy.get('unattributed', 0) / total:.1f}%")
PY
grep -o '"name":"pt_autograd_[0-9]*"' "$out/fast/trace.json" | sort -u || echo "no pt_autograd thread named in trace.json"

say "overhead of CUPTI collection (fast loader, steady state)"
build-gpu/bin/train_mlp "${model[@]}" --device_timeline=false --out="$out/off" >"$out/off.log" 2>&1
report "$out/off" "no device timeline"
python3 - "$out" <<'PY'
import json, sys
on = json.load(open(sys.argv[1] + "/fast/report.json"))["throughput"]["steady_steps_per_s"]
off = json.load(open(sys.argv[1] + "/off/report.json"))["throughput"]["steady_steps_per_s"]
print(f"trainscope with CUPTI: {1e3 / on:.3f} ms/step, without: {1e3 / off:.3f} ms/step: "
      f"ratio {off / on:.3f}")
PY
python3 tools/torch_profiler_overhead.py --steps "$steps" --batch 512 --hidden 4096 \
  --trace "$out/torch_profiler_trace.json"

say "trainscope::torch on CUDA: AMP, prefetcher, memory, two ranks"
build-gpu/tests/torch_test 2>&1 | tail -3 || true
build-gpu/bin/train_mlp "${model[@]}" --amp=fp16 --out="$out/fp16" >"$out/fp16.log" 2>&1 || true
grep -hE "^acceptance|amp" "$out/fp16.log" "$out/fp16/report.json" | head -5 || true
build-gpu/bin/train_mlp "${model[@]}" --amp=bf16 --out="$out/bf16" >"$out/bf16.log" 2>&1 || true
grep -h "^acceptance" "$out/bf16.log" || true
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('memory', r['memory'])" \
  "$out/fp16/report.json" || true
build-gpu/tests/torch_test --gtest_filter='DevicePrefetcher*' 2>&1 | grep -E "OK|FAILED|SKIPPED" || true

say "NCCL, two ranks: sync time per rank, measured on the device (issue 16 point 5)"
build-gpu/bin/train_mlp "${model[@]}" --world_size=2 --slow_rank=1 --slow_rank_ms=5 \
  --out="$out/ddp" 2>&1 | tail -8 || true
for r in 0 1; do
  python3 - "$out/ddp/report-rank$r.json" "$r" <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
d = r["distributed"]
print(f"rank {sys.argv[2]}: backend {d['backend']}, device-timed sync {d.get('device_sync_s', 0):.3f} s, "
      f"late {d.get('device_sync_late', 0)}")
PY
done
build-gpu/bin/trainscope ranks "$out/ddp" | tail -6 || true

say "NCCL, a dead peer (issue 16 point 6: the survivor's report names it)"
dead_rc=0
timeout 180 build-gpu/bin/train_mlp --steps=200 --batch_size=512 --hidden=1024 --world_size=2 \
  --die_rank=1 --die_at_step=50 --dist_timeout_s=20 --out="$out/dead" >"$out/dead.log" 2>&1 ||
  dead_rc=$?
echo "exit code $dead_rc (3: a survivor wrote its report naming the missing rank)"
grep -hE "missing|rank 0" "$out/dead.log" | tail -3 || true
build-gpu/bin/trainscope ranks "$out/dead" | tail -3 || true

say "trainscope tune amp on CUDA: fp32 against fp16 (GradScaler) and bf16, loss curves"
timeout 240 build-gpu/bin/trainscope tune amp --precisions=fp16,bf16 -o "$out/tune_amp/experiment.json" \
  -- build-gpu/bin/train_mlp --amp={precision} --seed={repeat} --out={out} --steps=200 \
  --hidden=1024 --batch_size=256 --eval_every=10 --target_mse=0.1 --loss_curve 2>&1 |
  tail -12 || true
python3 - "$out/tune_amp/experiment.json" <<'PY' || true
import json, sys
e = json.load(open(sys.argv[1]))
print("GPU covariates (NVML):", e.get("gpu_covariates"))
for v in e["variants"]:
    t = v["trials"][0]
    print(f"  {v['name']}: SM clock min {t.get('gpu_sm_clock_mhz_min')} MHz, "
          f"max {t.get('gpu_temperature_c_max')} C, events '{t.get('gpu_clock_events')}'")
PY

say "trainscope tune batch on CUDA: the largest batch under a 2 GiB cap (the OOM record), sizes ranked"
timeout 240 build-gpu/bin/trainscope tune batch --budget_mb=2048 --min_batch=1024 --base_batch=1024 \
  --sizes=2 --lr_rule=linear --base_lr=0.003 --probe_args="--steps=2 --eval_every=1" \
  -o "$out/tune_batch/experiment.json" -- build-gpu/bin/train_mlp --batch_size={batch} --lr={lr} \
  --memory_budget_mb={memory_mb} --hidden=4096 --seed={repeat} --out={out} --steps=400 \
  --eval_every=10 --stop_at_target --target_mse=0.1 2>&1 |
  grep -E "probe|largest|rank|  [0-9]+  b|GPU|wrote" || true

say "trainscope analyze on the PyTorch profiler's trace"
build-gpu/bin/trainscope analyze "$out/torch_profiler_trace.json" | head -20
build-gpu/bin/trainscope analyze "$out/fast/trace.json" | head -12
