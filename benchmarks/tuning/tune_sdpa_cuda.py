#!/usr/bin/env python3
"""How the canonical sdpa's time on an NVIDIA GPU splits between its passes and depends on its chunks: the data
behind sdpa_chunking (src/core/plans/sdpa.cpp), which must place the chunks from the head dim, dtype and device alone.

    MTLINV_DEVICE=cuda python benchmarks/tuning/tune_sdpa_cuda.py [--reps 30] [--chunkings 512 256:4096 ...]

Runs the kernels of the canonical plan on a device with matrix units (sdpa_mma_d128_bf16, then sdpa_combine_bf16)
directly with raw arguments, on bench_cuda.py's attention shape (Hq=32, Hkv=8, D=128, bf16, causal), decode
(Lq=1) and verify (Lq=8), timed as there (events, medians, K and V rotated through HBM). Each cell is both passes
with those chunks, then pass 1 alone, in us; the percentage is of the copy bandwidth for reading K and V once. A
chunking is S (chunks of S keys throughout) or S:T (chunks of S below key T, growing past it: metal/sdpa_args.h).
With --out DIR: tune_sdpa_cuda.json (command, commit, device, every cell's min / median / max) and tune_sdpa_cuda.md
(benchmarks/report.py).
"""
import math
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

HQ, HKV, D = 32, 8, 128


def sdpa_args(lq, keys, chunking, prefetch):
    """SdpaArgs (metal/sdpa_args.h): q_heads, kv_heads, group, q_len, kv_len, kv_capacity, head_dim, causal,
    scale_log2, n_blocks, block_keys, tier_keys, prefetch, rows_out (0: out as q)."""
    return struct.pack("8If5I", HQ, HKV, HQ // HKV, lq, keys, keys, D, 1, D ** -0.5 * math.log2(math.e),
                       n_chunks(chunking, keys), *chunking, prefetch, 0)


def n_chunks(chunking, keys):
    return len(ops.sdpa_chunks(*chunking, keys))


def plan_prefetch(launches):
    """The plan's SdpaArgs.prefetch: a hint that changes no bits."""
    return struct.unpack_from("<I", launches[0]["args"], 48)[0]  # SdpaArgs.prefetch


def prefetch_for(chunking, keys):
    """SdpaArgs.prefetch by the plan's rule (src/core/plans/sdpa.cpp) for a grid of these chunks: on where one tile's
    threadgroups are at most one per two cores."""
    return int(2 * n_chunks(chunking, keys) * HKV <= mtlinv.device_info()["threads"])


def plan_launches(lq, keys):
    """The canonical plan's two launches for this shape: kernels, grids and threadgroup sizes come from the plan,
    so this script cannot drift from it; only the chunk count (grid z of pass 1) follows the chunking timed."""
    plan = ops.plan_sdpa(q_len=lq, kv_len=keys, head_dim=D, q_heads=HQ, kv_heads=HKV, dtype="bfloat16", limit=8)
    return plan["launches"]


def two_passes(launches, q, k, v, out, part_o, part_ml, lq, keys, chunking, combine=True):
    args = sdpa_args(lq, keys, chunking, prefetch_for(chunking, keys))
    first, second = launches
    x, y, _ = first["threadgroups"]  # sdpa_mma's grid: query tiles, B * Hkv, chunks
    ops._launch(first["kernel"], (x, y, n_chunks(chunking, keys)), first["threads"], args,
                ops.plan_buffers(first, [q, k, v, out], [part_o, part_ml]))
    if combine:
        ops._launch(second["kernel"], second["threadgroups"], second["threads"], args,
                    ops.plan_buffers(second, [q, k, v, out], [part_o, part_ml]))


def parse_chunking(text):
    """S or S:T (S a positive multiple of 128: sdpa_mma's 4 simdgroups take 32-key steps; T a multiple of 4 S)."""
    block_keys, _, tier_keys = text.partition(":")
    chunking = (int(block_keys), int(tier_keys or 0))
    if chunking[0] <= 0 or chunking[0] % 128 or chunking[1] < 0 or chunking[1] % (4 * chunking[0]):
        raise argparse.ArgumentTypeError(f"a chunking is S or S:T with S a positive multiple of 128 and T a multiple "
                                         f"of 4 S, got {text!r}")
    return chunking


