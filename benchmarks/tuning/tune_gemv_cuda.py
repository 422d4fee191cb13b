#!/usr/bin/env python3
"""How the canonical gemv_nk's time depends on its K splits and row tile, on an NVIDIA GPU: the data behind
gemv_k_splits (src/core/plans/gemv.cpp), which must pick the splits from K, N, dtype and device alone.

    MTLINV_DEVICE=cuda python benchmarks/tuning/tune_gemv_cuda.py [--reps 30] [--mma-only] [--tiled]

Launches gemv_nk_r{R}_bf16 directly (the plans' kernels, raw arguments) for every k_splits in 1, 2, 4, 8 and
R in 1, 2, 4, 8 on the shapes of bench_cuda.py, timed as there (events, medians, weights rotated through HBM),
then gemv_nk_mma's forms (the kernels the plans pick on a GPU with matrix units: tiles of 8 rows with one or two
output tiles per threadgroup, of 16 rows with one or two splits per simdgroup) for k_splits 1 to 16 at M = 1, 8 / 16.
--tiled times the _tiled instances with W in the tile layout (mtlinv.tile_weights; gemv_nk_mma only).
Prints, per shape and R (or M), the time of each split count and the count the plan picks ("-" where the plan picks
another kernel). With --out DIR: tune_gemv_cuda.json (command, commit, device, every cell's min / median / max) and
tune_gemv_cuda.md (benchmarks/report.py).
"""
import os
import struct
import sys

sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cuda"))  # bench_cuda.py
import bench_cuda as bc  # noqa: E402  (sets MTLINV_CUDA_SYNC=0 before mtlinv loads)
import report  # noqa: E402

import argparse  # noqa: E402

import numpy as np  # noqa: E402

import mtlinv  # noqa: E402
from mtlinv import _native as ops  # noqa: E402


def gemv_args(m, k, n, splits):
    # GemvArgs (metal/gemv_args.h): rows, k, n, k_splits, x/w/y batch strides, has_bias, vector_loads, w_kn
    return struct.pack("10I", m, k, n, splits, m * k, 0, m * n, 0, 1, 0)


def plan_splits(kernel, m, k, n, tiled=False):
    """The split count the plans give `kernel` (a name, or a prefix ending in "_r") here, or "-" where they pick
    another kernel (a GPU with matrix units runs 16-bit W [N, K] on gemv_nk_mma, not gemv_nk)."""
    launch = ops.plan_gemv(rows=m, k=k, n=n, dtype="bfloat16", limit=16, tiled=tiled)["launches"][0]
    mine = launch["kernel"].startswith(kernel) if kernel.endswith("_r") else launch["kernel"] == kernel
    return struct.unpack_from("<4I", launch["args"])[3] if mine else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    report.add_out_argument(ap)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--mma-only", action="store_true", help="only the gemv_nk_mma kernels")
    ap.add_argument("--mma-kernels", nargs="+", default=["gemv_nk_mma_r8_bf16", "gemv_nk_mma_r8_c2_bf16",
                                                         "gemv_nk_mma_r16_bf16", "gemv_nk_mma_r16_u2_bf16"])
    ap.add_argument("--tiled", action="store_true", help="W in the tile layout (the _tiled gemv_nk_mma kernels)")
    args = ap.parse_args()
    copy_bw = bc.copy_bandwidth()
    say, records = report.Lines(), []
    say(f"# {mtlinv.device_info()['name']}: copy {copy_bw / 1e9:.0f} GB/s; us per call (GB/s of the weights)")
    sections = [] if args.mma_only or args.tiled else [lambda: tune_row_tiled(args.reps, say, records)]
    sections += [lambda name=name: tune_mma(name + ("_tiled" if args.tiled else ""), args.reps, args.tiled, say,
                                            records) for name in args.mma_kernels]
    for section in sections:
        section()
        # After each kernel: a run cut off by a time limit keeps what it measured.
        report.write(args.out, "tune_gemv_cuda", {"copy_bytes_per_s": copy_bw, "reps": args.reps,
                                                  "tiled": args.tiled, "rows": records}, say.text())


def tune_row_tiled(reps, say, records):
    say("\n## gemv_nk_r{R}_bf16\n")
    say(bc.split_header())
    for k, n in bc.SHAPES:
        w_host = (bc.RNG.standard_normal((n, k), dtype=np.float32) * k ** -0.5).astype(bc.BF16)
        ws, _ = bc.tensors(w_host, bc.copies_for(w_host.nbytes))
        bias = mtlinv.asarray(np.zeros(n, bc.BF16))
        for r in bc.TUNE_TILES:
            x = mtlinv.asarray(bc.RNG.standard_normal((r, k), dtype=np.float32).astype(bc.BF16))
            y = mtlinv.asarray(np.zeros((r, n), bc.BF16))
            name = f"gemv_nk_r{r}_bf16"

            def calls(s, name=name, r=r, x=x, y=y):  # the rotating calls at s splits
                return [lambda w=w: ops._launch(name, (-(-n // 4), 1, 1), (32 * s, 1, 1), gemv_args(r, k, n, s),
                                                [x, w, bias, y]) for w in ws]
            times, cells = bc.split_times(calls, reps, w_host.nbytes)
            plan = plan_splits("gemv_nk_r", r, k, n)
            say(bc.row([k, n, f"{r}", *cells, plan]))
            records.append({"k": k, "n": n, "kernel": name, "m": r, "bytes": w_host.nbytes, "splits": times,
                            "plan_splits": plan})
        del ws


def tune_mma(name, reps, tiled, say, records):
    # The form from the name: two output tiles per threadgroup (_c2_), two splits per simdgroup (_u2_).
    cols = 32 if "_c2_" in name else 16
    per_simdgroup = 2 if "_u2_" in name else 1
    splits = tuple(s for s in bc.MMA_SPLITS if s >= per_simdgroup)
    say(f"\n## {name}\n")
    say(bc.split_header(splits, "M"))
    for k, n in bc.SHAPES:
        w_host = (bc.RNG.standard_normal((n, k), dtype=np.float32) * k ** -0.5).astype(bc.BF16)
        layout = mtlinv.tile_weights(w_host) if tiled else w_host
        ws = [mtlinv.asarray(layout) for _ in range(bc.copies_for(w_host.nbytes))]
        bias = mtlinv.asarray(np.zeros(n, bc.BF16))
        for m in ((16,) if "_r16" in name else (1, 8)):
            x = mtlinv.asarray(bc.RNG.standard_normal((m, k), dtype=np.float32).astype(bc.BF16))
            y = mtlinv.asarray(np.zeros((m, n), bc.BF16))

            def calls(s, m=m, x=x, y=y):  # the rotating calls at s splits
                return [lambda w=w: ops._launch(name, (-(-n // cols), 1, 1), (32 * s // per_simdgroup, 1, 1),
                                                gemv_args(m, k, n, s), [x, w, bias, y]) for w in ws]
            times, cells = bc.split_times(calls, reps, w_host.nbytes, splits)
            plan = plan_splits(name, m, k, n, tiled)
            say(bc.row([k, n, f"{m}", *cells, plan]))
            records.append({"k": k, "n": n, "kernel": name, "m": m, "bytes": w_host.nbytes, "splits": times,
                            "plan_splits": plan})
        del ws


if __name__ == "__main__":
    main()
