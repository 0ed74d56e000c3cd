#!/usr/bin/env bash
# The whole test suite: sets up what is missing, builds everything, runs
# every test (ctest), then the core again under AddressSanitizer and UBSan
# and under ThreadSanitizer, every input reader under libFuzzer,
# the benchmarks' quick pass and a memory soak. Prints how long each part took.
#   tools/test.sh            everything
#   TRAINSCOPE_NO_SANITIZE=1 tools/test.sh   skip the sanitizer builds
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${JOBS:-$(nproc)}"
declare -a timings=()
passed=0
failed=0
logs=$(mktemp -d)
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
  rm -rf "$logs"
  echo "tests: $passed passed, $failed failed"
}
# ctest_counted <build dir>: runs a test tree, adds its counts to the totals.
ctest_counted() {
  local log="$logs/$(basename "$1").log" rc=0
  ctest --test-dir "$1" --output-on-failure -j "$jobs" 2>&1 | tee "$log" || rc=$?
  local line total bad
  line=$(grep -E "tests passed, [0-9]+ tests? failed out of [0-9]+" "$log" | tail -1)
  total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")
  bad=$(sed -E 's/.* ([0-9]+) tests? failed.*/\1/' <<<"$line")
  passed=$((passed + ${total:-0} - ${bad:-0}))
  failed=$((failed + ${bad:-0}))
  return $rc
}
trap report EXIT

part "dependencies" tools/deps.sh
# The rooms of sdk/ and their edges; fails on an include that the room's
# trainscope_room(... USES ...) in sdk/CMakeLists.txt does not name.
part "layers" python3 tools/layers.py
# Every C++ source in the style of .clang-format; names the lines that are not.
format_check() {
  if ! git rev-parse --git-dir >/dev/null 2>&1; then
    echo "format: not a git checkout; skipped"
    return 0
  fi
  git ls-files -z 'sdk/*.cc' 'sdk/*.h' 'include/*.h' 'tests/*.cc' 'tests/*.h' 'bench/*.cc' \
    'integrations/*.cc' 'integrations/*.h' 'samples/*.cc' 'samples/*.h' |
    xargs -0 clang-format --dry-run -Werror || return 1
  # No tracked file over 512 KiB: a benchmark's output committed by mistake
  # (it happened: 528 MB under a folder named --help) fails here.
  local big
  big=$(git ls-files -z | xargs -0 stat -c '%s %n' 2>/dev/null | awk '$1 > 524288')
  if [[ -n "$big" ]]; then
    echo "format: tracked files over 512 KiB:"
    echo "$big"
    return 1
  fi
}
part "format" format_check
# The pages' scripts (sdk/html/*.js) under Debian's eslint and
# sdk/html/.eslintrc.json; a warning fails too. Debian's eslint keeps its
# modules in /usr/share/nodejs, where a Node.js other than Debian's
# (NodeSource's) does not look unless NODE_PATH names it. The `unix`
# formatter: the default one needs chalk, which Debian's eslint does not
# depend on.
lint_pages() {
  NODE_PATH="/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}" \
    eslint --format unix --max-warnings 0 --report-unused-disable-directives sdk/html/*.js
}
part "lint (page scripts)" lint_pages
part "build" env BUILD_DIR=build tools/build.sh
part "cupti against the CUDA 12 headers" tools/cuda12-compile.sh
# Clang's thread-safety analysis over the session's locked state
# (absl::Mutex with ABSL_GUARDED_BY), from the build's compile lines.
part "thread-safety (clang, sdk/session)" env BUILD_DIR=build tools/thread-safety.sh
part "tests" ctest_counted build
# The fault tests' outcomes (ctest keeps a passing test's output in its log).
fault_tests() {
  grep -hE "^(kill-during-save|resume equivalence|corruption|disk full|SIGTERM mid-run|multi-rank)" \
    build/Testing/Temporary/LastTest.log || echo "no fault-test lines in the log"
}
part "fault tests (outcomes)" fault_tests
if [[ "${TRAINSCOPE_NO_SANITIZE:-0}" != 1 ]]; then
  part "build (asan+ubsan, core)" env BUILD_DIR=build-asan tools/build.sh \
    -DTRAINSCOPE_SANITIZE=ON -DTRAINSCOPE_TORCH=OFF -DTRAINSCOPE_BUILD_BENCH=OFF
  export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  part "tests (asan+ubsan, core)" ctest_counted build-asan
  unset ASAN_OPTIONS UBSAN_OPTIONS
  # The threads of the core (the parallel trace reader, async and sharded
  # checkpoints, the recorder's registration) under ThreadSanitizer.
  part "build (tsan, core)" env BUILD_DIR=build-tsan tools/build.sh \
    -DTRAINSCOPE_SANITIZE=thread -DTRAINSCOPE_TORCH=OFF -DTRAINSCOPE_BUILD_BENCH=OFF
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
  part "tests (tsan, core)" ctest_counted build-tsan
  unset TSAN_OPTIONS
  # Every reader of outside input under libFuzzer (Clang + ASan), 10 s each
  # from its seed corpus: a finding fails the suite (docs/fuzzing.md).
  part "fuzz (6 readers, 10 s each)" env FUZZ_SECONDS=10 tools/fuzz.sh
fi
part "benchmarks" build/bin/trainscope_bench
part "checkpoint benchmark" env TMPDIR="$PWD/build" build/bin/checkpoint_bench
# The experiment engine's own cost per trial, beside a 10 s trial (a few
# seconds; reports, never fails).
part "tune benchmark" build/bin/tune_bench
# `trainscope ranks` in memory independent of the run's length: 3 ranks'
# steps files of 10^5 and 10^6 rows, the report's peak RSS of each (about
# 15 s; reports, never fails; --steps=10000000 for the 10^7 figure).
part "ranks benchmark (3 x 10^6 steps)" bash -c 'rm -rf build/ranks-out && build/bin/ranks_bench build/ranks-out --steps=1000000 && rm -rf build/ranks-out'
# A long run in constant memory: 10^7 events paced at 500,000/s,
# its peak RSS and drops after 10^6 and 10^7 (about 20 s; reports, never fails).
part "soak (10^7 events)" bash -c 'rm -rf build/soak-out && build/bin/soak build/soak-out --events=10000000 --rate=500000 && rm -rf build/soak-out'
# The drain's capacity (events per CPU second, beside the producer's rate)
# and 2 M events/s sustained with the default ring (about 20 s; reports,
# never fails).
part "drain benchmark" bash -c 'rm -rf build/drain-out && build/bin/drain_bench build/drain-out --runs=3 --seconds=3 && rm -rf build/drain-out'
