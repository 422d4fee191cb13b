#!/usr/bin/env python3
"""mtlinv on an NVIDIA GPU against PyTorch (cuBLAS, SDPA) on the same data: gemv, qgemv (4- and 8-bit) and sdpa.

    MTLINV_DEVICE=cuda python benchmarks/cuda/bench_cuda.py [--out DIR] [--quick]

Method (docs/decisions.md, "Measuring on a GPU"):
  * Kernel time from CUDA events around each call, median of --reps calls after a warm-up of every input copy.
    The ops return without waiting (MTLINV_CUDA_SYNC=0, set here over any setting in the environment), so calls
    queue on the one stream; a sleep kernel first holds the GPU while the host queues every call, so no launch
    gap falls inside an event pair.
  * Inputs rotate through copies totalling about 1 GiB, far beyond the 60 MB L2, so weights and KV caches come
    from HBM as in decoding. PyTorch reads the very same memory through DLPack.
  * Achieved bandwidth counts the bytes a call must move (weights or KV read once, activations in and out)
    against the device-to-device copy bandwidth measured at the start of the same run (bytes read + written).
  * "floor us (% of it)": the time one launch of a plain read of the same weights or KV cache takes (a
    grid-stride stream, benchmarks/profiling/probe_reads_cuda.py), timed the same way, and that time over the
    call's. The launch, ramp-up and tail of one call hold a 30 MB read near 60% of copy bandwidth on an H200, so
    for operands of that size this, not the copy, is the ceiling a kernel can approach.
Goals and the latest figures against them: docs/results.md, "The latest run". With --out DIR it writes
bench_cuda.json (every timing's min / median / max), bench_cuda.md and the plots of benchmarks/plot.py.
"""
import os

os.environ["MTLINV_CUDA_SYNC"] = "0"  # before mtlinv creates its backend: ops leave their kernels queued
os.environ.setdefault("MTLINV_DEVICE", "cuda")

import argparse  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

BENCHMARKS = Path(__file__).resolve().parents[1]
sys.path[1:1] = [str(BENCHMARKS), str(BENCHMARKS / "profiling")]  # report.py, timing.py; probe_reads_cuda.py
import report  # noqa: E402
import timing  # noqa: E402
from probe_reads_cuda import cp as cupy, one_call_read_floor  # noqa: E402

try:  # optional so that --help works anywhere; main() needs it
    import torch  # noqa: E402
    import torch.nn.functional as F  # noqa: E402
    from torch.nn.attention.bias import causal_lower_right  # noqa: E402
except ImportError:
    torch = None

import mtlinv  # noqa: E402
from mtlinv import quant  # noqa: E402
from mtlinv import _native as ops  # noqa: E402

BF16 = ml_dtypes.bfloat16
ROTATION_BYTES = 1 << 30
SHAPES = [(4096, 4096), (4096, 14336), (8192, 8192)]  # (K, N)
SLEEP_CYCLES = 20_000_000  # ~10 ms at boost clock: longer than the host needs to queue --reps calls
RNG = np.random.default_rng(0)


def event_spread(calls, reps):
    """min, median and max seconds of one call (event_times)."""
    return report.spread(event_times(calls, reps))


def event_times(calls, reps):
    """Seconds of each of `reps` calls, each timed alone by an event pair; `calls` rotate (distinct inputs)."""
    for call in calls:
        call()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    torch.cuda._sleep(SLEEP_CYCLES)
    for i in range(reps):
        starts[i].record()
        calls[i % len(calls)]()
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends)]


def canonical_and_throughput(calls, reps, rows, limit):
    """Event-timed spreads of the same calls under `limit` (canonical) and under limit 0 (throughput; None when
    rows == 1, which is canonical either way)."""
    with mtlinv.batch_invariant(limit):
        t_can = event_spread(calls, reps)
    if rows == 1:
        return t_can, None
    with mtlinv.batch_invariant(0):
        return t_can, event_spread(calls, reps)


