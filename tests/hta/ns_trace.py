#!/usr/bin/env python3
"""Turns a microsecond PyTorch-profiler trace into a nanosecond-resolution one.

  ns_trace.py SRC.json[.gz] DST.json[.gz] [--seed=N] [--style=kineto|short]

What a Kineto built with nanosecond timestamps writes: `"displayTimeUnit":
"ns"`, and every ts and dur in microseconds with a fractional part (Kineto's
ChromeTraceLogger formats them as "{us}.{ns:03}"). Each event's ts gets a
fraction of 0..999 ns and each dur a change of -499..+499 ns (never below 0),
drawn from a seeded generator, so the same seed gives the same file. The
timestamps keep their epoch magnitude (about 1.7e15 us), where a double's
spacing is 0.25 us: exactly what makes the parse and the sum ts + dur round.

--style=kineto (default) writes three decimals ("1712195495505772.800");
--style=short drops trailing zeros as Python's float repr does ("...772.8",
"2.75", and "5.0" for a whole number).
"""
import argparse
import gzip
import json
import random
import re

_PLACEHOLDER = re.compile(r'"@@ns(-?\d+)@@"')


def _decimal(ns, style):
    sign = "-" if ns < 0 else ""
    whole, frac = divmod(abs(ns), 1000)
    text = f"{whole}.{frac:03d}"
    if style == "short":
        text = text.rstrip("0")
        if text.endswith("."):
            text += "0"
    return sign + text


def convert(trace, seed=14, style="kineto"):
    """Returns the JSON text of `trace` (a parsed trace) with ns timestamps."""
    rng = random.Random(seed)
    trace = dict(trace)
    trace["displayTimeUnit"] = "ns"
    events = []
    for event in trace.get("traceEvents", []):
        event = dict(event)
        ts = event.get("ts")
        if isinstance(ts, (int, float)) and not isinstance(ts, bool):
            event["ts"] = f"@@ns{round(ts * 1000) + rng.randrange(1000)}@@"
        dur = event.get("dur")
        if isinstance(dur, (int, float)) and not isinstance(dur, bool):
            ns = max(0, round(dur * 1000) + rng.randrange(-499, 500))
            event["dur"] = f"@@ns{ns}@@"
        events.append(event)
    trace["traceEvents"] = events
    text = json.dumps(trace, indent=1)
    return _PLACEHOLDER.sub(lambda m: _decimal(int(m.group(1)), style), text)


def _open(path, mode):
    return gzip.open(path, mode + "t") if path.endswith(".gz") else open(path, mode)


def make(src, dst, seed=14, style="kineto"):
    with _open(src, "r") as f:
        trace = json.load(f)
    with _open(dst, "w") as f:
        f.write(convert(trace, seed, style))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src")
    parser.add_argument("dst")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--style", choices=("kineto", "short"), default="kineto")
    args = parser.parse_args()
    make(args.src, args.dst, args.seed, args.style)


if __name__ == "__main__":
    main()
