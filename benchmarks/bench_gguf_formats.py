#!/usr/bin/env python3
"""GGUF projections as the device model runs them against a kernel that reads about the block format's own bytes,
and the K-quants' super-block form against their float32-scale affine import.

    python benchmarks/bench_gguf_formats.py [--formats Q4_K Q6_K ...] [--shapes 4096x14336 ...] [--m 1 8] [--out DIR]
    MTLINV_DEVICE=cuda python3 benchmarks/bench_gguf_formats.py ...   # events, weights rotated through HBM

Each format's weights are random blocks of that type (random bytes, float16 d fields drawn like a trained model's),
imported exactly as `mtlinv.model` imports a file's projections (`QuantLinear.from_gguf`): Q4_K, Q5_K and Q6_K in
qgemv's super-block form (codes at their width, int8 scale codes, float32 factors per 256 values), the others in
the affine format with the blocks' float16 scales. Beside it the float32-scale affine import of the same blocks
(`compact=False`: 5- and 6-bit codes at 8 bits, Q6_K at group 16), what the model ran before. Beside each, the
stand-in: MLX's affine format at the width and group size whose bytes per weight are closest to the block
format's (bfloat16 scales, as mlx-lm saves them), run by the same canonical kernels: what a kernel reading the
blocks' bytes could reach without new tuning. "import / stand-in" is what the device model's form costs against
it, "affine / import" what it saves against the float32-scale import. On CUDA, times come from events around each
call (benchmarks/cuda/bench_cuda.py's method); elsewhere from the wall clock (the emulator's times say nothing
about a GPU). Needs the model extra (gguf).
"""
import argparse
import dataclasses
import os
import sys

CUDA = os.environ.get("MTLINV_DEVICE") == "cuda"
if CUDA:  # bench_cuda sets MTLINV_CUDA_SYNC=0, which must precede mtlinv's backend
    sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "cuda"))
    import bench_cuda as bc  # noqa: E402

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

import mtlinv  # noqa: E402
import report  # noqa: E402
import timing  # noqa: E402
from gguf_weights import ARRAYS, F16_FIELDS, arrays, gguf_tensor, nbytes  # noqa: E402
from mtlinv import quant  # noqa: E402

BF16 = ml_dtypes.bfloat16
# MLX's affine (bits, group size) closest to each format's bits per weight (format: 4.5, 5, 8.5, 5.5, 6, 4.5,
# 5.5, 6.5625; the stand-in with bfloat16 scales and biases: bits + 32 / group).
STAND_INS = {"Q4_0": (4, 64), "Q4_1": (4, 32), "Q8_0": (8, 64), "Q5_0": (5, 64), "Q5_1": (5, 32),
             "Q4_K": (4, 64), "Q5_K": (5, 64), "Q6_K": (6, 64)}


def device_copies(linear, copies):
    """`copies` device copies of a QuantLinear's arrays (distinct memory, so a rotation reads them from DRAM; an
    array serving two fields stays one array)."""
    host = {f: np.asarray(a) for f, a in arrays(linear).items()}
    fields = {f: next(g for g in host if getattr(linear, g) is getattr(linear, f))
              for f in ARRAYS if getattr(linear, f) is not None}
    out = []
    for _ in range(copies):
        on_device = {g: mtlinv.asarray(a) for g, a in host.items()}
        out.append(dataclasses.replace(linear, **{f: on_device[g] for f, g in fields.items()}))
    return out


