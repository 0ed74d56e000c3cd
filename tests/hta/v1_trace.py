#!/usr/bin/env python3
"""Rewrites a PyTorch-profiler trace in the dialect PyTorch 1.x's profiler wrote.

  v1_trace.py SRC.json[.gz] DST.json[.gz]

What changes, as in the traces Kineto wrote for PyTorch 1.x:
- categories capitalised: kernel -> Kernel, gpu_memcpy -> Memcpy,
  gpu_memset -> Memset, cuda_runtime -> Runtime, cuda_driver -> Driver,
  cpu_op -> Operator; the others as they were;
- flows (ac2g) in category "async_gpu";
- no "cuda_sync" events (the 1.x profiler recorded none);
- "displayTimeUnit": "ms", and every ts in whole microseconds relative to
  the first one, which "baseTimeNanoseconds" holds (dur unchanged).

Device events keep their args (stream, correlation, device): what HTA and
trainscope read device work by. The same input gives the same file.
"""
import argparse
import gzip
import json

CATEGORIES = {
    "kernel": "Kernel",
    "gpu_memcpy": "Memcpy",
    "gpu_memset": "Memset",
    "cuda_runtime": "Runtime",
    "cuda_driver": "Driver",
    "cpu_op": "Operator",
    "ac2g": "async_gpu",
}


def convert(trace):
    """Returns `trace` (a parsed trace) in the 1.x dialect, as a new dict."""
    events = [e for e in trace.get("traceEvents", []) if e.get("cat") != "cuda_sync"]
    stamps = [e["ts"] for e in events
              if isinstance(e.get("ts"), (int, float)) and not isinstance(e.get("ts"), bool)]
    base_us = int(min(stamps)) if stamps else 0
    out_events = []
    for event in events:
        event = dict(event)
        cat = event.get("cat")
        if cat in CATEGORIES:
            event["cat"] = CATEGORIES[cat]
            if cat == "ac2g":
                event["name"] = "async_gpu"
        ts = event.get("ts")
        if isinstance(ts, (int, float)) and not isinstance(ts, bool):
            event["ts"] = int(round(ts)) - base_us
        out_events.append(event)
    out = {k: v for k, v in trace.items() if k != "traceEvents"}
    out["displayTimeUnit"] = "ms"
    out["baseTimeNanoseconds"] = base_us * 1000
    out["traceEvents"] = out_events
    return out


def _open(path, mode):
    return gzip.open(path, mode + "t") if path.endswith(".gz") else open(path, mode)


def make(src, dst):
    with _open(src, "r") as f:
        trace = json.load(f)
    with _open(dst, "w") as f:
        json.dump(convert(trace), f, indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src")
    parser.add_argument("dst")
    args = parser.parse_args()
    make(args.src, args.dst)


if __name__ == "__main__":
    main()
