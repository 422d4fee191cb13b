"""What one op call costs the host: each op a decoder forward calls (benchmarks/profile_decode.py counts them), at
SmolLM2-135M's shapes and one row, called --calls times in a row on the active device, timed two ways:

  issue  until the last call returns, per call: on CUDA the kernels are then queued, not run
  total  until mtlinv.synchronize() returns after them, per call

against two floors measured in the same run: a call into the extension that launches nothing
(mtlinv.get_limit) and, on CUDA with CuPy, an empty kernel launched from CuPy (the driver's cost of a launch plus
CuPy's own). On CUDA a loop of this many calls can fill the launch queue, so an op's time is an upper bound on its
host cost: part of it may be the queue waiting for the GPU (docs/decisions.md, "Decoder step: host side", separates
the two with launches skipped). Each time is the median of --repeats runs after a warm-up run.

  python3 benchmarks/op_overhead.py [--calls 2000] [--repeats 5] [--out DIR]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import mtlinv
import report
from mtlinv import quant
from timing import cuda_module

# SmolLM2-135M's shapes (the demo's model): hidden 576, 9 query heads and 3 KV heads of 64, ffn 1536, Q4_1 weights
# (4-bit, groups of 32, float32 scales and biases).
HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN, GROUP = 576, 9, 3, 64, 1536, 32
CACHE, POSITION = 512, 64


def quantized(rng, n: int, k: int) -> tuple:
    wq, scales, biases = quant.quantize((rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32),
                                        group_size=GROUP, bits=4)
    return mtlinv.asarray(wq), mtlinv.asarray(scales), mtlinv.asarray(biases)


def decoder_ops() -> dict:
    """name -> a no-argument call of that op, as a forward makes it at one row."""
    rng = np.random.default_rng(0)
    bf16 = quant.BFLOAT16

    def act(*shape):
        return mtlinv.asarray(rng.standard_normal(shape).astype(bf16))

    x, weight = act(1, HIDDEN), act(HIDDEN)
    qkv_rows = HEADS + 2 * KV_HEADS
    w_qkv, w_gate_up, w_down = quantized(rng, qkv_rows * HEAD_DIM, HIDDEN), quantized(rng, 2 * FFN, HIDDEN), \
        quantized(rng, HIDDEN, FFN)
    # The shapes DeviceModel passes: the projection's flat q|k|v, per-layer [H, C, D] caches, [Hq, 1, D] queries.
    qkv, gate_up = act(1, qkv_rows * HEAD_DIM), act(1, 2 * FFN)
    k_cache, v_cache = act(KV_HEADS, CACHE, HEAD_DIM), act(KV_HEADS, CACHE, HEAD_DIM)
    heads, hidden = act(HEADS, 1, HEAD_DIM), act(1, FFN)
    return {
        "get_limit (no launch)": mtlinv.get_limit,
        "reshape (no launch)": lambda: qkv.reshape(1, qkv_rows, -1),
        "add_rms_norm": lambda: mtlinv.add_rms_norm(x, x, weight, 1e-5),
        "qgemv q|k|v 576->960": lambda: mtlinv.qgemv(x, *w_qkv, group_size=GROUP, bits=4),
        "qgemv gate|up 576->3072": lambda: mtlinv.qgemv(x, *w_gate_up, group_size=GROUP, bits=4),
        "qgemv down 1536->576": lambda: mtlinv.qgemv(hidden, *w_down, group_size=GROUP, bits=4),
        "swiglu_halves": lambda: mtlinv.swiglu_halves(gate_up),
        "qkv_to_heads": lambda: mtlinv.qkv_to_heads(qkv, HEADS, k_cache, v_cache, POSITION, POSITION, 1e5),
        "sdpa": lambda: mtlinv.sdpa(heads, k_cache, v_cache, causal=True, kv_len=POSITION + 1),
        "heads_to_rows": lambda: mtlinv.heads_to_rows(heads),
    }


def cupy_empty_launch():
    """A launch of an empty kernel from CuPy, or None off CUDA or without CuPy."""
    cupy = cuda_module("cupy")
    if cupy is None:
        return None
    kernel = cupy.RawKernel('extern "C" __global__ void empty() {}', "empty")
    return lambda: kernel((1,), (32,), ())


def time_calls(fn, calls: int, repeats: int) -> tuple[dict, dict]:
    """(issue, total) seconds per call: the spread over repeats of `calls` calls in a row."""
    issue, total = [], []
    for run in range(repeats + 1):
        mtlinv.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        mtlinv.synchronize()
        t2 = time.perf_counter()
        if run:  # run 0 warms up: first launches, the memory cache's first fills
            issue.append((t1 - t0) / calls)
            total.append((t2 - t0) / calls)
    return report.spread(issue), report.spread(total)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=2000, help="calls in a row per timed run")
    ap.add_argument("--repeats", type=int, default=5)
    report.add_out_argument(ap)
    args = ap.parse_args(argv)
    for name in ("calls", "repeats"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    info = mtlinv.device_info()
    ops = decoder_ops()
    launch = cupy_empty_launch()
    if launch is not None:
        ops = {"cupy empty kernel (driver floor)": launch, **ops}
    say = report.Lines()
    say(f"# What one op call costs the host: {info['backend']} ({info['name']})\n")
    say(f"{args.calls} calls in a row, medians of {args.repeats} runs (min and max in the JSON), us per call\n")
    for line in report.md_header(["call", "issue us", "total us"]):
        say(line)
    rows = []
    for name, fn in ops.items():
        issue, total = time_calls(fn, args.calls, args.repeats)
        rows.append({"call": name, "issue": issue, "total": total})
        say(report.md_row([name, f"{issue['median'] * 1e6:.2f}", f"{total['median'] * 1e6:.2f}"]))
    report.write(args.out, "op_overhead", {"calls": args.calls, "rows": rows}, say.text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
