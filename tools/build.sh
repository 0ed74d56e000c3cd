#!/usr/bin/env bash
# Configures and builds trainscope into $BUILD_DIR (default: build/).
#   tools/build.sh [extra cmake -D options...]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${BUILD_DIR:-build}"
jobs="${JOBS:-$(nproc)}"
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >"$build_dir.configure.log" 2>&1 ||
    { cat "$build_dir.configure.log"; exit 1; }
  grep -E "^-- trainscope:" "$build_dir.configure.log" || true
elif (($#)); then
  cmake "$build_dir" "$@" >/dev/null
fi
cmake --build "$build_dir" -j "$jobs"
