"""Where a decoding step's time goes: one forward of the llama decoder (mtlinv.model.device_model) at M = 1 (a
decode step) and at M = k + 1 (a verification call), on the active device, timed three ways:

  issue  until forward_on_device returns: on CUDA its kernels are then queued, not run; elsewhere they have run;
  total  until mtlinv.synchronize() returns after it (forward's own download of the logits left out);
  gpu    CUDA events recorded before and after it (CUDA with torch only): the device's span for the step.

and the ops each forward calls (each one Python call into the extension). On CUDA, issue close to total means the
host bounds the step (the GPU waits for kernels to be queued); gpu close to total with issue well below it means
the device does. Every time is the median of --reps forwards at the same position (the cache rolled back between
them), after warm-up forwards at every M timed, so that one-time costs (first launches, the block cache) are left
out.

The model is SmolLM2-135M's shape with random weights quantized to 4 bits (float32 scales, as the GGUF imports have
them) unless --model names a GGUF file, so it needs no download:

  python3 benchmarks/profile_decode.py [--model PATH] [--k 4] [--position 64] [--reps 20] [--cprofile]
"""
from __future__ import annotations

import argparse
import cProfile
import functools
import json
import pstats
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import mtlinv
from mtlinv.model import LlamaConfig, LlamaWeights, load_gguf
from mtlinv.model.device_model import DeviceModel, DeviceWeights
from mtlinv.model.reference import LayerWeights

# SmolLM2-135M-Instruct's hyperparameters (the demo's model), for the random stand-in.
SMOLLM2_135M = LlamaConfig(n_layers=30, n_heads=9, n_kv_heads=3, hidden=576, ffn=1536, head_dim=64,
                           rope_theta=100000.0, rms_eps=1e-5, vocab=49152, context=8192)
# The ops a forward calls (DeviceModel reaches them as attributes of the mtlinv module, so wrappers see them).
OPS = ("embedding", "rms_norm", "add", "add_rms_norm", "qgemv", "swiglu", "swiglu_halves", "rope_heads", "write_heads",
       "qkv_to_heads", "sdpa", "heads_to_rows")


def random_weights(config: LlamaConfig, seed: int = 0) -> LlamaWeights:
    """Random float64 weights of the given shape, scaled so that activations stay O(1) through the layers."""
    rng = np.random.default_rng(seed)
    h, d = config.hidden, config.head_dim

    def mat(n, k):
        return rng.standard_normal((n, k)) / np.sqrt(k)

    def norm():
        return 1.0 + 0.1 * rng.standard_normal(h)

    layers = tuple(
        LayerWeights(norm(), mat(config.n_heads * d, h), mat(config.n_kv_heads * d, h), mat(config.n_kv_heads * d, h),
                     mat(h, config.n_heads * d), norm(), mat(config.ffn, h), mat(config.ffn, h), mat(h, config.ffn))
        for _ in range(config.n_layers))
    embedding = rng.standard_normal((config.vocab, h))
    return LlamaWeights(config, embedding, layers, norm(), embedding)


def load_weights(model_path: str | None) -> tuple[str, DeviceWeights]:
    if model_path:
        return Path(model_path).name, DeviceWeights.from_gguf(load_gguf(model_path))
    c = SMOLLM2_135M
    print(f"quantizing a random llama of SmolLM2-135M's shape ({c.n_layers} layers, hidden {c.hidden}) to 4 bits",
          file=sys.stderr, flush=True)
    return "random, SmolLM2-135M's shape, 4-bit", DeviceWeights.from_reference(random_weights(c), bits=4)


class GpuEvents:
    """CUDA events on the default stream, which mtlinv's CUDA backend queues its kernels on; None off CUDA or
    without torch."""

    @staticmethod
    def make():
        if mtlinv.device_info()["backend"] != "cuda":
            return None
        try:
            import torch
        except ImportError:
            return None
        return GpuEvents(torch)

    def __init__(self, torch):
        self.torch = torch

    def span(self, fn) -> float:
        start = self.torch.cuda.Event(enable_timing=True)
        end = self.torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3


