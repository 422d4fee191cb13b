#!/usr/bin/env python3
"""Dense gemv on the active device: canonical vs throughput vs per-row (M single-row calls), beside MLX's matmul.

    python benchmarks/bench_gemv.py [--quick] [--repeat 5] [--out DIR]

The peer is MLX (mlx.core: on a Mac its GPU, with mlx[cpu] on Linux its CPU) in the same dtype, or NumPy's float32
matmul where MLX is not installed. Prints, for each shape, dtype and M, the median times and the ratios
canonical(M)/canonical(1), canonical(M)/throughput(M) and canonical/peer, and the canonical call's share of the
copy bandwidth measured where the peer runs (timing.peer_copy_bandwidth); the spreads are in the JSON.
"""
import argparse

import ml_dtypes
import numpy as np

import mtlinv
import report
import timing

SHAPES = [(4096, 4096), (4096, 11008)]  # (K, N)
DTYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}
MLX_DTYPES = {"f16": "float16", "bf16": "bfloat16"}
MS = [1, 2, 4, 8, 16]


def peer_call(mx, name, x32, w32):
    """A no-argument call of the peer's x @ W.T: MLX in the same dtype, or NumPy in float32."""
    if mx is None:
        return lambda: x32 @ w32.T
    dtype = getattr(mx, MLX_DTYPES[name])
    x, w = mx.array(x32).astype(dtype), mx.array(w32).astype(dtype)
    mx.eval(x, w)
    return lambda: mx.eval(x @ w.T)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one shape, fewer repeats")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per measurement")
    report.add_out_argument(ap)
    a = ap.parse_args()
    if a.repeat < 1:
        ap.error(f"--repeat must be >= 1, got {a.repeat}")
    shapes = SHAPES[:1] if a.quick else SHAPES
    repeat = 3 if a.quick else a.repeat
    mx, peer, copy_bw = timing.peer()
    rng = np.random.default_rng(0)
    info = mtlinv.device_info()
    say = report.Lines()
    say(f"# gemv on {info['backend']} ({info['name']}) beside {peer}\n")
    say(f"times in ms, medians of {repeat}; copy bandwidth {copy_bw / 1e9:.0f} GB/s (read + write, where the peer "
        "runs)\n")
    for line in report.md_header(["K", "N", "dtype", "M", "canonical", "throughput", "per-row", peer,
                                  "% of copy", "can(M)/can(1)", "can/thr", "can/peer"]):
        say(line)
    results = []
    for k, n in shapes:
        w32 = (rng.standard_normal((n, k)) * k ** -0.5).astype(np.float32)
        for name, dtype in DTYPES.items():
            w = mtlinv.asarray(w32.astype(dtype))
            can1 = None
            for m in MS:
                x32 = rng.standard_normal((m, k)).astype(np.float32)
                x = mtlinv.asarray(x32.astype(dtype))
                rows = [mtlinv.asarray(x32[r:r + 1].astype(dtype)) for r in range(m)]

                def spread(fn):
                    return report.spread(timing.sample_seconds(fn, repeat=repeat))

                with mtlinv.batch_invariant(16):
                    t_can = spread(lambda: mtlinv.gemv(x, w))
                    t_row = spread(lambda: [mtlinv.gemv(r, w) for r in rows])
                with mtlinv.batch_invariant(0):
                    t_thr = spread(lambda: mtlinv.gemv(x, w)) if m > 1 else None
                t_peer = spread(peer_call(mx, name, x32, w32))
                can1 = can1 or t_can
                nbytes = 2 * (n * k + m * k + m * n)
                results.append({"op": "gemv", "dtype": name, "k": k, "n": n, "m": m, "canonical": t_can,
                                "throughput": t_thr, "per_row": t_row, "peer": t_peer, "canonical_bytes": nbytes,
                                "peer_bytes": nbytes if mx else 2 * nbytes})
                c = t_can["median"]
                say(report.md_row([k, n, name, m, f"{c * 1e3:.3f}",
                                   f"{t_thr['median'] * 1e3:.3f}" if t_thr else "-", f"{t_row['median'] * 1e3:.3f}",
                                   f"{t_peer['median'] * 1e3:.3f}", f"{100 * nbytes / c / copy_bw:.0f}%",
                                   f"{c / can1['median']:.2f}", f"{c / t_thr['median']:.2f}" if t_thr else "-",
                                   f"{c / t_peer['median']:.2f}"]))
    report.write(a.out, "bench_gemv", {"copy_bytes_per_s": copy_bw, "repeat": repeat, "peer_names": {"gemv": peer},
                                       "results": results}, say.text())


if __name__ == "__main__":
    main()
