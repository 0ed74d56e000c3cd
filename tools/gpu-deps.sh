#!/usr/bin/env bash
# Run HERE before tools/gpu-check.sh goes to the GPU machine, which has
# CUDA (nvcc), CMake, ninja and python3's torch (LibTorch, with nccl.h in its
# nvidia-nccl wheel) but no package registry. This packs, into .gpu-deps/
# (ignored; the device tool carries it: carry [".gpu-deps"]):
#   - the Debian packages CMakeLists.txt finds beyond that image, the versions
#     installed here (so the device builds what builds here): Abseil, fmt,
#     simdjson, ISA-L, xxHash, zlib's headers and archive, GoogleTest and
#     GoogleMock (GTestTargets names gmock's files too), gloo's headers
#     (c10d's ProcessGroupGloo.hpp; LibTorch has gloo itself). gpu-check.sh
#     unpacks them into a prefix (out/gpu-check-work/deps-root) for CMake.
#   - cupti.tar.xz: .cache/cupti, the libcupti of CUDA 12.2, 12.4, 12.9 and
#     13.0 that tools/deps.sh takes from their wheels, for cupti_test's
#     CuptiLibraryTest (skipped without them, which the GPU check counts as
#     a failure). GPU_DEPS_CUPTI=0 leaves them out.
# Debs come from apt's cache where it holds that version, else apt-get
# download. It prints what it packed and the size against the tool's limit
# of 64 MiB (the working tree and the carried folders together).
set -euo pipefail
cd "$(dirname "$0")/.."
limit=$((64 * 1024 * 1024))
grep -qx "/.gpu-deps/" .gitignore 2>/dev/null ||
  { grep -qx "/.gpu-deps/" .git/info/exclude 2>/dev/null || echo "/.gpu-deps/" >>.git/info/exclude; }
rm -rf .gpu-deps
mkdir -p .gpu-deps
packages=(libabsl-dev libabsl20220623 libfmt-dev libfmt9 libsimdjson-dev libsimdjson14
          libisal-dev libisal2 libxxhash-dev libxxhash0 zlib1g-dev libgtest-dev libgmock-dev
          libgloo-dev)
for p in "${packages[@]}"; do
  version="$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || true)"
  cached=""
  if [[ -n "$version" ]]; then
    cached="$(ls /var/cache/apt/archives/"${p}_${version//:/%3a}"_*.deb 2>/dev/null | head -1 || true)"
  fi
  if [[ -n "$cached" ]]; then
    cp "$cached" .gpu-deps/
  elif [[ -n "$version" ]]; then
    (cd .gpu-deps && apt-get -o APT::Sandbox::User=root download "$p=$version" >/dev/null)
  else
    (cd .gpu-deps && apt-get -o APT::Sandbox::User=root download "$p" >/dev/null)
  fi
done
if [[ "${GPU_DEPS_CUPTI:-1}" == 1 ]]; then
  if [[ -d .cache/cupti ]]; then
    XZ_OPT="-6 -T0" tar -cJf .gpu-deps/cupti.tar.xz -C .cache cupti
  else
    echo "gpu-deps: no .cache/cupti (tools/deps.sh makes it): CuptiLibraryTest will skip there" >&2
  fi
fi
ls -l .gpu-deps | awk 'NR > 1 { printf "  %9d  %s\n", $5, $9 }'
carried=$(du -sb .gpu-deps | cut -f1)
tree=$( (git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null || true) |
  tail -1 | cut -f1)
total=$((carried + tree))
printf 'gpu-deps: .gpu-deps %.1f MiB (%d files) + working tree %.1f MiB = %.1f MiB of the 64 MiB limit\n' \
  "$(echo "$carried / 1048576" | bc -l)" "$(ls .gpu-deps | wc -l)" \
  "$(echo "$tree / 1048576" | bc -l)" "$(echo "$total / 1048576" | bc -l)"
if ((total > limit)); then
  echo "gpu-deps: over the limit: GPU_DEPS_CUPTI=0 leaves the libcupti wheels out" >&2
  exit 1
fi