def count_ops(fn) -> dict[str, int]:
    """How many times fn() calls each op of OPS."""
    counts = dict.fromkeys(OPS, 0)
    originals = {name: getattr(mtlinv, name) for name in OPS if hasattr(mtlinv, name)}

    def counting(name, op):
        @functools.wraps(op)
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return op(*args, **kwargs)
        return wrapper

    try:
        for name, op in originals.items():
            setattr(mtlinv, name, counting(name, op))
        fn()
    finally:
        for name, op in originals.items():
            setattr(mtlinv, name, op)
    return {name: n for name, n in counts.items() if n}


def profile_rows(model: DeviceModel, position: int, m: int, reps: int, events: GpuEvents | None) -> dict:
    tokens = [(7 * i + 3) % model.weights.config.vocab for i in range(m)]

    def step():
        model.rollback(position)
        return model.forward_on_device(tokens, position)

    for _ in range(3):
        step()
        mtlinv.synchronize()
    issue, total, gpu = [], [], []
    for _ in range(reps):
        mtlinv.synchronize()
        t0 = time.perf_counter()
        step()
        t1 = time.perf_counter()
        mtlinv.synchronize()
        t2 = time.perf_counter()
        issue.append(t1 - t0)
        total.append(t2 - t0)
        if events:
            gpu.append(events.span(step))
    ops = count_ops(step)
    mtlinv.synchronize()
    row = {"m": m, "issue_s": statistics.median(issue), "total_s": statistics.median(total),
           "gpu_s": statistics.median(gpu) if gpu else None, "ops": sum(ops.values()), "ops_by_name": ops}
    row["host_per_op_s"] = row["issue_s"] / row["ops"]
    return row


def us(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:.0f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="a GGUF file (default: a random model of SmolLM2-135M's shape)")
    ap.add_argument("--k", type=int, default=4, help="draft tokens per round: verification runs k + 1 rows")
    ap.add_argument("--position", type=int, default=64, help="cache positions before the timed step")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--cprofile", action="store_true", help="also print the host's 15 costliest functions at M = 1")
    ap.add_argument("--out", help="write the rows as JSON here")
    args = ap.parse_args(argv)
    for name in ("k", "position", "reps"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be >= 1, got {getattr(args, name)}")

    info = mtlinv.device_info()
    what, weights = load_weights(args.model)
    capacity = args.position + args.k + 1
    if capacity > weights.config.context:
        ap.error(f"--position {args.position} + --k {args.k} + 1 = {capacity} exceeds the model's context "
                 f"{weights.config.context}")
    model = DeviceModel(weights, capacity)
    model.forward_on_device([1] * args.position, 0)  # the cache the timed steps attend to
    mtlinv.synchronize()
    limit = args.k + 1
    events = GpuEvents.make()
    print(f"device: {info['backend']} ({info['name']}); model: {what}; {args.position} cached positions; "
          f"limit {limit}; medians of {args.reps}")
    print(f"{'M':>3} {'ops':>5} {'issue us':>9} {'total us':>9} {'gpu us':>7} {'host us/op':>10} {'total / M=1':>11}")
    rows = []
    with mtlinv.batch_invariant(limit):
        for m in (1, limit):
            row = profile_rows(model, args.position, m, args.reps, events)
            rows.append(row)
            print(f"{m:>3} {row['ops']:>5} {us(row['issue_s']):>9} {us(row['total_s']):>9} {us(row['gpu_s']):>7} "
                  f"{row['host_per_op_s'] * 1e6:>10.2f} {row['total_s'] / rows[0]['total_s']:>11.2f}")
        print("ops per forward: " + ", ".join(f"{k} {v}" for k, v in rows[0]["ops_by_name"].items()))
        if args.cprofile:
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(args.reps):
                model.rollback(args.position)
                model.forward_on_device([1], args.position)
            mtlinv.synchronize()
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
    if args.out:
        Path(args.out).write_text(json.dumps({"device": info["name"], "backend": info["backend"], "model": what,
                                              "position": args.position, "limit": limit, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
