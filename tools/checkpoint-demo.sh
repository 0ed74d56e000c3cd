#!/usr/bin/env bash
# Kill-and-resume, end to end: runs samples/checkpoint_resume once without
# interruption, then again SIGKILLed twice at random moments and restarted
# until it finishes; compares every step's loss with the uninterrupted run
# and prints the measured save cost, restart delay and recomputation.
#   tools/checkpoint-demo.sh [--async]      (builds first if needed)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${BUILD_DIR:-build}"
[[ -x "$build_dir/bin/checkpoint_resume" ]] || BUILD_DIR="$build_dir" tools/build.sh >/dev/null
bin="$build_dir/bin/checkpoint_resume"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
flags=(--steps=4000 --save_every=200 "$@")
"$bin" "${flags[@]}" --dir="$work/whole" >"$work/whole.out" 2>/dev/null
for attempt in 1 2 3 4 5 6; do
  "$bin" "${flags[@]}" --dir="$work/killed" >>"$work/killed.out" 2>>"$work/killed.err" &
  pid=$!
  if ((attempt <= 2)); then
    # SIGKILL once it has printed about another 1,000-2,000 step lines.
    target=$(( $(wc -l <"$work/killed.out") + 1000 + RANDOM % 1000 ))
    while (( $(wc -l <"$work/killed.out") < target )) && kill -0 "$pid" 2>/dev/null; do
      sleep 0.01
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    echo "attempt $attempt: SIGKILLed after $(wc -l <"$work/killed.out") step lines so far"
  else
    wait "$pid" && { echo "attempt $attempt: finished"; break; }
  fi
done
grep -E "resumed from|restart delay|saves,|^checkpoints:" "$work/killed.err" || true
# Every line printed (re-done steps included) must match the uninterrupted run.
if sort -u "$work/killed.out" | comm -23 - <(sort -u "$work/whole.out") | grep -q .; then
  echo "MISMATCH: some step's loss differs from the uninterrupted run"; exit 1
fi
echo "all $(sort -u "$work/killed.out" | wc -l) distinct step lines match the uninterrupted run"
echo "the last run's report.checkpoint:"
python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["checkpoint"], indent=1))' \
  "$work/killed/report/report.json"
