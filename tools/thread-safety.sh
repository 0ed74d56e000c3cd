#!/usr/bin/env bash
# Clang's thread-safety analysis (-Wthread-safety -Werror) over the rooms
# whose state is shared by threads under absl::Mutex (ABSL_GUARDED_BY and
# friends): a field read or written without its lock fails the suite.
# The compile lines come from $BUILD_DIR/compile_commands.json (the main
# build, with GCC); each is run with clang++ -fsyntax-only. First a probe
# that breaks the rule must fail, so the check is known to bite.
#   tools/thread-safety.sh          sdk/session
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"
cxx="${THREAD_SAFETY_CXX:-$(command -v clang++-16 || command -v clang++ || true)}"
if [[ -z "$cxx" ]]; then
  echo "thread-safety: no clang++ (tools/deps.sh installs clang-16)" >&2
  exit 1
fi
if [[ ! -f "$build/compile_commands.json" ]]; then
  echo "thread-safety: no $build/compile_commands.json (build first)" >&2
  exit 1
fi
flags=(-fsyntax-only -Wthread-safety -Wthread-safety-beta -Werror -Wno-unknown-warning-option)
# The include paths and definitions of each source's compile line.
python3 - "$build/compile_commands.json" "$PWD/sdk/session/" >"$build/thread-safety.lines" <<'PY'
import json, shlex, sys
entries, folder = json.load(open(sys.argv[1])), sys.argv[2]
for e in entries:
    if not e["file"].startswith(folder):
        continue
    words = shlex.split(e["command"]) if "command" in e else e["arguments"]
    keep = [w for w in words if w.startswith(("-I", "-D", "-isystem", "-std="))]
    print(shlex.join([e["file"]] + keep))
PY
mapfile -t lines <"$build/thread-safety.lines"
if ((${#lines[@]} == 0)); then
  echo "thread-safety: no sdk/session sources in $build/compile_commands.json" >&2
  exit 1
fi
read -ra probe_args <<<"${lines[0]}"
probe="$build/thread-safety-probe.cc"
cat >"$probe" <<'CC'
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
struct Probe {
  absl::Mutex mu;
  int guarded ABSL_GUARDED_BY(mu) = 0;
  int Unlocked() { return guarded; }  // must be refused
};
CC
if "$cxx" "${flags[@]}" "${probe_args[@]:1}" "$probe" 2>/dev/null; then
  echo "thread-safety: the probe that reads a guarded field unlocked compiled: the analysis is off" >&2
  exit 1
fi
# ThreadSanitizer cannot see what a lock of Debian's (uninstrumented)
# absl::Mutex orders: sdk/ takes one only through sdk/ground/locks.h, which
# tells it.
if grep -rnE 'absl::(MutexLock|ReaderMutexLock|WriterMutexLock)\b|(->|\.)(Lock|Unlock|WaitWithTimeout|Wait)\(' \
    --include='*.cc' --include='*.h' sdk | grep -v '^sdk/ground/locks.h:'; then
  echo "thread-safety: lock absl::Mutex through sdk/ground/locks.h (ThreadSanitizer sees it there)" >&2
  exit 1
fi
status=0
for line in "${lines[@]}"; do
  read -ra args <<<"$line"
  echo "thread-safety: ${args[0]#"$PWD"/}"
  "$cxx" "${flags[@]}" "${args[@]:1}" "${args[0]}" || status=1
done
exit "$status"