def chunking_name(chunking):
    return f"S = {chunking[0]}" + (f", tiers from {chunking[1]}" if chunking[1] else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    report.add_out_argument(ap)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 16384, 65536])
    ap.add_argument("--lq", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--chunkings", type=parse_chunking, nargs="+", default=[(256, 0), (512, 0), (256, 4096)],
                    help="chunkings to time: S or S:T (parse_chunking)")
    args = ap.parse_args()
    one_chunk = [(n, chunking_name(c)) for n in args.lengths for c in args.chunkings if n_chunks(c, n) < 2]
    if one_chunk:
        ap.error(f"--lengths: these put every key in one chunk, which runs pass 1 alone: {one_chunk}")
    if not mtlinv.device_info().get("matrix_units"):
        sys.exit("tune_sdpa_cuda.py times the matrix-unit kernels: run it with MTLINV_DEVICE=cuda on a GPU")
    copy_bw = bc.copy_bandwidth()
    say, records = report.Lines(), []
    say(f"# {mtlinv.device_info()['name']}: copy {copy_bw / 1e9:.0f} GB/s; both passes / pass 1 alone, us "
        f"(% of copy bandwidth for both)\n")
    say(bc.row(["keys", "Lq"] + [chunking_name(c) for c in args.chunkings] + ["plan's chunks"]))
    say(bc.row(["---:"] * (3 + len(args.chunkings))))
    plan_chunking = ops.sdpa_chunking(D, "bfloat16")
    for keys in args.lengths:
        kv_host = bc.RNG.standard_normal((1, HKV, keys, D), dtype=np.float32).astype(bc.BF16)
        copies = bc.copies_for(2 * kv_host.nbytes)
        ks, _ = bc.tensors(kv_host, copies)
        vs, _ = bc.tensors(kv_host, copies)
        for lq in args.lq:
            q = mtlinv.asarray(bc.RNG.standard_normal((1, HQ, lq, D), dtype=np.float32).astype(bc.BF16))
            out = mtlinv.asarray(np.zeros((1, HQ, lq, D), bc.BF16))
            launches = plan_launches(lq, keys)
            assert launches[0]["kernel"] == "sdpa_mma_d128_bf16", launches[0]["kernel"]
            cells, timings = [], []
            for chunking in args.chunkings:
                blocks = n_chunks(chunking, keys)
                part_o = mtlinv.asarray(np.zeros(HQ * lq * blocks * D, np.float32))
                part_ml = mtlinv.asarray(np.zeros(HQ * lq * blocks * 2, np.float32))
                times = []
                for combine in (True, False):
                    calls = [lambda k=k, v=v, c=combine:
                             two_passes(launches, q, k, v, out, part_o, part_ml, lq, keys, chunking, c)
                             for k, v in zip(ks, vs)]
                    times.append(bc.event_spread(calls, args.reps))
                both, first = (t["median"] for t in times)
                cells.append(f"{both * 1e6:.1f} / {first * 1e6:.1f} ({100 * 2 * kv_host.nbytes / both / copy_bw:.0f}%)")
                timings.append({"chunking": list(chunking), "chunks": blocks, "both_passes": times[0],
                                "pass_1": times[1]})
            say(bc.row([keys, lq, *cells, chunking_name(plan_chunking)]))
            records.append({"keys": keys, "lq": lq, "kv_bytes": 2 * kv_host.nbytes, "chunkings": timings})
        del ks, vs
        # After each length: a run cut off by a time limit keeps what it measured.
        report.write(args.out, "tune_sdpa_cuda", {
            "copy_bytes_per_s": copy_bw, "reps": args.reps, "shape": {"q_heads": HQ, "kv_heads": HKV, "head_dim": D},
            "plan_chunking": list(plan_chunking), "rows": records}, say.text())


if __name__ == "__main__":
    main()
