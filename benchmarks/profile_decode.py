"""Where a decoding step's time goes: one forward of the llama decoder (mtlinv.model.device_model) at M = 1 (a
decode step) and at M = k + 1 (a verification call), on the active device, timed three ways:

  issue  until the forward returns: on CUDA its kernels are then queued, not run; elsewhere they have run;
  total  until mtlinv.synchronize() returns after it (forward's own download of the logits left out);
  gpu    CUDA events recorded before and after it (CUDA with torch only): the device's span for the step.

and the ops and kernel launches each forward issues. Each forward runs three ways, in turn: mtlinv.Decoder (the
ops called from C++, one Python call a forward: what DeviceModel runs), the same with its launch batches off (on
CUDA the decoder runs each layer's kernels as one graph launch; off, a driver call per kernel), and forward_by_ops
(the same ops called from Python one by one, the loop it replaced). All three give the same bits. On CUDA the
batched decoder's graph builds and kernel updates per forward are printed too. On CUDA, issue close to total means the
host bounds the step (the GPU waits for kernels to be queued); gpu close to total with issue well below it means
the device does. Every time is the median of --reps forwards at the same position (the cache rolled back between
them), after warm-up forwards at every M timed, so that one-time costs (first launches, the block cache) are left
out.

The model is SmolLM2-135M's shape with random weights quantized to 4 bits (float32 scales, as the GGUF imports have
them) unless --model names a GGUF file, so it needs no download:

  python3 benchmarks/profile_decode.py [--model PATH] [--k 4] [--position 64] [--reps 20] [--out DIR]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import mtlinv
from mtlinv.model import LlamaConfig, LlamaWeights, load_gguf
from mtlinv.model.device_model import DeviceModel, DeviceWeights, forward_by_ops
from mtlinv.model.reference import LayerWeights
import report
from timing import cuda_module

# SmolLM2-135M-Instruct's hyperparameters (the demo's model), for the random stand-in.
SMOLLM2_135M = LlamaConfig(n_layers=30, n_heads=9, n_kv_heads=3, hidden=576, ffn=1536, head_dim=64,
                           rope_theta=100000.0, rms_eps=1e-5, vocab=49152, context=8192)

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
        torch = cuda_module("torch")
        return None if torch is None else GpuEvents(torch)

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


def count_runs(fn) -> tuple[int, int, dict]:
    """(ops, kernel launches, launch batch counts) that fn() issues."""
    plans, launches = mtlinv._native._run_counts()
    batches = mtlinv._native._launch_batch_counts()
    fn()
    after = mtlinv._native._run_counts()
    batches_after = mtlinv._native._launch_batch_counts()
    return after[0] - plans, after[1] - launches, {k: batches_after[k] - batches[k] for k in batches}


def unbatched(fn):
    """fn with the decoder's launch batches off while it runs."""
    def run():
        previous = mtlinv._native._set_launch_batches(False)
        try:
            return fn()
        finally:
            mtlinv._native._set_launch_batches(previous)
    return run


def profile_rows(model: DeviceModel, position: int, m: int, reps: int, events: GpuEvents | None) -> list[dict]:
    """The forward at M rows run three ways, their repetitions interleaved so that the host's drift (20-40% within
    a minute on the GPU machine) falls on all alike: mtlinv.Decoder (one call) with and without its launch batches,
    and forward_by_ops (a Python call per op, the loop the decoder replaced), all with the model's caches, so all
    compute the same bits."""
    tokens = [(7 * i + 3) % model.weights.config.vocab for i in range(m)]

    def decoder():
        model.rollback(position)
        return model.forward_on_device(tokens, position)

    def by_ops():
        return forward_by_ops(model.weights, model._k, model._v, tokens, position)

    loops = {"decoder": decoder, "unbatched": unbatched(decoder), "by ops": by_ops}
    for step in loops.values():
        for _ in range(3):
            step()
            mtlinv.synchronize()
    times = {name: ([], [], []) for name in loops}
    for _ in range(reps):
        for name, step in loops.items():
            issue, total, gpu = times[name]
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
    rows = []
    for name, step in loops.items():
        issue, total, gpu = times[name]
        ops, launches, batches = count_runs(step)
        mtlinv.synchronize()
        rows.append({"m": m, "loop": name, "issue_s": statistics.median(issue), "total_s": statistics.median(total),
                     "gpu_s": statistics.median(gpu) if gpu else None, "issue": report.spread(issue),
                     "total": report.spread(total), "gpu": report.spread(gpu) if gpu else None, "ops": ops,
                     "launches": launches, "host_per_op_s": statistics.median(issue) / ops, "batches": batches})
    return rows


def us(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:.0f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="a GGUF file (default: a random model of SmolLM2-135M's shape)")
    ap.add_argument("--k", type=int, default=4, help="draft tokens per round: verification runs k + 1 rows")
    ap.add_argument("--position", type=int, default=64, help="cache positions before the timed step")
    ap.add_argument("--reps", type=int, default=20)
    report.add_out_argument(ap)
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
    say = report.Lines()
    say(f"# Where a decoding step's time goes: {info['backend']} ({info['name']})\n")
    say(f"model: {what}; {args.position} cached positions; limit {limit}; medians of {args.reps} forwards (min and "
        "max in the JSON)\n")
    for line in report.md_header(["M", "loop", "ops", "launches", "issue us", "total us", "gpu us", "host us/op",
                                  "total / decoder M=1", "batches/builds/updates"]):
        say(line)
    rows = []
    with mtlinv.batch_invariant(limit):
        for m in (1, limit):
            for row in profile_rows(model, args.position, m, args.reps, events):
                rows.append(row)
                b = row["batches"]
                say(report.md_row([m, row["loop"], row["ops"], row["launches"], us(row["issue_s"]),
                                   us(row["total_s"]), us(row["gpu_s"]), f"{row['host_per_op_s'] * 1e6:.2f}",
                                   f"{row['total_s'] / rows[0]['total_s']:.2f}",
                                   f"{b['batches']}/{b['builds']}/{b['updates']}"]))
    say()
    for m in (1, limit):
        decoder, plain, by_ops = (next(r for r in rows if r["m"] == m and r["loop"] == name)
                                  for name in ("decoder", "unbatched", "by ops"))
        say(f"M={m}: the unbatched decoder takes {plain['total_s'] / decoder['total_s']:.2f}x the decoder's time, "
            f"the by-ops loop {by_ops['total_s'] / decoder['total_s']:.2f}x")
    report.write(args.out, "profile_decode", {"model": what, "position": args.position, "limit": limit,
                                              "rows": rows}, say.text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
