#!/usr/bin/env bash
# tools/gpu-check-dry-run.sh [OUT]: runs tools/gpu-check.sh on this machine,
# which has no GPU, as if it had one, to prove the script's machinery:
# budget, sections, assertions, JSON, tarball and exit code.
#
# A stand-in `nvidia-smi` on PATH reports one H100, so every CUDA test that
# skips here (no device) is a FAIL, as it would be on the device; the local
# python3 torch makes the GradScaler reference (on the CPU). The build is
# not made: the binaries of GPU_CHECK_BUILD_DIR (default build/, which
# another engineer keeps built) are used as they are (GPU_CHECK_PREBUILT=1);
# a full build on a 2-core VM takes over 10 minutes.
#
# GPU_CHECK_DRY_NO_BUILD=1 points the script at an empty build folder
# instead, to show every section failing "no build". GPU_CHECK_DRY_BUILD=1
# builds for real (in build-gpu unless GPU_CHECK_BUILD_DIR says otherwise;
# give it GPU_CHECK_BUDGET_S=1500 here). GPU_CHECK_DRY_PYTHON=PATH puts that
# interpreter first on PATH as python3 (a venv with the image's torch 2.11,
# say); its LibTorch is then the one built against. train_mlp runs
# GPU_CHECK_STEPS (60 here) steps: a CPU is slow.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
out="${1:-/tmp/gpu-check-dry}"
fake="$(mktemp -d)"
trap 'rm -rf "$fake"' EXIT
cat >"$fake/nvidia-smi" <<'SH'
#!/bin/sh
# A stand-in for the dry run (tools/gpu-check-dry-run.sh): one H100.
case "$*" in
  *-L*) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-fake)" ;;
  *--query-gpu*) echo "580.159.04, NVIDIA H100 80GB HBM3, 81559 MiB" ;;
  *) echo "| NVIDIA-SMI 580.159.04             Driver Version: 580.159.04     CUDA Version: 13.0     |" ;;
esac
SH
chmod +x "$fake/nvidia-smi"
if [[ -n "${GPU_CHECK_DRY_PYTHON:-}" ]]; then
  printf '#!/bin/sh\nexec %q "$@"\n' "$GPU_CHECK_DRY_PYTHON" >"$fake/python3"  # a venv: not a link
  chmod +x "$fake/python3"
fi
prebuilt=1
build="${GPU_CHECK_BUILD_DIR:-$PWD/build}"
if [[ "${GPU_CHECK_DRY_BUILD:-0}" == 1 ]]; then
  prebuilt=0
  build="${GPU_CHECK_BUILD_DIR:-$PWD/build-gpu}"
fi
[[ "${GPU_CHECK_DRY_NO_BUILD:-0}" == 1 ]] && build="$fake/no-build"
echo "dry run: stand-in nvidia-smi ($(PATH="$fake:$PATH" nvidia-smi -L)), python3 $(PATH="$fake:$PATH" command -v python3)," \
  "$( ((prebuilt)) && echo prebuilt || echo building) $build, OUT $out"
PATH="$fake:$PATH" GPU_CHECK_PREBUILT=$prebuilt GPU_CHECK_BUILD_DIR="$build" \
  GPU_CHECK_STEPS="${GPU_CHECK_STEPS:-60}" \
  GPU_CHECK_WORK="${GPU_CHECK_WORK:-/tmp/gpu-check-dry-work}" tools/gpu-check.sh "$out"
code=$?
echo "== dry run: tools/gpu-check.sh exited $code"
python3 -m json.tool "$out/gpu-check.json" >/dev/null && echo "gpu-check.json: valid JSON"
tar -tzf "$out/gpu-check-artifacts.tar.gz" | sort | sed 's/^/  /'
exit "$code"
