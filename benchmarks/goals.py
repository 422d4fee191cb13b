#!/usr/bin/env python3
"""The GPU speed goals, measured: each goal of docs/results.md's goal tables with the values one run's JSON gives
and whether they meet it. Reads what `benchmarks/cuda/bench_cuda.py --out DIR` and `benchmarks/bench_decode_step.py
--out DIR` wrote (the step with float32 scales, the default, and optionally again with `--scales bfloat16`); prints
a Markdown table. Reads JSON only: runs anywhere, on any machine's results.

    python3 benchmarks/goals.py DIR/bench_cuda.json DIR/bench_decode_step.json [BF16DIR/bench_decode_step.json]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

LARGE = ((4096, 14336), (8192, 8192))  # (K, N): the shapes of the goals "at the two larger shapes"


def shape_name(k, n):
    return f"{k}²" if k == n else f"{k} x {n}"


def median(entry, key="canonical"):
    return entry[key]["median"]


class Bench:
    """bench_cuda.json's timings by (op, shape, rows)."""

    def __init__(self, data):
        self.copy = data["copy_bytes_per_s"]
        self.by = {}
        for r in data["results"]:
            shape = (r["keys"],) if r["op"] == "sdpa" else (r["k"], r["n"])
            self.by[r["op"], shape, r.get("q_len", r.get("m"))] = r
        self.shapes = {op: sorted({s for o, s, _ in self.by if o == op}) for op in ("gemv", "qgemv", "sdpa")}

    def get(self, op, shape, m):
        return self.by[op, shape, m]

    def ratio(self, op, shape, m, over=1):
        return median(self.get(op, shape, m)) / median(self.get(op, shape, over))

    def of_copy(self, op, shape, m=1):
        r = self.get(op, shape, m)
        return r["canonical_bytes"] / median(r) / self.copy

    def of_floor(self, op, shape, m=1):
        r = self.get(op, shape, m)
        return median(r, "read_floor") / median(r)

    def vs_peer(self, op, shape, m):
        r = self.get(op, shape, m)
        return median(r) / median(r, "peer") if r.get("peer") else None


def listing(values, fmt):
    return " / ".join(fmt.format(v) for v in values)


def span(values):
    lo, hi = min(values), max(values)
    return f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}"


def kernel_goals(b: Bench):
    """(goal, measured, met) rows of the kernel goals. A run without its peers (no CUDA torch there) has no row for
    the goals that compare with them."""
    q, g, s = b.shapes["qgemv"], b.shapes["gemv"], b.shapes["sdpa"]
    peers = all(r.get("peer") for r in b.by.values())
    names = listing([shape_name(*x) for x in q], "{}")
    large = [x for x in LARGE if x in q]
    floor = [b.of_floor("qgemv", x) for x in q]
    yield ("qgemv 4-bit, one row, >= 95% of the one-call read floor", f"{listing(floor, '{:.0%}')} ({names})",
           all(f >= 0.95 for f in floor))
    copy = [b.of_copy("qgemv", x) for x in large]
    yield ("qgemv 4-bit, one row, >= 85% of copy at the two larger shapes",
           f"{listing(copy, '{:.0%}')} ({listing([shape_name(*x) for x in large], '{}')})", all(c >= 0.85 for c in copy))
    r16, r8 = [b.ratio("qgemv", x, 16) for x in q], [b.ratio("qgemv", x, 8) for x in q]
    yield ("qgemv 4-bit, 16 rows <= 1.3x one row", f"{listing(r16, '{:.2f}')} (8 rows: {span(r8)})",
           all(r <= 1.3 for r in r16))
    if peers:
        peer = {m: [b.vs_peer("qgemv", x, m) for x in large] for m in (1, 8, 16)}
        yield ("qgemv 4-bit <= 0.35x cuBLAS dense bf16 at the two larger shapes",
               "; ".join(f"{listing(v, '{:.2f}')} at {m} row{'s' * (m > 1)}" for m, v in peer.items()),
               all(v <= 0.35 for vs in peer.values() for v in vs))
        parts, met = [], True
        for x in g:
            low = [b.vs_peer("gemv", x, m) for m in range(1, 9)]
            high = [b.vs_peer("gemv", x, m) for m in range(9, 17)]
            parts.append(f"{shape_name(*x)}: {span(low)} at 1-8 rows, {span(high)} at 9-16")
            met &= max(low + high) <= 1.0
        yield "gemv <= 1.0x cuBLAS at every M in 1..16", "; ".join(parts), met
    verify = [b.ratio("sdpa", x, 8) for x in s]
    keys = listing([f"{x[0] // 1024}K" for x in s], "{}")
    yield "sdpa verify(8) / decode <= 1.3 at every length", f"{listing(verify, '{:.2f}')} at {keys}", \
        all(v <= 1.3 for v in verify)
    if (16384,) in s:
        c = b.of_copy("sdpa", (16384,))
        yield ("sdpa decode >= 75% of copy at 16K keys",
               f"{c:.0%} ({b.of_floor('sdpa', (16384,)):.0%} of its one-call floor)", c >= 0.75)
    if peers:
        torch = [b.vs_peer("sdpa", x, 1) for x in s]
        yield ("sdpa decode no slower than torch SDPA at any length", f"{listing(torch, '{:.2f}')}x torch's time",
               all(t <= 1.0 for t in torch))


def step_goals(decodes):
    """(goal, measured, met) rows of the decoding step's goals, one JSON per scale dtype (none: no rows)."""
    if not decodes:
        return
    ones, verifies, met_floor, met_verify = [], [], True, True
    for d in decodes:
        steps = {s["rows"]: s for s in d["steps"] if s["impl"] == "mtlinv"}
        one = steps[1]
        t, floor = one["time"]["median"], one["floor_s"]
        ones.append(f"{d['shape']['scales']} scales {t * 1e3:.2f} ms, {floor / t:.0%} of {floor * 1e3:.2f} ms")
        met_floor &= floor / t >= 0.70
        ratios = {m: s["time"]["median"] / one["time"]["median"] for m, s in steps.items() if m > 1}
        bits = all(s.get("row0_bits_equal_1_row") for s in steps.values() if s["rows"] > 1)
        verifies.append(f"{d['shape']['scales']}: " + ", ".join(f"{m} rows {r:.2f}" for m, r in sorted(ratios.items()))
                        + ("; row 0 bit-equal to the 1-row step" if bits else "; row 0 **differs**"))
        met_verify &= ratios.get(5, float("inf")) <= 1.15 and bits
    yield "the 8B decoding step >= 70% of its physical floor, one row", "; ".join(ones), met_floor
    yield "verify(5) / decode <= 1.15, bits unchanged", "; ".join(verifies), met_verify


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bench", type=Path, help="bench_cuda.json of one run")
    ap.add_argument("decode", type=Path, nargs="*", help="bench_decode_step.json of one run per scale dtype")
    args = ap.parse_args(argv)
    bench = json.loads(args.bench.read_text())
    decodes = [json.loads(p.read_text()) for p in args.decode]
    print(f"{bench['gpu']} at {bench['commit']}, {bench['date'][:10]}; copy {bench['copy_bytes_per_s'] / 1e9:.0f} GB/s "
          f"(medians)\n")
    print("| goal | measured (tile layout) | met? |\n|---|---|---|")
    for goal, measured, met in [*kernel_goals(Bench(bench)), *step_goals(decodes)]:
        print(f"| {goal} | {measured} | {'yes' if met else 'no'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