def copies_for(nbytes, cap=64):
    return max(2, min(cap, math.ceil(ROTATION_BYTES / nbytes)))


def copy_bandwidth():
    """Device-to-device copy, bytes read + written per second (the memory-bound ceiling)."""
    return timing.device_copy_bandwidth(torch)


def read_floor(nbytes, reps):
    """The spread of one call of a plain read of `nbytes` (probe_reads_cuda.one_call_read_floor); None without
    CuPy."""
    return report.spread(one_call_read_floor(nbytes, reps)) if cupy is not None else None


def floor_cell(floor, t):
    """The one-call read floor and the call's time as a share of it: "11.6 (62%)"."""
    return f"{fmt_us(floor)} ({100 * med(floor) / med(t):.0f}%)" if floor else "-"


def tensors(host, copies):
    """`copies` device copies of one host array: mtlinv Tensors and the torch views of the same memory."""
    mt = [mtlinv.asarray(host) for _ in range(copies)]
    return mt, [torch.from_dlpack(t) for t in mt]


row = report.md_row


def med(t):
    """A spread's median, a number as is, None as is."""
    return t["median"] if isinstance(t, dict) else t


def fmt_us(t):
    return f"{med(t) * 1e6:.1f}" if t is not None else "-"


def ratio(a, b):
    return f"{med(a) / med(b):.2f}" if a is not None and b is not None else "-"


# The split counts and row tiles the tuning scripts (tune_gemv_cuda.py, tune_qgemv_cuda.py) sweep.
TUNE_SPLITS = (1, 2, 4, 8)
TUNE_TILES = (1, 2, 4, 8)
MMA_SPLITS = (1, 2, 4, 8, 16)  # the matrix-unit kernels' (at most 16 simdgroups)


def split_header(splits=TUNE_SPLITS, rows="M (tile R)"):
    """The head of a tuning table: a column per split count."""
    return "\n".join([row(["K", "N", rows] + [f"splits {s}" for s in splits] + ["plan's splits"]),
                      row(["---:"] * (4 + len(splits)))])


def split_times(launch_for, reps, nbytes, splits=TUNE_SPLITS):
    """One tuning row: the spread of a call at every split count ({"S": spread}; launch_for(s) gives the rotating
    calls at s splits), and its cells, us per call (GB/s of `nbytes`) at the median."""
    spreads = {str(s): event_spread(launch_for(s), reps) for s in splits}
    cells = [f"{t['median'] * 1e6:.1f} ({nbytes / t['median'] / 1e9:.0f})" for t in spreads.values()]
    return spreads, cells


def canonical_rows(calls, tiled_calls, reps, case):
    """The canonical time with the weights in rows, after checking that the tile layout gives the same bits."""
    with mtlinv.batch_invariant(16):
        t_rows = event_spread(calls, reps)
        same = np.asarray(calls[0]()).tobytes() == np.asarray(tiled_calls[0]()).tobytes()
    if not same:
        raise AssertionError(f"{case}: the tile layout's bits differ from the rows'")
    return t_rows


MATVEC_COLUMNS = ["K", "N", "M", "canonical rows us", "canonical tiles us", "throughput us", "{peer} us",
                  "tiles GB/s", "% of copy", "floor us (% of it)", "can(M)/can(1)", "can/{peer}", "tiles/rows"]


def matvec_row(r, copy_bw, can1, peer):
    bw = r["canonical_bytes"] / med(r["canonical"])
    return row([r["k"], r["n"], r["m"], fmt_us(r["canonical_rows"]), fmt_us(r["canonical"]), fmt_us(r["throughput"]),
                fmt_us(r["peer"]), f"{bw / 1e9:.0f}", f"{100 * bw / copy_bw:.0f}%", floor_cell(r["read_floor"],
                r["canonical"]), ratio(r["canonical"], can1), ratio(r["canonical"], r["peer"]),
                ratio(r["canonical"], r["canonical_rows"])])


