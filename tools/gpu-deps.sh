#!/usr/bin/env bash
# Run HERE (the build machine) before tools/gpu-check.sh goes to the GPU
# machine: downloads the Debian packages trainscope builds against (the GPU
# machine has CUDA, CMake and PyTorch, but not Abseil, fmt, simdjson or
# GoogleTest) into .gpu-deps/, an ignored folder that the device tool
# carries (`carry: [".gpu-deps"]`). gpu-check.sh unpacks them into a prefix.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .gpu-deps
grep -qx "/.gpu-deps/" .git/info/exclude 2>/dev/null || echo "/.gpu-deps/" >> .git/info/exclude
packages=(libabsl-dev libabsl20220623 libfmt-dev libfmt9 libsimdjson-dev libsimdjson14
          libisal-dev libisal2 libxxhash-dev libxxhash0 libgtest-dev libgmock-dev zlib1g-dev
          libgloo-dev)
(cd .gpu-deps && apt-get download "${packages[@]}" >/dev/null)
ls -la .gpu-deps
du -sh .gpu-deps
