#!/usr/bin/env bash
# Installs what trainscope needs on Debian 12, and nothing when it is there:
#   - Debian packages (apt-get as root; `apt-get update` first),
#   - LibTorch 2.x, as the C++ library inside PyPI's `torch` wheel (pip).
# The CUDA toolkit is used when present (NVTX, CUPTI; LibTorch's CMake
# config also wants it) but is not installed here.
#   - Holistic Trace Analysis (pip), the reference of `trainscope analyze`.
# Environment: TRAINSCOPE_TORCH_SPEC (default torch==2.15.0),
#              TRAINSCOPE_SKIP_TORCH=1 to build without LibTorch,
#              TRAINSCOPE_SKIP_HTA=1 to skip HTA (its test is then skipped),
#              TRAINSCOPE_SKIP_CUPTI_WHEELS=1 to skip the libcupti 12/13 wheels.
set -euo pipefail

packages=(cmake make g++ git python3 python3-pip pkg-config clang-format
          libabsl-dev libfmt-dev libsimdjson-dev libxxhash-dev zlib1g-dev libisal-dev
          libgtest-dev libgmock-dev libbenchmark-dev libgloo-dev
          clang-16 libfuzzer-16-dev libclang-rt-16-dev
          libjs-chart.js chromium eslint)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    echo "deps: need root for apt-get (missing: ${missing[*]})" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ "${TRAINSCOPE_SKIP_TORCH:-0}" != 1 ]] &&
   ! python3 -c "import torch" >/dev/null 2>&1; then
  spec="${TRAINSCOPE_TORCH_SPEC:-torch==2.15.0}"
  echo "deps: pip install $spec (LibTorch comes inside the wheel; a few GB)"
  python3 -m pip install --quiet --disable-pip-version-check "$spec" ||
    python3 -m pip install --quiet --disable-pip-version-check --break-system-packages "$spec"
fi
# Holistic Trace Analysis: the reference our trace analysis is tested against.
# From 0.6.0 it is published on PyPI as traceinsight (same `hta` package);
# an older HolisticTraceAnalysis is removed first, as both install hta/.
if [[ "${TRAINSCOPE_SKIP_HTA:-0}" != 1 ]] &&
   ! python3 -c "import importlib.metadata as m, hta, psutil
assert m.version('traceinsight') == '0.6.0'" >/dev/null 2>&1; then
  echo "deps: pip install traceinsight==0.6.0 (HTA 0.6.0, the reference for trainscope analyze)"
  pip_hta() {
    python3 -m pip "$@" --quiet --disable-pip-version-check ||
      python3 -m pip "$@" --quiet --disable-pip-version-check --break-system-packages
  }
  if python3 -c "import importlib.metadata as m; m.version('HolisticTraceAnalysis')" \
      >/dev/null 2>&1; then
    pip_hta uninstall -y HolisticTraceAnalysis || true
  fi
  pip_hta install traceinsight==0.6.0 psutil ||
    echo "deps: WARNING: could not install HTA; its reference test will be skipped"
fi
# libcupti of CUDA 12 and 13 from their PyPI wheels, unpacked into
# .cache/cupti/<version>/: cupti_test loads each (no driver needed) to check
# the version it reports and whether this build reads it (about 36 MB once).
if [[ "${TRAINSCOPE_SKIP_CUPTI_WHEELS:-0}" != 1 ]]; then
  cupti_dir="$(cd "$(dirname "$0")/.." && pwd)/.cache/cupti"
  for spec in nvidia-cuda-cupti-cu12==12.2.142 nvidia-cuda-cupti-cu12==12.4.127 \
              nvidia-cuda-cupti-cu12==12.9.79 nvidia-cuda-cupti==13.0.85; do
    version="${spec##*==}"
    [[ -n "$(ls "$cupti_dir/$version"/libcupti.so.* 2>/dev/null)" ]] && continue
    echo "deps: $spec (libcupti for cupti_test)"
    tmp="$(mktemp -d)"
    if python3 -m pip download --quiet --disable-pip-version-check --no-deps -d "$tmp" "$spec"; then
      mkdir -p "$cupti_dir/$version"
      python3 - "$tmp" "$cupti_dir/$version" <<'PY'
import glob, os, sys, zipfile
for wheel in glob.glob(os.path.join(sys.argv[1], "*.whl")):
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if os.path.basename(name).startswith("libcupti.so"):
                with open(os.path.join(sys.argv[2], os.path.basename(name)), "wb") as out:
                    out.write(z.read(name))
PY
    else
      echo "deps: WARNING: could not download $spec; cupti_test skips its version checks"
    fi
    rm -rf "$tmp"
  done
fi
# The headers of CUDA 12.8 (CUPTI's and the runtime's, from their PyPI
# wheels) in .cache/cuda12/include: tools/cuda12-compile.sh compiles the
# CUPTI collector against them as well as against the toolkit's CUDA 13 (about
# 11 MB downloaded once).
cuda12_dir="$(cd "$(dirname "$0")/.." && pwd)/.cache/cuda12"
if [[ ! -f "$cuda12_dir/include/cupti_activity.h" || ! -f "$cuda12_dir/include/cuda.h" ]]; then
  echo "deps: CUDA 12.8 CUPTI and runtime headers (for tools/cuda12-compile.sh)"
  tmp="$(mktemp -d)"
  if python3 -m pip download --quiet --disable-pip-version-check --no-deps -d "$tmp" \
      nvidia-cuda-cupti-cu12==12.8.90 nvidia-cuda-runtime-cu12==12.8.90; then
    mkdir -p "$cuda12_dir/include"
    python3 - "$tmp" "$cuda12_dir/include" <<'PY'
import glob, os, sys, zipfile
for wheel in glob.glob(os.path.join(sys.argv[1], "*.whl")):
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            parts = name.split("/")
            if len(parts) >= 4 and parts[2] == "include" and not name.endswith("/"):
                target = os.path.join(sys.argv[2], *parts[3:])
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "wb") as out:
                    out.write(z.read(name))
PY
  else
    echo "deps: WARNING: could not download the CUDA 12.8 headers; the CUDA 12 compile is skipped"
  fi
  rm -rf "$tmp"
fi
if python3 -c "import torch" >/dev/null 2>&1; then
  echo "deps: ok ($(python3 -c 'import torch; print("torch", torch.__version__)' 2>/dev/null))"
else
  echo "deps: ok (without LibTorch)"
fi
