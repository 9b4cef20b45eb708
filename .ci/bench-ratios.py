#!/usr/bin/env python3
"""Throughput ratios against the `memcpy` baseline measured in the same criterion group.

    .ci/bench-ratios.py [--check] [CRITERION_DIR]

Reads CRITERION_DIR/<group>/<function>/new/{estimates,benchmark}.json (default:
${CARGO_TARGET_DIR:-target}/criterion), and prints, for every group that has a `memcpy` function,
each function's throughput (bytes / mean time) divided by memcpy's. With --check, fails (exit 1)
when a ratio in THRESHOLDS is below its minimum, or when a thresholded result is missing.
"""
import json
import os
import sys

# (group, function) -> minimum throughput ratio to memcpy; "a|b" checks the first of a, b that ran
# (ISA-specific ids). Regression guards with headroom for a noisy shared 2-core machine: half of
# DESIGN.md's target where the code meets it, else about half of what this machine measured
# (the gap to the target is reported, not hidden: see the comments).
THRESHOLDS = {
    ("one_4mib_event_16k_chunks", "ssegate"): 0.5,  # target >= 1.0; measured ~1.9
    ("dense_4mib_event_16k_chunks", "ssegate"): 0.5,  # measured ~1.9 (one data line)
    ("one_4mib_event_64b_chunks", "ssegate"): 0.02,  # target >= 0.35; measured ~0.04-0.07
    ("100k_events_200b_16k_chunks", "ssegate"): 0.025,  # target <= 40 ns/event; measured ~0.06-0.07
    ("json_prose_4mib", "ssegate_gate"): 0.025,  # exact gate; target >= 0.35; measured ~0.06
    ("json_dense_4mib", "ssegate_gate"): 0.004,  # exact gate; target >= 0.20; measured ~0.01
    ("prose_4MiB", "gate_fast/avx512|gate_fast/avx2|gate_fast/portable"): 0.15,  # measured ~0.37
    ("dense_4MiB", "gate_fast/avx512|gate_fast/avx2|gate_fast/portable"): 0.05,  # measured ~0.13
}


def load(path):
    with open(path) as f:
        return json.load(f)


def results(root):
    out = {}
    if not os.path.isdir(root):
        return out
    for group in sorted(os.listdir(root)):
        gdir = os.path.join(root, group)
        if not os.path.isdir(gdir) or group == "report":
            continue
        for fn in sorted(os.listdir(gdir)):
            new = os.path.join(gdir, fn, "new")
            est, bench = os.path.join(new, "estimates.json"), os.path.join(new, "benchmark.json")
            if not (os.path.exists(est) and os.path.exists(bench)):
                continue
            mean_ns = load(est)["mean"]["point_estimate"]
            b = load(bench)
            tp = (b.get("throughput") or {}).get("Bytes") or (b.get("throughput") or {}).get("BytesDecimal")
            if tp:
                # Criterion's directory names are sanitised; the ids in benchmark.json are not.
                out[(b.get("group_id", group), b.get("function_id") or fn)] = (tp / mean_ns, mean_ns, tp)
    return out


def chosen(res, group, fns):
    """The first function of the `a|b|c` alternatives that has a result."""
    return next((f for f in fns.split("|") if (group, f) in res), None)


def threshold_for(res, group, fn):
    for (g, fns), lo in THRESHOLDS.items():
        if g == group and chosen(res, g, fns) == fn:
            return lo
    return None


def main():
    args = [a for a in sys.argv[1:] if a != "--check"]
    check = "--check" in sys.argv[1:]
    root = args[0] if args else os.path.join(os.environ.get("CARGO_TARGET_DIR") or "target", "criterion")
    res = results(root)
    groups = sorted({g for g, _ in res})
    failed = []
    print("%-30s %-38s %12s %10s %8s" % ("group", "function", "GB/s", "x memcpy", "min"))
    for g in groups:
        base = res.get((g, "memcpy"))
        if not base:
            continue
        for (gg, fn), (thr, _, _) in sorted(res.items(), key=lambda kv: -kv[1][0]):
            if gg != g:
                continue
            ratio = thr / base[0]
            lo = threshold_for(res, g, fn)
            mark = ""
            if lo is not None and ratio < lo:
                mark = "  FAIL"
                failed.append("%s/%s %.3f < %.3f" % (g, fn, ratio, lo))
            print("%-30s %-38s %12.3f %10.4f %8s%s" % (g, fn, thr, ratio, "" if lo is None else lo, mark))
    if check:
        for (g, fns) in THRESHOLDS:
            if chosen(res, g, fns) is None or (g, "memcpy") not in res:
                failed.append("%s/%s: no result in %s" % (g, fns, root))
        if failed:
            print("bench ratios below threshold:\n  " + "\n  ".join(failed), file=sys.stderr)
            sys.exit(1)
        print("bench ratios: all %d thresholds met" % len(THRESHOLDS))


main()
