"""sdpa benchmark: decode (Lq = 1) and causal verification (Lq = 2, 4, 8) over a KV cache, Hq=32, Hkv=8, D=128.

For each context length it reports, measured in one run on the active device:
  * the canonical path (limit >= Lq) and the throughput path (limit 0) for each Lq, and their ratio;
  * verify(k) / decode: the cost of checking k draft tokens relative to decoding one (canonical path);
  * K/V bytes per second: the kv_len keys and values of every kv head, counted once per call;
  * numpy (float32 on the CPU) for the same attention, the peer a user would otherwise run.

    python benchmarks/bench_sdpa.py [--lengths 1024 4096 16384 65536] [--repeat 3] [--out benchmarks/results]
"""
import argparse
import os
import pathlib
import platform
import statistics
import time

import ml_dtypes
import numpy as np

import mtlinv

Q_HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
VERIFY = (2, 4, 8)


def timed(fns, repeat):
    """Median seconds of `repeat` calls of each function after one warm-up call each. The functions take turns
    within each round, so a slow spell of the machine falls on all of them alike."""
    times = [[] for _ in fns]
    for fn in fns:
        fn()
    for _ in range(repeat):
        for fn, spent in zip(fns, times):
            start = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def with_limit(limit, fn):
    def call():
        with mtlinv.batch_invariant(limit):
            fn()
    return call


def numpy_attention(q, k, v, kv_len):
    """float32 causal attention in numpy, GQA by grouping query heads over their kv head."""
    lq = q.shape[2]
    group = q.shape[1] // k.shape[1]
    qg = q.reshape(k.shape[1], group * lq, HEAD_DIM)
    s = qg @ np.swapaxes(k[0, :, :kv_len], -1, -2) * HEAD_DIM ** -0.5
    position = kv_len - lq + np.tile(np.arange(lq), group)
    s = np.where(np.arange(kv_len)[None, :] <= position[:, None], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v[0, :, :kv_len]


def run(lengths, repeat):
    rng = np.random.default_rng(0)
    dtype = ml_dtypes.bfloat16
    capacity = max(lengths)
    k_host = rng.standard_normal((1, KV_HEADS, capacity, HEAD_DIM), np.float32)
    v_host = rng.standard_normal((1, KV_HEADS, capacity, HEAD_DIM), np.float32)
    k = mtlinv.asarray(k_host.astype(dtype))
    v = mtlinv.asarray(v_host.astype(dtype))
    queries = {lq: mtlinv.asarray(rng.standard_normal((1, Q_HEADS, lq, HEAD_DIM)).astype(dtype))
               for lq in (1,) + VERIFY}

    rows = []
    for kv_len in lengths:
        kv_bytes = 2 * KV_HEADS * kv_len * HEAD_DIM * np.dtype(dtype).itemsize
        canonical, throughput = {}, {}
        for lq, q in queries.items():
            q32 = np.asarray(q, np.float32)

            def call():
                mtlinv.sdpa(q, k, v, kv_len=kv_len)

            canonical[lq], throughput[lq] = timed([with_limit(max(VERIFY), call), with_limit(0, call)], repeat)
            # Apart: BLAS threads that spin after a call would slow the emulator's workers on the same cores.
            [peer] = timed([lambda: numpy_attention(q32, k_host, v_host, kv_len)], repeat)
            rows.append({
                "kv_len": kv_len, "lq": lq, "canonical_ms": canonical[lq] * 1e3,
                "throughput_ms": throughput[lq] * 1e3, "canonical_vs_throughput": canonical[lq] / throughput[lq],
                "verify_vs_decode": canonical[lq] / canonical[1], "kv_gb_s": kv_bytes / canonical[lq] / 1e9,
                "numpy_ms": peer * 1e3,
            })
            r = rows[-1]
            print(f"kv_len={kv_len:6d} Lq={lq}: canonical {r['canonical_ms']:9.2f} ms, throughput "
                  f"{r['throughput_ms']:9.2f} ms, verify/decode {r['verify_vs_decode']:5.2f}, "
                  f"K/V {r['kv_gb_s']:7.3f} GB/s, numpy {r['numpy_ms']:8.2f} ms", flush=True)
    return rows


def table(rows, repeat):
    info = mtlinv.device_info()
    lines = [
        f"# sdpa: decode and verify, Hq={Q_HEADS}, Hkv={KV_HEADS}, D={HEAD_DIM}, bf16",
        "",
        f"Device: {info['backend']} ({info['name']}); host {platform.machine()} with {os.cpu_count()} CPUs; "
        f"median of {repeat} calls after a warm-up, canonical and throughput taking turns; "
        "`benchmarks/bench_sdpa.py`.",
        "canonical: limit 8 (sdpa_blocks over chunks of S keys, then sdpa_combine); throughput: limit 0 (Lq = 1 "
        "takes the canonical path regardless; Lq > 1 the same two passes over a block count chosen from Lq, kv_len "
        "and the device); verify/decode: canonical Lq vs canonical Lq = 1; K/V GB/s: bytes of K and V read per "
        "second on the canonical path; numpy: float32 attention on the CPU.",
        "",
        "| kv_len | Lq | canonical ms | throughput ms | canonical / throughput | verify / decode | K/V GB/s "
        "| numpy ms |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['kv_len']} | {r['lq']} | {r['canonical_ms']:.2f} | {r['throughput_ms']:.2f} | "
                     f"{r['canonical_vs_throughput']:.2f} | {r['verify_vs_decode']:.2f} | {r['kv_gb_s']:.3f} | "
                     f"{r['numpy_ms']:.2f} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 16384, 65536])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path(__file__).parent / "results",
                    help="folder for sdpa_<backend>.md")
    args = ap.parse_args()
    rows = run(args.lengths, args.repeat)
    text = table(rows, args.repeat)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"sdpa_{mtlinv.device_info()['backend']}.md"
    path.write_text(text)
    print(f"written to {path}")


if __name__ == "__main__":
    main()
