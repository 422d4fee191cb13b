#!/usr/bin/env python3
"""One mtlinv call on the CUDA device, for Nsight Compute to profile (the hardware counters behind a benchmark row).

    ncu --clock-control none -k regex:sdpa_blocks --section SpeedOfLight --section Occupancy \\
        --section WarpStateStats python3 benchmarks/profiling/ncu_case.py sdpa --keys 16384 --q-len 1
    ncu --clock-control none -k regex:gemv_nk ... python3 benchmarks/profiling/ncu_case.py gemv --k 4096 --n 14336 --rows 8
    ncu --clock-control none -k regex:qgemv_mma ... python3 benchmarks/profiling/ncu_case.py qgemv --k 4096 --n 14336

With `--section SourceCounters --page source --print-source sass --csv`, benchmarks/profiling/ncu_stalls.py lists the
instructions warps wait at.

The shapes are bench_cuda.py's (bf16; qgemv 4-bit g64 with bf16 scales; attention Hq=32, Hkv=8, D=128, causal).
The call runs twice: once to load the kernels, once to profile (pass `--launch-skip` to ncu to keep only the
second).
"""
import argparse
import os

os.environ.setdefault("MTLINV_DEVICE", "cuda")

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

import mtlinv  # noqa: E402
from mtlinv import _native as ops  # noqa: E402

BF16 = ml_dtypes.bfloat16


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("op", choices=["sdpa", "gemv", "qgemv"])
    ap.add_argument("--keys", type=int, default=16384)
    ap.add_argument("--q-len", type=int, default=1)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--rows", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    if args.op == "sdpa":
        q = mtlinv.asarray(rng.standard_normal((1, 32, args.q_len, 128), dtype=np.float32).astype(BF16))
        k = mtlinv.asarray(rng.standard_normal((1, 8, args.keys, 128), dtype=np.float32).astype(BF16))
        v = mtlinv.asarray(rng.standard_normal((1, 8, args.keys, 128), dtype=np.float32).astype(BF16))
        call = lambda: ops.sdpa(q, k, v)  # noqa: E731
    else:
        x = mtlinv.asarray(rng.standard_normal((args.rows, args.k), dtype=np.float32).astype(BF16))
        if args.op == "gemv":
            w = mtlinv.asarray(rng.standard_normal((args.n, args.k), dtype=np.float32).astype(BF16))
            call = lambda: ops.gemv(x, w)  # noqa: E731
        else:
            # Random codes and plausible scales, as bench_cuda.py: the timing does not depend on the values.
            wq = mtlinv.asarray(rng.integers(0, 2**32, size=(args.n, args.k // 8), dtype=np.uint32))
            scales = mtlinv.asarray((rng.random((args.n, args.k // 64), dtype=np.float32) * 0.02).astype(BF16))
            biases = mtlinv.asarray((-rng.random((args.n, args.k // 64), dtype=np.float32) * 0.1).astype(BF16))
            call = lambda: ops.qgemv(x, wq, scales, biases, group_size=64, bits=4)  # noqa: E731
    with mtlinv.batch_invariant(16):
        for _ in range(2):
            np.asarray(call())


if __name__ == "__main__":
    main()
