#!/usr/bin/env bash
# tools/gpu-check.sh [OUT]: the GPU validation of trainscope, one command
# that builds, checks and decides (docs/gpu-validation.md).
#
#   here:   tools/gpu-deps.sh                 # packs what the build needs into .gpu-deps/
#   device: tools/gpu-check.sh "$OUT"         # carry [".gpu-deps"], timeout_s 540
#
# Sections, in order of value; each prints exactly one line
#   PASS <section> <figures>  |  FAIL <section> <reason; figures>  |  SKIP <section> <what is missing>
# and every section runs even when an earlier one failed (the build keeps
# going past a failed target; a section whose program did not build is
# FAIL "no build"):
#   build          configure (Release, Ninja) and build only the targets below
#   cuda-unit      TorchCudaTest.* against a GradScaler reference made by python torch
#   nccl-one-rank  TorchNcclTest.* (one rank: two ranks on one GPU are Gloo, not NCCL)
#   collector      CollectorGpuTest.*:CuptiLibrary* (CUPTI on the device), the libcupti mapped
#   train-mlp      train_mlp on CUDA in fp32, fp16 and bf16, each checked against its report.json
#   analyze        `trainscope analyze` on train_mlp's trace (only if the budget has room)
# On a machine where nvidia-smi shows a GPU, a test that reports SKIPPED is a
# FAIL. The whole run keeps to a time budget (GPU_CHECK_BUDGET_S, 470 s):
# each section's timeout is what is left less the minimum every later
# section needs, so run back to back to their timeouts they end within the
# budget; a section that cannot get its own minimum is FAIL (budget).
#
# OUT (first argument, else $OUT, else out/gpu-check) receives three files:
# gpu-check.json (every figure), gpu-check-summary.txt (the lines) and
# gpu-check-artifacts.tar.gz (logs, gtest JSON, reports, traces). Exit 0
# only if no section failed.
#
# Environment: GPU_CHECK_BUDGET_S (470), GPU_CHECK_BUILD_DIR (build-gpu),
# GPU_CHECK_PREBUILT=1 (use GPU_CHECK_BUILD_DIR's binaries, do not build;
# the dry run: tools/gpu-check-dry-run.sh), GPU_CHECK_SECTIONS (a comma list
# to run only those; the others are FAIL "not selected"), GPU_CHECK_STEPS
# (train_mlp's steps, 300), GPU_CHECK_WORK (scratch, out/gpu-check-work).
set -uo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.." || exit 2
repo="$PWD"
out="${1:-${OUT:-$repo/out/gpu-check}}"
mkdir -p "$out" || exit 2
out="$(cd "$out" && pwd)"
work="${GPU_CHECK_WORK:-$repo/out/gpu-check-work}"
rm -rf "$work" && mkdir -p "$work/sections" || exit 2
rm -f "$out/gpu-check.json" "$out/gpu-check-summary.txt" "$out/gpu-check-artifacts.tar.gz"
budget="${GPU_CHECK_BUDGET_S:-470}"
bdir="${GPU_CHECK_BUILD_DIR:-$repo/build-gpu}"
prebuilt="${GPU_CHECK_PREBUILT:-0}"
steps="${GPU_CHECK_STEPS:-300}"
only="${GPU_CHECK_SECTIONS:-}"
jobs="$(nproc)"
export TMPDIR="$work/tmp" && mkdir -p "$TMPDIR"
t0="${EPOCHREALTIME/./}"

now_s() { local t="${EPOCHREALTIME/./}"; echo $(((t - t0) / 1000000)); }
now_ms() { local t="${EPOCHREALTIME/./}"; echo $(((t - t0) / 1000)); }
say() { printf '== %s\n' "$*"; }

# ---- the evaluator: python3, standard library only ------------------------
read -r -d '' EVAL_PY <<'PY'
import json, math, os, re, sys

