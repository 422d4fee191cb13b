#!/usr/bin/env python3
"""The GPU speed goals, measured: each goal of docs/results.md's goal tables with the values one run's JSON gives
and whether they meet it. Reads what `benchmarks/cuda/bench_cuda.py --out DIR` and `benchmarks/bench_decode_step.py
--out DIR` wrote (the step with float32 scales, the default, and optionally again with `--scales bfloat16`); prints
a Markdown table over the shapes and key counts the run timed. A goal whose timings the records lack (a `--quick` or
`--only` run, a cut-off one) gets a row that says what is missing. Reads JSON only: runs anywhere, on any machine's
results.

    python3 benchmarks/goals.py DIR/bench_cuda.json DIR/bench_decode_step.json [BF16DIR/bench_decode_step.json]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


class Missing(Exception):
    """A timing a goal needs is not in the records."""


def shape_name(k, n):
    return f"{k}²" if k == n else f"{k} x {n}"


def op_of(record):
    """A timing's op as the goals name it: qgemv by its code width ("qgemv4", "qgemv8"), the others as recorded."""
    return f"qgemv{record['bits']}" if record["op"] == "qgemv" else record["op"]


def op_name(op):
    return f"{op[5:]}-bit qgemv" if op.startswith("qgemv") else op


class Bench:
    """bench_cuda.json's timings by (op, shape, rows)."""

    def __init__(self, data):
        self.copy = data["copy_bytes_per_s"]
        self.by = {}
        for r in data["results"]:
            shape = (r["keys"],) if r["op"] == "sdpa" else (r["k"], r["n"])
            self.by[op_of(r), shape, r.get("q_len", r.get("m"))] = r
        self.ops = {op for op, _, _ in self.by}
        # The shapes and key counts the run timed (bench_cuda.py's, fewer with --quick), smallest first.
        self.shapes = sorted({s for op, s, _ in self.by if op != "sdpa"}, key=lambda s: (s[0] * s[1], s))
        self.keys = sorted(s[0] for op, s, m in self.by if op == "sdpa" and m == 1)
        self.large = self.shapes[-2:]  # the goals' "two larger shapes"

    def median(self, op, shape, m, key="canonical"):
        entry = self.by.get((op, shape, m), {}).get(key)
        if not entry:
            if op not in self.ops:
                raise Missing(f"the run timed no {op_name(op)}")
            where, units = (f"{shape[0]} keys", ("query", "queries")) if op == "sdpa" else \
                (shape_name(*shape), ("row", "rows"))
            raise Missing(f"{op_name(op)} {where} at {m} {units[m > 1]}{'' if key == 'canonical' else ', ' + key}")
        return entry["median"]

    def each(self, items):
        """The shapes or key counts a goal runs over; none in the run is a missing timing."""
        if not items:
            raise Missing("no timings of this op in the run")
        return items

    def ratio(self, op, shape, m, over=1):
        return self.median(op, shape, m) / self.median(op, shape, over)

    def of_copy(self, op, shape, m=1):
        t = self.median(op, shape, m)
        return self.by[op, shape, m]["canonical_bytes"] / t / self.copy

    def of_floor(self, op, shape, m=1):
        return self.median(op, shape, m, "read_floor") / self.median(op, shape, m)

    def vs_peer(self, op, shape, m):
        return self.median(op, shape, m) / self.median(op, shape, m, "peer")


def listing(values, fmt):
    return " / ".join(fmt.format(v) for v in values)


def shape_names(shapes):
    return listing([shape_name(*x) for x in shapes], "{}")


def key_names(keys):
    return listing([f"{k // 1024}K" for k in keys], "{}")


def span(values):
    lo, hi = min(values), max(values)
    return f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}"


# Each goal: its wording, and a function of the records giving (measured, met).
def qgemv_floor(op):
    def measure(b):
        floor = [b.of_floor(op, x) for x in b.each(b.shapes)]
        return f"{listing(floor, '{:.0%}')} ({shape_names(b.shapes)})", all(f >= 0.95 for f in floor)
    return measure


def qgemv_copy(op):
    def measure(b):
        copy = [b.of_copy(op, x) for x in b.each(b.large)]
        return f"{listing(copy, '{:.0%}')} ({shape_names(b.large)})", all(c >= 0.85 for c in copy)
    return measure


def qgemv_rows(op):
    def measure(b):
        shapes = b.each(b.shapes)
        r16, r8 = [b.ratio(op, x, 16) for x in shapes], [b.ratio(op, x, 8) for x in shapes]
        return f"{listing(r16, '{:.2f}')} (8 rows: {span(r8)})", all(r <= 1.3 for r in r16)
    return measure


def qgemv_cublas(op, bound):
    def measure(b):
        peer = {m: [b.vs_peer(op, x, m) for x in b.each(b.large)] for m in (1, 8, 16)}
        measured = "; ".join(f"{listing(v, '{:.2f}')} at {m} row{'s' * (m > 1)}" for m, v in peer.items())
        return measured, all(v <= bound for vs in peer.values() for v in vs)
    return measure


# "Faster than cuBLAS's dense bf16 product by the byte ratio's worth" is 0.35x for 4-bit weights (4.5 bits a weight
# with a bfloat16 scale and bias per 64); at 8 bits (8.5) the same margin over the bytes is 0.66x.
QGEMV_CUBLAS_BOUND = {4: 0.35, 8: 0.66}


