#!/usr/bin/env python3
"""Runs Holistic Trace Analysis itself on the shared traces and compares its
temporal and idle-time breakdowns with `trainscope analyze --format=json`.

  compare_with_hta.py TRAINSCOPE_CLI KINETO_DIR

The same again on nanosecond-resolution copies of those traces (ns_trace.py:
"displayTimeUnit": "ns", every ts and dur with a fraction of a microsecond,
epoch-sized timestamps), where HTA's float64 reading and rounding of ts and
ts + dur decide the answer; and on copies in PyTorch 1.x's dialect
(v1_trace.py: capitalised categories, async_gpu flows, relative times
beside baseTimeNanoseconds), which must read as the originals do.

Exit 0: every value agrees within 0.5% (or 1 us near zero), and on the
nanosecond copies idle time, kernel time and every idle row within 2 us; 1:
a mismatch;
77: HTA is not installed (ctest reports the test as skipped). Also prints
where the installed HTA (a PyPI release) differs from expected-hta.json,
whose numbers come from HTA's main branch.
"""
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

try:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import ns_trace
    import v1_trace
    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)
    from hta.trace_analysis import TraceAnalysis
    from importlib.metadata import PackageNotFoundError, version
except ImportError as error:
    print(f"HTA not installed ({error}): pip install traceinsight==0.6.0")
    sys.exit(77)


def hta_version():
    """The installed HTA: PyPI's traceinsight from 0.6.0, HolisticTraceAnalysis before."""
    for name in ("traceinsight", "HolisticTraceAnalysis"):
        try:
            return f"{name} {version(name)}", version(name)
        except PackageNotFoundError:
            pass
    return "HTA (version unknown)", ""


def near(got, want):
    return abs(got - want) <= max(1.0, 0.005 * abs(want))


def within_2us(got, want):
    return abs(got - want) <= 2.0


def run_hta(path):
    directory = tempfile.mkdtemp(prefix="trainscope-hta-")
    try:
        shutil.copy(path, directory)
        analysis = TraceAnalysis(trace_dir=directory)
        rank = list(analysis.t.traces.keys())[0]
        temporal = analysis.get_temporal_breakdown(visualize=False).iloc[0]
        idle, _ = analysis.get_idle_time_breakdown(ranks=[rank], visualize=False)
        return {
            "temporal_breakdown_us": {
                k: float(temporal[k])
                for k in ("idle_time(us)", "compute_time(us)", "non_compute_time(us)",
                          "kernel_time(us)")
            },
            "idle_time_breakdown_us": {
                (int(r.stream), r.idle_category): float(r.idle_time) for r in idle.itertuples()
            },
        }
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def run_trainscope(cli, path):
    out = subprocess.run([cli, "analyze", "--format=json", path], check=True,
                         capture_output=True, text=True).stdout
    hta = json.loads(out)["hta"]
    return {
        "temporal_breakdown_us": hta["temporal_breakdown_us"],
        "idle_time_breakdown_us": {(r["stream"], r["category"]): r["idle_time"]
                                   for r in hta["idle_time_breakdown_us"]},
    }


def compare(label, a, b, report, exact_idle=False):
    """Counts the values of b that are not near a's. exact_idle: idle time,
    kernel time and every idle row within 2 us, not 0.5%."""
    bad = 0
    for key, want in a["temporal_breakdown_us"].items():
        got = b["temporal_breakdown_us"][key]
        ok = (within_2us if exact_idle and key in ("idle_time(us)", "kernel_time(us)") else near)(
            got, want)
        if not ok:
            bad += 1
        if got != want:
            report.append(f"  {label}: {key}: {want} vs {got} ({'OK' if ok else 'MISMATCH'})")
    for key in sorted(set(a["idle_time_breakdown_us"]) | set(b["idle_time_breakdown_us"])):
        want = a["idle_time_breakdown_us"].get(key)
        got = b["idle_time_breakdown_us"].get(key)
        if want is None or got is None or not (within_2us if exact_idle else near)(got, want):
            bad += 1
            report.append(f"  {label}: stream {key[0]} {key[1]}: {want} vs {got} MISMATCH")
        elif got != want:
            report.append(f"  {label}: stream {key[0]} {key[1]}: {want} vs {got} (OK)")
    return bad


