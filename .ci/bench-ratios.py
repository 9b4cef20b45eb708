#!/usr/bin/env python3
"""Throughput ratios against the `memcpy` baseline measured in the same criterion group.

    .ci/bench-ratios.py [--check] [CRITERION_DIR]

Reads CRITERION_DIR/<group>/<function>/new/{estimates,benchmark}.json (default:
${CARGO_TARGET_DIR:-target}/criterion), and prints, for every group that has a `memcpy` function,
each function's throughput (bytes / mean time) divided by memcpy's, then the RELATIVE pairs (one
function against another in the same group). With --check, fails (exit 1) when a ratio in
THRESHOLDS or RELATIVE is below its minimum, or when a checked result is missing.
"""
import json
import os
import sys

# (group, function) -> minimum throughput ratio to memcpy; "a|b" checks the first of a, b that ran
# (ISA-specific ids). Regression guards with headroom for a noisy shared 2-core machine: half of
# what the code measures on a 2-core AVX-512BW VM (docs/PERFORMANCE.md), the design target beside
# it where the code misses it (the gap is reported, not hidden).
# `ssegate_guarded` is the path that ships (ResumableStream: decode, exact gate, JSON-RPC peek,
# content hash, replay window).
THRESHOLDS = {
    # measured 0.23 (310-317 us) with memcpy at 71-85 us; target >= 0.5. The ratio moves with
    # memcpy's own speed on this shared host: 0.55-0.66 in eight runs of one session where memcpy
    # took 292-433 us (guarded 456-722 us), so the bar stays at half the quiet host's figure
    ("one_4mib_event_16k_chunks", "ssegate_guarded"): 0.115,
    # the same with the guard's gate capped at AVX2 (guard::Config::max_isa): the CPUs without
    # AVX-512; measured 0.18-0.20 (386-412 us); target >= 0.4. Where AVX2 is missing the row is not
    # run, and the default row is held to this bar instead.
    ("one_4mib_event_16k_chunks", "ssegate_guarded_avx2|ssegate_guarded"): 0.09,
    ("dense_4mib_event_16k_chunks", "ssegate_guarded"): 0.012,  # measured 0.024-0.034; target >= 0.15
    ("one_4mib_event_64b_chunks", "ssegate_guarded"): 0.011,  # measured 0.022-0.032 (noisy)
    # target <= 250 ns/event (~0.028 x memcpy here); measured 238-257 ns/event (0.026-0.029)
    ("100k_events_200b_16k_chunks", "ssegate_guarded"): 0.014,
    ("one_4mib_event_16k_chunks", "ssegate"): 0.6,  # decoder alone; measured 1.25-1.9
    ("dense_4mib_event_16k_chunks", "ssegate"): 0.6,  # measured 1.24-1.8 (one data line)
    ("one_4mib_event_64b_chunks", "ssegate"): 0.025,  # measured 0.052-0.053 (dropping the chunks: 0.08-0.10)
    ("100k_events_200b_16k_chunks", "ssegate"): 0.055,  # measured 0.10-0.13
    ("json_prose_4mib", "ssegate_gate"): 0.14,  # exact gate; measured 0.29-0.32 (AVX-512BW)
    ("json_dense_4mib", "ssegate_gate"): 0.014,  # exact gate; measured 0.029-0.032
    ("prose_4MiB", "gate_exact/avx512|gate_exact/avx2|gate_exact/portable"): 0.12,  # 0.27-0.31 / 0.24-0.26 (AVX2 sets the bar)
    ("dense_4MiB", "gate_exact/avx512|gate_exact/avx2|gate_exact/portable"): 0.012,  # 0.026-0.028 / 0.020-0.026
    ("prose_4MiB", "gate_fast/avx512|gate_fast/avx2|gate_fast/portable"): 0.17,  # 0.36-0.47 / 0.34-0.40
    ("dense_4MiB", "gate_fast/avx512|gate_fast/avx2|gate_fast/portable"): 0.06,  # 0.13-0.16 / 0.12-0.14
}