def stand_in(rng, k, n, bits, group_size):
    """MLX-format weights [N, K] at (bits, group_size), bfloat16 scales and biases, as a QuantLinear."""
    from mtlinv.model.device_model import QuantLinear

    w = (rng.standard_normal((n, k)) * k ** -0.5).astype(BF16)
    return QuantLinear.from_affine(quant.quantize(w, group_size=group_size, bits=bits), group_size=group_size,
                                   bits=bits)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--formats", nargs="+", choices=sorted(F16_FIELDS), default=["Q4_0", "Q8_0", "Q4_K", "Q5_K",
                                                                                "Q6_K"])
    ap.add_argument("--shapes", nargs="+", default=["4096x4096", "4096x14336", "14336x4096"], metavar="KxN",
                    help="K x N of the projections (default: an 8B llama's attention, gate/up and down)")
    ap.add_argument("--m", type=int, nargs="+", default=[1, 8], help="rows of x (canonical calls)")
    ap.add_argument("--reps", type=int, default=30, help="timed calls per measurement")
    report.add_out_argument(ap)
    args = ap.parse_args()
    shapes = [parse_shape(ap, s) for s in args.shapes]
    if args.reps < 1 or min(args.m) < 1:
        ap.error(f"--reps and --m must be >= 1, got {args.reps} and {args.m}")
    from mtlinv.model.device_model import QuantLinear  # the model extra: after --help

    info = mtlinv.device_info()
    copy_bw = bc.copy_bandwidth() if CUDA else timing.host_copy_bandwidth()
    say = report.Lines()
    say(f"# GGUF projections on {info['backend']} ({info['name']}): the device model's form against a same-bytes "
        f"stand-in\n")
    say(f"x bfloat16, canonical calls; us, medians of {args.reps}; copy bandwidth {copy_bw / 1e9:.0f} GB/s (read + "
        f"write){'' if CUDA else '; wall clock'}\n")
    for line in report.md_header(["format", "K x N", "M", "file bits/w", "device bits/w", "import us",
                                  "import % of copy", "affine bits/w", "affine us", "affine / import", "stand-in",
                                  "stand-in bits/w", "stand-in us", "import / stand-in"]):
        say(line)
    rng = np.random.default_rng(0)
    results = []
    for kind in args.formats:
        for k, n in shapes:
            t = gguf_tensor(rng, kind, k, n)
            imported = QuantLinear.from_gguf(t)
            affine = QuantLinear.from_gguf(t, compact=False)
            affine = affine if nbytes(affine) != nbytes(imported) else None
            bits, group = STAND_INS[kind]
            other = stand_in(rng, k, n, bits, group)
            x = rng.standard_normal((max(args.m), k)).astype(BF16)
            for m in args.m:
                xm = mtlinv.asarray(x[:m])
                t_import, t_other = (time_calls(linear, xm, args, m) for linear in (imported, other))
                row = {"format": kind, "k": k, "n": n, "m": m, "file_bytes": t.data.nbytes,
                       "import_form": "super-block" if imported.supers is not None else
                       f"affine, {np.asarray(imported.scales).dtype} scales", "import_bytes": nbytes(imported),
                       "import": t_import, "stand_in": f"{bits}-bit g{group}", "stand_in_bytes": nbytes(other),
                       "stand_in_time": t_other}
                ti, to = t_import["median"], t_other["median"]
                cells = ["-"] * 3
                if affine:
                    row.update(affine_bytes=nbytes(affine), affine=time_calls(affine, xm, args, m))
                    ta = row["affine"]["median"]
                    cells = [f"{8 * row['affine_bytes'] / (k * n):.2f}", f"{ta * 1e6:.1f}", f"{ta / ti:.2f}"]
                results.append(row)
                say(report.md_row([kind, f"{k} x {n}", m, f"{8 * t.data.nbytes / (k * n):.2f}",
                                   f"{8 * row['import_bytes'] / (k * n):.2f}", f"{ti * 1e6:.1f}",
                                   f"{100 * row['import_bytes'] / ti / copy_bw:.0f}%", *cells, row["stand_in"],
                                   f"{8 * row['stand_in_bytes'] / (k * n):.2f}", f"{to * 1e6:.1f}",
                                   f"{ti / to:.2f}"]))
    report.write(args.out, "bench_gguf_formats", {"copy_bytes_per_s": copy_bw, "formats": results}, say.text())


def parse_shape(ap, text):
    try:
        k, n = (int(v) for v in text.lower().split("x"))
    except ValueError:
        ap.error(f"--shapes: {text!r} is not KxN (e.g. 4096x14336)")
    if k % 256 or n < 1:
        ap.error(f"--shapes: {text!r}: K must be a multiple of 256 (a K-quant super-block) and N >= 1")
    return k, n


def time_calls(linear, x, args, m):
    """The spread of one canonical call y = linear(x): CUDA events over copies rotated through DRAM, else the wall
    clock."""
    with mtlinv.batch_invariant(m):
        if CUDA:
            calls = [lambda c=c: c(x) for c in device_copies(linear, bc.copies_for(nbytes(linear)))]
            return bc.event_spread(calls, args.reps)
        return report.spread(timing.sample_seconds(lambda: np.asarray(linear(x)), repeat=args.reps))


if __name__ == "__main__":
    main()
