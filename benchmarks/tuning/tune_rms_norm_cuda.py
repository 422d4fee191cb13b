#!/usr/bin/env python3
"""How add_rms_norm's and rms_norm's time depends on the threads of a row's threadgroup, on an NVIDIA GPU: the data
behind threads_per_row (src/core/plans/rms_norm.cpp), which must pick them from the row's width and the device
alone (the reduction's order follows the threads).

    MTLINV_DEVICE=cuda python benchmarks/tuning/tune_rms_norm_cuda.py [--cols 576 2048 4096 8192] [--rows 1 5]
        [--threads 128 256 512 1024] [--chain 200] [--reps 10]

Launches the bf16 kernels directly (raw arguments) as a decoder runs them: a chain of --chain launches between two
events, each launch on the next of 8 input sets, so that a launch overlaps the end of the one before it as in a
decoding step. Prints us per launch (median of --reps chains) for each thread count, and the plan's count. With
--out DIR: tune_rms_norm_cuda.json (command, commit, device, every cell's min / median / max over its chains) and
tune_rms_norm_cuda.md (benchmarks/report.py).
"""
import os
import struct
import sys

sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cuda"))  # bench_cuda.py
import bench_cuda as bc  # noqa: E402  (sets MTLINV_CUDA_SYNC=0 before mtlinv loads)
import report  # noqa: E402

import argparse  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

import mtlinv  # noqa: E402
from mtlinv import _native as ops  # noqa: E402

SETS = 8


def chain_spread(calls, chain, reps):
    """Seconds per launch of `chain` launches (calls in turn) between two events: min, median and max of reps."""
    for call in calls:
        call()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(bc.SLEEP_CYCLES)
        start.record()
        for i in range(chain):
            calls[i % len(calls)]()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / chain)
    return report.spread(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    report.add_out_argument(ap)
    ap.add_argument("--cols", type=int, nargs="+", default=[576, 2048, 4096, 8192])
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--threads", type=int, nargs="+", default=[128, 256, 512, 1024])
    ap.add_argument("--chain", type=int, default=200, help="launches between the two events")
    ap.add_argument("--reps", type=int, default=10, help="chains timed per cell")
    args = ap.parse_args()
    bad = [t for t in args.threads if t % 32 or not 32 <= t <= 1024]
    if bad:
        ap.error(f"--threads must be multiples of 32 in [32, 1024], got {bad}")
    say, records = report.Lines(), []
    say(f"# {mtlinv.device_info()['name']}: bf16, us per launch in a chain of {args.chain}\n")
    say(bc.row(["kernel", "cols", "rows", *[f"{t} threads" for t in args.threads], "plan"]))
    say(bc.row(["---"] * (4 + len(args.threads))))
    rng = np.random.default_rng(0)
    for kernel in ("add_rms_norm_bf16", "rms_norm_bf16"):
        residual = kernel.startswith("add")
        for cols in args.cols:
            for rows in args.rows:
                def tensor(shape):
                    return mtlinv.asarray(rng.standard_normal(shape, dtype=np.float32).astype(bc.BF16))
                w = tensor(cols)
                sets = [(tensor((rows, cols)), tensor((rows, cols)), tensor((rows, cols)), tensor((rows, cols)))
                        for _ in range(SETS)]
                # RmsNormArgs (metal/args.h): rows, cols, eps, q_heads, kv_heads; slots x, w, y, residual, sum.
                raw = struct.pack("2If2I", rows, cols, 1e-6, 0, 0)
                times = {}
                for threads in args.threads:
                    calls = [lambda s=s, t=threads: ops._launch(kernel, (rows, 1, 1), (t, 1, 1), raw,
                                                                [s[0], w, s[2], s[1] if residual else None,
                                                                 s[3] if residual else None])
                             for s in sets]
                    times[str(threads)] = chain_spread(calls, args.chain, args.reps)
                plan = ops.plan_rms_norm(rows=rows, cols=cols, dtype="bfloat16", residual=residual)
                plan_threads = plan["launches"][0]["threads"][0]
                say(bc.row([kernel, cols, rows, *[f"{t['median'] * 1e6:.2f}" for t in times.values()],
                            plan_threads]))
                records.append({"kernel": kernel, "cols": cols, "rows": rows, "threads": times,
                                "plan_threads": plan_threads})
        # After each kernel: a run cut off by a time limit keeps what it measured.
        report.write(args.out, "tune_rms_norm_cuda", {"chain": args.chain, "reps": args.reps, "rows": records},
                     say.text())


if __name__ == "__main__":
    main()
