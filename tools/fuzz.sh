#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with Clang into build-fuzz/ and
# runs each from a copy of its seed corpus for FUZZ_SECONDS (default 10).
# A crash, a leak, a sanitizer report or a timeout stops that target and
# fails the script; the input that did it is left in build-fuzz/findings/
# (make it a regression test). docs/fuzzing.md.
#   tools/fuzz.sh [target...]      default: every target
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-10}"
jobs="${JOBS:-$(nproc)}"
cxx="${FUZZ_CXX:-$(command -v clang++-16 || command -v clang++ || true)}"
if [[ -z "$cxx" ]]; then
  echo "fuzz: no clang++ (tools/deps.sh installs clang-16)" >&2
  exit 1
fi
build=build-fuzz
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
    -DTRAINSCOPE_FUZZ=ON -DTRAINSCOPE_TORCH=OFF -DTRAINSCOPE_CUDA=OFF \
    -DTRAINSCOPE_BUILD_TESTS=OFF -DTRAINSCOPE_BUILD_BENCH=OFF -DTRAINSCOPE_BUILD_SAMPLES=OFF \
    >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
fi
targets=("$@")
((${#targets[@]})) || targets=(trace trace_gzip report steps experiment manifest)
cmake --build "$build" -j "$jobs" --target "${targets[@]/%/_fuzz}"
mkdir -p "$build/findings"
# The targets write their input to a file under TMPDIR: keep it in here.
rm -rf "$build/tmp" && mkdir -p "$build/tmp"
export TMPDIR="$PWD/$build/tmp"
status=0
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  rm -rf "$corpus" && mkdir -p "$corpus"
  cp tests/fuzz/corpus/"$t"/* "$corpus"/
  log="$build/$t.log"
  # -rss_limit_mb: a reader's memory is bounded by its input; 2 GB is far
  # past any seed. -timeout: one input in more than 10 s is a hang.
  if "$build/fuzz/${t}_fuzz" "$corpus" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -artifact_prefix="$build/findings/$t-" -print_final_stats=1 \
      >"$log" 2>&1; then
    echo "fuzz: $t: $(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}') inputs in ${seconds} s, no finding"
  else
    echo "fuzz: $t: FINDING (see $log):"
    grep -E "ERROR|==[0-9]+==|Test unit written" "$log" | head -5 || tail -5 "$log"
    status=1
  fi
done
exit $status