def main():
    cli, kineto_dir = sys.argv[1], sys.argv[2]
    with open(os.path.join(kineto_dir, "expected-hta.json")) as f:
        expected = json.load(f)
    label, _ = hta_version()
    print(label)
    mismatches = 0
    for name, entry in expected.items():
        path = os.path.join(kineto_dir, name)
        hta = run_hta(path)
        ours = run_trainscope(cli, path)
        main_branch = {
            "temporal_breakdown_us": entry["temporal_breakdown_us"],
            "idle_time_breakdown_us": {(r["stream"], r["category"]): r["idle_time"]
                                       for r in entry["idle_time_breakdown_us"]},
        }
        notes = []
        bad = compare("installed HTA vs trainscope", hta, ours, notes)
        compare("installed HTA vs HTA main (expected file)", main_branch, hta, notes)
        mismatches += bad
        print(f"{name}: {'agrees' if bad == 0 else f'{bad} MISMATCH(ES)'} with the installed HTA")
        for line in notes:
            print(line)
    # Nanosecond copies: every shared trace as Kineto writes ns ("{us}.{ns:03}"),
    # and one with trailing zeros dropped ("...772.8", as Python writes it).
    variants = [(name, "kineto") for name in expected] + [("alexnet.json.gz", "short")]
    for name, style in variants:
        with tempfile.TemporaryDirectory(prefix="trainscope-ns-") as directory:
            path = os.path.join(directory, f"ns-{style}-{name}")
            ns_trace.make(os.path.join(kineto_dir, name), path, seed=14, style=style)
            hta = run_hta(path)
            ours = run_trainscope(cli, path)
        notes = []
        bad = compare("installed HTA vs trainscope", hta, ours, notes, exact_idle=True)
        mismatches += bad
        label = f"{name} with ns timestamps ({style})"
        print(f"{label}: {'agrees' if bad == 0 else f'{bad} MISMATCH(ES)'} with the installed HTA")
        for line in notes:
            print(line)
    # PyTorch 1.x's dialect: the same device work under the old names.
    for name in expected:
        with tempfile.TemporaryDirectory(prefix="trainscope-v1-") as directory:
            path = os.path.join(directory, f"v1-{name}")
            v1_trace.make(os.path.join(kineto_dir, name), path)
            hta = run_hta(path)
            ours = run_trainscope(cli, path)
        notes = []
        bad = compare("installed HTA vs trainscope", hta, ours, notes)
        mismatches += bad
        label = f"{name} in PyTorch 1.x's dialect"
        print(f"{label}: {'agrees' if bad == 0 else f'{bad} MISMATCH(ES)'} with the installed HTA")
        for line in notes:
            print(line)
    # Where trainscope differs on purpose: a CPU operator whose args carry a
    # stream (Triton's launcher does) is device time to HTA's temporal
    # breakdown (every row with a stream), not to trainscope.
    launcher = {"schemaVersion": 1, "distributedInfo": {"rank": 0}, "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "triton_poi_fused_add_0", "pid": 1, "tid": 1,
         "ts": 100, "dur": 95.8, "args": {"stream": 7, "grid": [1, 1, 1]}},
        {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 1, "tid": 1,
         "ts": 190, "dur": 4, "args": {"correlation": 11}},
        {"ph": "X", "cat": "kernel", "name": "triton_poi_fused_add_0", "pid": 0, "tid": 7,
         "ts": 194, "dur": 1.76, "args": {"stream": 7, "correlation": 11, "device": 0}}]}
    with tempfile.TemporaryDirectory(prefix="trainscope-launcher-") as directory:
        path = os.path.join(directory, "launcher.json")
        with open(path, "w") as f:
            json.dump(launcher, f)
        hta = run_hta(path)["temporal_breakdown_us"]["kernel_time(us)"]
        ours = run_trainscope(cli, path)["temporal_breakdown_us"]["kernel_time(us)"]
    print(f"a 1.76 us kernel launched by a 95.8 us Triton launcher op whose args carry a stream: "
          f"kernel_time {hta:g} us by HTA (it counts the operator), {ours:g} us by trainscope "
          "(device rows only; docs/gap-analysis.md, where trainscope differs on purpose)")
    if not (hta > 90 and abs(ours - 1.76) < 0.01):
        print("  MISMATCH: expected HTA above 90 us and trainscope 1.76 us")
        mismatches += 1
    print(f"{'all values agree' if mismatches == 0 else f'{mismatches} mismatch(es)'} within "
          "0.5% (idle on the ns copies within 2 us)")
    return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
