#!/usr/bin/env bash
# Compiles the CUPTI collector (sdk/cupti) and its test against the CUDA 12.8
# headers that tools/deps.sh unpacks into .cache/cuda12/include, with the
# flags of the main build (BUILD_DIR, default build/, which compiles them
# against the toolkit's CUDA 13 headers). Syntax and types only: nothing is
# linked. Fails if any file does not compile; skips, saying so, when the
# headers or the build's compile_commands.json are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${BUILD_DIR:-build}"
headers="$PWD/.cache/cuda12/include"
if [[ ! -f "$headers/cupti_activity.h" ]]; then
  echo "cuda12-compile: SKIPPED: no CUDA 12 headers in $headers (tools/deps.sh downloads them)"
  exit 0
fi
if [[ ! -f "$build_dir/compile_commands.json" ]]; then
  echo "cuda12-compile: SKIPPED: no $build_dir/compile_commands.json"
  exit 0
fi
python3 - "$build_dir/compile_commands.json" "$headers" <<'PY'
import json, re, shlex, subprocess, sys
commands, headers = sys.argv[1], sys.argv[2]
api = re.search(r"#define CUPTI_API_VERSION (\d+)", open(headers + "/cupti_version.h").read()).group(1)
wanted = [e for e in json.load(open(commands))
          if re.search(r"/sdk/cupti/[a-z_]+\.cc$|/tests/cupti_test\.cc$", e["file"])
          and "collector_stub" not in e["file"]]
if not wanted:
    print("cuda12-compile: FAILED: the build compiles no sdk/cupti sources (no CUPTI headers?)")
    sys.exit(1)
failed = 0
for e in wanted:
    args = shlex.split(e["command"])
    out, i = [], 0
    while i < len(args):
        a = args[i]
        if a in ("-o", "-c"):
            i += 2
            continue
        if a == "-isystem" and "cuda" in args[i + 1]:
            out += ["-isystem", headers]
            i += 2
            continue
        out.append(a)
        i += 1
    out += ["-fsyntax-only", "-c", e["file"]]
    result = subprocess.run(out, cwd=e["directory"], capture_output=True, text=True)
    name = e["file"].split("/main/")[-1] if "/main/" in e["file"] else e["file"]
    if result.returncode != 0:
        failed += 1
        print(f"cuda12-compile: {e['file']}: FAILED\n{result.stderr[-4000:]}")
print(f"cuda12-compile: {len(wanted) - failed} of {len(wanted)} files compile against the "
      f"CUDA 12.8 headers (CUPTI API version {api})")
sys.exit(1 if failed else 0)
PY
