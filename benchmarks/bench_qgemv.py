#!/usr/bin/env python3
"""Quantized matmul (qgemv) on the active device: canonical vs. throughput kernel vs. M single-row calls.

    python benchmarks/bench_qgemv.py [--k 4096] [--n 4096 11008] [--m 1 2 4 8 16] [--dtype float16]

Weights are MLX-format affine 4-bit, group 64 (mtlinv.quant.quantize) unless --bits/--group-size say otherwise.
Per (N, M) it reports the median time of
  canonical   one M-row call under limit >= M (the batch-invariant kernel, weights read once for all rows)
  throughput  one M-row call under limit 0 (the tiled kernel; M == 1 always runs the canonical one: '-')
  per-row     M single-row calls, the seed PR's way of staying invariant
and the ratios canonical(M) / canonical(1), canonical(M) / throughput(M) and per-row(M) / canonical(M), all
measured in this run. The table is Markdown, ready for docs/results.md.
"""
import argparse

import ml_dtypes
import numpy as np

import mtlinv
from mtlinv import quant
from timing import median_seconds

DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--n", type=int, nargs="+", default=[4096, 11008])
    ap.add_argument("--m", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=64)
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="float16")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per measurement (at least)")
    ap.add_argument("--min-seconds", type=float, default=0.2, help="keep timing a measurement at least this long")
    args = ap.parse_args()

    dtype = DTYPES[args.dtype]
    info = mtlinv.device_info()
    print(f"device: {info['backend']} ({info['name']}, {info['threads']} threads); K={args.k}, "
          f"{args.bits}-bit g{args.group_size}, x {args.dtype}\n")
    print("| N | M | canonical ms | throughput ms | per-row ms | canon(M)/canon(1) | canon/throughput "
          "| per-row/canon |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    rng = np.random.default_rng(0)
    previous_limit = mtlinv.get_limit()
    try:
        for n in args.n:
            w = (rng.standard_normal((n, args.k)) * args.k ** -0.5).astype(dtype)
            wq, scales, biases = (mtlinv.asarray(a) for a in
                                  quant.quantize(w, group_size=args.group_size, bits=args.bits))
            x_all = mtlinv.asarray(rng.standard_normal((max(args.m), args.k)).astype(dtype))
            rows = [mtlinv.asarray(rng.standard_normal((1, args.k)).astype(dtype)) for _ in range(max(args.m))]

            def call(x):
                return mtlinv.qgemv(x, wq, scales, biases, group_size=args.group_size, bits=args.bits)

            canonical_1 = None
            for m in args.m:
                x = mtlinv.asarray(np.asarray(x_all)[:m])
                mtlinv.set_limit(max(args.m))
                canonical = median_seconds(lambda: call(x), repeat=args.repeat, min_time=args.min_seconds)
                per_row = median_seconds(lambda: [call(r) for r in rows[:m]], repeat=args.repeat, min_time=args.min_seconds)
                if canonical_1 is None and m == 1:
                    canonical_1 = canonical
                throughput = None
                if m > 1:
                    mtlinv.set_limit(0)
                    throughput = median_seconds(lambda: call(x), repeat=args.repeat, min_time=args.min_seconds)
                cells = [
                    f"{canonical * 1e3:.2f}",
                    f"{throughput * 1e3:.2f}" if throughput else "-",
                    f"{per_row * 1e3:.2f}",
                    f"{canonical / canonical_1:.2f}" if canonical_1 else "-",
                    f"{canonical / throughput:.2f}" if throughput else "-",
                    f"{per_row / canonical:.2f}",
                ]
                print(f"| {n} | {m} | " + " | ".join(cells) + " |", flush=True)
    finally:
        mtlinv.set_limit(previous_limit)


if __name__ == "__main__":
    main()
