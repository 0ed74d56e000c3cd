#!/usr/bin/env bash
# The whole test suite: sets up what is missing, builds everything, runs
# every test (ctest), then the core again under AddressSanitizer and UBSan,
# and the benchmarks' quick pass. Prints how long each part took.
#   tools/test.sh            everything
#   TRAINSCOPE_NO_SANITIZE=1 tools/test.sh   skip the sanitizer build
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${JOBS:-$(nproc)}"
declare -a timings=()
part() {  # part <name> <command...>
  local name=$1 start=$SECONDS
  shift
  echo "==== $name"
  "$@"
  timings+=("$(printf '%-28s %5ds' "$name" $((SECONDS - start)))")
}
report() {
  echo "==== time per part"
  printf '%s\n' "${timings[@]}"
}
trap report EXIT

part "dependencies" tools/deps.sh
part "build" env BUILD_DIR=build tools/build.sh
part "tests" ctest --test-dir build --output-on-failure -j "$jobs"
if [[ "${TRAINSCOPE_NO_SANITIZE:-0}" != 1 ]]; then
  part "build (asan+ubsan, core)" env BUILD_DIR=build-asan tools/build.sh \
    -DTRAINSCOPE_SANITIZE=ON -DTRAINSCOPE_TORCH=OFF -DTRAINSCOPE_BUILD_BENCH=OFF
  part "tests (asan+ubsan, core)" env ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs"
fi
part "benchmarks" build/bin/trainscope_bench
