#!/usr/bin/env bash
# The main job: sets up what is missing, builds, and runs the instrumented
# train_mlp sample. It prints the trainscope summary and writes
# out/train_mlp/trace.json, report.json, steps.jsonl and report.html (with
# --world_size=N: each rank's files, -rank<R>, and ranks.html).
#   tools/run.sh [train_mlp flags, e.g. --steps=300 --loader_delay_ms=5]
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
BUILD_DIR="${BUILD_DIR:-build}" tools/build.sh >/dev/null
build_dir="${BUILD_DIR:-build}"
if [[ ! -x "$build_dir/bin/train_mlp" ]]; then
  echo "run: train_mlp was not built: LibTorch not found (see $build_dir.configure.log)" >&2
  exit 1
fi
# A fresh directory: a distributed run's report-rank<R>.json must not sit
# beside a single run's older report.json.
rm -rf out/train_mlp
"$build_dir/bin/train_mlp" --out=out/train_mlp "$@"
if [[ -f out/train_mlp/report.json ]]; then
  suffix=""
else
  suffix="-rank0"  # distributed: rank 0's files (the others beside them)
fi
echo "open out/train_mlp/trace$suffix.json in https://ui.perfetto.dev; again: $build_dir/bin/trainscope summary out/train_mlp/report$suffix.json"
# The same as one page for a browser (docs/html-report.md): the run's, or
# for a distributed run the ranks' (ranks.html; each rank's own report too
# with `trainscope html out/train_mlp/report-rank<R>.json`).
page=out/train_mlp/report.html
[[ -n "$suffix" ]] && page=out/train_mlp/ranks.html
if "$build_dir/bin/trainscope" html out/train_mlp >/dev/null; then
  echo "the run as a page: $page ($build_dir/bin/trainscope html out/train_mlp)"
else
  echo "run: trainscope html did not write $page (above: why)"
fi
