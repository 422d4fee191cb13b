#!/usr/bin/env python3
"""How the canonical qgemv's time depends on its K splits and row tile, on an NVIDIA GPU: the data behind
qgemv_k_splits and qgemv_mma_k_splits (src/core/plans/qgemv.cpp), which must pick the splits from K, N, bits and
device alone.

    MTLINV_DEVICE=cuda python benchmarks/tuning/tune_qgemv_cuda.py [--reps 30] [--bits 4] [--group-size 64] [--mma-only]
        [--shapes K:N ...] [--float32-scales] [--tiled]

Launches qgemv_b{bits}_r{R}_bf16 directly (the plans' kernels, raw arguments) for every k_splits in 1, 2, 4, 8
and R in 1, 2, 4, 8, then qgemv_mma_b{bits}_r8_bf16 / _r16_ (what the plans pick for 16-bit x on a GPU with
matrix units) for k_splits 1 to 16 at M = 1, 8 and 16 (with --tiled at 4 bits and bfloat16 scales also _r16_c2_,
two output tiles a threadgroup, at 16 rows), on the shapes of bench_cuda.py or --shapes (SmolLM2-135M's are 576:960
576:576 576:3072 1536:576), timed as there (events, medians, weights rotated through HBM).
--float32-scales times the _sf32 instances a GGUF import runs, --tiled the _tiled instances with the weights in the
tile layout (mtlinv.quant.tile; qgemv_mma only, N a multiple of 16, bits 4 or 8). Prints, per shape and tile, the
time of each split count (GB/s of packed weights, scales and biases) and the count the plan picks ("-" where it
picks another kernel). With --out DIR: tune_qgemv_cuda.json (command, commit, device, every cell's min / median /
max) and tune_qgemv_cuda.md (benchmarks/report.py).
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
from mtlinv import quant  # noqa: E402


def qgemv_args(m, k, n, group_size, splits):
    # QGemvArgs (metal/qgemv_args.h): rows, k, n, group_size, k_splits, has_bias, vector_loads, w_vector_loads
    return struct.pack("8I", m, k, n, group_size, splits, 0, 1, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    report.add_out_argument(ap)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=64)
    ap.add_argument("--mma-only", action="store_true", help="only the qgemv_mma kernels")
    ap.add_argument("--shapes", nargs="+", metavar="K:N", help="shapes to time instead of bench_cuda.py's")
    ap.add_argument("--float32-scales", action="store_true", help="float32 scales and biases (the _sf32 kernels)")
    ap.add_argument("--tiled", action="store_true", help="weights in the tile layout (the _tiled qgemv_mma kernels)")
    args = ap.parse_args()
    bits, group = args.bits, args.group_size
    shapes = [tuple(int(v) for v in shape.split(":")) for shape in args.shapes] if args.shapes else bc.SHAPES
    suffix = ("_bf16_sf32" if args.float32_scales else "_bf16") + ("_tiled" if args.tiled else "")
    if args.tiled and (bits not in (4, 8) or any(n % quant.TILE_ROWS for _, n in shapes)):
        ap.error(f"--tiled needs bits 4 or 8 and every N a multiple of {quant.TILE_ROWS}")
    copy_bw = bc.copy_bandwidth()
    say, records = report.Lines(), []
    say(f"# {mtlinv.device_info()['name']}: copy {copy_bw / 1e9:.0f} GB/s; qgemv {bits}-bit g{group}, bf16 x; "
        "us per call (GB/s of the weights)")
    scalar = [(f"qgemv_b{bits}_r{r}{suffix}", 4, r, bc.TUNE_SPLITS) for r in bc.TUNE_TILES]
    kernels = [] if args.mma_only or args.tiled else scalar
    kernels += [(f"qgemv_mma_b{bits}_r8{suffix}", 16, m, bc.MMA_SPLITS) for m in (1, 8)]
    kernels += [(f"qgemv_mma_b{bits}_r16{suffix}", 16, 16, bc.MMA_SPLITS)]
    two_tiles = f"qgemv_mma_b{bits}_r16_c2{suffix}"  # the plan's 16-row form at large N, where it is built
    if two_tiles in mtlinv.kernel_names():
        kernels += [(two_tiles, 32, 16, bc.MMA_SPLITS)]
    for title, family in (("row-tiled qgemv", "qgemv_b"), ("qgemv_mma", "qgemv_mma_b")):
        rows = [kernel for kernel in kernels if kernel[0].startswith(family)]
        if not rows:
            continue
        say(f"\n## {title}, {bits}-bit g{group}{', tile layout' if args.tiled else ''}"
            f"{', float32 scales' if args.float32_scales else ''}\n")
        say(bc.split_header(rows[0][3], "kernel, M"))
        for k, n in shapes:
            tune_shape(k, n, bits, group, rows, args.reps, np.float32 if args.float32_scales else bc.BF16,
                       args.tiled, say, records)
            # After each shape: a run cut off by a time limit keeps what it measured.
            report.write(args.out, "tune_qgemv_cuda", {
                "copy_bytes_per_s": copy_bw, "reps": args.reps, "bits": bits, "group_size": group,
                "scales": "float32" if args.float32_scales else "bfloat16", "tiled": args.tiled, "rows": records},
                say.text())


def tune_shape(k, n, bits, group, kernels, reps, scale_dtype, tiled, say, records):
    """One table row per (kernel, M) at this shape, said and appended to records; `kernels`: (name, outputs per
    threadgroup, M, split counts)."""
    # Random codes and plausible scales: the timing does not depend on the values.
    wq_host = bc.RNG.integers(0, 2**32, size=(n, k * bits // 32), dtype=np.uint32)
    scales_host = (bc.RNG.random((n, k // group), dtype=np.float32) * 0.02).astype(scale_dtype)
    biases_host = (-bc.RNG.random((n, k // group), dtype=np.float32) * 0.1).astype(scale_dtype)
    wbytes = wq_host.nbytes + scales_host.nbytes + biases_host.nbytes
    host = quant.tile(wq_host, scales_host, biases_host, group, bits) if tiled else (wq_host, scales_host, biases_host)
    packs = [tuple(mtlinv.asarray(a) for a in host) for _ in range(bc.copies_for(wbytes))]
    bias = mtlinv.asarray(np.zeros(n, bc.BF16))
    for name, cols, m, splits in kernels:
        x = mtlinv.asarray(bc.RNG.standard_normal((m, k), dtype=np.float32).astype(bc.BF16))
        y = mtlinv.asarray(np.zeros((m, n), bc.BF16))

        def calls(s, name=name, cols=cols, m=m, x=x, y=y):  # the rotating calls at s splits
            return [lambda p=p: ops._launch(name, (-(-n // cols), 1, 1), (32 * s, 1, 1), qgemv_args(m, k, n, group, s),
                                            [x, *p, bias, y]) for p in packs]
        times, cells = bc.split_times(calls, reps, wbytes, splits)
        launch = ops.plan_qgemv(rows=m, k=k, n=n, group_size=group, bits=bits, dtype="bfloat16",
                                scale_dtype="float32" if scale_dtype == np.float32 else "bfloat16",
                                limit=16, tiled=tiled)["launches"][0]
        plan_splits = launch["threads"][0] // 32 if launch["kernel"] == name else "-"
        say(bc.row([k, n, f"{name.split('_bf16')[0]}, {m}", *cells, plan_splits]))
        records.append({"k": k, "n": n, "kernel": name, "m": m, "bytes": wbytes, "splits": times,
                        "plan_splits": plan_splits})


if __name__ == "__main__":
    main()
