#!/usr/bin/env python3
"""Quantized matmul (qgemv) on the active device: canonical vs. throughput vs. M single-row calls, beside MLX.

    python benchmarks/bench_qgemv.py [--k 4096] [--n 4096 11008] [--m 1 2 4 8 16] [--dtype float16] [--out DIR]

Weights are MLX-format affine 4-bit, group 64 (mtlinv.quant.quantize) unless --bits/--group-size say otherwise.
Per (N, M) it reports the median time of
  canonical   one M-row call under limit >= M (the batch-invariant kernel, weights read once for all rows)
  throughput  one M-row call under limit 0 (the tiled kernel; M == 1 always runs the canonical one: '-')
  per-row     M single-row calls, the seed PR's way of staying invariant
  peer        MLX's quantized_matmul on the same codes, scales and biases (mlx.core: on a Mac its GPU, with
              mlx[cpu] on Linux its CPU), or NumPy's float32 matmul of the dequantized weights without MLX
and the ratios canonical(M) / canonical(1), canonical(M) / throughput(M), per-row(M) / canonical(M) and
canonical / peer, all measured in this run, and the canonical call's share of the copy bandwidth where the peer
runs. The table is Markdown; the spreads are in the JSON.
"""
import argparse

import ml_dtypes
import numpy as np

import mtlinv
import report
import timing
from mtlinv import quant

DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--n", type=int, nargs="+", default=[4096, 11008])
    ap.add_argument("--m", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=64)
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="float16")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per measurement (at least)")
    ap.add_argument("--min-seconds", type=float, default=0.2, help="keep timing a measurement at least this long")
    report.add_out_argument(ap)
    args = ap.parse_args()
    if args.repeat < 1 or min(args.m) < 1:
        ap.error(f"--repeat and --m must be >= 1, got {args.repeat} and {args.m}")

    dtype = DTYPES[args.dtype]
    info = mtlinv.device_info()
    mx, peer, copy_bw = timing.peer()
    say = report.Lines()
    say(f"# qgemv on {info['backend']} ({info['name']}, {info['threads']} threads) beside {peer}\n")
    say(f"K={args.k}, {args.bits}-bit g{args.group_size}, x {args.dtype}; ms, medians; copy bandwidth "
        f"{copy_bw / 1e9:.0f} GB/s (read + write, where the peer runs)\n")
    for line in report.md_header(["N", "M", "canonical ms", "throughput ms", "per-row ms", f"{peer} ms",
                                  "% of copy", "canon(M)/canon(1)", "canon/throughput", "per-row/canon",
                                  "canon/peer"]):
        say(line)
    rng = np.random.default_rng(0)
    results = []

    def spread(fn):
        return report.spread(timing.sample_seconds(fn, repeat=args.repeat, min_time=args.min_seconds))

    for n in args.n:
        w = (rng.standard_normal((n, args.k)) * args.k ** -0.5).astype(dtype)
        host = quant.quantize(w, group_size=args.group_size, bits=args.bits)
        wq, scales, biases = (mtlinv.asarray(a) for a in host)
        x_all = rng.standard_normal((max(args.m), args.k)).astype(dtype)
        rows = [mtlinv.asarray(rng.standard_normal((1, args.k)).astype(dtype)) for _ in range(max(args.m))]
        wbytes = sum(a.nbytes for a in host)

        def call(x):
            return mtlinv.qgemv(x, wq, scales, biases, group_size=args.group_size, bits=args.bits)

        canonical_1 = None
        for m in args.m:
            x = mtlinv.asarray(x_all[:m])
            with mtlinv.batch_invariant(max(args.m)):
                canonical = spread(lambda: call(x))
                per_row = spread(lambda: [call(r) for r in rows[:m]])
            throughput = None
            if m > 1:
                with mtlinv.batch_invariant(0):
                    throughput = spread(lambda: call(x))
            t_peer = spread(peer_call(mx, host, x_all[:m], args))
            canonical_1 = canonical_1 or (canonical if m == 1 else None)
            nbytes = wbytes + x_all.itemsize * (m * args.k + m * n)
            results.append({"op": "qgemv", "dtype": args.dtype, "k": args.k, "n": n, "m": m, "bits": args.bits,
                            "group": args.group_size, "canonical": canonical, "throughput": throughput,
                            "per_row": per_row, "peer": t_peer, "canonical_bytes": nbytes,
                            "peer_bytes": nbytes if mx else None})
            c = canonical["median"]
            say(report.md_row([n, m, f"{c * 1e3:.3f}", f"{throughput['median'] * 1e3:.3f}" if throughput else "-",
                               f"{per_row['median'] * 1e3:.3f}", f"{t_peer['median'] * 1e3:.3f}",
                               f"{100 * nbytes / c / copy_bw:.0f}%",
                               f"{c / canonical_1['median']:.2f}" if canonical_1 else "-",
                               f"{c / throughput['median']:.2f}" if throughput else "-",
                               f"{per_row['median'] / c:.2f}", f"{c / t_peer['median']:.2f}"]))
    report.write(args.out, "bench_qgemv", {"copy_bytes_per_s": copy_bw, "peer_names": {"qgemv": peer},
                                           "results": results}, say.text())


def peer_call(mx, host, x, args):
    """A no-argument call of the peer: MLX's quantized_matmul on the same codes, scales and biases, or NumPy's
    float32 product with the dequantized weights."""
    if mx is None:
        w = quant.dequantize(*host, group_size=args.group_size, bits=args.bits).astype(np.float32)
        x32 = x.astype(np.float32)
        return lambda: x32 @ w.T
    wq, scales, biases = (mx.array(np.asarray(a).astype(np.float32)) if a.dtype != np.uint32 else mx.array(a)
                          for a in host)
    dtype = getattr(mx, args.dtype)
    scales, biases = scales.astype(dtype), biases.astype(dtype)
    xm = mx.array(x.astype(np.float32)).astype(dtype)
    mx.eval(wq, scales, biases, xm)
    return lambda: mx.eval(mx.quantized_matmul(xm, wq, scales, biases, transpose=True, group_size=args.group_size,
                                               bits=args.bits))


if __name__ == "__main__":
    main()
