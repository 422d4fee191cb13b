#!/usr/bin/env python3
"""sdpa benchmark: decode (Lq = 1) and causal verification (Lq = 2, 4, 8) over a KV cache, Hq=32, Hkv=8, D=128.

For each context length it reports, measured in one run on the active device:
  * the canonical path (limit >= Lq) and the throughput path (limit 0) for each Lq, and their ratio;
  * verify(k) / decode: the cost of checking k draft tokens relative to decoding one (canonical path);
  * K/V bytes per second: the kv_len keys and values of every kv head, counted once per call, and their share of
    the copy bandwidth where the peer runs;
  * the peer: MLX's mx.fast.scaled_dot_product_attention (on a Mac its GPU, with mlx[cpu] on Linux its CPU) with
    the same bottom-right causal mask, or float32 attention in NumPy without MLX.

    python benchmarks/bench_sdpa.py [--lengths 1024 4096 16384 65536] [--repeat 3] [--out DIR]
"""
import argparse
import time

import ml_dtypes
import numpy as np

import mtlinv
import report
import timing

Q_HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
VERIFY = (2, 4, 8)


def timed(fns, repeat):
    """The spread of `repeat` calls of each function after one warm-up call each. The functions take turns within
    each round, so a slow spell of the machine falls on all of them alike."""
    times = [[] for _ in fns]
    for fn in fns:
        fn()
    for _ in range(repeat):
        for fn, spent in zip(fns, times):
            start = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - start)
    return [report.spread(t) for t in times]


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


def mlx_attention(mx, q, k, v, kv_len):
    """A no-argument call of MLX's fused attention on the same bf16 data, bottom-right causal."""
    lq = q.shape[2]
    k, v = (np.asarray(a, np.float32)[:, :, :kv_len] for a in (k, v))
    qm, km, vm = (mx.array(np.asarray(a, np.float32)).astype(mx.bfloat16) for a in (q, k, v))
    mask = mx.array(np.arange(kv_len)[None, :] <= (kv_len - lq + np.arange(lq))[:, None])
    mx.eval(qm, km, vm, mask)
    return lambda: mx.eval(mx.fast.scaled_dot_product_attention(qm, km, vm, scale=HEAD_DIM ** -0.5, mask=mask))


def run(lengths, repeat, mx, copy_bw, say):
    rng = np.random.default_rng(0)
    dtype = ml_dtypes.bfloat16
    capacity = max(lengths)
    k_host = rng.standard_normal((1, KV_HEADS, capacity, HEAD_DIM), np.float32)
    v_host = rng.standard_normal((1, KV_HEADS, capacity, HEAD_DIM), np.float32)
    k = mtlinv.asarray(k_host.astype(dtype))
    v = mtlinv.asarray(v_host.astype(dtype))
    queries = {lq: mtlinv.asarray(rng.standard_normal((1, Q_HEADS, lq, HEAD_DIM)).astype(dtype))
               for lq in (1,) + VERIFY}
    results = []
    for kv_len in lengths:
        kv_bytes = 2 * KV_HEADS * kv_len * HEAD_DIM * np.dtype(dtype).itemsize
        decode = None
        for lq, q in queries.items():
            q32 = np.asarray(q, np.float32)

            def call():
                mtlinv.sdpa(q, k, v, kv_len=kv_len)

            canonical, throughput = timed([with_limit(max(VERIFY), call), with_limit(0, call)], repeat)
            # Apart: BLAS threads that spin after a call would slow the emulator's workers on the same cores.
            peer_fn = mlx_attention(mx, q, k, v, kv_len) if mx else lambda: numpy_attention(q32, k_host, v_host,
                                                                                            kv_len)
            [peer] = timed([peer_fn], repeat)
            decode = decode or canonical
            results.append({"op": "sdpa", "keys": kv_len, "q_len": lq, "canonical": canonical,
                            "throughput": throughput, "peer": peer, "canonical_bytes": kv_bytes})
            c = canonical["median"]
            say(report.md_row([kv_len, lq, f"{c * 1e3:.2f}", f"{throughput['median'] * 1e3:.2f}",
                               f"{peer['median'] * 1e3:.2f}", f"{c / throughput['median']:.2f}",
                               f"{c / decode['median']:.2f}", f"{kv_bytes / c / 1e9:.3f}",
                               f"{100 * kv_bytes / c / copy_bw:.1f}%", f"{c / peer['median']:.2f}"]))
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 16384, 65536])
    ap.add_argument("--repeat", type=int, default=3)
    report.add_out_argument(ap)
    args = ap.parse_args()
    if args.repeat < 1 or min(args.lengths) < max(VERIFY):
        ap.error(f"--repeat must be >= 1 and --lengths >= {max(VERIFY)}, got {args.repeat} and {args.lengths}")
    info = mtlinv.device_info()
    mx, peer, copy_bw = timing.peer()
    say = report.Lines()
    say(f"# sdpa: decode and verify, Hq={Q_HEADS}, Hkv={KV_HEADS}, D={HEAD_DIM}, bf16, beside {peer}\n")
    say(f"Device: {info['backend']} ({info['name']}); median of {args.repeat} calls after a warm-up, canonical and "
        "throughput taking turns. canonical: limit 8; throughput: limit 0 (Lq = 1 takes the canonical path "
        "regardless); verify/decode: canonical Lq vs canonical Lq = 1; K/V GB/s: bytes of K and V read per second "
        f"on the canonical path, against a copy bandwidth of {copy_bw / 1e9:.0f} GB/s (read + write, where the peer "
        "runs).\n")
    for line in report.md_header(["kv_len", "Lq", "canonical ms", "throughput ms", f"{peer} ms",
                                  "canonical / throughput", "verify / decode", "K/V GB/s", "% of copy",
                                  "canonical / peer"]):
        say(line)
    results = run(args.lengths, args.repeat, mx, copy_bw, say)
    report.write(args.out, "bench_sdpa", {"copy_bytes_per_s": copy_bw, "peer_names": {"sdpa": peer},
                                          "results": results}, say.text())


if __name__ == "__main__":
    main()