def bench_gemv(ms, reps, copy_bw, results, say):
    say("\n## gemv, bf16, y = x @ W.T, W [N, K]\n")
    say("Canonical with W in rows and in the tile layout (mtlinv.tile_weights: the same bits); bandwidth, floor and")
    say("ratios are the tile layout's. Times: medians of the event-timed calls (min and max in the JSON).\n")
    for line in report.md_header([c.format(peer="cuBLAS") for c in MATVEC_COLUMNS]):
        say(line)
    for k, n in SHAPES:
        w_host = (RNG.standard_normal((n, k), dtype=np.float32) * k ** -0.5).astype(BF16)
        copies = copies_for(w_host.nbytes)
        w_mt, w_th = tensors(w_host, copies)
        tiles_host = mtlinv.tile_weights(w_host)
        w_tiles = [mtlinv.asarray(tiles_host) for _ in range(copies)]
        floor = read_floor(w_host.nbytes, reps)
        can1 = None
        for m in ms:
            x = mtlinv.asarray(RNG.standard_normal((m, k), dtype=np.float32).astype(BF16))
            xt = torch.from_dlpack(x)
            calls = [lambda w=w: ops.gemv(x, w) for w in w_mt]
            tiled_calls = [lambda w=w: ops.gemv(x, w) for w in w_tiles]
            t_rows = canonical_rows(calls, tiled_calls, reps, f"gemv K={k} N={n} M={m}")
            t_can, t_thr = canonical_and_throughput(tiled_calls, reps, m, 16)
            t_torch = event_spread([lambda w=w: F.linear(xt, w) for w in w_th], reps)
            can1 = can1 or t_can
            nbytes = w_host.nbytes + 2 * (m * k + m * n)
            results.append({"op": "gemv", "k": k, "n": n, "m": m, "canonical": t_can, "canonical_rows": t_rows,
                            "throughput": t_thr, "peer": t_torch, "canonical_bytes": nbytes, "peer_bytes": nbytes,
                            "read_floor": floor})
            say(matvec_row(results[-1], copy_bw, can1, "cuBLAS"))
        check_gemv_rows(x_rows=8, k=k, w=w_tiles[0], say=say)
        del w_mt, w_th, w_tiles
        torch.cuda.empty_cache()


def check_gemv_rows(x_rows, k, w, say):
    """Row r of an 8-row canonical call has the bits of the call on row r alone (the op tests do this in depth)."""
    x = RNG.standard_normal((x_rows, k), dtype=np.float32).astype(BF16)
    with mtlinv.batch_invariant(16):
        full = np.asarray(ops.gemv(x, w))
        same = all(np.asarray(ops.gemv(x[r:r + 1], w)).tobytes() == full[r:r + 1].tobytes() for r in range(x_rows))
    say(f"\n(K={k}: rows of the 8-row canonical call bit-identical to single-row calls: {same})\n")
    if not same:
        raise AssertionError(f"gemv K={k}: a row of the 8-row canonical call differs from its single-row call")


