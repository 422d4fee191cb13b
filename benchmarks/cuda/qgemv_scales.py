#!/usr/bin/env python3
"""qgemv with float32 scales (GGUF imports) against scales of x's type, on an NVIDIA GPU, and digests of outputs
that two builds must share.

    MTLINV_DEVICE=cuda python3 benchmarks/cuda/qgemv_scales.py [--reps 30] [--digests-only]

Times the canonical 4-bit g64 qgemv in the tile layout (bf16 x; the decoder's projections) at M = 1, 8 and 16 on
an 8B llama's shapes, scales and biases in bfloat16 and in float32 (full 24-bit significands, as
bench_decode_step.py draws them), events around each call, weights rotated through HBM (bench_cuda.py's timing).
Then prints a SHA-256 digest of the output bits of a fixed set of calls (both widths, both x types, both layouts,
both scale types, M = 1, 5, 8 and 16, special scales that take the general dequantisation): run it under two builds
and compare the DIGEST lines to show that a change kept every bit. With --out DIR: qgemv_scales.json (command,
commit, device, every timing's min / median / max, the digests) and qgemv_scales.md (benchmarks/report.py).
"""
import argparse
import hashlib
import os
import sys

sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
import bench_cuda as bc  # noqa: E402  (sets MTLINV_CUDA_SYNC=0 before mtlinv loads)
import report  # noqa: E402

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

import mtlinv  # noqa: E402
from mtlinv import quant  # noqa: E402

BF16 = ml_dtypes.bfloat16
SHAPES = [(4096, 4096), (4096, 14336), (14336, 4096), (8192, 8192)]  # (K, N): attention, gate/up, down, wide
ROWS = [1, 8, 16]


def weights(rng, k, n, bits, group_size, scale_dtype, special=False):
    """Random codes, scales around bench_decode_step.py's, biases that centre the codes; `special`: some groups
    with scales past 2^100, subnormal or zero, and -0 biases with negative scales."""
    wq = quant.pack(rng.integers(0, 1 << bits, size=(n, k)), bits)
    scales = ((rng.random((n, k // group_size), dtype=np.float32) + 0.5) * np.float32(k ** -0.5 / 4))
    scales *= rng.choice(np.float32([-1, 1]), scales.shape)
    biases = -scales * np.float32((1 << bits) / 2)
    if special:
        scales[3, :2] = np.float32(2.0 ** 101)
        scales[5, 1:3] = np.float32(3 * 2.0 ** -140)
        scales[7, 0], biases[7, 0] = np.float32(-0.5), np.float32(-0.0)
        scales[9, 2] = np.float32(0.0)
    return wq, scales.astype(scale_dtype), biases.astype(scale_dtype)


def timings(args, say, records):
    rng = np.random.default_rng(0)
    say("| K x N | M | bf16 scales us | float32 scales us | float32 / bf16 |")
    say("|---|---:|---:|---:|---:|")
    for k, n in SHAPES:
        wq, scales, biases = weights(rng, k, n, 4, 64, np.float32)
        x = rng.standard_normal((16, k)).astype(BF16)
        times = {}
        for name, dtype in (("bf16", BF16), ("f32", np.float32)):
            t = quant.tile(wq, scales.astype(dtype), biases.astype(dtype), group_size=64, bits=4)
            copies = bc.copies_for(sum(a.nbytes for a in t))
            sets = [tuple(mtlinv.asarray(a) for a in t) for _ in range(copies)]
            for m in ROWS:
                xm = mtlinv.asarray(x[:m])
                calls = [lambda s=s: mtlinv.qgemv(xm, *s, group_size=64, bits=4) for s in sets]
                with mtlinv.batch_invariant(16):
                    times[name, m] = bc.event_spread(calls, args.reps)
        for m in ROWS:
            b, f = times["bf16", m], times["f32", m]
            say(f"| {k} x {n} | {m} | {b['median'] * 1e6:.1f} | {f['median'] * 1e6:.1f} | "
                f"{f['median'] / b['median']:.2f} |")
            records.append({"k": k, "n": n, "m": m, "bfloat16_scales": b, "float32_scales": f})


def digests(say):
    """The digest of each call's output bits (DIGEST lines), and of all of them; returns {case: digest}."""
    rng = np.random.default_rng(1)
    found = {}
    total = hashlib.sha256()
    for bits in (4, 8):
        for xdtype in (np.float16, BF16):
            for scale_dtype in (xdtype, np.float32):
                for special in ((False, True) if scale_dtype == np.float32 else (False,)):
                    for k, n in ((4096, 512), (576, 320), (1024 + 128, 48)):
                        q = weights(rng, k, n, bits, 64, scale_dtype, special)
                        x = rng.standard_normal((16, k)).astype(xdtype)
                        for layout in ("rows", "tiles"):
                            w = quant.tile(*q, group_size=64, bits=bits) if layout == "tiles" else q
                            w = tuple(mtlinv.asarray(a) for a in w)
                            for m in (1, 5, 8, 16):
                                with mtlinv.batch_invariant(16):
                                    y = np.asarray(mtlinv.qgemv(mtlinv.asarray(x[:m]), *w, group_size=64, bits=bits))
                                case = (f"b{bits} x={np.dtype(xdtype).name} scales={np.dtype(scale_dtype).name}"
                                        f"{' special' if special else ''} {k}x{n} {layout} M={m}")
                                found[case] = hashlib.sha256(y.tobytes()).hexdigest()[:16]
                                total.update(y.tobytes())
                                say(f"DIGEST {case} {found[case]}")
    found["all"] = total.hexdigest()
    say(f"DIGEST all {found['all']}")
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    report.add_out_argument(ap)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--digests-only", action="store_true")
    args = ap.parse_args()
    say, records = report.Lines(), []
    say(f"# {mtlinv.device_info()['name']}: "
        + ("output digests" if args.digests_only else
           f"4-bit g64 qgemv, tile layout, bf16 x; medians of {args.reps} event-timed calls") + "\n")
    if not args.digests_only:
        timings(args, say, records)
        report.write(args.out, "qgemv_scales", {"reps": args.reps, "rows": records}, say.text())
    say()
    found = digests(say)
    report.write(args.out, "qgemv_scales", {"reps": args.reps, "rows": records, "digests": found}, say.text())


if __name__ == "__main__":
    main()