# (group, function, other) -> minimum of function's throughput / other's, in the same run; "a|b" as
# `other` is the fastest of them (the best peer). Half of what was measured, the target beside it.
RELATIVE = {
    # decode alone vs sse-stream 0.3: target >= 1.5; measured 1.19-1.60 (the peer's speed varies on
    # this host); half, 0.6
    ("100k_events_200b_16k_chunks", "ssegate", "sse-stream_0.3"): 0.6,
    # decode alone, 64-byte chunks, vs the best peer: target >= 1.25; measured 1.20-1.31
    # (allocator-bound and the noisiest row)
    ("one_4mib_event_64b_chunks", "ssegate", "sseer|sse-stream_0.3"): 0.6,
    # guard + the application's parse vs the parse alone: target time <= 1.15 x (>= 0.87); measured
    # 0.87-0.99
    ("one_4mib_event_16k_chunks", "ssegate_guarded+simd_json", "ssegate+simd_json"): 0.47,
    # delivery after the last chunk of a 4 MiB result, gate ahead vs gate at dispatch: measured 133-260 x
    ("latency_after_last_chunk_4mib", "gate_ahead", "gate_at_dispatch"): 50,
    # decode + guard vs decode + simd-json parse: target time <= 0.3 x (>= 3.3); measured 1.13-1.43
    ("100k_events_200b_16k_chunks", "ssegate_guarded", "ssegate+simd_json"): 0.65,
    # small events, guard + the application's parse vs the parse alone: target time <= 1.08 x
    # (>= 0.926); measured 0.58-0.66 (1.52-1.72 x) in eight runs of one session. The target is
    # below the gate's floor: the exact gate alone costs 74-83 ns per event, 0.17-0.19 of the
    # parse path's 425-439 ns (docs/PERFORMANCE.md); bar below the measured spread
    ("100k_events_200b_16k_chunks", "ssegate_guarded+simd_json", "ssegate+simd_json"): 0.5,
    # small events in 64-byte chunks, decode alone vs the best peer (sse-stream 0.3 here): target
    # >= 1.15; measured 0.86-0.90 (before the decoder kept its copy buffer: 0.59-0.68); bar below
    # the spread, the peer's own speed moving most
    ("10k_events_200b_64b_chunks", "ssegate", "sseer|sse-stream_0.3"): 0.7,
    # the exact gate vs the fastest validator with no value built (serde_json into IgnoredAny,
    # simd-json's tape): measured 1.79-2.05 (dense; serde_json) and 3.88-4.09 (prose; serde_json)
    ("json_dense_4mib", "ssegate_gate", "serde_json_validate|simd_json_tape"): 0.9,
    ("json_prose_4mib", "ssegate_gate", "serde_json_validate|simd_json_tape"): 2.0,
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
            t = b.get("throughput") or {}
            tp = t.get("Bytes") or t.get("BytesDecimal") or t.get("Elements")
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
    print()
    print("%-30s %-60s %8s %8s" % ("group", "function / other", "ratio", "min"))
    for (g, fn, others), lo in RELATIVE.items():
        mine = res.get((g, fn))
        theirs = [res[(g, o)] for o in others.split("|") if (g, o) in res]
        if not mine or not theirs:
            failed.append("%s: %s vs %s: no result in %s" % (g, fn, others, root))
            continue
        ratio = mine[0] / max(t[0] for t in theirs)
        mark = "  FAIL" if ratio < lo else ""
        if mark:
            failed.append("%s: %s / %s %.3f < %.3f" % (g, fn, others, ratio, lo))
        print("%-30s %-60s %8.3f %8s%s" % (g, fn + " / " + others, ratio, lo, mark))
    if check:
        for (g, fns) in THRESHOLDS:
            if chosen(res, g, fns) is None or (g, "memcpy") not in res:
                failed.append("%s/%s: no result in %s" % (g, fns, root))
        if failed:
            print("bench ratios below threshold:\n  " + "\n  ".join(failed), file=sys.stderr)
            sys.exit(1)
        print("bench ratios: all %d thresholds met" % (len(THRESHOLDS) + len(RELATIVE)))


main()