def bench_qgemv(ms, reps, copy_bw, results, say, group=64, bits=4):
    say(f"\n## qgemv, {bits}-bit g{group} weights, bf16 activations (cuBLAS: dense bf16 of the same shape)\n")
    say("Canonical with the weights in MLX's row layout and in the tile layout (mtlinv.quant.tile: the same bits);")
    say("bandwidth, floor and ratios are the tile layout's; cuBLAS reads the dense bf16 matrix (its own bytes).\n")
    for line in report.md_header([c.format(peer="cuBLAS bf16") for c in MATVEC_COLUMNS]):
        say(line)
    cublas = {(r["k"], r["n"], r["m"]): r for r in results if r["op"] == "gemv"}
    for k, n in SHAPES:
        # Random codes and plausible scales: the timing does not depend on the values.
        wq_host = RNG.integers(0, 2**32, size=(n, k * bits // 32), dtype=np.uint32)
        scales_host = (RNG.random((n, k // group), dtype=np.float32) * 0.02).astype(BF16)
        biases_host = (-RNG.random((n, k // group), dtype=np.float32) * 0.1).astype(BF16)
        tiles_host = quant.tile(wq_host, scales_host, biases_host, group_size=group, bits=bits)
        wbytes = wq_host.nbytes + scales_host.nbytes + biases_host.nbytes
        copies = copies_for(wbytes)
        packs = [tuple(mtlinv.asarray(a) for a in (wq_host, scales_host, biases_host)) for _ in range(copies)]
        tiled = [tuple(mtlinv.asarray(a) for a in tiles_host) for _ in range(copies)]
        floor = read_floor(wbytes, reps)
        can1 = None
        for m in ms:
            x = mtlinv.asarray(RNG.standard_normal((m, k), dtype=np.float32).astype(BF16))
            calls = [lambda p=p: ops.qgemv(x, *p, group_size=group, bits=bits) for p in packs]
            tiled_calls = [lambda p=p: ops.qgemv(x, *p, group_size=group, bits=bits) for p in tiled]
            t_rows = canonical_rows(calls, tiled_calls, reps, f"qgemv K={k} N={n} M={m}")
            t_can, t_thr = canonical_and_throughput(tiled_calls, reps, m, 16)
            can1 = can1 or t_can
            dense = cublas.get((k, n, m), {})
            results.append({"op": "qgemv", "k": k, "n": n, "m": m, "bits": bits, "group": group, "canonical": t_can,
                            "canonical_rows": t_rows, "throughput": t_thr, "peer": dense.get("peer"),
                            "canonical_bytes": wbytes + 2 * (m * k + m * n), "peer_bytes": dense.get("peer_bytes"),
                            "read_floor": floor})
            say(matvec_row(results[-1], copy_bw, can1, "cuBLAS bf16"))
        del packs, tiled


def bench_sdpa(lengths, q_lens, reps, copy_bw, results, say, hq=32, hkv=8, d=128):
    say(f"\n## sdpa, bf16, Hq={hq}, Hkv={hkv}, D={d}, causal (bottom-right), canonical = limit 8\n")
    for line in report.md_header(["keys", "Lq", "canonical us", "throughput us", "torch SDPA us",
                                  "canonical KV GB/s", "% of copy", "floor us (% of it)", "can(Lq)/can(1)",
                                  "can/torch", "bit-exact"]):
        say(line)
    for keys in lengths:
        kv_host = RNG.standard_normal((1, hkv, keys, d), dtype=np.float32).astype(BF16)
        copies = copies_for(2 * kv_host.nbytes)
        k_mt, k_th = tensors(kv_host, copies)
        v_mt, v_th = tensors(kv_host[:, :, ::-1].copy(), copies)
        floor = read_floor(2 * kv_host.nbytes, reps)
        decode = None
        for lq in q_lens:
            q_host = RNG.standard_normal((1, hq, lq, d), dtype=np.float32).astype(BF16)
            q = mtlinv.asarray(q_host)
            qt = torch.from_dlpack(q)
            calls = [lambda k=k, v=v: ops.sdpa(q, k, v) for k, v in zip(k_mt, v_mt)]
            t_can, t_thr = canonical_and_throughput(calls, reps, lq, 8)
            t_torch = event_spread(torch_sdpa_calls(qt, k_th, v_th, lq, keys), reps)
            decode = decode or t_can
            exact = verify_exact(q_host, k_mt[0], v_mt[0], keys) if lq > 1 else True
            nbytes = 2 * kv_host.nbytes + 2 * 2 * q_host.size
            bw = nbytes / med(t_can)
            results.append({"op": "sdpa", "keys": keys, "q_len": lq, "canonical": t_can, "throughput": t_thr,
                            "peer": t_torch, "canonical_bytes": nbytes, "bit_exact": exact, "read_floor": floor})
            say(row([keys, lq, fmt_us(t_can), fmt_us(t_thr), fmt_us(t_torch), f"{bw / 1e9:.0f}",
                     f"{100 * bw / copy_bw:.0f}%", floor_cell(floor, t_can), ratio(t_can, decode),
                     ratio(t_can, t_torch), "yes" if exact else "NO"]))
        del k_mt, k_th, v_mt, v_th
        torch.cuda.empty_cache()


def torch_sdpa_calls(q, ks, vs, lq, keys):
    """PyTorch's attention on the same memory, with the bottom-right causal mask that verification needs."""
    mask = None
    if lq > 1:
        mask = causal_lower_right(lq, keys)
        try:
            F.scaled_dot_product_attention(q, ks[0], vs[0], attn_mask=mask, enable_gqa=True)
        except (TypeError, RuntimeError, NotImplementedError):  # a CausalBias without GQA support: a dense mask
            mask = torch.ones(lq, keys, dtype=torch.bool, device="cuda").tril(keys - lq)
    return [lambda k=k, v=v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
            for k, v in zip(ks, vs)]


def verify_exact(q_host, k, v, keys):
    """Query i of the canonical Lq-query call has the bits of the single-query call over the first
    keys - Lq + i + 1 keys (design.md §1)."""
    lq = q_host.shape[2]
    with mtlinv.batch_invariant(8):
        full = np.asarray(ops.sdpa(q_host, k, v))
        return all(np.asarray(ops.sdpa(q_host[:, :, i:i + 1], k, v, kv_len=keys - lq + i + 1)).tobytes()
                   == full[:, :, i:i + 1].tobytes() for i in range(lq))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    report.add_out_argument(ap)
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="M in 1, 2, 8, 16; 1K and 16K keys")
    ap.add_argument("--only", nargs="+", choices=["gemv", "qgemv", "sdpa"], default=["gemv", "qgemv", "sdpa"])
    ap.add_argument("--qgemv-bits", nargs="+", type=int, choices=[4, 8], default=[4, 8],
                    help="the code widths qgemv is timed at (groups of 64 each; default: 4 and 8)")
    args = ap.parse_args()
    if torch is None:
        ap.error("needs PyTorch with CUDA (the baselines, and events to time with)")
    if args.reps < 1:
        ap.error(f"--reps must be >= 1, got {args.reps}")
    ms = [1, 2, 8, 16] if args.quick else list(range(1, 17))
    lengths = [1024, 16384] if args.quick else [1024, 4096, 16384, 65536]
    info = mtlinv.device_info()
    say = report.Lines()
    overlap = "overlapped" if info["overlapped_launches"] else "serial"
    say(f"# mtlinv on {info['name']} ({info['backend']}, {overlap} launches); torch {torch.__version__} on "
        f"{torch.cuda.get_device_name()}; medians of {args.reps} event-timed calls\n")
    copy_bw = copy_bandwidth()
    say(f"device-to-device copy: {copy_bw / 1e9:.0f} GB/s (read + write)")
    if cupy is None:
        say("no one-call read floor: install CuPy for the floor column")
    results = []
    sections = {"gemv": lambda: bench_gemv(ms, args.reps, copy_bw, results, say),
                "qgemv": lambda: [bench_qgemv(ms, args.reps, copy_bw, results, say, bits=bits)
                                  for bits in args.qgemv_bits],
                "sdpa": lambda: bench_sdpa(lengths, list(range(1, 9)), args.reps, copy_bw, results, say)}
    failed = False
    for name in args.only:
        try:
            sections[name]()
        except Exception:  # report and go on: one broken section must not cost the others their GPU time
            failed = True
            say(f"\n{name} FAILED:\n{traceback.format_exc()}")
        # After each section: a run cut off by a time limit keeps what it measured.
        report.write(args.out, "bench_cuda", {
            "torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "copy_bytes_per_s": copy_bw,
            "reps": args.reps, "failed": failed, "sections": args.only[:args.only.index(name) + 1],
            "peer_names": {"gemv": "cuBLAS", "qgemv": "cuBLAS dense bf16", "sdpa": "torch SDPA"},
            "results": results}, say.text())
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
