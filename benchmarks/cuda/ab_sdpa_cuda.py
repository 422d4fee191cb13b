#!/usr/bin/env python3
"""Two or more builds of attention's pass 1 side by side on one GPU: same inputs, same plan, bits compared.

    MTLINV_DEVICE=cuda python benchmarks/cuda/ab_sdpa_cuda.py --kernels sdpa_mma_d128_bf16 sdpa_mmh_d128_bf16 \
        [--prefetch plan|0|1 ...] [--lengths 1024 16384] [--lq 1 4 5 8] [--reps 30]

An experiment on sdpa_mma keeps the kernel it started from registered under another name for one build (its file
copied with sdpa_mma renamed, e.g. to sdpa_mmh), and this script runs each named kernel in place of the plan's
pass 1, with the plan's grid, threadgroup, chunks and pass 2, on bench_cuda.py's attention shape (Hq = 32,
Hkv = 8, D = 128, bf16, causal), timed as there (events, medians, K and V rotated through HBM). Each cell is both
passes, then pass 1 alone, in us; the last column says whether every variant's output has the bits of the first.
--prefetch runs each kernel once per value of SdpaArgs.prefetch (a hint that changes no bits): the plan's, 0 or 1.
--threads gives each kernel its threadgroup size (default: the plan's), for a variant with more simdgroups.
With --out DIR: ab_sdpa_cuda.json (command, commit, device, every cell's min / median / max, the bits' verdict) and
ab_sdpa_cuda.md (benchmarks/report.py).
"""
import os
import sys

sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tuning"))  # tune_sdpa_cuda.py
import bench_cuda as bc  # noqa: E402  (sets MTLINV_CUDA_SYNC=0 before mtlinv loads)
import report  # noqa: E402
import tune_sdpa_cuda as ts  # noqa: E402

import argparse  # noqa: E402

import numpy as np  # noqa: E402

import mtlinv  # noqa: E402
from mtlinv import _native as ops  # noqa: E402


def run(kernel, threads, launches, args, q, k, v, out, part_o, part_ml, combine=True):
    first, second = launches
    ops._launch(kernel, first["threadgroups"], (threads, 1, 1) if threads else first["threads"], args,
                ops.plan_buffers(first, [q, k, v, out], [part_o, part_ml]))
    if combine:
        ops._launch(second["kernel"], second["threadgroups"], second["threads"], args,
                    ops.plan_buffers(second, [q, k, v, out], [part_o, part_ml]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    report.add_out_argument(ap)
    ap.add_argument("--kernels", nargs="+", required=True, help="pass-1 kernels to run in the plan's place")
    ap.add_argument("--prefetch", nargs="+", default=["plan"], choices=["plan", "0", "1"])
    ap.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 16384, 65536])
    ap.add_argument("--lq", type=int, nargs="+", default=[1, 4, 5, 8])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--threads", type=int, nargs="+", help="threadgroup size of each kernel (default: the plan's)")
    args = ap.parse_args()
    if args.threads and len(args.threads) != len(args.kernels):
        ap.error(f"--threads: one size per kernel ({len(args.kernels)}), got {args.threads}")
    threads = dict(zip(args.kernels, args.threads or [0] * len(args.kernels)))
    one_chunk = [n for n in args.lengths if ts.n_chunks(ops.sdpa_chunking(ts.D, "bfloat16"), n) < 2]
    if one_chunk:
        ap.error(f"--lengths: these put every key in one chunk, which runs pass 1 alone: {one_chunk}")
    if not mtlinv.device_info().get("matrix_units"):
        sys.exit("ab_sdpa_cuda.py times the matrix-unit kernels: run it with MTLINV_DEVICE=cuda on a GPU")
    missing = [name for name in args.kernels if name not in ops.kernel_names()]
    if missing:
        sys.exit(f"--kernels: not registered in this build: {missing}")
    variants = [(name, pf) for name in args.kernels for pf in args.prefetch]
    say, records = report.Lines(), []
    say(f"# {mtlinv.device_info()['name']}: both passes / pass 1 alone, us\n")
    say(bc.row(["keys", "Lq"] + [f"{name} (prefetch {pf})" for name, pf in variants] + ["bits equal"]))
    say(bc.row(["---:"] * (3 + len(variants))))
    for keys in args.lengths:
        kv_host = bc.RNG.standard_normal((1, ts.HKV, keys, ts.D), dtype=np.float32).astype(bc.BF16)
        copies = bc.copies_for(2 * kv_host.nbytes)
        ks, _ = bc.tensors(kv_host, copies)
        vs, _ = bc.tensors(kv_host, copies)
        for lq in args.lq:
            q = mtlinv.asarray(bc.RNG.standard_normal((1, ts.HQ, lq, ts.D), dtype=np.float32).astype(bc.BF16))
            launches = ts.plan_launches(lq, keys)
            blocks = launches[0]["threadgroups"][2]  # sdpa_mma's grid: query tiles, B * Hkv, chunks
            part_o = mtlinv.asarray(np.zeros(ts.HQ * lq * blocks * ts.D, np.float32))
            part_ml = mtlinv.asarray(np.zeros(ts.HQ * lq * blocks * 2, np.float32))
            cells, outputs, timings = [], [], []
            for name, pf in variants:
                prefetch = ts.plan_prefetch(launches) if pf == "plan" else int(pf)
                sargs = ts.sdpa_args(lq, keys, ops.sdpa_chunking(ts.D, "bfloat16"), prefetch)
                out = mtlinv.asarray(np.zeros((1, ts.HQ, lq, ts.D), bc.BF16))
                run(name, threads[name], launches, sargs, q, ks[0], vs[0], out, part_o, part_ml)
                outputs.append(out.numpy().tobytes())
                both, first = (bc.event_spread([lambda k=k, v=v, c=combine:
                                                run(name, threads[name], launches, sargs, q, k, v, out, part_o,
                                                    part_ml, c)
                                                for k, v in zip(ks, vs)], args.reps)
                               for combine in (True, False))
                cells.append(f"{both['median'] * 1e6:.1f} / {first['median'] * 1e6:.1f}")
                timings.append({"kernel": name, "prefetch": prefetch, "both_passes": both, "pass_1": first})
            same = all(o == outputs[0] for o in outputs[1:])
            say(bc.row([keys, lq, *cells, "yes" if same else "**no**"]))
            records.append({"keys": keys, "lq": lq, "variants": timings, "bits_equal": same})
        del ks, vs
        # After each length: a run cut off by a time limit keeps what it measured.
        report.write(args.out, "ab_sdpa_cuda", {"reps": args.reps, "kernels": args.kernels, "rows": records},
                     say.text())


if __name__ == "__main__":
    main()
