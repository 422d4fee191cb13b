"""Dense gemv on the active device: canonical vs throughput vs per-row (the seed's approach: M single-row calls),
and NumPy float32 matmul on the same shapes.

    python benchmarks/bench_gemv.py [--quick]

Prints, for each shape, dtype and M: the three times, canonical(M)/canonical(1) and canonical(M)/throughput(M).
"""
import argparse

import ml_dtypes
import numpy as np

import mtlinv
from timing import median_seconds, ms

SHAPES = [(4096, 4096), (4096, 11008)]  # (K, N)
DTYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}
MS = [1, 2, 4, 8, 16]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="one shape, fewer repeats")
    a = ap.parse_args()
    shapes = SHAPES[:1] if a.quick else SHAPES
    repeat = 3 if a.quick else 5
    rng = np.random.default_rng(0)
    info = mtlinv.device_info()
    print(f"gemv on {info['backend']} ({info['name']}); times in ms, medians of {repeat}")
    print(f"{'K':>5} {'N':>6} {'dtype':>5} {'M':>3} {'canonical':>10} {'throughput':>10} {'per-row':>10} "
          f"{'numpy f32':>10} {'can(M)/can(1)':>13} {'can/thr':>8} {'can/numpy':>9}")
    for k, n in shapes:
        w32 = (rng.standard_normal((n, k)) * k ** -0.5).astype(np.float32)
        for name, dtype in DTYPES.items():
            w = mtlinv.asarray(w32.astype(dtype))
            can1 = None
            for m in MS:
                x32 = rng.standard_normal((m, k)).astype(np.float32)
                x = mtlinv.asarray(x32.astype(dtype))
                rows = [mtlinv.asarray(x32[r:r + 1].astype(dtype)) for r in range(m)]
                with mtlinv.batch_invariant(16):
                    t_can = median_seconds(lambda: mtlinv.gemv(x, w), repeat=repeat)
                    t_row = median_seconds(lambda: [mtlinv.gemv(r, w) for r in rows], repeat=repeat)
                with mtlinv.batch_invariant(0):
                    t_thr = median_seconds(lambda: mtlinv.gemv(x, w), repeat=repeat) if m > 1 else t_can
                t_np = median_seconds(lambda: x32 @ w32.T, repeat=repeat)
                can1 = can1 or t_can
                print(f"{k:5d} {n:6d} {name:>5} {m:3d} {ms(t_can):>10} {ms(t_thr):>10} {ms(t_row):>10} "
                      f"{ms(t_np):>10} {t_can / can1:13.2f} {t_can / t_thr:8.2f} {t_can / t_np:9.2f}")


if __name__ == "__main__":
    main()