def fnum(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return v
    return int(f) if re.fullmatch(r"[-+]?\d+", str(v).strip()) else f

def finite(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

def fmt(v):
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return ",".join(fmt(x) for x in v)
    return str(v)

def line_figures(fig):
    return " ".join(f"{k}={fmt(v)}" for k, v in fig.items()
                    if not isinstance(v, dict) and v is not None and v != ""
                    and k not in ("missing_tests",))

def emit(work, name, state, seconds, timeout, reason, figures):
    idx = len(os.listdir(os.path.join(work, "sections")))
    started = float(os.environ.get("SEC_START_S", "0"))
    rec = {"name": name, "state": state, "seconds": round(seconds, 1), "timeout_s": timeout,
           "started_at_s": round(started, 1), "latest_end_s": round(started + timeout, 1),
           "figures": figures, "reason": reason}
    with open(os.path.join(work, "sections", f"{idx:02d}-{name}.json"), "w") as f:
        json.dump(rec, f, indent=1)
    text = line_figures(figures)
    if state == "PASS":
        line = f"PASS {name} {text}"
    else:
        line = f"{state} {name} {reason}" + (f"; {text}" if text else "")
    line = " ".join(line.split())
    print(line[:1500])
    with open(os.path.join(work, "summary.txt"), "a") as f:
        f.write(line + "\n")

def log_chunks(log):
    """Per test: its lines in the log, its figures lines, its skip message."""
    chunks, cur = {}, None
    try:
        lines = open(log, errors="replace").read().splitlines()
    except OSError:
        return {}, [], None
    last_run = None
    for i, l in enumerate(lines):
        m = re.match(r"\[ RUN      \] (\S+)", l)
        if m:
            cur = last_run = m.group(1)
            chunks[cur] = {"lines": [], "figures": {}, "skip": None}
            continue
        if cur is None:
            continue
        if re.match(r"\[ +(OK|FAILED|SKIPPED) +\] " + re.escape(cur), l):
            cur = None
            continue
        c = chunks[cur]
        c["lines"].append(l)
        m = re.search(r"figures:\s*(.*)", l)
        if m:
            for tok in m.group(1).split():
                if "=" in tok:
                    k, v = tok.split("=", 1)
                    c["figures"][k] = fnum(v)
        if l.rstrip().endswith("Skipped") and i + 1 < len(lines) and c["skip"] is None:
            c["skip"] = lines[i + 1].strip()
    return chunks, lines, last_run

def gtest(a):
    # gtest WORK NAME SECONDS TIMEOUT GPU FILTER EXPECTED(,) EXTRA_JSON [BIN JSON LOG RC]...
    work, name, seconds, timeout, gpu, filt, expected, extra = a[:8]
    runs = [a[i:i + 4] for i in range(8, len(a), 4)]
    seconds, gpu = float(seconds), gpu == "1"
    expected = [e for e in expected.split(",") if e]
    figures = json.loads(extra) if extra else {}
    tests, problems, libcupti = {}, [], []
    for binary, js, log, rc in runs:
        rc = int(rc)
        chunks, lines, last_run = log_chunks(log)
        for l in lines:
            for p in re.findall(r"(/[^\s'\"(),;]*libcupti\.so[0-9.]*)", l):
                if p not in libcupti:
                    libcupti.append(p)
        try:
            doc = json.load(open(js))
        except (OSError, ValueError):
            why = {124: "timed out", 137: "killed after its timeout"}.get(rc, f"exit {rc}")
            where = f" during {last_run}" if last_run else ""
            problems.append(f"{os.path.basename(binary)}: {why}{where}, no gtest JSON")
            continue
        for suite in doc.get("testsuites", []):
            for t in suite.get("testsuite", []):
                full = f"{suite['name']}.{t['name']}"
                if t.get("status") == "NOTRUN":
                    continue
                if t.get("failures"):
                    state = "failed"
                elif t.get("result") == "SKIPPED":
                    state = "skipped"
                else:
                    state = "passed"
                c = chunks.get(full, {})
                entry = {"state": state, "seconds": fnum(str(t.get("time", "0")).rstrip("s")),
                         "binary": os.path.basename(binary)}
                if c.get("figures"):
                    entry["figures"] = c["figures"]
                if state == "failed":
                    entry["message"] = t["failures"][0].get("failure", "").splitlines()[:3]
                if state == "skipped":
                    entry["message"] = c.get("skip") or ""
                old = tests.get(full)
                if old is None or old["state"] == "passed":
                    tests[full] = entry
        if rc not in (0, 1):
            why = {124: "timed out", 137: "killed after its timeout"}.get(rc, f"exit {rc}")
            problems.append(f"{os.path.basename(binary)}: {why}"
                            + (f" during {last_run}" if last_run else ""))
    short = {k.split(".", 1)[1] for k in tests}
    missing = [e for e in expected if e not in short]
    count = lambda s: sum(1 for t in tests.values() if t["state"] == s)
    passed, failed, skipped = count("passed"), count("failed"), count("skipped")
    figures.update({"passed": f"{passed}/{len(tests)}", "failed": failed, "skipped": skipped,
                    "missing": len(missing)})
    if libcupti:
        figures["libcupti"] = libcupti
    figures["tests"] = {k: v for k, v in sorted(tests.items())}
    if missing:
        figures["missing_tests"] = missing
    reasons = []
    if figures.get("gradscaler_reference", "ok") != "ok":
        reasons.append("GradScaler reference " + figures["gradscaler_reference"])
    if not tests and not problems:
        reasons.append(f"no such tests (filter {filt})")
    reasons += problems
    if missing and tests:
        reasons.append(f"missing {len(missing)} of {len(expected)} expected tests: " +
                       ", ".join(missing[:6]) + (" ..." if len(missing) > 6 else ""))
    for k, v in tests.items():
        if v["state"] == "failed":
            msg = " | ".join(m.strip() for m in v.get("message", []) if m.strip())
            reasons.append(f"{k} failed: {msg[:200]}")
    skipped_names = [f"{k} ({v.get('message', '')[:100]})" for k, v in tests.items()
                     if v["state"] == "skipped"]
    if skipped_names and gpu:
        reasons.append(f"{len(skipped_names)} skipped on a machine with a GPU: " +
                       "; ".join(skipped_names[:4]) + (" ..." if len(skipped_names) > 4 else ""))
    if reasons:
        state, reason = "FAIL", "; ".join(reasons)
    elif skipped_names:
        state = "SKIP"
        reason = "no GPU visible (nvidia-smi -L); skipped: " + "; ".join(skipped_names[:3])
    else:
        state, reason = "PASS", ""
    emit(work, name, state, seconds, int(timeout), reason, figures)

def train_mlp(a):
    # trainmlp WORK NAME SECONDS TIMEOUT GPU [LABEL AMP DIR LOG RC SECONDS]...
    work, name, seconds, timeout, gpu = a[:5]
    gpu = gpu == "1"
    runs = [a[i:i + 6] for i in range(5, len(a), 6)]
    figures, bad, short = {}, [], []
    for label, amp, d, log, rc, secs in runs:
        rc = int(rc)
        f = {"exit": rc, "seconds": float(secs)}
        errs = []
        if rc != 0:
            errs.append({124: "timed out", 137: "killed after its timeout"}.get(rc, f"exit {rc}"))
        try:
            r = json.load(open(os.path.join(d, "report.json")))
        except (OSError, ValueError) as e:
            errs.append("no report.json")
            r = None
        if r is not None:
            dt, idle, tp = r.get("device_timeline", {}), r.get("idle", {}), r.get("throughput", {})
            cfg, acc = r.get("config", {}), r.get("acceptance", {})
            busy = dt.get("busy_s_by_phase", {}) or {}
            total_busy = sum(v for v in busy.values() if finite(v)) or 0
            f.update({
                "steps_per_s": tp.get("steady_steps_per_s"),
                "median_step_ms": tp.get("median_step_ms"),
                "idle_share": idle.get("share"), "top_cause": idle.get("top_cause"),
                "busy_source": idle.get("busy_source"),
                "device_timeline": dt.get("status"), "kernels": dt.get("kernels"),
                "records": dt.get("records"), "dropped": dt.get("dropped"),
                "amp": cfg.get("amp"), "torch_device": cfg.get("torch.device"),
                "final_train_loss": fnum(cfg.get("final_train_loss")),
                "eval_mse": acc.get("value"), "acceptance_passed": acc.get("passed"),
                "memory_peak_bytes": r.get("memory", {}).get("peak_bytes"),
                "backward_busy_share": (busy.get("backward", 0) / total_busy) if total_busy else None,
                "unattributed_busy_share": (busy.get("unattributed", 0) / total_busy) if total_busy else None,
            })
            if amp == "fp16":
                f["final_scale"] = fnum(cfg.get("amp.final_scale"))
                f["skipped_steps"] = fnum(cfg.get("amp.skipped_steps"))
            status = dt.get("status") or ""
            if not status.startswith("collected"):
                errs.append(f"device timeline '{status}'")
            if not (isinstance(dt.get("kernels"), int) and dt["kernels"] > 0):
                errs.append(f"kernels {dt.get('kernels')}")
            if dt.get("dropped") != 0:
                errs.append(f"dropped {dt.get('dropped')}")
            if not (finite(tp.get("steady_steps_per_s")) and tp["steady_steps_per_s"] > 0):
                errs.append(f"steady steps/s {tp.get('steady_steps_per_s')}")
            want_amp = "off" if amp == "fp32" else amp
            if cfg.get("amp") != want_amp:
                errs.append(f"config.amp '{cfg.get('amp')}', asked {want_amp}")
            if not str(cfg.get("torch.device", "")).startswith("cuda"):
                errs.append(f"torch.device '{cfg.get('torch.device')}'")
            if not finite(fnum(cfg.get("final_train_loss"))):
                errs.append(f"final_train_loss '{cfg.get('final_train_loss')}'")
            if acc.get("metric") is None or not finite(acc.get("value")) or "passed" not in acc:
                errs.append(f"acceptance {acc.get('metric')}={acc.get('value')}")
            if not finite(idle.get("share")):
                errs.append(f"idle share {idle.get('share')}")
            if amp == "fp16" and not (finite(f["final_scale"]) and f["final_scale"] > 0):
                errs.append(f"amp.final_scale '{cfg.get('amp.final_scale')}'")
        f["checks"] = "ok" if not errs else "; ".join(errs)
        figures[label] = f
        if errs:
            bad.append(f"{label}: " + ", ".join(errs))
        sps = f.get("steps_per_s")
        share = f.get("idle_share")
        short.append(f"{label} " + (f"{sps:.1f} steps/s" if finite(sps) else "- steps/s") +
                     (f" idle {100 * share:.1f}%" if finite(share) else " idle -") +
                     f" top={f.get('top_cause') or '-'} kernels={f.get('kernels')}")
    figures["runs"] = " | ".join(short)
    if bad and not gpu:
        emit(work, name, "SKIP", float(seconds), int(timeout),
             "no GPU visible (nvidia-smi -L): " + "; ".join(bad), figures)
    elif bad:
        emit(work, name, "FAIL", float(seconds), int(timeout), "; ".join(bad), figures)
    else:
        emit(work, name, "PASS", float(seconds), int(timeout), "", figures)

def analyze(a):
    # analyze WORK NAME SECONDS TIMEOUT TRACE LOG RC
    work, name, seconds, timeout, trace, log, rc = a
    rc = int(rc)
    text = open(log, errors="replace").read() if os.path.exists(log) else ""
    figures = {"trace": os.path.basename(os.path.dirname(trace)) + "/trace.json", "exit": rc}
    m = re.search(r"idle: ([0-9.]+)% of ([0-9.]+ \w+)", text)
    k = re.search(r"(\d+) kernels, (\d+) copies, (\d+) sets", text)
    if m:
        figures["idle_share"] = float(m.group(1)) / 100
        figures["window"] = m.group(2)
    if k:
        figures["kernels"], figures["copies"], figures["sets"] = map(int, k.groups())
    errs = []
    if rc != 0:
        errs.append({124: "timed out"}.get(rc, f"exit {rc}"))
    if not m:
        errs.append("no idle share printed")
    emit(work, name, "FAIL" if errs else "PASS", float(seconds), int(timeout),
         "; ".join(errs), figures)

def record(a):
    # record WORK NAME STATE SECONDS TIMEOUT REASON [FIGURES_JSON]
    work, name, state, seconds, timeout, reason = a[:6]
    figures = json.loads(a[6]) if len(a) > 6 and a[6] else {}
    emit(work, name, state, float(seconds), int(timeout), reason, figures)

def final(a):
    # final WORK OUT BUDGET USED EXIT_CODE
    work, out, budget, used, code = a
    secs = []
    for fn in sorted(os.listdir(os.path.join(work, "sections"))):
        secs.append(json.load(open(os.path.join(work, "sections", fn))))
    try:
        machine = json.load(open(os.path.join(work, "machine.json")))
    except (OSError, ValueError):
        machine = {}
    doc = {
        "tool": "tools/gpu-check.sh",
        "machine": machine,
        "sections": secs,
        "budget": {"total_s": int(budget), "used_s": int(used), "left_s": int(budget) - int(used),
                   "timeouts_s": {s["name"]: s["timeout_s"] for s in secs},
                   "latest_end_s": max([s["latest_end_s"] for s in secs] or [0]),
                   "rule": "each section's timeout is the time left less the minimum of every "
                           "later section (and 10 s to pack), so no section can end past the "
                           "budget, whatever the ones before it took",
                   "minimum_s": json.loads(os.environ.get("GPU_CHECK_NEEDS", "{}"))},
        "failed": [s["name"] for s in secs if s["state"] == "FAIL"],
        "result": "FAIL" if any(s["state"] == "FAIL" for s in secs) else "PASS",
        "exit_code": int(code),
        "artifacts": "gpu-check-artifacts.tar.gz",
    }
    json.dump(doc, open(os.path.join(out, "gpu-check.json"), "w"), indent=1)

def machine(a):
    # machine WORK key=value... (torch.json merged in)
    work = a[0]
    m = {}
    for kv in a[1:]:
        k, v = kv.split("=", 1)
        if k == "nvidia_smi_L":
            v = [x for x in v.split("\n") if x]
        elif k == "gpu_visible":
            v = v == "1"
        elif k in ("nproc", "budget_s"):
            v = int(v)
        m[k] = v
    try:
        m.update(json.load(open(os.path.join(work, "torch.json"))))
    except (OSError, ValueError) as e:
        m["torch_error"] = "python3 could not report torch"
    json.dump(m, open(os.path.join(work, "machine.json"), "w"), indent=1)

{"gtest": gtest, "trainmlp": train_mlp, "analyze": analyze, "record": record,
 "final": final, "machine": machine}[sys.argv[1]](sys.argv[2:])
PY
ev() { python3 -c "$EVAL_PY" "$@"; }

# ---- budget ----------------------------------------------------------------
# Minimum seconds each section needs (what later sections reserve); the
# packing at the end keeps 10 s. analyze reserves nothing: it runs only if
# there is room.
declare -A need=([build]=60 [cuda-unit]=30 [nccl-one-rank]=20 [collector]=30 [train-mlp]=60
                 [analyze]=5)
declare -A want=([build]=$budget [cuda-unit]=90 [nccl-one-rank]=45 [collector]=90 [train-mlp]=150
                 [analyze]=20)
order=(build cuda-unit nccl-one-rank collector train-mlp analyze)
final_reserve=10
export GPU_CHECK_NEEDS="{$(for k in "${!need[@]}"; do printf '"%s":%d,' "$k" "${need[$k]}"; done | sed 's/,$//')}"
failed_any=0

selected() { [[ -z "$only" || ",$only," == *",$1,"* ]]; }

# plan NAME: sets tmo (seconds) or returns 1 (not enough budget left).
plan() {
  local name="$1" later=0 seen=0 s
  for s in "${order[@]}"; do
    if ((seen)) && selected "$s" && [[ "$s" != analyze ]]; then later=$((later + need[$s])); fi
    [[ "$s" == "$name" ]] && seen=1
  done
  local left=$((budget - $(now_s) - final_reserve - later))
  tmo=$((left < want[$name] ? left : want[$name]))
  ((tmo >= need[$name]))
}

# section_start NAME: 0 to run it; else it has already been recorded.
section_start() {
  local name="$1"
  sec_t0="$(now_ms)"
  export SEC_START_S="${sec_t0}e-3"
  if ! selected "$name"; then
    ev record "$work" "$name" FAIL 0 0 "not selected (GPU_CHECK_SECTIONS=$only)"
    failed_any=1
    return 1
  fi
  if ! plan "$name"; then
    ev record "$work" "$name" FAIL 0 0 \
      "budget: $((budget - $(now_s))) s of ${budget} s left, the section needs ${need[$name]} s and later ones their minimum"
    failed_any=1
    return 1
  fi
  say "$name (timeout ${tmo} s, at $(now_s) s of ${budget} s)"
  return 0
}
sec_seconds() { echo "$(( $(now_ms) - sec_t0 ))e-3"; }
last_state() { local f; f="$(ls "$work/sections" | tail -1)"; python3 -c \
  'import json,sys; print(json.load(open(sys.argv[1]))["state"])' "$work/sections/$f"; }
mark() { [[ "$(last_state)" == FAIL ]] && failed_any=1; }

# ---- machine ---------------------------------------------------------------
say "machine"
gpu=0
smi_l="$(nvidia-smi -L 2>/dev/null)" || smi_l=""
grep -qE '^GPU [0-9]+:' <<<"$smi_l" && gpu=1
smi_q="$(nvidia-smi --query-gpu=driver_version,name,memory.total --format=csv,noheader 2>/dev/null | head -1)" || smi_q=""
nvcc_v="$(nvcc --version 2>/dev/null | grep -i release | tail -1)"
[[ -z "$nvcc_v" && -x /usr/local/cuda/bin/nvcc ]] &&
  nvcc_v="$(/usr/local/cuda/bin/nvcc --version | grep -i release | tail -1)"
timeout -k 5 60 python3 - >"$work/torch.json" 2>"$work/torch.err" <<'PY'
import json, torch, torch.utils
d = {"torch": torch.__version__, "torch_cuda": torch.version.cuda,
     "torch_cuda_available": torch.cuda.is_available(),
     "torch_cmake_prefix_path": torch.utils.cmake_prefix_path}
if d["torch_cuda_available"]:
    d["torch_device"] = torch.cuda.get_device_name(0)
    d["torch_capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
print(json.dumps(d))
PY
ev machine "$work" "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)" "nvidia_smi_L=$smi_l" \
  "driver=${smi_q%%,*}" "nvidia_smi_query=$smi_q" "nvcc=${nvcc_v:-not found}" \
  "cmake=$(cmake --version 2>/dev/null | head -1)" "ninja=$(ninja --version 2>/dev/null || echo none)" \
  "nproc=$jobs" "kernel=$(uname -r)" "gpu_visible=$gpu" "budget_s=$budget"
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m.get("date"), "|",
  "; ".join(m.get("nvidia_smi_L") or ["no GPU (nvidia-smi -L)"]), "| driver", m.get("driver") or "-",
  "| torch", m.get("torch", "?"), "CUDA", m.get("torch_cuda"), "available", m.get("torch_cuda_available"),
  "|", m.get("nvcc"))' "$work/machine.json"
torch_prefix="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("torch_cmake_prefix_path",""))' "$work/machine.json")"

# ---- carried dependencies --------------------------------------------------
prefix="$work/deps-root"  # not under .gpu-deps: that folder travels
if compgen -G ".gpu-deps/*.deb" >/dev/null; then
  rm -rf "$prefix" && mkdir -p "$prefix"
  n=0
  for deb in .gpu-deps/*.deb; do
    if command -v dpkg >/dev/null; then dpkg -x "$deb" "$prefix" || echo "dpkg -x $deb failed"
    else  # no dpkg: a .deb is an ar archive holding data.tar.*
      python3 - "$deb" "$prefix" <<'PY' || echo "unpacking $deb failed"
import io, sys, tarfile
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"!<arch>\n"
pos = 8
while pos < len(data):
    name, size = data[pos:pos + 16].decode().strip().rstrip("/"), int(data[pos + 48:pos + 58])
    body = data[pos + 60:pos + 60 + size]
    if name.startswith("data.tar"):
        tarfile.open(fileobj=io.BytesIO(body)).extractall(sys.argv[2])
    pos += 60 + size + (size & 1)
PY
    fi
    n=$((n + 1))
  done
  echo "unpacked $n packages from .gpu-deps into $prefix"
else
  echo "no .gpu-deps/*.deb: the system's packages (tools/gpu-deps.sh packs them)"
fi
if [[ ! -e .cache/cupti && -f .gpu-deps/cupti.tar.xz ]]; then
  mkdir -p .cache && tar -xJf .gpu-deps/cupti.tar.xz -C .cache &&
    echo "unpacked the libcupti 12/13 wheels' libraries into .cache/cupti"
fi
libdir="$prefix/usr/lib/x86_64-linux-gnu"
# Our programs only: python3 (torch) keeps the image's libraries.
runenv=(env "LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")

# ---- 1. build ----------------------------------------------------------------
targets=(cupti_test torch_test train_mlp trainscope_cli)
declare -A bin=([cupti_test]="$bdir/tests/cupti_test" [torch_test]="$bdir/tests/torch_test"
                [torch_cuda_test]="$bdir/tests/torch_cuda_test" [train_mlp]="$bdir/bin/train_mlp"
                [trainscope_cli]="$bdir/bin/trainscope")
declare -A is_built=()
# have TARGET...: 0 if one of them built (the sections need one of theirs).
have() { local t; for t in "$@"; do [[ -n "${is_built[$t]:-}" ]] && return 0; done; return 1; }
if section_start build; then
  figs="{}"
  if [[ "$prebuilt" == 1 ]]; then
    missing=()
    for t in "${targets[@]}"; do [[ -x "${bin[$t]}" ]] || missing+=("$t"); done
    [[ -x "${bin[torch_cuda_test]}" ]] && targets+=(torch_cuda_test)
    figs="$(printf '{"mode":"prebuilt","dir":"%s","targets":"%s"}' "$bdir" "$(IFS=,; echo "${targets[*]}")")"
    for t in "${targets[@]}"; do [[ -x "${bin[$t]}" ]] && is_built[$t]=1; done
    if ((${#missing[@]})); then
      ev record "$work" build FAIL "$(sec_seconds)" "$tmo" "prebuilt $bdir lacks: ${missing[*]}" "$figs"
    else
      ev record "$work" build PASS "$(sec_seconds)" "$tmo" "" "$figs"
    fi
  else
    gen=(); genname="Unix Makefiles"
    command -v ninja >/dev/null && gen=(-G Ninja) && genname=Ninja
    if [[ -f "$bdir/CMakeCache.txt" ]] && ! grep -q "^CMAKE_GENERATOR:INTERNAL=$genname\$" "$bdir/CMakeCache.txt"; then
      rm -rf "$bdir"
    fi
    export TORCH_CUDA_ARCH_LIST=9.0
    c0=$(now_s)
    timeout -k 5 "$tmo" cmake -S . -B "$bdir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DTRAINSCOPE_TORCH=ON -DTRAINSCOPE_CUDA=ON -DTRAINSCOPE_BUILD_TESTS=ON \
      -DTRAINSCOPE_BUILD_SAMPLES=ON -DTRAINSCOPE_BUILD_BENCH=OFF -DTORCH_CUDA_ARCH_LIST=9.0 \
      -DCMAKE_PREFIX_PATH="$torch_prefix;$prefix/usr" >"$work/configure.log" 2>&1
    crc=$?
    configure_s=$(($(now_s) - c0))
    grep -E "^-- trainscope:" "$work/configure.log"
    cuda_paths="$(sed -nE 's/.*CUDA paths ([01]), NCCL ([01]).*/\1/p' "$work/configure.log" | tail -1)"
    nccl="$(sed -nE 's/.*CUDA paths ([01]), NCCL ([01]).*/\2/p' "$work/configure.log" | tail -1)"
    cupti="$(grep -q "CUPTI collector on" "$work/configure.log" && echo on || echo off)"
    torchv="$(sed -nE 's/.*trainscope: LibTorch ([^ ]+) at.*/\1/p' "$work/configure.log" | tail -1)"
    if ((crc != 0)); then
      tail -25 "$work/configure.log"
      ev record "$work" build FAIL "$(sec_seconds)" "$tmo" \
        "configure $([[ $crc == 124 ]] && echo 'timed out' || echo "exit $crc"): $(grep -m1 -E 'CMake Error|Could not find|error' "$work/configure.log" | cut -c1-200)"
    else
      if ninja -C "$bdir" -t targets all 2>/dev/null | grep -q '^torch_cuda_test:' ||
         cmake --build "$bdir" --target help 2>/dev/null | grep -qE '(^|[ .])torch_cuda_test$'; then
        targets+=(torch_cuda_test)
      fi
      b0=$(now_s)
      left=$((tmo - configure_s))
      ((left < 1)) && left=1
      # Keep going past a failed target (-k): the sections whose programs
      # built still run; the others are FAIL "no build".
      keep=(-k 0); [[ "$genname" == Ninja ]] || keep=(-k)
      timeout -k 5 "$left" cmake --build "$bdir" -j "$jobs" --target "${targets[@]}" -- "${keep[@]}" \
        >"$work/build.log" 2>&1
      brc=$?
      build_s=$(($(now_s) - b0))
      ok_targets=(); bad_targets=()
      for t in "${targets[@]}"; do
        if [[ -x "${bin[$t]}" ]] && { [[ "$genname" != Ninja ]] ||
             ninja -C "$bdir" -n "$t" 2>/dev/null | grep -q "no work to do"; }; then
          ok_targets+=("$t"); is_built[$t]=1
        else
          bad_targets+=("$t")
        fi
      done
      figs="$(printf '{"generator":"%s","jobs":%d,"configure_s":%d,"build_s":%d,"targets":"%s","built":"%s","not_built":"%s","libtorch":"%s","cuda_paths":"%s","nccl":"%s","cupti_collector":"%s"}' \
        "$genname" "$jobs" "$configure_s" "$build_s" "$(IFS=,; echo "${targets[*]}")" \
        "$(IFS=,; echo "${ok_targets[*]}")" "$(IFS=,; echo "${bad_targets[*]}")" "$torchv" "$cuda_paths" "$nccl" "$cupti")"
      if ((brc != 0 || ${#bad_targets[@]})); then
        grep -E -m8 "error:|FAILED:" "$work/build.log" | cut -c1-300
        first_error="$(grep -m1 -E 'error:' "$work/build.log" | sed "s|$repo/||" | cut -c1-240)"
        ev record "$work" build FAIL "$(sec_seconds)" "$tmo" \
          "build $([[ $brc == 124 ]] && echo "timed out after ${left} s" || echo "exit $brc"), not built: ${bad_targets[*]:-none}: ${first_error:-see build.log}" "$figs"
      elif [[ "$cuda_paths" != 1 || "$cupti" != on || "$nccl" != 1 ]] && ((gpu)); then
        ev record "$work" build FAIL "$(sec_seconds)" "$tmo" \
          "built without what the GPU sections test: CUDA paths ${cuda_paths:-?}, NCCL ${nccl:-?}, CUPTI collector $cupti" "$figs"
      else
        ev record "$work" build PASS "$(sec_seconds)" "$tmo" "" "$figs"
      fi
    fi
  fi
  mark
fi

# gtest_section NAME FILTER EXPECTED(,) EXTRA_JSON BINARY...
gtest_section() {
  local name="$1" filt="$2" expected="$3" extra="$4"; shift 4
  local runs=() b t0s left rc i=0
  for b in "$@"; do
    [[ -x "$b" ]] || continue
    left=$((tmo - ($(now_ms) - sec_t0) / 1000))
    ((left < 5)) && left=5
    i=$((i + 1))
    timeout -k 5 "$left" "${runenv[@]}" "$b" --gtest_filter="$filt" \
      --gtest_output="json:$work/$name-$i.json" >"$work/$name-$i.log" 2>&1
    rc=$?
    runs+=("$b" "$work/$name-$i.json" "$work/$name-$i.log" "$rc")
  done
  if ((${#runs[@]} == 0)); then
    ev record "$work" "$name" FAIL "$(sec_seconds)" "$tmo" "no test binary: $*"
  else
    ev gtest "$work" "$name" "$(sec_seconds)" "$tmo" "$gpu" "$filt" "$expected" "$extra" "${runs[@]}"
  fi
  mark
}
nobuild() { ev record "$work" "$1" FAIL 0 0 "no build ($2 not built)"; failed_any=1; }

# ---- 2. cuda-unit ------------------------------------------------------------
if section_start cuda-unit; then
  if ! have torch_test torch_cuda_test; then nobuild cuda-unit torch_test; else
    ref="$work/gradscaler-reference.json"
    gen_t=$((tmo / 3 < 45 ? tmo / 3 : 45))
    timeout -k 5 "$gen_t" python3 - "$ref" >"$work/gradscaler-figures.json" \
      2>"$work/gradscaler-reference.log" <<'PY'
# torch.amp.GradScaler's own scale sequence on a tiny model, the steps in
# found_inf given an infinite gradient on purpose.
import json, sys, torch
dev = "cuda" if torch.cuda.is_available() else "cpu"
init_scale, growth_factor, backoff_factor, growth_interval = 1024.0, 2.0, 0.5, 3
found_inf = [False, False, False, True, False, False, False, False, False, False,
             True, True, False, False, False, False, False, False, True, False]
torch.manual_seed(0)
model = torch.nn.Linear(8, 1).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler(dev, init_scale=init_scale, growth_factor=growth_factor,
                              backoff_factor=backoff_factor, growth_interval=growth_interval)
x, y = torch.randn(16, 8, device=dev), torch.randn(16, 1, device=dev)
scales, skipped = [], 0
for inf in found_inf:
    opt.zero_grad(set_to_none=True)
    before = model.weight.detach().clone()
    scaler.scale(torch.nn.functional.mse_loss(model(x), y)).backward()
    if inf:
        model.weight.grad[0, 0] = float("inf")
    scaler.step(opt)
    scaler.update()
    if torch.equal(before, model.weight.detach()):
        skipped += 1
    scales.append(float(scaler.get_scale()))
if skipped != sum(found_inf):
    sys.exit(f"GradScaler skipped {skipped} steps, {sum(found_inf)} were made inf")
json.dump({"init_scale": init_scale, "growth_factor": growth_factor,
           "backoff_factor": backoff_factor, "growth_interval": growth_interval,
           "found_inf": found_inf, "scales": scales}, open(sys.argv[1], "w"), indent=1)
print(json.dumps({"gradscaler_reference": "ok", "reference_torch": torch.__version__,
                  "reference_device": dev, "reference_steps": len(scales),
                  "reference_final_scale": scales[-1]}))
PY
    grc=$?
    if ((grc == 0)); then
      export TRAINSCOPE_GRADSCALER_REFERENCE="$ref"
      extra="$(tail -1 "$work/gradscaler-figures.json")"
    else
      extra="$(printf '{"gradscaler_reference":"could not be made (exit %d): %s"}' "$grc" \
        "$(tail -1 "$work/gradscaler-reference.log" | tr -d '"\\' | cut -c1-150)")"
    fi
    gtest_section cuda-unit 'TorchCudaTest.*' \
      PrefetcherMoves256MiBBatchesFor50IterationsWithTheirSums,RecordStepMemoryWithoutAnIndexUsesTheCurrentDevice,LimitMemoryThenAnOverBudgetAllocationThrowsOutOfMemory,AutocastGuardDtypesAndNesting,GradScalerFollowsPythonsScaleSequence,CudaRngStateRoundTrips,StepRateAfterFinishMatchesTheBaselineAndTheProfilerRunsInBothOrders,GlooAllReduceOfCudaTensorsKeepsQueuedComputeOutOfSync \
      "$extra" "${bin[torch_test]}" "${bin[torch_cuda_test]}"
  fi
fi

# ---- 3. nccl-one-rank ----------------------------------------------------------
if section_start nccl-one-rank; then
  if ! have torch_test torch_cuda_test; then nobuild nccl-one-rank torch_test; else
    gtest_section nccl-one-rank 'TorchNcclTest.*' \
      OneRankAllReduceBarrierAndCheckpointVote,OneRankWithBlockingWait "" \
      "${bin[torch_test]}" "${bin[torch_cuda_test]}"
  fi
fi

# ---- 4. collector ----------------------------------------------------------------
if section_start collector; then
  if ! have cupti_test; then nobuild collector cupti_test; else
    gtest_section collector 'CollectorGpuTest.*:CuptiLibrary*' \
      SpinKernelThenManySmallKernelsLeaveNoRecordBehindTheWatermark,TinyBuffersCountWhatCuptiDrops,StopDuringARunningKernelCountsWhatIsLost,EventAndStreamQueriesAreNotSyncTime,ThirtyTwoLaunchingThreadsAreAllMatched,SetActiveToggledDuringCopiesLeavesNoLaunchWaiting,GraphCaptureAndReplayDoNotHoldTheWatermark,ChosenLibcuptiIsTheOneMappedIntoTheProcess,BackToBackSessionsEachSeeOnlyTheirOwnWork,AForkedChildIsNotToldAnotherCollectorRuns,SkippedApisLeaveNoRecords,CollectsAMemsetAKernelAndTheirDriverCallsOnTheRecordersClock,AnotherCuptiSubscriberLeavesTheDeviceTimelineUnavailable \
      "" "${bin[cupti_test]}"
  fi
fi

# ---- 5. train-mlp ----------------------------------------------------------------
trace_for_analyze=""
if section_start train-mlp; then
  if ! have train_mlp; then nobuild train-mlp train_mlp; else
    runs=()
    amps=(fp32 fp16 bf16)
    for idx in 0 1 2; do
      amp="${amps[$idx]}"
      d="$work/train-mlp/$amp"
      mkdir -p "$d"
      spent=$((($(now_ms) - sec_t0) / 1000))
      later=$(((2 - idx) * 20))
      rt=$((tmo - spent - later)); ((rt > 50)) && rt=50; ((rt < 5)) && rt=5
      r0=$(now_ms)
      timeout -k 5 "$rt" "${runenv[@]}" "${bin[train_mlp]}" --steps="$steps" --batch_size=512 \
        --hidden=1024 --loader_workers=2 --eval_every=100 --amp="$amp" --out="$d" >"$d/run.log" 2>&1
      rc=$?
      runs+=("$amp" "$amp" "$d" "$d/run.log" "$rc" "$(( $(now_ms) - r0 ))e-3")
      [[ -z "$trace_for_analyze" && -s "$d/trace.json" ]] && trace_for_analyze="$d/trace.json"
    done
    ev trainmlp "$work" train-mlp "$(sec_seconds)" "$tmo" "$gpu" "${runs[@]}"
    mark
  fi
fi

# ---- 6. analyze (if the budget has room) --------------------------------------------
if section_start analyze; then
  if ! have trainscope_cli; then nobuild analyze trainscope_cli
  elif [[ -z "$trace_for_analyze" ]]; then
    ev record "$work" analyze FAIL "$(sec_seconds)" "$tmo" "no trace.json from train-mlp"; failed_any=1
  else
    timeout -k 5 "$tmo" "${runenv[@]}" "${bin[trainscope_cli]}" analyze "$trace_for_analyze" \
      >"$work/analyze.log" 2>&1
    rc=$?
    ev analyze "$work" analyze "$(sec_seconds)" "$tmo" "$trace_for_analyze" "$work/analyze.log" "$rc"
    mark
  fi
fi

# ---- summary, JSON, artifacts ------------------------------------------------------
used=$(now_s)
code=$failed_any
ev final "$work" "$out" "$budget" "$used" "$code"
timeouts="$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
print(", ".join("%s %d" % (s["name"], s["timeout_s"]) for s in d["sections"]),
      "s; latest possible end %s s" % d["budget"]["latest_end_s"])' "$out/gpu-check.json")"
budget_line="budget: used ${used} s of ${budget} s ($((budget - used)) s left); timeouts ${timeouts}"
echo "$budget_line" >>"$work/summary.txt"
cp "$work/summary.txt" "$out/gpu-check-summary.txt"
cp "$out/gpu-check.json" "$work/"
# Logs, gtest JSON, reports and traces; no build tree, nothing over 8 MB.
(cd "$work" && find . -type f ! -path './tmp/*' ! -path './deps-root/*' -size -8M -print0 |
  tar --null -czf "$out/gpu-check-artifacts.tar.gz" -T -) ||
  echo "could not write the artifacts tarball"
printf '\n== summary (%s)\n' "$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["machine"]; print("; ".join(m.get("nvidia_smi_L") or ["no GPU"]), "| torch", m.get("torch"))' "$out/gpu-check.json")"
grep -vE '^budget:' "$work/summary.txt"
echo "$budget_line"
echo "gpu-check.json, gpu-check-summary.txt, gpu-check-artifacts.tar.gz ($(du -k "$out/gpu-check-artifacts.tar.gz" 2>/dev/null | cut -f1) KiB) in $out"
echo "exit $code"
exit "$code"