def qgemv_goals(bits):
    op, bound = f"qgemv{bits}", QGEMV_CUBLAS_BOUND[bits]
    return ((f"qgemv {bits}-bit, one row, >= 95% of the one-call read floor", qgemv_floor(op)),
            (f"qgemv {bits}-bit, one row, >= 85% of copy at the two larger shapes", qgemv_copy(op)),
            (f"qgemv {bits}-bit, 16 rows <= 1.3x one row", qgemv_rows(op)),
            (f"qgemv {bits}-bit <= {bound}x cuBLAS dense bf16 at the two larger shapes", qgemv_cublas(op, bound)))


def gemv_cublas(b):
    parts, worst = [], 0.0
    for x in b.each(b.shapes):
        low = [b.vs_peer("gemv", x, m) for m in range(1, 9)]
        high = [b.vs_peer("gemv", x, m) for m in range(9, 17)]
        parts.append(f"{shape_name(*x)}: {span(low)} at 1-8 rows, {span(high)} at 9-16")
        worst = max(worst, *low, *high)
    return "; ".join(parts), worst <= 1.0


def sdpa_verify(b):
    verify = [b.ratio("sdpa", (k,), 8) for k in b.each(b.keys)]
    return f"{listing(verify, '{:.2f}')} at {key_names(b.keys)}", all(v <= 1.3 for v in verify)


def sdpa_copy(b):
    c = b.of_copy("sdpa", (16384,))
    return f"{c:.0%} ({b.of_floor('sdpa', (16384,)):.0%} of its one-call floor)", c >= 0.75


def sdpa_torch(b):
    torch = [b.vs_peer("sdpa", (k,), 1) for k in b.each(b.keys)]
    return f"{listing(torch, '{:.2f}')}x torch's time", all(t <= 1.0 for t in torch)


KERNEL_GOALS = qgemv_goals(4) + qgemv_goals(8) + (
    ("gemv <= 1.0x cuBLAS at every M in 1..16", gemv_cublas),
    ("sdpa verify(8) / decode <= 1.3 at every length", sdpa_verify),
    ("sdpa decode >= 75% of copy at 16K keys", sdpa_copy),
    ("sdpa decode no slower than torch SDPA at any length", sdpa_torch),
)


def mtlinv_steps(d):
    steps = {s["rows"]: s for s in d["steps"] if s["impl"] == "mtlinv"}
    if 1 not in steps:
        raise Missing(f"the one-row step with {d['shape']['scales']} scales")
    return steps


def step_floor(decodes):
    parts, met = [], True
    for d in decodes:
        one = mtlinv_steps(d)[1]
        t, floor = one["time"]["median"], one["floor_s"]
        parts.append(f"{d['shape']['scales']} scales {t * 1e3:.2f} ms, {floor / t:.0%} of {floor * 1e3:.2f} ms")
        met &= floor / t >= 0.70
    return "; ".join(parts), met


def step_verify(decodes):
    parts, met = [], True
    for d in decodes:
        steps = mtlinv_steps(d)
        if 5 not in steps:
            raise Missing(f"the 5-row step with {d['shape']['scales']} scales")
        ratios = {m: s["time"]["median"] / steps[1]["time"]["median"] for m, s in sorted(steps.items()) if m > 1}
        bits = all(s.get("row0_bits_equal_1_row") for m, s in steps.items() if m > 1)
        parts.append(f"{d['shape']['scales']}: " + ", ".join(f"{m} rows {r:.2f}" for m, r in ratios.items())
                     + ("; row 0 bit-equal to the 1-row step" if bits else "; row 0 **differs**"))
        met &= ratios[5] <= 1.15 and bits
    return "; ".join(parts), met


STEP_GOALS = (
    ("the 8B decoding step >= 70% of its physical floor, one row", step_floor),
    ("verify(5) / decode <= 1.15, bits unchanged", step_verify),
)


def rows(bench, decodes):
    """(goal, measured, met) for every goal; met is None where the records lack what it needs."""
    b = Bench(bench)
    for goals, records in ((KERNEL_GOALS, b), (STEP_GOALS, decodes)):
        for goal, measure in goals:
            try:
                if not records:
                    raise Missing("no bench_decode_step.json given")
                yield (goal, *measure(records))
            except Missing as e:
                yield goal, f"not measured: {e}", None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench", type=Path, help="bench_cuda.json of one run")
    ap.add_argument("decode", type=Path, nargs="*", help="bench_decode_step.json of one run per scale dtype")
    args = ap.parse_args(argv)
    bench = json.loads(args.bench.read_text())
    decodes = [json.loads(p.read_text()) for p in args.decode]
    print(f"{bench['gpu']} at {bench['commit']}, {bench['date'][:10]}; copy {bench['copy_bytes_per_s'] / 1e9:.0f} GB/s "
          f"(medians)")
    for d in decodes:
        if d["device"]["name"] != bench["device"]["name"] or d["commit"] != bench["commit"]:
            print(f"the {d['shape']['scales']}-scale step: {d['device']['name']} at {d['commit']}")
        print(f"the {d['shape']['scales']}-scale step: {d['shape_label']}")
    if bench.get("failed"):
        print("bench_cuda.py reported a failure (a bit check or a section; its output says which)")
    print("\n| goal | measured (tile layout) | met? |\n|---|---|---|")
    for goal, measured, met in rows(bench, decodes):
        print(f"| {goal} | {measured} | {'-' if met is None else 'yes' if met else 'no'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
